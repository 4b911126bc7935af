"""The run stage: deadline, budget, session snapshot, timeouts (async and sync), retries, cancellation."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from toolrun import ErrorCode, ToolContext, ToolError, tool
from toolrun.runtime import ToolFinished, ToolRetrying
from toolrun.tools import ToolBudget

from .conftest import Recorder, call


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """An event sync tools wait on; always set at teardown so no worker thread outlives the test."""
    event = threading.Event()
    yield event
    event.set()


# ---------------------------------------------------------------------------------------------------------
# Timeouts


async def test_a_hanging_async_tool_times_out(make_executor: Any) -> None:
    @tool(timeout=0.05)
    async def hang() -> None:
        """Hang."""
        await asyncio.Event().wait()

    ex = make_executor(hang)
    async with asyncio.timeout(15):  # a 0.05 s time box, however loaded the machine: never 15 s
        r = await ex.execute(call("hang"))
    assert r.error is not None and r.error.code == ErrorCode.TIMEOUT
    assert r.error.details == {"timeout": 0.05} and r.attempts == 1
    assert not r.error.retryable and "may or may not" in r.error.message


async def test_a_hanging_sync_tool_times_out_without_blocking_the_loop(
    make_executor: Any, gate: threading.Event
) -> None:
    finished = threading.Event()

    @tool(timeout=0.1, idempotent=True)
    def hang() -> str:
        """Hang until the gate opens."""
        gate.wait(10)
        finished.set()
        return "late"

    @tool
    async def quick() -> str:
        """Quick."""
        return "quick"

    ex = make_executor(hang, quick)
    slow = asyncio.ensure_future(ex.execute(call("hang")))
    assert (await ex.execute(call("quick"))).value == "quick"  # the loop is free while the thread waits
    r = await slow
    assert r.error is not None and r.error.code == ErrorCode.TIMEOUT and r.error.retryable
    gate.set()
    await asyncio.to_thread(finished.wait, 5)
    assert r.error.code == ErrorCode.TIMEOUT  # the late result went nowhere


async def test_the_timeout_includes_the_first_step_of_a_coroutine(make_executor: Any) -> None:
    @tool(timeout=0.02)
    async def slow_start() -> str:
        """Busy before its first suspension."""
        time.sleep(0.05)
        await asyncio.sleep(0)
        return "done"

    @tool(timeout=0.02)
    async def busy_only() -> str:
        """Never suspends: nothing can interrupt it, and it needs no timer."""
        time.sleep(0.03)
        return "done"

    ex = make_executor(slow_start, busy_only)
    r = await ex.execute(call("slow_start"))
    assert r.error is not None and r.error.code == ErrorCode.TIMEOUT
    assert (await ex.execute(call("busy_only"))).value == "done"


async def test_suspending_tools_resume_normally(make_executor: Any) -> None:
    @tool
    async def steps(n: int) -> int:
        """Suspend n times."""
        total = 0
        for i in range(n):
            await asyncio.sleep(0)
            total += i
        try:
            await asyncio.sleep(0)
            raise ValueError("inner")
        except ValueError:
            total += 1000
        return total

    ex = make_executor(steps, default_timeout=5)
    assert (await ex.execute(call("steps", {"n": 10}))).value == 1045
    ex2 = make_executor(steps, default_timeout=None)
    assert (await ex2.execute(call("steps", {"n": 3}))).value == 1003


async def test_the_tools_own_timeout_error_is_not_a_timeout(make_executor: Any) -> None:
    @tool(timeout=5)
    async def upstream() -> str:
        """Calls an upstream that times out."""
        await asyncio.sleep(0)
        raise TimeoutError("upstream")

    ex = make_executor(upstream)
    r = await ex.execute(call("upstream"))
    assert r.error is not None and r.error.code == ErrorCode.EXECUTION_FAILED


# ---------------------------------------------------------------------------------------------------------
# Deadline and budget


async def test_past_the_deadline_nothing_starts(make_executor: Any) -> None:
    runs: list[int] = []

    @tool
    async def work() -> int:
        """Work."""
        runs.append(1)
        return 1

    ex = make_executor(work)
    r = await ex.execute(call("work"), ToolContext(deadline=time.time() - 1))
    assert r.error is not None and r.error.code == ErrorCode.DEADLINE_EXCEEDED and runs == []
    assert (await ex.execute(call("work"), ToolContext().with_timeout(60))).value == 1


async def test_the_deadline_shortens_the_timeout(make_executor: Any) -> None:
    @tool(timeout=30)
    async def hang() -> None:
        """Hang."""
        await asyncio.Event().wait()

    ex = make_executor(hang)
    async with asyncio.timeout(15):  # the 0.05 s deadline, not the tool's 30 s
        r = await ex.execute(call("hang"), ToolContext().with_timeout(0.05))
    assert r.error is not None and r.error.code == ErrorCode.TIMEOUT and r.error.details["deadline"] is True


async def test_the_budget_counts_started_calls_only(make_executor: Any) -> None:
    attempts: list[int] = []

    @tool(retries=2)
    async def flaky() -> str:
        """Fails once, retryably."""
        attempts.append(1)
        if len(attempts) == 1:
            raise ToolError("BUSY", "busy", retryable=True)
        return "ok"

    @tool(destructive=True)
    async def drop() -> str:
        """Drop."""
        return "dropped"

    budget = ToolBudget(max_calls=2)
    ctx = ToolContext(user_id="u1", budget=budget)
    ex = make_executor(flaky, drop)
    assert (await ex.execute(call("flaky"), ctx)).value == "ok"  # two attempts, one call
    assert budget.calls_used == 1
    assert (await ex.execute(call("drop"), ctx)).status == "confirmation_required"
    assert (await ex.execute(call("nope"), ctx)).error is not None
    assert budget.calls_used == 1
    assert (await ex.execute(call("flaky"), ctx)).status == "ok"
    r = await ex.execute(call("flaky"), ctx)
    assert r.error is not None and r.error.code == ErrorCode.BUDGET_EXCEEDED
    assert r.error.details == {"max_calls": 2} and budget.calls_used == 2


# ---------------------------------------------------------------------------------------------------------
# Session state (see also test_isolation.py)


async def test_a_failing_handler_s_state_changes_are_rolled_back_in_place(make_executor: Any) -> None:
    @tool
    async def edit(fail: bool, ctx: ToolContext) -> str:
        """Edit the session."""
        assert ctx.state is not None
        ctx.state["items"].append("new")
        ctx.state["touched"] = True
        if fail:
            raise ValueError("boom")
        return "ok"

    ex = make_executor(edit)
    state: dict[str, Any] = {"items": ["a"]}
    ctx = ToolContext(state=state)
    r = await ex.execute(call("edit", {"fail": True}), ctx)
    assert r.status == "error" and ctx.state is state and state == {"items": ["a"]}
    assert (await ex.execute(call("edit", {"fail": False}), ctx)).status == "ok"
    assert state == {"items": ["a", "new"], "touched": True}


async def test_state_is_restored_before_each_retry(make_executor: Any) -> None:
    seen: list[list[str]] = []

    @tool(retries=2)
    async def append(ctx: ToolContext) -> str:
        """Append, failing twice."""
        assert ctx.state is not None
        seen.append(list(ctx.state["log"]))
        ctx.state["log"].append("x")
        if len(seen) < 3:
            raise ToolError("AGAIN", "again", retryable=True)
        return "ok"

    ex = make_executor(append)
    state: dict[str, Any] = {"log": []}
    r = await ex.execute(call("append"), ToolContext(state=state))
    assert r.status == "ok" and r.attempts == 3
    assert seen == [[], [], []] and state == {"log": ["x"]}


async def test_uncopyable_state_fails_closed_except_for_read_only_tools(make_executor: Any) -> None:
    runs: list[str] = []

    @tool
    async def write(ctx: ToolContext) -> str:
        """Write."""
        runs.append("write")
        return "w"

    @tool(read_only=True)
    async def read(ctx: ToolContext) -> str:
        """Read."""
        runs.append("read")
        return "r"

    @tool
    async def blind() -> str:
        """Cannot see the state (no context): nothing to copy."""
        runs.append("blind")
        return "b"

    ex = make_executor(write, read, blind)
    ctx = ToolContext(state={"lock": threading.Lock()})
    r = await ex.execute(call("write"), ctx)
    assert r.error is not None and r.error.code == ErrorCode.EXECUTION_FAILED and runs == []
    assert (await ex.execute(call("read"), ctx)).value == "r"
    assert (await ex.execute(call("blind"), ctx)).value == "b"


# ---------------------------------------------------------------------------------------------------------
# Retries


async def test_retryable_tool_errors_are_retried_with_events(make_executor: Any) -> None:
    runs: list[int] = []

    @tool(retries=3)
    async def shaky() -> int:
        """Succeeds on the third try."""
        runs.append(1)
        if len(runs) < 3:
            raise ToolError("UNAVAILABLE", "try later", retryable=True)
        return len(runs)

    rec = Recorder()
    ex = make_executor(shaky)
    ex.subscribe(rec)
    r = await ex.execute(call("shaky"))
    assert (r.value, r.attempts) == (3, 3)
    retrying = rec.of(ToolRetrying)
    assert [e.attempt for e in retrying] == [1, 2] and all(e.code == "UNAVAILABLE" for e in retrying)
    assert rec.of(ToolFinished)[0].attempts == 3


async def test_retries_stop_at_the_limit_and_never_for_plain_errors(make_executor: Any) -> None:
    runs: dict[str, int] = {"busy": 0, "bad": 0}

    @tool(retries=2)
    async def busy() -> None:
        """Always busy."""
        runs["busy"] += 1
        raise ToolError("BUSY", "busy", retryable=True)

    @tool(retries=2, idempotent=True)
    async def bad() -> None:
        """Always wrong."""
        runs["bad"] += 1
        raise ToolError("BAD", "bad")

    ex = make_executor(busy, bad)
    r = await ex.execute(call("busy"))
    assert r.attempts == 3 and runs["busy"] == 3 and r.error is not None and r.error.code == "BUSY"
    r = await ex.execute(call("bad"))
    assert r.attempts == 1 and runs["bad"] == 1


async def test_timeouts_and_transient_errors_are_retried_only_for_idempotent_tools(
    make_executor: Any,
) -> None:
    runs: dict[str, int] = {}

    def make(name: str, idempotent: bool, fail: str) -> Any:
        async def handler() -> str:
            runs[name] = runs.get(name, 0) + 1
            if runs[name] == 1:
                if fail == "timeout":
                    await asyncio.Event().wait()
                raise ConnectionError("reset")
            return "ok"

        handler.__name__ = name
        handler.__doc__ = "A tool."
        return tool(handler, timeout=0.05, retries=2, idempotent=idempotent)

    ex = make_executor(
        make("idem_timeout", True, "timeout"),
        make("once_timeout", False, "timeout"),
        make("idem_conn", True, "conn"),
        make("once_conn", False, "conn"),
    )
    assert (await ex.execute(call("idem_timeout"))).value == "ok"
    assert (await ex.execute(call("idem_conn"))).value == "ok"
    r = await ex.execute(call("once_timeout"))
    assert r.error is not None and r.error.code == ErrorCode.TIMEOUT and r.attempts == 1
    r = await ex.execute(call("once_conn"))
    assert r.error is not None and r.error.code == ErrorCode.EXECUTION_FAILED and not r.error.retryable
    assert runs == {"idem_timeout": 2, "idem_conn": 2, "once_timeout": 1, "once_conn": 1}


async def test_no_retry_starts_past_the_deadline(make_executor: Any) -> None:
    runs: list[int] = []

    @tool(retries=5)
    async def later() -> None:
        """Asks to be retried in a minute."""
        runs.append(1)
        raise ToolError("LATER", "later", retryable=True, details={"retry_after": 60})

    ex = make_executor(later, retry_backoff_max=120)
    r = await ex.execute(call("later"), ToolContext().with_timeout(5))
    assert runs == [1] and r.attempts == 1


def test_backoff_grows_with_jitter_and_honours_retry_after() -> None:
    from toolrun.runtime._run import backoff_delay

    for attempt in range(1, 8):
        delay = backoff_delay(attempt, 0.1, 2.0, None)
        assert 0.5 * min(2.0, 0.1 * 2 ** (attempt - 1)) <= delay <= min(2.0, 0.1 * 2 ** (attempt - 1))
    assert backoff_delay(1, 0.1, 2.0, ToolError("X", "x", details={"retry_after": 1.5})) == 1.5
    assert backoff_delay(1, 0.1, 2.0, ToolError("X", "x", details={"retry_after": 100})) == 2.0


# ---------------------------------------------------------------------------------------------------------
# Cancellation


async def test_cancelling_the_caller_propagates_and_is_recorded(make_executor: Any) -> None:
    started = asyncio.Event()
    cleaned = asyncio.Event()

    @tool
    async def wait_forever(ctx: ToolContext) -> None:
        """Wait."""
        assert ctx.state is not None
        ctx.state["dirty"] = True
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            cleaned.set()

    rec = Recorder()
    ex = make_executor(wait_forever)
    ex.subscribe(rec)
    state: dict[str, Any] = {}
    task = asyncio.ensure_future(ex.execute(call("wait_forever"), ToolContext(state=state)))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned.is_set() and state == {}
    [finished] = rec.of(ToolFinished)
    assert finished.outcome == "cancelled"


async def test_an_outer_timeout_still_works_around_execute(make_executor: Any) -> None:
    @tool(timeout=30)
    async def hang() -> None:
        """Hang."""
        await asyncio.Event().wait()

    ex = make_executor(hang)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await ex.execute(call("hang"))


async def test_a_tool_cancelling_itself_is_a_result(make_executor: Any) -> None:
    @tool
    async def self_cancel() -> None:
        """Awaits something that gets cancelled."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        fut.cancel()
        await fut

    @tool
    async def raises_cancelled() -> None:
        """Raises CancelledError without suspending."""
        raise asyncio.CancelledError

    ex = make_executor(self_cancel, raises_cancelled)
    for name in ("self_cancel", "raises_cancelled"):
        r = await ex.execute(call(name))
        assert r.error is not None and r.error.code == ErrorCode.EXECUTION_FAILED, name
        assert r.error.details["cancelled"] is True


