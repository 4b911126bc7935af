"""Waiting for a state in tests, never for a time: `wait_for` polls a condition until it holds.

Its deadline is generous on purpose (a loaded CI machine is slow, not wrong); it only turns a hang into a
clear failure that names what never happened. A test that needs to know something *did not* happen waits
for the event that would have made it happen instead.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["wait_for"]


async def wait_for(
    predicate: Callable[[], Any | Awaitable[Any]],
    *,
    timeout: float = 30.0,
    every: float = 0.005,
    what: str | None = None,
) -> Any:
    """Call `predicate` (sync or async) until it returns something truthy, and return that.

    Raises `AssertionError` naming `what` (or the predicate) when `timeout` seconds pass first.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if loop.time() >= deadline:
            raise AssertionError(
                f"{what or getattr(predicate, '__name__', 'the condition')} did not happen "
                f"within {timeout:g} s"
            )
        await asyncio.sleep(every)
