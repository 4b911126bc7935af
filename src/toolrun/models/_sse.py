"""The `text/event-stream` reader both lean transports share (`_http` on httpx, `_aiohttp` on aiohttp), and
their decoding of a JSON answer.

A transport gives the body's byte chunks, tells which of its exceptions mean the connection broke and how
to let go of the response; `EventStream` splits the chunks into lines on bytes (`\\n`, `\\r\\n` or `\\r`,
however the reads cut them), gathers each event's `data:` lines, decodes the payload with msgspec (no text
copy) and stops at `[DONE]`. An event whose payload carries an `error` object (a failure reported inside a
200 stream) raises the matching `ProviderError`, as the SDKs' streams do.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import msgspec

from toolrun.models._errors import ProviderResponseError, ProviderUnavailableError, error_from_body

__all__ = ["EventStream", "json_body", "split_lines"]

_decode = msgspec.json.decode
# After the consumer stopped: how long, and for how many events, `EventStream.close` reads on to the end.
_DRAIN_SECONDS = 0.5
_DRAIN_EVENTS = 8
_AFTER_DONE_LINES = 64


def json_body(content: bytes, status: int, provider: str) -> Any:
    """A 2xx answer's JSON body, decoded; a body that is not JSON is a `ProviderResponseError` (both lean
    transports' `post`)."""
    try:
        return _decode(content)
    except msgspec.DecodeError as exc:
        raise ProviderResponseError(
            f"the response is not valid JSON: {exc}", provider=provider, status_code=status
        ) from exc


async def split_lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The lines of a body without their ends (`\\n`, `\\r\\n` or `\\r`), however the reads split them."""
    pending = b""
    async for chunk in chunks:
        buffer = pending + chunk if pending else chunk
        if b"\r" in buffer:
            tail = buffer.endswith(b"\r")  # its `\n` may come with the next read
            buffer = buffer.replace(b"\r\n", b"\n")
            if tail:
                buffer = buffer[:-1]
            buffer = buffer.replace(b"\r", b"\n")
            if tail:
                buffer += b"\r"
        lines = buffer.split(b"\n")
        pending = lines.pop()
        for line in lines:
            yield line
    if pending and pending != b"\r":
        yield pending


class EventStream:
    """The `data:` payloads of a `text/event-stream` response, decoded, until `[DONE]` or the end.

    A transport subclasses it: `_chunks` (the body's bytes), `_broken` (its exceptions for a connection
    that broke or stalled), `_unavailable` (such an exception as a `ProviderUnavailableError`) and
    `_release` (let go of the response: back to the pool when read to its end, else closed).
    """

    def __init__(self, provider: str) -> None:
        self._provider = provider
        self._finished = False
        self._events = self._read()

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self._events

    # -- what a transport provides ---------------------------------------------------------------------

    def _chunks(self) -> AsyncIterator[bytes]:
        raise NotImplementedError

    def _broken(self) -> tuple[type[BaseException], ...]:
        raise NotImplementedError

    def _unavailable(self, exc: BaseException) -> ProviderUnavailableError:
        raise NotImplementedError

    async def _release(self) -> None:
        raise NotImplementedError

    # -- the reader ------------------------------------------------------------------------------------

    async def _read(self) -> AsyncIterator[dict[str, Any]]:
        data: list[bytes] = []
        event: bytes | None = None
        try:
            lines = split_lines(self._chunks())
            async for line in lines:
                if line:
                    if line.startswith(b"data:"):
                        data.append(line[6:] if line.startswith(b"data: ") else line[5:])
                    elif line.startswith(b"event:"):
                        event = line[6:].strip()
                    continue  # ids, retries and comments (": ping") carry nothing for us
                if not data:
                    event = None
                    continue
                payload = data[0] if len(data) == 1 else b"\n".join(data)
                data.clear()
                if payload.startswith(b"[DONE]"):
                    # Read the body to its end (the chunked terminator follows at once): a response read
                    # to its end gives its connection back to the pool; one released early closes it.
                    after = 0
                    async for _ in lines:
                        after += 1
                        if after > _AFTER_DONE_LINES:
                            break
                    self._finished = True
                    return
                item = self._item(payload, event)
                event = None
                if item is not None:
                    yield item
            self._finished = True
            if data and not b"\n".join(data).startswith(b"[DONE]"):
                item = self._item(b"\n".join(data), event)
                if item is not None:
                    yield item
        except self._broken() as exc:
            raise self._unavailable(exc) from exc

    def _item(self, payload: bytes, event: bytes | None) -> dict[str, Any] | None:
        try:
            item = _decode(payload)
        except msgspec.DecodeError as exc:
            raise ProviderResponseError(
                f"a stream event is not valid JSON: {payload[:200]!r}", provider=self._provider
            ) from exc
        if isinstance(item, dict) and item.get("error") and (event is None or event == b"error"):
            raise error_from_body(item["error"], status=None, headers=None, provider=self._provider)
        if not isinstance(item, dict):
            raise ProviderResponseError(
                f"a stream event is not a JSON object: {payload[:200]!r}", provider=self._provider
            )
        return item

    async def close(self) -> None:
        """End the stream. A consumer stops at the finish reason; what follows (a usage chunk, `[DONE]`, the
        body's end) arrives at once, so it is read here, for a short while at most: the connection then goes
        back to the pool instead of being closed, and the next request needs no new one."""
        try:
            if not self._finished:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(_DRAIN_SECONDS):
                        left = _DRAIN_EVENTS
                        async for _ in self._events:
                            left -= 1
                            if left <= 0:
                                break
            await self._events.aclose()  # type: ignore[attr-defined]
        finally:
            await self._release()  # read to its end: back to the pool; otherwise (cut short) closed