async def test_base_exceptions_from_tools_are_results_but_keyboard_interrupt_propagates(
    make_executor: Any,
) -> None:
    @tool
    async def exits() -> None:
        """Calls sys.exit."""
        raise SystemExit(3)

    @tool
    async def group() -> None:
        """Raises a group."""
        raise BaseExceptionGroup("g", [ValueError("a"), KeyboardInterrupt()])

    @tool
    async def interrupted() -> None:
        """Ctrl-C."""
        raise KeyboardInterrupt

    ex = make_executor(exits, group, interrupted)
    for name in ("exits", "group"):
        r = await ex.execute(call(name))
        assert r.error is not None and r.error.code == ErrorCode.EXECUTION_FAILED
    with pytest.raises(KeyboardInterrupt):
        await ex.execute(call("interrupted"))


async def test_sync_tools_share_a_bounded_pool(make_executor: Any, gate: threading.Event) -> None:
    running = threading.Semaphore(0)
    peak = {"now": 0, "max": 0}
    lock = threading.Lock()

    @tool
    def block() -> str:
        """Block on the gate."""
        with lock:
            peak["now"] += 1
            peak["max"] = max(peak["max"], peak["now"])
        running.release()
        gate.wait(10)
        with lock:
            peak["now"] -= 1
        return "done"

    ex = make_executor(block, thread_pool_size=2)
    tasks = [asyncio.ensure_future(ex.execute(call("block"))) for _ in range(4)]
    for _ in range(2):
        await asyncio.to_thread(running.acquire, True, 5)
    assert peak["now"] == 2
    gate.set()
    results = await asyncio.gather(*tasks)
    assert [r.value for r in results] == ["done"] * 4 and peak["max"] == 2


