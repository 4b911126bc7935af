"""The toolrun SSE format: the internal event stream as `text/event-stream`, one `id:` per event.

```
id: run_0123…:1
event: run_started
data: {"run_id": "run_0123…", "conversation_id": "conv_…", "model": "demo", "demo": true, "resumed": false}
```

Event names: `run_started`, `text_delta`, `tool_call_started`, `tool_call_finished`,
`confirmation_required`, `run_finished` (data: the `/chat` body), `error`. A client that disconnects only
stops listening: the run goes on in its own task to its next safe point and is stored.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent

from toolrun.server._handle import RunHandle
from toolrun.server._responses import json_text

__all__ = ["SSE_DOC", "sse_events", "sse_response"]

SSE_DOC: dict[int | str, dict[str, Any]] = {
    200: {"description": "Server-sent events (see docs/service.md).", "content": {"text/event-stream": {}}}
}
"""The OpenAPI entry of a streaming route's success."""


async def sse_events(handle: RunHandle) -> AsyncIterator[ServerSentEvent]:
    """The handle's events as SSE events with ids `<run_id>:<n>`."""
    n = 0
    async for event in handle:
        n += 1
        yield ServerSentEvent(
            id=f"{handle.run_id}:{n}",
            event=event.kind,
            # json_text cleans lone surrogates (a tool's value may hold one: encoded, it would cut the stream)
            data=json_text(event.data()),
        )


def sse_response(handle: RunHandle) -> EventSourceResponse:
    """A streaming response over the handle (pings every 15 s keep proxies from closing it)."""
    return EventSourceResponse(
        sse_events(handle), ping=15, headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    )
