"""Module-level functions for the process isolation tests (a worker process imports them by name)."""

from __future__ import annotations

import os
import time
from typing import Any

from toolrun import ToolError, tool
from toolrun.runtime import ProcessIsolation


def crunch(n: int) -> int:
    """Sum the first n integers."""
    return sum(range(n))


def spin(seconds: float) -> None:
    """Busy-loop (a thread could not be stopped)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def worker_pid() -> int:
    """The worker's process id."""
    return os.getpid()


def fail(text: str) -> None:
    """Raise an ordinary exception."""
    raise ValueError(text)


def refuse() -> None:
    """Raise a ToolError."""
    raise ToolError("REFUSED", "not here", recover_action="ask", details={"n": 1})


def die() -> None:
    """Exit the worker abruptly."""
    os._exit(3)


def gives_unpicklable() -> Any:
    """Return something that cannot be sent back."""
    return lambda: 1


DECORATED = ProcessIsolation(max_workers=1)


@tool(timeout=20)
@DECORATED.wrap
def square(n: int) -> int:
    """Square a number in a worker process."""
    return n * n