async def test_the_handler_is_called_directly_only_when_invoke_would_do_just_that(make_executor: Any) -> None:
    """The run stage skips `Tool.invoke` for a plain handler; a tool taking a context, or whose `invoke`
    is overridden (by a subclass or on the instance), still goes through it."""
    from toolrun import Tool

    async def add(a: int, b: int) -> int:
        """Adds two numbers."""
        return a + b

    async def whoami(ctx: ToolContext[Any]) -> str | None:
        """Says who is calling."""
        return ctx.user_id

    async def minus(a: int, /, b: int) -> int:
        """Subtracts b from a (a is positional-only)."""
        return a - b

    class Doubled(Tool):
        def invoke(self, arguments: Any, context: Any = None) -> Any:
            async def twice() -> Any:
                return 2 * await super(Doubled, self).invoke(arguments, context)

            return twice()

    plain, with_context = Tool.from_function(add), Tool.from_function(whoami)
    doubled = Doubled.from_function(add, name="doubled")
    patched = Tool.from_function(add, name="patched")

    async def tripled(a: int, b: int) -> int:
        """Three times the sum."""
        return 3 * (a + b)

    patched.invoke = lambda arguments, context=None: tripled(**arguments)  # type: ignore[method-assign]
    assert plain.direct_handler() is add
    assert with_context.direct_handler() is None
    positional = Tool.from_function(minus)
    assert positional.direct_handler() is None
    assert doubled.direct_handler() is None and patched.direct_handler() is None
    ex = make_executor(plain, with_context, doubled, patched, positional)
    ctx = ToolContext(user_id="u1")
    assert (await ex.execute(call("add", {"a": 1, "b": 2}), ctx)).value == 3
    assert (await ex.execute(call("whoami", {}), ctx)).value == "u1"
    assert (await ex.execute(call("doubled", {"a": 1, "b": 2}), ctx)).value == 6
    assert (await ex.execute(call("patched", {"a": 1, "b": 2}), ctx)).value == 9
    assert (await ex.execute(call("minus", {"a": 5, "b": 2}), ctx)).value == 3


