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
from toolrun.tools import ProgressThrottle

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

    throttle = ProgressThrottle(forward, interval=3600)
    for i in range(1, 1001):
        await throttle(i, 1000)
    throttle.close()
    await throttle(1001, 1000)
    assert got == [1, 1000] and throttle.dropped == 999
