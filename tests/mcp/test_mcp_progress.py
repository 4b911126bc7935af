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
