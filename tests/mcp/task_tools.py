"""Background tools for the MCP Tasks tests (also served over stdio: `task_tools:registry`)."""

from __future__ import annotations

import asyncio
from typing import Any

from toolrun import ToolContext, ToolRegistry, tool

STATE: dict[str, Any] = {"cancelled": 0, "finished": 0}


@tool(background=True, timeout=60)
async def build_report(month: str, seconds: float = 0.2, *, ctx: ToolContext) -> dict[str, Any]:
    """Build the month's report (takes a while).

    Args:
        month: The month, e.g. "2026-11".
        seconds: How long the work takes.
    """
    await ctx.report_progress(1, total=2, message="reading")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        STATE["cancelled"] += 1
        raise
    STATE["finished"] += 1
    return {"month": month, "rows": 1234}


@tool(background=True, timeout=60)
async def failing_export(target: str) -> str:
    """An export that always fails (its tool error is a completed task's `isError` result)."""
    raise ValueError(f"disk full while writing {target}")


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


registry = ToolRegistry([build_report, failing_export, add])
