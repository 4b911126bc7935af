"""`RunHandle`: the events of one run, as the run's task produces them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from toolrun.server._errors import ServiceError
from toolrun.server.events import RunError, RunFinished, ServiceEvent

__all__ = ["RunHandle"]

_END = object()


class RunHandle:
    """The events of one run, as it happens. Iterate it (once), or `await result()`."""

    def __init__(self, run_id: str, conversation_id: str) -> None:
        self.run_id = run_id
        self.conversation_id = conversation_id
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None

    def _put(self, event: ServiceEvent) -> None:
        self._queue.put_nowait(event)

    def _close(self) -> None:
        self._queue.put_nowait(_END)

    async def next(self, within: float) -> ServiceEvent | None:
        """The next event, None after the last; `TimeoutError` when none comes within `within` seconds (the
        stream goes on: call again)."""
        if self._queue.empty():
            async with asyncio.timeout(within):
                item = await self._queue.get()
        else:
            item = self._queue.get_nowait()
        return None if item is _END else item

    async def __aiter__(self) -> AsyncIterator[ServiceEvent]:
        while True:
            item = await self._queue.get()
            if item is _END:
                return
            yield item

    async def result(self) -> dict[str, Any]:
        """Drain the stream; the `RunFinished` body (raises `ServiceError` 500 after a `RunError`)."""
        final: dict[str, Any] | None = None
        error: RunError | None = None
        async for event in self:
            if isinstance(event, RunFinished):
                final = event.response
            elif isinstance(event, RunError):
                error = event
        if final is None:
            detail = error.message if error is not None else "The run ended without a result."
            raise ServiceError(500, "internal_error", detail)
        return final
