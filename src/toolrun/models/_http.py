"""A lean JSON-over-HTTP client for model providers: one pooled `httpx.AsyncClient`, msgspec on both ends.

The official SDKs build a typed object graph for every request and every response (and every stream
chunk), then toolrun turns it back into plain data (`to_dict`) to read it. With a model answering in
milliseconds (a local vLLM, a compatible gateway), that construction is most of the CPU a chat turn costs.
This client skips it: the body toolrun already builds is encoded with msgspec and posted on a kept-alive
HTTP/1.1 connection, and the answer is decoded with msgspec straight into the dicts `parse_response` and
`_stream_events` read. What reaches those parsers is the same JSON either way, so both paths share one
parser.

Failures become the same `ProviderError`s as through the SDK (`map_http_error`), with the same status rules
(`_errors._class_for_status`), messages and `retry_after`.

httpx is imported on first use only (it comes with the `openai` extra and the server).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from toolrun.models._errors import (
    ProviderError,
    ProviderResponseError,
    ProviderUnavailableError,
    error_from_body,
    error_from_status,
)

if TYPE_CHECKING:
    import httpx

__all__ = ["HTTPClient", "SSEStream"]

_decode = msgspec.json.decode
_CONNECT_TIMEOUT = 30.0
# Not the SDK's 5 s: a connect timeout also counts the time the event loop takes to come back to the new
# connection, and a server loop busy with 200 chats took longer than 5 s to do so (bench/service.py: 15 of
# 200 streamed turns failed with ProviderUnavailableError while the model server was up and idle).
_DEFAULT_TIMEOUT = 600.0  # the SDK's: a long generation may take minutes


class SSEStream:
    """The `data:` payloads of a `text/event-stream` response, decoded, until `[DONE]` or the end.

    An event whose payload carries an `error` object (a failure reported inside a 200 stream) raises the
    matching `ProviderError`, as the SDK's stream does.
    """

    def __init__(self, response: httpx.Response, provider: str) -> None:
        self._response = response
        self._provider = provider
        self._events = self._read()

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self._events

    async def _read(self) -> AsyncIterator[dict[str, Any]]:
        import httpx

        data: list[str] = []
        event: str | None = None
        try:
            async for line in self._response.aiter_lines():
                if line:
                    if line.startswith("data:"):
                        data.append(line[6:] if line.startswith("data: ") else line[5:])
                    elif line.startswith("event:"):
                        event = line[6:].strip()
                    continue  # ids, retries and comments (": ping") carry nothing for us
                if not data:
                    event = None
                    continue
                payload = "\n".join(data)
                data.clear()
                if payload.startswith("[DONE]"):
                    return
                item = self._item(payload, event)
                event = None
                if item is not None:
                    yield item
            if data and not "\n".join(data).startswith("[DONE]"):
                item = self._item("\n".join(data), event)
                if item is not None:
                    yield item
        except httpx.HTTPError as exc:
            raise _unavailable(exc, "the connection broke", self._provider) from exc

    def _item(self, payload: str, event: str | None) -> dict[str, Any] | None:
        try:
            item = _decode(payload)
        except msgspec.DecodeError as exc:
            raise ProviderResponseError(
                f"a stream event is not valid JSON: {payload[:200]!r}", provider=self._provider
            ) from exc
        if isinstance(item, dict) and item.get("error") and (event is None or event == "error"):
            raise error_from_body(item["error"], status=None, headers=None, provider=self._provider)
        if not isinstance(item, dict):
            raise ProviderResponseError(
                f"a stream event is not a JSON object: {payload[:200]!r}", provider=self._provider
            )
        return item

    async def close(self) -> None:
        await self._events.aclose()  # type: ignore[attr-defined]
        await self._response.aclose()


class HTTPClient:
    """POST JSON bodies to one API root; answers as dicts, failures as `ProviderError`s.

    Args:
        base_url: The API root, e.g. `http://127.0.0.1:8000/v1`.
        headers: Sent with every request (authorization, API version).
        provider: `ProviderError.provider` for every error raised.
        client: An `httpx.AsyncClient` to use (you keep ownership); default: one of its own, keeping up to
            200 connections alive (one uvicorn worker easily has that many chats waiting on the model).
    """

    def __init__(
        self,
        base_url: str,
        *,
        headers: Mapping[str, str],
        provider: str,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        import httpx

        self.base_url = base_url.rstrip("/")
        self.provider = provider
        self._headers = {"content-type": "application/json", "accept": "application/json", **headers}
        self._own = client is None
        self._client = client or httpx.AsyncClient(
            timeout=httpx.Timeout(_DEFAULT_TIMEOUT, connect=_CONNECT_TIMEOUT),
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200, keepalive_expiry=30),
            headers=self._headers,
        )
        self._timeouts: dict[float, httpx.Timeout] = {}

    def _timeout(self, seconds: float | None) -> Any:
        if seconds is None:
            import httpx

            return httpx.USE_CLIENT_DEFAULT
        timeout = self._timeouts.get(seconds)
        if timeout is None:
            import httpx

            timeout = self._timeouts[seconds] = httpx.Timeout(seconds, connect=min(seconds, _CONNECT_TIMEOUT))
        return timeout

    def _request(self, path: str, body: bytes, timeout: float | None, *, stream: bool) -> Any:
        # The client toolrun made carries the headers already; a client you passed in gets them per request.
        headers = None if self._own else self._headers
        if stream:
            headers = {**(headers or {}), "accept": "text/event-stream"}
        return self._client.build_request(
            "POST", self.base_url + path, content=body, headers=headers, timeout=self._timeout(timeout)
        )

    async def post(self, path: str, body: bytes, *, timeout_s: float | None = None) -> Any:
        """POST `body` (encoded JSON); the decoded JSON answer (a 2xx) or a `ProviderError`."""
        import httpx

        try:
            response = await self._client.send(self._request(path, body, timeout_s, stream=False))
        except httpx.HTTPError as exc:
            raise _unavailable(exc, "could not reach the provider", self.provider) from exc
        content = response.content
        if not 200 <= response.status_code < 300:
            raise _status_error(response, content, self.provider)
        try:
            return _decode(content)
        except msgspec.DecodeError as exc:
            raise ProviderResponseError(
                f"the response is not valid JSON: {exc}",
                provider=self.provider,
                status_code=response.status_code,
            ) from exc

    async def stream(self, path: str, body: bytes, *, timeout_s: float | None = None) -> SSEStream:
        """POST `body` and open its event stream (a non-2xx answer raises its `ProviderError`)."""
        import httpx

        try:
            response = await self._client.send(self._request(path, body, timeout_s, stream=True), stream=True)
        except httpx.HTTPError as exc:
            raise _unavailable(exc, "could not reach the provider", self.provider) from exc
        if not 200 <= response.status_code < 300:
            try:
                content = await response.aread()
            except httpx.HTTPError:
                content = b""
            finally:
                await response.aclose()
            raise _status_error(response, content, self.provider)
        return SSEStream(response, self.provider)

    async def aclose(self) -> None:
        if self._own:
            await self._client.aclose()


def _unavailable(exc: Exception, what: str, provider: str) -> ProviderUnavailableError:
    """The `ProviderUnavailableError` of a transport failure: a timeout says so, anything else says `what`
    happened and httpx's own words."""
    import httpx

    if isinstance(exc, httpx.TimeoutException):
        return ProviderUnavailableError("the request timed out", provider=provider)
    return ProviderUnavailableError(f"{what}: {type(exc).__name__}: {exc}", provider=provider)


def _status_error(response: httpx.Response, content: bytes, provider: str) -> ProviderError:
    """The `ProviderError` of a non-2xx answer, caused by httpx's own `HTTPStatusError` (for debugging, as
    the SDK's exception is on the SDK path)."""
    import httpx

    error = error_from_status(response.status_code, response.headers, content, provider=provider)
    error.__cause__ = httpx.HTTPStatusError(
        f"HTTP {response.status_code}", request=response.request, response=response
    )
    return error
