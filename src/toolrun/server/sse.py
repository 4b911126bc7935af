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

from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from toolrun.server._handle import RunHandle
from toolrun.server._responses import json_text

__all__ = ["SSE_DOC", "FramesResponse", "SSEResponse", "sse_response"]

SSE_DOC: dict[int | str, dict[str, Any]] = {
    200: {"description": "Server-sent events (see docs/service.md).", "content": {"text/event-stream": {}}}
}
"""The OpenAPI entry of a streaming route's success."""


_PING = ": ping\r\n\r\n"
_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


class FramesResponse(StreamingResponse):
    """A stream of ready-made frames (toolrun's SSE, AG-UI's and the AI SDK's event streams), written
    straight to the ASGI `send`, one frame a send.

    Starlette's `StreamingResponse` runs each response in an anyio task group with a second task that
    listens for the client's disconnect, and cancels the frames when it comes (`sse_starlette`'s
    `EventSourceResponse` ran three tasks and a cancel scope around every send: 13.6% of a streamed turn's
    CPU, bench/README.md). Here the frames run to their end either way: they follow a run that goes on in
    its own task to its next safe point whether or not anybody listens (uvicorn drops what is sent after a
    disconnect), so there is nothing to cancel, and the stream still ends when the run does.
    """

    def __init__(self, frames: AsyncIterable[str], *, media_type: str, headers: Mapping[str, str]) -> None:
        super().__init__(iter(()), headers=headers, media_type=media_type)
        self._frames = frames

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        frames = self._frames
        try:
            await send(
                {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
            )
            async for frame in frames:
                await send({"type": "http.response.body", "body": frame.encode(), "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:  # a server whose send raises once the client is gone: the frames are closed, not left open
            close = getattr(frames, "aclose", None)
            if close is not None:
                await close()


class SSEResponse(FramesResponse):
    """A run's events as `text/event-stream`, one `id:` per event (`<run_id>:<n>`), a comment line
    (`: ping`) after `ping` seconds without one, so that proxies keep the connection open (a
    `FramesResponse`: a client that goes away stops nothing, and the response ends with the run's events).
    """

    media_type = "text/event-stream"

    def __init__(self, handle: RunHandle, *, ping: float = 15.0) -> None:
        super().__init__(_event_frames(handle, ping), media_type=self.media_type, headers=_HEADERS)


async def _event_frames(handle: RunHandle, ping: float) -> AsyncIterator[str]:
    n = 0
    while True:
        try:
            event = await handle.next(ping)
        except TimeoutError:
            yield _PING
            continue
        if event is None:
            return
        n += 1
        # json_text: compact (no line breaks inside `data:`), lone surrogates cleaned (a tool's value may hold
        # one: encoded as is, it would cut the stream)
        yield f"id: {handle.run_id}:{n}\r\nevent: {event.kind}\r\ndata: {json_text(event.data())}\r\n\r\n"


def sse_response(handle: RunHandle) -> SSEResponse:
    """A streaming response over the handle (pings every 15 s keep proxies from closing it)."""
    return SSEResponse(handle, ping=15.0)
