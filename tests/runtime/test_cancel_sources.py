"""Who cancelled: a tool is abandoned only when it was asked to stop and did not.

A tool's own libraries cancel the task the tool runs in all the time: `asyncio.timeout`, anyio cancel scopes
and task groups (httpx connects through one), `asyncio.TaskGroup` when a child fails. They withdraw that
request as the tool leaves them, and the tool goes on working. Only the executor's time box and the
caller's cancellation ask the tool to stop; a tool that swallows those is closed after `cancel_grace`.

Every tool here keeps working for several times `GRACE` after its own library cancelled it, so the old rule
(any swallowed `CancelledError` arms the grace) reports each of them as an abandoned `TIMEOUT`. The tests
assert what the tools went through (which cancellations reached them, whether they were closed), never how
long a call took, so a loaded machine changes nothing.
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import anyio
import pytest

from toolrun import ErrorCode, ToolContext, tool

from .conftest import call

GRACE = 0.1
AFTER = 4 * GRACE  # how long each tool goes on working after its own cancellation


@tool(timeout=10)
async def own_asyncio_timeout() -> str:
    """Wait under its own short asyncio.timeout, then work on."""
    try:
        async with asyncio.timeout(0.01):
            await asyncio.sleep(10)
    except TimeoutError:
        pass
    await asyncio.sleep(AFTER)
    return "done"


@tool(timeout=10)
async def own_anyio_scope() -> str:
    """Wait under its own anyio move_on_after, then work on."""
    with anyio.move_on_after(0.01) as scope:
        await anyio.sleep(10)
    await anyio.sleep(AFTER)
    return f"done {scope.cancelled_caught}"


@tool(timeout=10)
async def anyio_group_first_wins() -> str:
    """Race two children in an anyio task group; the first cancels the group (happy eyeballs)."""
    winner: list[str] = []

    async def attempt(name: str, delay: float, tg: anyio.abc.TaskGroup) -> None:
        await anyio.sleep(delay)
        winner.append(name)
        tg.cancel_scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(attempt, "fast", 0.01, tg)
        tg.start_soon(attempt, "slow", 10, tg)
    await anyio.sleep(AFTER)
    return winner[0]


@tool(timeout=10)
async def asyncio_group_child_fails() -> str:
    """An asyncio.TaskGroup whose child fails (the group cancels this task), handled, then work on."""

    async def fails() -> None:
        await asyncio.sleep(0.01)
        raise LookupError("child")

    try:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(fails())
            tg.create_task(asyncio.sleep(10))
    except* LookupError:
        pass
    await asyncio.sleep(AFTER)
    return "recovered"


@tool(timeout=10)
async def shielded_cleanup_then_work() -> str:
    """Its own scope is cancelled; it cleans up (shielded, shorter than the grace) and works on."""
    with anyio.CancelScope() as scope:
        scope.cancel()
        try:
            await anyio.sleep(10)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(GRACE / 2)
    await anyio.sleep(AFTER)
    return "cleaned"


@tool(timeout=10)
async def cancels_a_child_it_awaits() -> str:
    """Awaits a child task that it cancels itself, takes the CancelledError, and works on."""
    child = asyncio.ensure_future(asyncio.sleep(10))
    asyncio.get_running_loop().call_later(0.01, child.cancel)
    try:
        await child
    except asyncio.CancelledError:
        pass
    await asyncio.sleep(AFTER)
    return "child gone"


OWN_CANCELLATIONS = [
    (own_asyncio_timeout, "done"),
    (own_anyio_scope, "done True"),
    (anyio_group_first_wins, "fast"),
    (asyncio_group_child_fails, "recovered"),
    (shielded_cleanup_then_work, "cleaned"),
    (cancels_a_child_it_awaits, "child gone"),
]


@pytest.mark.parametrize(("handler", "expected"), OWN_CANCELLATIONS, ids=lambda v: getattr(v, "name", ""))
async def test_a_tool_working_on_after_its_own_librarys_cancellation_returns_its_result(
    make_executor: Any, handler: Any, expected: str
) -> None:
    ex = make_executor(handler, cancel_grace=GRACE)
    r = await ex.execute(call(handler.name))
    assert r.status == "ok", r.error
    # The value comes only after the tool's `sleep(AFTER)` (four graces after its own cancellation) ran out
    # uncancelled: an armed grace would have closed it there, and the result would be a TIMEOUT.
    assert r.value == expected


async def test_a_tool_swallowing_the_time_box_after_its_own_cancellation_is_still_abandoned(
    make_executor: Any,
) -> None:
    """A withdrawn request disarms the grace; the time box expiring later arms it again."""
    swallowed: list[str] = []

    @tool(timeout=3 * GRACE)
    async def stubborn_after_cleanup() -> None:
        """Its own scope's cancellation, a short cleanup, then it ignores every cancellation."""
        with anyio.CancelScope() as scope:
            scope.cancel()
            try:
                await anyio.sleep(10)
            finally:
                with anyio.CancelScope(shield=True):
                    await anyio.sleep(GRACE / 2)
        while True:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                swallowed.append("time box")
                continue

    ex = make_executor(stubborn_after_cleanup, cancel_grace=GRACE)
    r = await ex.execute(call("stubborn_after_cleanup"))
    assert r.error is not None and r.error.code == ErrorCode.TIMEOUT
    assert r.error.details["abandoned"] is True and r.error.details["timeout"] == 3 * GRACE
    assert not r.error.retryable and "may or may not" in r.error.message
    # It was dropped for swallowing the time box's cancellation, not its own library's: with the grace
    # armed by that one it would have been closed before any cancellation reached its loop.
    assert swallowed == ["time box"]


