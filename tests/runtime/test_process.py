"""ProcessIsolation: sync tools in worker processes that are killed on timeout."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

from toolrun import ErrorCode, Tool, ToolRegistry, tool
from toolrun.exceptions import ToolDefinitionError
from toolrun.runtime import ProcessIsolation, ToolExecutor
from waiting import wait_for

from . import _isolated
from .conftest import call

pytestmark = pytest.mark.slow


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1].startswith("Z")  # killed, not yet reaped
    except FileNotFoundError:
        return True


@pytest.fixture
async def isolation() -> AsyncIterator[ProcessIsolation]:
    iso = ProcessIsolation(max_workers=1)
    await iso.start()
    yield iso
    iso.close()


async def test_a_runaway_tool_is_killed_on_timeout(isolation: ProcessIsolation) -> None:
    spin = Tool.from_function(isolation.wrap(_isolated.spin), timeout=0.5)
    pid = tool(isolation.wrap(_isolated.worker_pid))
    crunch = tool(isolation.wrap(_isolated.crunch))
    ex = ToolExecutor(ToolRegistry([spin, pid, crunch]), default_timeout=20)
    first = (await ex.execute(call("worker_pid"))).value
    assert isinstance(first, int) and first != os.getpid()
    r = await ex.execute(call("spin", {"seconds": 60}))
    assert r.error is not None and r.error.code == ErrorCode.TIMEOUT
    await wait_for(lambda: _gone(first))
    assert (await ex.execute(call("crunch", {"n": 10}))).value == 45  # a fresh worker took over
    second = (await ex.execute(call("worker_pid"))).value
    assert second != first
    ex.close()


async def test_errors_cross_the_process_boundary(isolation: ProcessIsolation) -> None:
    tools = [
        tool(isolation.wrap(f))
        for f in (_isolated.fail, _isolated.refuse, _isolated.die, _isolated.gives_unpicklable)
    ]
    ex = ToolExecutor(ToolRegistry(tools), default_timeout=20)
    r = await ex.execute(call("fail", {"text": "x"}))
    assert r.error is not None and r.error.code == ErrorCode.EXECUTION_FAILED
    assert isinstance((await _raw(isolation, _isolated.fail, "boom")), ValueError)
    r = await ex.execute(call("refuse"))
    assert r.error is not None and (r.error.code, r.error.recover_action, r.error.details) == (
        "REFUSED",
        "ask",
        {"n": 1},
    )
    r = await ex.execute(call("gives_unpicklable"))
    assert r.error is not None and r.error.code == ErrorCode.RESULT_INVALID
    r = await ex.execute(call("die"))
    assert r.error is not None and r.error.code == ErrorCode.EXECUTION_FAILED
    assert await isolation.run(_isolated.crunch, 4) == 6  # and it recovers
    ex.close()


async def _raw(isolation: ProcessIsolation, fn: Any, *args: Any) -> BaseException | None:
    try:
        await isolation.run(fn, *args)
    except BaseException as exc:
        return exc
    return None


async def test_calls_wait_for_a_free_worker(isolation: ProcessIsolation) -> None:
    results = await asyncio.gather(*[isolation.run(_isolated.crunch, n) for n in range(6)])
    assert results == [sum(range(n)) for n in range(6)] and isolation.workers == 1


async def test_decorated_module_level_tools_work() -> None:
    ex = ToolExecutor(ToolRegistry([_isolated.square]))
    try:
        r = await ex.execute(call("square", {"n": 7}))
        assert r.value == 49
        assert _isolated.square.parameters["properties"]["n"]["type"] == "integer"
    finally:
        _isolated.DECORATED.close()
        ex.close()


def test_only_module_level_functions_can_be_isolated() -> None:
    iso = ProcessIsolation()

    def local(n: int) -> int:
        return n

    with pytest.raises(ToolDefinitionError):
        iso.wrap(local)
    with pytest.raises(ToolDefinitionError):
        iso.wrap(lambda: 1)
    with pytest.raises(ValueError):
        ProcessIsolation(max_workers=0)
    iso.close()


async def test_closed_isolation_refuses_calls() -> None:
    iso = ProcessIsolation()
    iso.close()
    with pytest.raises(RuntimeError):
        await iso.run(_isolated.crunch, 3)


async def test_started_workers_answer_the_first_calls_at_once() -> None:
    """`start()` returns when the workers can take calls: a fresh worker needs a second or more to import
    the main module and toolrun, which must not fall inside the first calls' time boxes."""
    iso = ProcessIsolation(max_workers=2)
    try:
        await iso.start()
        crunch = Tool.from_function(iso.wrap(_isolated.crunch), timeout=0.5)
        ex = ToolExecutor(ToolRegistry([crunch]))
        results = await asyncio.gather(*(ex.execute(call("crunch", {"n": 10})) for _ in range(2)))
        assert [r.value for r in results] == [45, 45], [r.error for r in results]
        ex.close()
    finally:
        iso.close()


async def test_a_worker_started_for_a_cancelled_call_serves_the_next_call() -> None:
    def workers() -> set[int]:
        return {p.pid for p in multiprocessing.active_children() if p.name == "toolrun-isolated"}

    others = workers()  # another test's pool still winding down is not this one's
    iso = ProcessIsolation(max_workers=1)
    try:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.01):  # cancelled while its worker is still starting
                await iso.run(_isolated.crunch, 3)
        assert await iso.run(_isolated.worker_pid) in {p.pid for p in multiprocessing.active_children()}
        assert iso.workers == 1
        assert len(workers() - others) == 1
    finally:
        iso.close()
