"""Progress from inside a tool: `ctx.report_progress` becomes `ToolCallProgress` events on the agent's
stream, throttled (a flood of reports does not flood the stream), the final report always passes, nothing
after the call ended, and nothing in the audit."""

from __future__ import annotations

import asyncio
from typing import Any

from toolrun import Agent, ToolContext, ToolRegistry, tool
from toolrun.agent import ToolCallFinished, ToolCallProgress
from toolrun.models import FunctionModel, ModelResponse
from toolrun.runtime import InMemoryAuditSink, ToolExecutor
from toolrun.tools._context import ProgressThrottle

LEAKED: dict[str, Any] = {}


@tool(read_only=True)
async def crunch(n: int, ctx: ToolContext) -> str:
    """Works through n items, reporting each."""
    for i in range(n):
        await ctx.report_progress(i + 1, n, f"item {i + 1}")
        if i % 100 == 0:
            await asyncio.sleep(0)
    return "crunched"


@tool(read_only=True)
async def leaky(ctx: ToolContext) -> str:
    """Returns at once but keeps reporting from a task it leaves behind."""

    async def keep_reporting() -> None:
        for i in range(50):
            await ctx.report_progress(i)
            await asyncio.sleep(0.005)
        LEAKED["done"].set()

    LEAKED["task"] = asyncio.create_task(keep_reporting())
    LEAKED["reporter"] = ctx.progress
    return "left"


def scripted(*calls: tuple[str, dict[str, Any]], wait: asyncio.Event | None = None) -> FunctionModel:
    turns = iter([ModelResponse.from_tool_calls(call) for call in calls])

    async def reply(messages, tools):  # type: ignore[no-untyped-def]
        for response in turns:
            return response
        if wait is not None:
            await wait.wait()
        return ModelResponse.from_text("done")

    return FunctionModel(reply)


async def test_a_flood_of_reports_becomes_a_few_events_ending_with_the_final_one() -> None:
    audit = InMemoryAuditSink()
    executor = ToolExecutor(ToolRegistry([crunch]), audit=audit)
    agent = Agent(scripted(("crunch", {"n": 10_000})), executor=executor, progress_interval=0.05)
    events = [e async for e in agent.stream("go")]
    executor.close()
    progress = [e for e in events if isinstance(e, ToolCallProgress)]
    assert 2 <= len(progress) < 200  # 10,000 reports, throttled
    assert progress[0].progress == 1 and (progress[-1].progress, progress[-1].total) == (10_000, 10_000)
    assert all(e.call.name == "crunch" and e.message is not None for e in progress)
    finished = next(i for i, e in enumerate(events) if isinstance(e, ToolCallFinished))
    assert all(events.index(e) < finished for e in progress)
    assert "item" not in repr([r.to_dict() for r in audit.records])


async def test_no_progress_after_the_call_ended() -> None:
    LEAKED["done"] = asyncio.Event()
    agent = Agent(scripted(("leaky", {}), wait=LEAKED["done"]), ToolRegistry([leaky]))
    events = [e async for e in agent.stream("go")]
    await LEAKED.pop("task")
    finished = next(i for i, e in enumerate(events) if isinstance(e, ToolCallFinished))
    late = [e for e in events[finished:] if isinstance(e, ToolCallProgress)]
    assert late == []  # 50 reports made while the model's next turn waited: none reached the stream
    reporter = LEAKED.pop("reporter")
    assert isinstance(reporter, ProgressThrottle) and reporter.closed and reporter.dropped >= 45


async def test_the_throttle_itself() -> None:
    got: list[float] = []

    async def forward(progress: float, total: float | None, message: str | None) -> None:
        got.append(progress)

    throttle = ProgressThrottle(forward, interval=3600, burst=3)
    for i in range(1, 1001):
        await throttle(i, 1000)  # 1000 of 1000 is not the end: the call's end is
    assert got == [1, 2, 3]
    await throttle.aclose()  # the call ended: its last report goes on
    await throttle(1001, 1000)
    assert got == [1, 2, 3, 1000] and throttle.dropped == 997