# ---------------------------------------------------------------------------------------------------------
# A pool of their own (background jobs: `worker_threads(pool)`)


async def test_calls_in_a_pool_of_their_own_leave_the_executors_threads_free_and_queue_without_a_time_box(
    make_executor: Any, gate: threading.Event
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from toolrun.runtime._run import worker_threads

    holding = threading.Event()
    quick_ran = threading.Event()

    @tool(timeout=30)
    def hold() -> str:
        """Block until the gate opens."""
        holding.set()
        gate.wait(10)
        return "held"

    @tool(timeout=0.05)
    def quick() -> str:
        """Answer at once."""
        quick_ran.set()
        return "quick"

    ex = make_executor(hold, quick, thread_pool_size=1)
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        with worker_threads(pool) as threads:
            held = asyncio.ensure_future(ex.execute(call("hold")))
            queued = asyncio.ensure_future(ex.execute(call("quick")))
        await asyncio.to_thread(holding.wait, 5)
        # the job pool's only thread is taken; the executor's only thread is not
        assert (await ex.execute(call("quick"))).value == "quick"
        quick_ran.clear()
        await asyncio.sleep(0.3)  # past the queued call's time box: it still waits for its thread
        assert not queued.done() and not quick_ran.is_set()
        gate.set()
        assert (await held).value == "held"
        assert (await queued).value == "quick"  # its time box started with its thread
        assert len(threads) == 2 and all(work.done() for work in threads)
    finally:
        gate.set()
        pool.shutdown(wait=True)


async def test_a_call_cancelled_while_it_waits_for_a_thread_of_its_pool_never_runs(
    make_executor: Any, gate: threading.Event
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from toolrun.runtime._run import worker_threads

    holding = threading.Event()
    ran: list[str] = []

    @tool(timeout=30)
    def hold() -> str:
        """Block until the gate opens."""
        holding.set()
        gate.wait(10)
        return "held"

    @tool
    def note() -> str:
        """Write a note."""
        ran.append("note")
        return "noted"

    ex = make_executor(hold, note)
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        with worker_threads(pool):
            held = asyncio.ensure_future(ex.execute(call("hold")))
            queued = asyncio.ensure_future(ex.execute(call("note")))
        await asyncio.to_thread(holding.wait, 5)
        queued.cancel()
        with pytest.raises(asyncio.CancelledError):
            await queued
        gate.set()
        assert (await held).value == "held"
    finally:
        gate.set()
        pool.shutdown(wait=True)
    assert ran == []
