"""Real crashes of DurableAgent workers: SIGKILL at each crash window, restart, count what happened.

A worker process (`_dbos_worker.py`) starts five runs that hang, each at one window: during a model
request, during a slow non-idempotent tool, during a slow idempotent tool, between a tool's end and the
next model request, and while waiting for an approval. The test waits until every run has reached its
window (marker files), SIGKILLs the worker, and starts it again (the same DBOS executor id: DBOS recovers
its runs at launch), or lets a second process take them over (its lease on the dead executor's runs).
The counters are rows the model and the tools wrote to a database, so they survive the kill.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from servers import POSTGRES_URL as POSTGRES

from ._dbos_worker import SCENARIOS, counts, create_tables

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

WORKER = Path(__file__).with_name("_dbos_worker.py")
POSTGRES_DBOS = os.environ.get("TOOLRUN_TEST_DBOS_URL", "postgresql://postgres@127.0.0.1:5432/test_dbos")


@dataclass
class Setup:
    system_db: str
    counters_db: str
    markers: Path
    out: Path
    engine: AsyncEngine


@pytest.fixture(params=["sqlite", "postgresql"])
async def setup(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Setup]:
    if request.param == "sqlite":
        system_db, counters_db = (
            f"sqlite:///{tmp_path}/dbos.sqlite",
            f"sqlite+aiosqlite:///{tmp_path}/c.sqlite",
        )
    else:
        system_db, counters_db = POSTGRES_DBOS, POSTGRES
    (tmp_path / "markers").mkdir()
    (tmp_path / "out").mkdir()
    engine = create_async_engine(counters_db)
    await create_tables(engine)
    try:
        yield Setup(system_db, counters_db, tmp_path / "markers", tmp_path / "out", engine)
    finally:
        await engine.dispose()


class Worker:
    def __init__(self, setup: Setup, executor: str, keys: list[str], *flags: str) -> None:
        self.log = setup.out.parent / f"{executor}-{len(list(setup.out.parent.glob('*.log')))}.log"
        with self.log.open("w") as log:
            self.proc = self._spawn(setup, executor, keys, flags, log)

    @staticmethod
    def _spawn(
        setup: Setup, executor: str, keys: list[str], flags: tuple[str, ...], log: Any
    ) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [
                sys.executable,
                str(WORKER),
                "--system-db",
                setup.system_db,
                "--counters-db",
                setup.counters_db,
                "--executor",
                executor,
                "--markers",
                str(setup.markers),
                "--out",
                str(setup.out),
                "--runs",
                *keys,
                *flags,
            ],
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.DEVNULL,
            stderr=log,
        )

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    async def finished(self, timeout: float) -> None:
        try:
            async with asyncio.timeout(timeout):
                while self.proc.poll() is None:
                    await asyncio.sleep(0.1)
        except TimeoutError:
            self.kill()
        assert self.proc.returncode == 0, self.stderr()

    def stderr(self) -> str:
        if self.proc.poll() is None:
            self.kill()
        return self.log.read_text()[-6000:]


async def _wait_for(paths: list[Path], worker: Worker, timeout: float = 90) -> None:
    """Until every marker exists (the observable state the kill is paced on)."""
    async with asyncio.timeout(timeout):
        while not all(p.exists() for p in paths):
            if worker.proc.poll() is not None:
                pytest.fail("the worker exited before reaching its crash points:\n" + worker.stderr())
            await asyncio.sleep(0.05)


def _keys() -> list[str]:
    prefix = uuid.uuid4().hex[:10]
    return [f"{prefix}:{scenario}" for scenario in SCENARIOS]


async def _check(setup: Setup, keys: list[str]) -> None:
    """Every run completed; every model request and tool call completed exactly once."""
    for key in keys:
        scenario = key.rsplit(":", 1)[1]
        run: dict[str, Any] = json.loads((setup.out / f"{key}.json").read_text())
        assert run["status"] == "completed", (scenario, run["error"])
        assert run["output"] == f"done {scenario}"
        seen = await counts(setup.engine, key)
        # each model request completed once: the one killed mid-request was sent twice, answered once
        assert seen["model:0:done"] == 1, (scenario, seen)
        assert seen["model:1:done"] == 1, (scenario, seen)
        result = run["tool_calls"][-1]["result"]
        if scenario == "model":
            assert seen["model:1:sent"] == 2, seen
            assert seen["effect:add_row"] == 1, seen  # the completed tool call was not run again
        elif scenario == "between":
            assert seen["model:1:begin"] == 2, seen
            assert seen["model:1:sent"] == 1, seen
            assert seen["effect:add_row"] == 1, seen
        elif scenario == "tool":
            # killed mid-call, not idempotent: not run again, and the model is told it may have run
            assert seen["tool:slow_write:start"] == 1, seen
            assert "effect:slow_write" not in seen, seen
            assert result["status"] == "error"
            assert result["error"]["code"] == "TIMEOUT"
            assert "may or may not" in result["error"]["message"]
            assert result["error"]["details"] == {"interrupted": True}
        elif scenario == "idem":
            # killed mid-call, idempotent: run again with the same idempotency key, effect once
            assert seen["tool:slow_put:start"] == 2, seen
            assert seen["effects"] == 1, seen
            assert result["status"] == "ok"
        elif scenario == "approval":
            assert seen.get("effect:remove_row") == 1, (seen, result)
            assert result["status"] == "ok"
        assert seen["model:0:sent"] == 1, (scenario, seen)


def _markers(setup: Setup, keys: list[str]) -> list[Path]:
    return [setup.markers / f"{key}.{key.rsplit(':', 1)[1]}" for key in keys]


async def test_a_killed_worker_restarted_finishes_every_run_exactly_once(setup: Setup) -> None:
    keys = _keys()
    executor = f"crash-{uuid.uuid4().hex[:8]}"
    first = Worker(setup, executor, keys, "--start", "--crash")
    try:
        await _wait_for(_markers(setup, keys), first)
    finally:
        first.kill()
    assert not list(setup.out.iterdir())  # nothing finished before the kill
    second = Worker(setup, executor, keys, "--approve")  # same executor id: DBOS recovers its runs
    await second.finished(timeout=120)
    await _check(setup, keys)


@pytest.mark.parametrize("setup", ["postgresql"], indirect=True)
async def test_another_process_takes_over_the_runs_of_a_dead_one(setup: Setup) -> None:
    keys = _keys()
    # The survivor runs alongside the victim but approves only once the victim is dead: an approval
    # given earlier would let the victim start the destructive call, and the kill could land inside it
    # (then the call is rightly reported as interrupted, not run again: that window is the `tool` run's).
    dead = setup.markers / "victim-dead"
    survivor = Worker(
        setup, f"b-{uuid.uuid4().hex[:8]}", keys, "--approve", "--approve-after", str(dead), "--lease", "1.5"
    )
    victim = Worker(setup, f"a-{uuid.uuid4().hex[:8]}", keys, "--start", "--crash", "--lease", "1.5")
    try:
        await _wait_for(_markers(setup, keys), victim)
    finally:
        victim.kill()
        dead.write_text("")
    await survivor.finished(timeout=120)
    await _check(setup, keys)
