"""Tools served in the MCP tests (also imported by the stdio subprocess: `sample_tools:registry`)."""

from __future__ import annotations

import asyncio

from toolrun import ToolContext, ToolRegistry, tool

STATE: dict[str, asyncio.Event] = {}
"""Events a test can wait on (in-process servers only)."""


@tool(read_only=True, title="Add two numbers")
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


@tool(read_only=True, open_world=False)
async def get_task(task_id: str) -> dict[str, str]:
    """Get a task by id."""
    return {"id": task_id, "title": "Write the report"}


@tool
async def broken(task_id: str) -> dict[str, str]:
    """A tool that fails with an internal error."""
    raise RuntimeError(f"database password=hunter2 for {task_id}")


@tool(timeout=0.2)
async def slow() -> str:
    """Takes longer than its timeout."""
    await asyncio.sleep(30)
    return "late"


@tool(destructive=True)
async def delete_task(task_id: str) -> dict[str, str]:
    """Delete a task permanently."""
    return {"deleted": task_id}


@tool(roles={"admin"}, idempotent=True)
async def purge_cache() -> str:
    """Admins only: purge the cache."""
    return "purged"


@tool(rate_limit="1/minute")
async def send_note(text: str) -> str:
    """Send a note (once a minute)."""
    return "sent"


@tool
async def long_job(steps: int, ctx: ToolContext) -> str:
    """A long job that reports progress."""
    for i in range(steps):
        await ctx.report_progress(i + 1, steps, f"step {i + 1}")
        await asyncio.sleep(0)
    return "done"


@tool(timeout=60)
async def wait_forever() -> str:
    """Waits until cancelled (tests cancellation)."""
    STATE["started"].set()
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        STATE["cancelled"].set()
        raise
    return "never"


@tool
def crash() -> str:
    """Ends the server process at once (tests a server that dies)."""
    import os

    os._exit(3)


def build_registry() -> ToolRegistry:
    return ToolRegistry(
        [add, get_task, broken, slow, delete_task, purge_cache, send_note, long_job, wait_forever]
    )


registry = build_registry()
"""The stdio subprocess's tools: the above, plus `crash`."""
registry.register(crash)
