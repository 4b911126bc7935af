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

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from toolrun.server._handle import RunHandle
from toolrun.server._responses import json_text

__all__ = ["SSE_DOC", "FramesResponse", "SSEResponse", "pinged", "sse_response"]

SSE_DOC: dict[int | str, dict[str, Any]] = {
    200: {"description": "Server-sent events (see docs/service.md).", "content": {"text/event-stream": {}}}
}
"""The OpenAPI entry of a streaming route's success."""


_PING = ": ping\r\n\r\n"
_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


class FramesResponse(StreamingResponse):
    """A stream of ready-made frames (toolrun's SSE, AG-UI's and the AI SDK's event streams), written
    straight to the ASGI `send`, one frame a send: the service's one SSE writer.

    Starlette's `StreamingResponse` runs each response in an anyio task group with a second task that
    listens for the client's disconnect, and cancels the frames when it comes (`sse_starlette`'s
    `EventSourceResponse` ran three tasks and a cancel scope around every send: bench/README.md). By
    default the frames run to their end either way: they follow a run that goes on in its own task to its
    next safe point whether or not anybody listens (uvicorn drops what is sent after a disconnect), so
    there is nothing to cancel, and the stream still ends when the run does.

    `until_disconnect=True` is for frames that follow no run and have no end of their own (the jobs
    stream): they are cancelled when the client goes away, as `StreamingResponse` does it.
    """

    def __init__(
        self,
        frames: AsyncIterable[str],
        *,
        media_type: str,
        headers: Mapping[str, str],
        until_disconnect: bool = False,
    ) -> None:
        super().__init__(iter(()), headers=headers, media_type=media_type)
        self._frames = frames
        self._until_disconnect = until_disconnect

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        frames = self._frames
        try:
            if self._until_disconnect:
                self.body_iterator = aiter(frames)
                await super().__call__(scope, receive, send)
                return
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

    def __init__(self, handle: RunHandle, *, ping: float = 15.0) -> None:
        super().__init__(_event_frames(handle, ping), media_type="text/event-stream", headers=_HEADERS)


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


async def pinged(frames: AsyncIterable[str], every: float) -> AsyncIterator[str]:
    """The frames, with a `: ping` comment line after each `every` seconds without one, so that proxies keep
    a quiet stream open. The next frame is awaited in a task of its own, so a ping never cuts a frame's
    work short; closing this closes `frames`."""
    source = aiter(frames)
    step: asyncio.Task[str | None] | None = None

    async def following() -> str | None:
        return await anext(source, None)

    try:
        while True:
            step = asyncio.create_task(following())
            while not (await asyncio.wait({step}, timeout=every))[0]:
                yield _PING
            frame = step.result()
            if frame is None:
                return
            yield frame
    finally:
        if step is not None and not step.done():
            step.cancel()
            await asyncio.wait({step})
        close = getattr(source, "aclose", None)
        if close is not None:
            await close()


def sse_response(handle: RunHandle) -> SSEResponse:
    """A streaming response over the handle (pings every 15 s keep proxies from closing it)."""
    return SSEResponse(handle, ping=15.0)
