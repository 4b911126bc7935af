"""Time boxes for suspended handlers: `asyncio.timeout` semantics, one shared timer per event loop.

`asyncio.timeout` schedules one `TimerHandle` per use. Every suspended tool call then adds a handle to the
loop's timer heap, whose entries compare in Python (`TimerHandle.__lt__`), and a long timeout's cancelled
handle stays in the heap until it reaches the head: at a few thousand calls in flight, every `sleep` in
every task pays for the extra depth. Here every time box of a loop lives in one heap of plain tuples
(compared in C) and the loop holds a single timer, for the earliest deadline.

Semantics are those of `asyncio.timeout` (Python 3.11): on expiry the task is cancelled; when the
`CancelledError` comes out of the box and no other cancellation was requested meanwhile, it becomes a
timeout (`Box.expired()`), and the cancellation request is withdrawn (`Task.uncancel`) whether or not
the handler let the error out. A cancellation from elsewhere propagates untouched.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from typing import Any

__all__ = ["Box", "Watchdog", "watchdog"]


class Box:
    """One time box (see `Watchdog.box`)."""

    __slots__ = ("_cancelling", "_fired", "_open", "_task", "_withdrawn")

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self._task = task
        self._cancelling = task.cancelling()
        self._fired = False
        self._open = True
        self._withdrawn = False

    def expired(self) -> bool:
        """Whether the time ran out while the box was open."""
        return self._fired

    def close(self, exc: BaseException | None) -> bool:
        """Close the box as the guarded code ends with `exc`; True when that exception is this timeout."""
        self._open = False
        if self._fired and not self._withdrawn:
            self._withdrawn = True
            return self._task.uncancel() <= self._cancelling and isinstance(exc, asyncio.CancelledError)
        return False

    def _fire(self) -> None:
        if self._open and not self._fired:
            self._fired = True
            self._task.cancel()


class Watchdog:
    """The time boxes of one event loop, with one loop timer for the earliest of them."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._heap: list[tuple[float, int, Box]] = []
        self._seq = itertools.count()
        self._handle: asyncio.TimerHandle | None = None
        self._armed = math.inf

    def box(self, seconds: float, task: asyncio.Task[Any]) -> Box:
        """Open a box that cancels `task` after `seconds` unless closed first (`Box.close`)."""
        box = Box(task)
        if seconds <= 0:  # already over: cancel at the next suspension, as asyncio.timeout does
            box._fire()
            return box
        when = self._loop.time() + seconds
        heap = self._heap
        heapq.heappush(heap, (when, next(self._seq), box))
        if when < self._armed:
            self._arm(when)
        elif len(heap) > 256 and len(heap) & 255 == 0:
            self._compact()
        return box

    def _arm(self, when: float) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._handle = self._loop.call_at(when, self._fire)
        self._armed = when

    def _fire(self) -> None:
        self._handle = None
        self._armed = math.inf
        heap = self._heap
        now = self._loop.time()
        while heap and (heap[0][0] <= now or not heap[0][2]._open):
            heapq.heappop(heap)[2]._fire()
        if heap:
            self._arm(heap[0][0])

    def _compact(self) -> None:
        """Drop closed boxes (they wait in the heap until their deadline otherwise)."""
        live = [entry for entry in self._heap if entry[2]._open]
        if len(live) * 2 < len(self._heap):
            heapq.heapify(live)
            self._heap = live
            if not live and self._handle is not None:
                self._handle.cancel()
                self._handle = None
                self._armed = math.inf

    def __len__(self) -> int:
        return len(self._heap)


_last: tuple[asyncio.AbstractEventLoop | None, Watchdog | None] = (None, None)
_by_loop: dict[int, tuple[Any, Watchdog]] = {}


def watchdog(loop: asyncio.AbstractEventLoop) -> Watchdog:
    """The watchdog of `loop` (created on first use)."""
    global _last
    if _last[0] is loop and _last[1] is not None:
        return _last[1]
    entry = _by_loop.get(id(loop))
    if entry is None or entry[0] is not loop:
        if len(_by_loop) > 64:  # forget closed loops (tests make many)
            for key, (old, _) in list(_by_loop.items()):
                if old.is_closed():
                    del _by_loop[key]
        entry = (loop, Watchdog(loop))
        _by_loop[id(loop)] = entry
    _last = (loop, entry[1])
    return entry[1]
