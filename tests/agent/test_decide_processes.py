"""`Agent.decide` across real processes on PostgreSQL: the approval arrives in a later request, elsewhere.

Process A runs until the destructive call pauses the run and exits; processes started afterwards (fresh
interpreters, fresh agents, the same database and hash key) decide it by confirmation id. The tool
appends its process id to a file each time it runs, so the tests see where and how often it ran.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from processes import outcomes, scratch_postgres, start_together

SCRIPT = Path(__file__).with_name("_decide_process_script.py")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


@pytest.fixture
def url() -> Iterator[str]:
    with scratch_postgres("decide") as made:  # psycopg 3's async driver: postgresql+psycopg://
        yield made


def spawn(*args: str) -> dict[str, Any]:
    """Run one process to its end (warnings are errors there too); what it printed."""
    done = subprocess.run(
        [sys.executable, "-W", "error", str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"{args[0]} process failed:\n{done.stderr}"
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def tool_runs(runs: Path) -> list[str]:
    return runs.read_text().splitlines() if runs.exists() else []


def test_paused_in_one_process_decided_in_another_runs_once(url: str, tmp_path: Path) -> None:
    runs = tmp_path / "runs.txt"
    paused = spawn("pause", url, str(runs))
    assert paused["status"] == "awaiting_confirmation" and tool_runs(runs) == []
    cid = paused["confirmation_id"]

    intruder = spawn("decide", url, str(runs), cid, "u2")
    assert intruder == {"refused": "confirmation_unknown"} and tool_runs(runs) == []

    decided = spawn("decide", url, str(runs), cid, "u1")
    assert decided == {"status": "completed", "output": "Task t1 is gone."}
    assert len(tool_runs(runs)) == 1

    again = spawn("decide", url, str(runs), cid, "u1")
    assert again == {"refused": "confirmation_unknown"}
    assert len(tool_runs(runs)) == 1


def test_two_processes_deciding_at_once_run_the_tool_once(url: str, tmp_path: Path) -> None:
    runs = tmp_path / "runs.txt"
    paused = spawn("pause", url, str(runs))
    cid = paused["confirmation_id"]
    command = [str(SCRIPT), "decide", url, str(runs), cid, "u1"]
    results = outcomes(start_together([command, command], tmp_path))
    assert [code for code, _, _ in results] == [0, 0], [err for _, _, err in results]
    said = sorted((json.loads(out.strip().splitlines()[-1]) for _, out, _ in results), key=str)
    completed = [s for s in said if s.get("status") == "completed"]
    refused = [s for s in said if "refused" in s]
    assert len(completed) == 1 and len(refused) == 1, said
    # The loser met the run held by the winner, or already gone with its confirmation: refused either way.
    assert refused[0]["refused"] in ("decided_elsewhere", "confirmation_unknown")
    (line,) = tool_runs(runs)
    assert line.endswith(" t1")


def test_a_decider_killed_mid_call_leaves_a_run_the_next_decision_closes(url: str, tmp_path: Path) -> None:
    """SIGKILL in the window between the approved call starting and its result being kept: the run's
    confirmation is consumed and its claim lapses. The person's next click closes the run and says the
    call may have run; it never runs it again."""
    import os
    import signal
    import time

    runs = tmp_path / "runs.txt"
    paused = spawn("pause", url, str(runs))
    cid = paused["confirmation_id"]
    stalled = subprocess.Popen(
        [sys.executable, "-W", "error", str(SCRIPT), "stall", url, str(runs), cid, "u1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not tool_runs(runs):  # its call has started
            assert stalled.poll() is None and time.monotonic() < deadline, "the stalled call never started"
            time.sleep(0.02)
        os.kill(stalled.pid, signal.SIGKILL)
    finally:
        stalled.kill()
        stalled.communicate(timeout=30)
    time.sleep(1.5)  # its claim (1 s) lapses: the time a crashed decider's claim lasts is what is tested
    closed = spawn("decide", url, str(runs), cid, "u1")
    assert closed == {"status": "failed", "output": None, "code": "decision_interrupted"}, closed
    assert len(tool_runs(runs)) == 1  # never run twice
    again = spawn("decide", url, str(runs), cid, "u1")
    assert again == {"refused": "confirmation_unknown"} and len(tool_runs(runs)) == 1
