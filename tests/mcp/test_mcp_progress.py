"""MCP `notifications/progress` are throttled: a tool reporting 10,000 times does not flood the client,
and the final report always arrives (official `mcp` client, both protocol eras)."""

from __future__ import annotations

import asyncio

import pytest

from mcp import Client
from toolrun import ToolContext, ToolExecutor, ToolRegistry, tool
from toolrun.mcp import create_server


@tool(read_only=True)
async def crunch(n: int, ctx: ToolContext) -> str:
    """Works through n items, reporting each."""
    for i in range(n):
        await ctx.report_progress(i + 1, n)
        if i % 100 == 0:
            await asyncio.sleep(0)
    return "crunched"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_flood_of_reports_is_throttled(mode: str) -> None:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    registry = ToolRegistry([crunch])
    executor = ToolExecutor(registry)
    server = create_server(registry, executor=executor, principal=ToolContext(user_id="u1"))
    async with Client(server, mode=mode) as client:
        result = await client.call_tool("crunch", {"n": 10_000}, progress_callback=on_progress)
    executor.close()
    assert not result.is_error
    assert 2 <= len(seen) < 200 and seen[0] == 1 and seen[-1] == 10_000


@tool(read_only=True)
async def so_far(n: int, ctx: ToolContext) -> str:
    """Counts items, reporting "i of i so far" (each report looks complete)."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, i)
        if i % 100 == 0:
            await asyncio.sleep(0)
    return "counted"


@tool(read_only=True)
async def three_steps(ctx: ToolContext) -> str:
    """Reports 0, 50 and 100 of 100, 50 ms apart (as the conformance suite's tools-call-with-progress)."""
    for done in (0, 50, 100):
        await ctx.report_progress(done, total=100)
        if done < 100:
            await asyncio.sleep(0.05)
    return "done"


async def _progress_of(name: str, arguments: dict[str, int]) -> list[float]:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    registry = ToolRegistry([so_far, three_steps])
    executor = ToolExecutor(registry)
    server = create_server(registry, executor=executor, principal=ToolContext(user_id="u1"))
    async with Client(server) as client:
        result = await client.call_tool(name, arguments, progress_callback=on_progress)
    executor.close()
    assert not result.is_error
    return seen


async def test_reports_that_look_complete_are_throttled_too() -> None:
    seen = await _progress_of("so_far", {"n": 5_000})
    assert 2 <= len(seen) < 200 and seen[-1] == 5_000  # not 5,000 notifications; the last one arrives


async def test_a_short_call_under_the_rate_loses_no_report() -> None:
    assert await _progress_of("three_steps", {}) == [0, 50, 100]