@tool(read_only=True)
async def so_far(n: int, ctx: ToolContext) -> str:
    """Counts items, reporting "i of i so far" (each report looks complete)."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, i, "so far")
        if i % 100 == 0:
            await asyncio.sleep(0)
    return "counted"


async def test_reports_that_look_complete_are_throttled_too() -> None:
    agent = Agent(scripted(("so_far", {"n": 10_000})), ToolRegistry([so_far]), progress_interval=0.05)
    progress = [e async for e in agent.stream("go") if isinstance(e, ToolCallProgress)]
    assert 2 <= len(progress) < 200  # not 10,000 "final" reports
    assert progress[-1].progress == 10_000  # the last one made still arrives


GATE: dict[str, asyncio.Event] = {}


@tool(read_only=True)
async def steps(ctx: ToolContext) -> str:
    """Reports eight steps (of 100) in a quick row, then waits for the test."""
    for i in range(1, 9):
        await ctx.report_progress(i, 100)
    await GATE["steps"].wait()
    return "stepped"


async def test_a_short_burst_loses_nothing_and_the_last_report_does_not_wait_for_the_end() -> None:
    GATE["steps"] = asyncio.Event()
    agent = Agent(scripted(("steps", {})), ToolRegistry([steps]), progress_interval=0.02)
    seen: list[float] = []
    async with asyncio.timeout(10):
        async for event in agent.stream("go"):
            if isinstance(event, ToolCallProgress):
                seen.append(event.progress)
                if event.progress == 8:  # the tool still runs: the rate let it through
                    GATE["steps"].set()
    assert seen[0] == 1 and seen[-1] == 8 and seen == sorted(seen)


@tool(destructive=True)
async def wipe(n: int, ctx: ToolContext) -> str:
    """Wipes n disks, reporting each (held for the user's approval)."""
    for i in range(n):
        await ctx.report_progress(i + 1, n, f"disk {i + 1}")
    return "wiped"


async def test_the_approved_calls_own_progress_is_on_the_resumed_stream_before_its_result() -> None:
    from toolrun.store import InMemoryRunStore

    heard: list[str | None] = []

    async def callback(done: float, total: float | None, message: str | None) -> None:
        heard.append(message)

    agent = Agent(
        scripted(("wipe", {"n": 3}), ("wipe", {"n": 2})), [wipe], progress_interval=0, runs=InMemoryRunStore()
    )
    user = ToolContext(user_id="u1")
    paused = await agent.run("wipe three", context=user)
    decider = user.evolve(progress=callback)
    events = [
        e
        async for e in agent.stream_resume(paused, {paused.pending[0].confirmation_id: True}, context=decider)
    ]
    shown = [(type(e).__name__, getattr(e, "message", None)) for e in events[:4]]
    assert shown == [
        ("ToolCallProgress", "disk 1"),
        ("ToolCallProgress", "disk 2"),
        ("ToolCallProgress", "disk 3"),
        ("ToolCallFinished", None),
    ]
    step = events[3].step  # type: ignore[attr-defined]
    assert all(e.call.name == "wipe" and e.step == step for e in events[:3])  # type: ignore[attr-defined]
    assert heard == ["disk 1", "disk 2", "disk 3"]  # the deciding context's callback hears them too
    again = events[-1].run  # type: ignore[attr-defined]
    assert again.status == "awaiting_confirmation"  # the second wipe is held: decided by id this time
    decided = [e async for e in agent.stream_decide(again.pending[0].confirmation_id, True, context=user)]
    assert [e.message for e in decided if isinstance(e, ToolCallProgress)] == ["disk 1", "disk 2"]
    finished = [e for e in decided if isinstance(e, ToolCallFinished)]
    assert finished and finished[0].result.value == "wiped"
