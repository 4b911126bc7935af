"""Two processes with background jobs on PostgreSQL (psycopg 3): the one that started a job is killed mid-job;
the other takes the dead executor's job over through its lease and finishes it (an idempotent tool runs
again, keyed)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from processes import scratch_postgres

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

WORKER = Path(__file__).with_name("_dbos_job_worker.py")


def _until(path: Path, process: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert process.poll() is None, f"the worker exited ({process.returncode}) before {path.name}"
        assert time.monotonic() < deadline, f"no {path.name} after {timeout} s"
        time.sleep(0.05)


def test_a_live_process_finishes_the_job_of_a_dead_one(tmp_path: Path) -> None:
    with scratch_postgres("hpg_takeover") as url:

        def start(executor: str, role: str) -> subprocess.Popen[bytes]:
            with (tmp_path / f"{role}.log").open("w") as log:  # the child keeps its own copy
                return subprocess.Popen(
                    [sys.executable, str(WORKER), url, executor, str(tmp_path), role], stdout=log, stderr=log
                )

        survivor = start("survivor", "survivor")
        victim = start("victim", "victim")
        try:
            _until(tmp_path / "started", victim, 240)
            victim.kill()
            victim.wait(timeout=30)
            assert survivor.wait(timeout=200) == 0, (tmp_path / "survivor.log").read_text()[-3000:]
        finally:
            for process in (victim, survivor):
                if process.poll() is None:
                    process.kill()
                    process.wait()
        job = json.loads((tmp_path / "job.json").read_text())
    assert job["status"] == "completed", job
    assert job["result"]["value"] == {"done": "k1"}
    starts = (tmp_path / "starts").read_text().split()
    assert len(starts) == 2 and starts[0] != starts[1]  # begun by the victim, run again by the survivor