async def test_a_tool_swallowing_the_callers_cancellation_is_dropped_once_its_time_box_expires(
    make_executor: Any,
) -> None:
    """The caller's cancellation alone does not arm the grace (a request still standing cannot be told
    from one a library left behind: Python 3.11's `TaskGroup` never withdraws its own when a child fails
    while it waits in `__aexit__`, see `asyncio_group_child_fails`); the time box does, and then the
    caller's cancellation propagates."""
    waiting = asyncio.Event()
    cancelled = asyncio.Event()
    swallowed = 0

    @tool(timeout=3 * GRACE)
    async def stubborn() -> None:
        """Ignore every cancellation."""
        nonlocal swallowed
        while True:
            try:
                waiting.set()
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                swallowed += 1
                cancelled.set()

    ex = make_executor(stubborn, cancel_grace=GRACE)
    task = asyncio.ensure_future(ex.execute(call("stubborn")))
    await asyncio.wait_for(waiting.wait(), 30)  # the tool is in its sleep
    task.cancel()
    await asyncio.wait_for(cancelled.wait(), 30)
    done, _ = await asyncio.wait([task], timeout=30)
    assert done and task.cancelled()
    # The caller's cancellation (swallowed) left it running; the time box's (swallowed too) armed the grace.
    assert swallowed == 2


async def test_a_tool_swallowing_an_outer_timeout_is_dropped_and_the_outer_timeout_fires(
    make_executor: Any,
) -> None:
    @tool(timeout=2 * GRACE)
    async def stubborn() -> None:
        """Ignore every cancellation."""
        while True:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                continue

    ex = make_executor(stubborn, cancel_grace=GRACE)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(GRACE):
            await ex.execute(call("stubborn"))  # returns at all: the tool, stuck forever, was dropped


async def test_an_abandoned_tools_async_cleanup_runs_in_its_task_before_the_result(
    make_executor: Any,
) -> None:
    """Closing an abandoned tool throws `GeneratorExit` where it waits; its `async with` blocks then await
    (a client closing its connections) inside anyio scopes it opened. `coroutine.close()` cannot run
    that: it would leave the coroutine half-closed, its scopes open on the caller's task, and the caller's
    own anyio scope (an MCP request's, a door's deadline) fails on exit. The executor drives the cleanup
    in the caller's task, one more grace at most, and only then answers."""
    closed = asyncio.Event()

    class Connection:
        async def __aenter__(self) -> Connection:
            return self

        async def __aexit__(self, *exc: object) -> None:
            with anyio.CancelScope(shield=True):
                await asyncio.sleep(0.01)  # closing a real connection awaits
            closed.set()

    @tool(timeout=GRACE)
    async def compensates() -> None:
        """On cancellation, call a compensating endpoint that takes longer than the grace."""
        with anyio.fail_after(30):
            async with Connection():
                try:
                    await asyncio.sleep(10)
                except asyncio.CancelledError:
                    await asyncio.sleep(10)
                    raise

    ex = make_executor(compensates, cancel_grace=GRACE)
    with anyio.fail_after(30):  # the caller's own scope, as a door has
        r = await ex.execute(call("compensates"))
    assert r.error is not None and r.error.code == ErrorCode.TIMEOUT
    assert r.error.details["abandoned"] is True
    assert closed.is_set()
    gc.collect()  # a half-closed coroutine would be reported here (an error under filterwarnings=error)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_an_abandoned_tools_endless_cleanup_is_dropped_after_a_second_grace(make_executor: Any) -> None:
    swallowed: list[str] = []

    @tool(timeout=GRACE)
    async def endless() -> None:
        """Ignore everything, GeneratorExit included."""
        while True:
            try:
                await asyncio.sleep(10)
            except BaseException as exc:
                swallowed.append(type(exc).__name__)
                continue

    ex = make_executor(endless, cancel_grace=GRACE)
    r = await ex.execute(call("endless"))  # returns at all: the endless cleanup was dropped
    assert r.error is not None and r.error.details["abandoned"] is True
    # The time box's cancellation, then (a grace later) the close, whose cleanup it was given a grace for
    # (dropping it may throw in more).
    assert swallowed[:2] == ["CancelledError", "GeneratorExit"]


async def test_an_abandoned_tool_is_reported_against_the_time_box_it_overran(make_executor: Any) -> None:
    """The context's deadline shortened the tool's own timeout: the result names the deadline."""

    @tool(timeout=30)
    async def stubborn() -> None:
        """Ignore every cancellation."""
        while True:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                continue

    ex = make_executor(stubborn, cancel_grace=GRACE)
    r = await ex.execute(call("stubborn"), ToolContext(user_id="u1").with_timeout(2 * GRACE))
    assert r.error is not None and r.error.code == ErrorCode.TIMEOUT
    assert r.error.details["abandoned"] is True and r.error.details["deadline"] is True
    assert 0 < r.error.details["timeout"] <= 2 * GRACE
    assert "within 30 seconds" not in r.error.message
