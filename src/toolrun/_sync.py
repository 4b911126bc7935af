"""Running a coroutine to its end from sync code: the CLI's checks and the LangChain / LangGraph sync doors.

In this thread when no event loop runs here; otherwise in a fresh thread of its own (with this thread's
context variables), so a sync caller inside a running loop neither blocks on nor re-enters that loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
from collections.abc import Coroutine
from typing import Any

__all__ = ["run_sync"]


def run_sync(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run `coro` to its end and return its result (see the module docstring for where it runs)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    context = contextvars.copy_context()
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(context.run, asyncio.run, coro).result()
