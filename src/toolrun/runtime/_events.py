"""Events the executor emits, and the bus that delivers them to sync or async subscribers.

Events carry identifiers, codes and timings, never argument values, results or messages, so a subscriber
can ship them anywhere. The one exception is `ToolFinished.exception`: the live exception object of an
unexpected failure, handed to in-process subscribers (an error reporter) on purpose. It is left out of
`repr()` and `to_dict()`.

```python
executor.events.subscribe(print)                              # every event, sync
executor.events.subscribe(on_finished, ToolFinished)          # only some types
async def ship(event: ToolEvent) -> None: ...
executor.events.subscribe(ship)                               # async: runs as a task; await drain()
```

A subscriber that raises is logged (to the `toolrun` logger, message redacted) and never breaks the call.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Literal

import msgspec

from toolrun.runtime._logging import log_exception

__all__ = [
    "ConfirmationRequested",
    "ConfirmationResolved",
    "EventBus",
    "Outcome",
    "Subscriber",
    "ToolEvent",
    "ToolFinished",
    "ToolRetrying",
    "ToolStarted",
]

Outcome = Literal["ok", "error", "confirmation_required", "cancelled"]

_logger = logging.getLogger("toolrun")


# Events are `msgspec.Struct`s: the executor builds two per call on its hot path, and a Struct's C
# `__init__` with positional arguments costs a fraction of setting a dataclass's slots one by one. They
# behave as the dataclasses they replaced did (keywords or positions, attributes, `==`, `match`), except
# for `dataclasses.fields()`/`asdict()`: use `to_dict()`. The executor builds ToolStarted and ToolFinished
# positionally: a field added to either must be added there too (tests/runtime/test_observe.py pins the
# field lists).
class ToolEvent(msgspec.Struct):
    """Base of every executor event."""

    call_id: str
    """The call's id."""
    tool_name: str | None
    """The registered tool name; None when the model named no known tool (its text is never echoed)."""
    trace_id: str | None = None
    """The context's trace id."""
    user_id: str | None = None
    """The principal the call ran for."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe fields, plus `"event"`: the class name."""
        out: dict[str, Any] = {"event": type(self).__name__}
        for name in self.__struct_fields__:
            if name != "exception":
                out[name] = getattr(self, name)
        return out


class ToolStarted(ToolEvent):
    """The executor took the call (before lookup; paired with exactly one `ToolFinished`)."""


class ToolFinished(ToolEvent):
    """The call ended: with a result, or cancelled by the caller."""

    outcome: Outcome = "ok"
    """`"ok"`, `"error"`, `"confirmation_required"`, or `"cancelled"` (the caller's task was cancelled)."""
    code: str | None = None
    """The error code when `outcome == "error"`."""
    duration: float = 0.0
    """Seconds in the executor."""
    attempts: int = 0
    """How many times the handler started."""
    cached: bool = False
    """Served from the result cache."""
    error_id: str | None = None
    """For `EXECUTION_FAILED` (and other internal failures): the id that ties the result to the logs."""
    exception: BaseException | None = None
    """The unexpected exception behind an `EXECUTION_FAILED`, for in-process error reporting only (left
    out of `repr()`, `==` and `to_dict()`: its message may hold user data)."""

    def __repr__(self) -> str:
        fields = ", ".join(
            f"{name}={getattr(self, name)!r}" for name in self.__struct_fields__ if name != "exception"
        )
        return f"{type(self).__name__}({fields})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.to_dict() == other.to_dict()


class ToolRetrying(ToolEvent, kw_only=True):
    """An attempt failed with a retryable error; the next one starts after `delay` seconds."""

    attempt: int
    """The attempt that failed (1 for the first)."""
    delay: float
    """Seconds before the next attempt."""
    code: str
    """The failed attempt's error code."""


class ConfirmationRequested(ToolEvent, kw_only=True):
    """A call was held back for a person's approval."""

    confirmation_id: str
    expires_at: float
    """`time.time()` seconds."""


class ConfirmationResolved(ToolEvent, kw_only=True):
    """A pending confirmation was decided or found unusable."""

    confirmation_id: str
    decision: Literal["approved", "denied", "expired", "mismatch", "unknown"]
    """`approved`/`denied` by the user; `expired`; `mismatch` (other tool, arguments or user);
    `unknown` (no such pending confirmation for this user, or already used)."""


Subscriber = Callable[[Any], Any]
"""A function taking one event; sync, or async (then each delivery runs as a task)."""


class EventBus:
    """Delivers events to subscribers, filtered by type.

    `active` is False while nobody subscribes; the executor then builds no events at all.
    """

    def __init__(self) -> None:
        self._subs: list[tuple[tuple[type[ToolEvent], ...], Subscriber, bool]] = []
        self._by_type: dict[type[ToolEvent], tuple[tuple[Subscriber, bool], ...]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self.active = False
        """Whether anyone subscribes (read on the hot path)."""
        self.only: Subscriber | None = None
        """The one subscriber, when exactly one sync subscriber takes every event: the executor calls it
        itself (one frame less per event than `emit`)."""

    def subscribe(self, fn: Subscriber, *event_types: type[ToolEvent]) -> Callable[[], None]:
        """Deliver events (all, or instances of `event_types`) to `fn`; returns a function to unsubscribe."""
        is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)  # noqa: B004
        )
        entry = (tuple(event_types) or (ToolEvent,), fn, is_async)
        self._subs.append(entry)
        self._changed()

        def unsubscribe() -> None:
            if entry in self._subs:
                self._subs.remove(entry)
                self._changed()

        return unsubscribe

    def wants(self, event_type: type[ToolEvent]) -> bool:
        """Whether any subscriber takes events of `event_type`."""
        return bool(self._targets(event_type))

    def emit(self, event: ToolEvent) -> None:
        """Deliver `event` now to sync subscribers, and as tasks to async ones. Never raises."""
        for fn, is_async in self._by_type.get(type(event)) or self._targets(type(event)):
            try:
                if is_async:
                    self._spawn(fn(event))
                else:
                    fn(event)
            except Exception as exc:
                log_exception(_logger, "Event subscriber %r failed on %s", exc, fn, type(event).__name__)

    async def drain(self) -> None:
        """Wait until every async delivery started so far has finished."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        try:
            task = asyncio.get_running_loop().create_task(coro)
        except BaseException:
            coro.close()
            raise
        self._tasks.add(task)
        task.add_done_callback(self._delivered)

    def _delivered(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log_exception(_logger, "Async event subscriber failed", exc)

    def _targets(self, event_type: type[ToolEvent]) -> tuple[tuple[Subscriber, bool], ...]:
        targets = self._by_type.get(event_type)
        if targets is None:
            targets = tuple((fn, a) for types, fn, a in self._subs if issubclass(event_type, types))
            self._by_type[event_type] = targets
        return targets

    def _changed(self) -> None:
        self._by_type = {}
        self.active = bool(self._subs)
        only = self._subs[0] if len(self._subs) == 1 else None
        self.only = only[1] if only is not None and only[0] == (ToolEvent,) and not only[2] else None

    def failed(self, event: ToolEvent, exc: Exception) -> None:
        """Log the failure of `only` on `event` (for callers that call it themselves)."""
        log_exception(_logger, "Event subscriber %r failed on %s", exc, self.only, type(event).__name__)
