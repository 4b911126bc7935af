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

import functools
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from toolrun.models._errors import (
    ProviderError,
    ProviderUnavailableError,
    error_from_status,
)
from toolrun.models._sse import EventStream, json_body

if TYPE_CHECKING:
    import httpx

__all__ = ["HTTPClient", "SSEStream"]

_CONNECT_TIMEOUT = 30.0
# Not the SDK's 5 s: a connect timeout also counts the time the event loop takes to come back to the new
# connection, and a server loop busy with 200 chats took longer than 5 s to do so (bench/service.py: 15 of
# 200 streamed turns failed with ProviderUnavailableError while the model server was up and idle).
_DEFAULT_TIMEOUT = 600.0  # the SDK's: a long generation may take minutes
_MAX_CONNECTIONS = 1024  # the client's own pools, all together (see `HTTPClient.__init__`)
_KEEP_ALIVE = 256
_POOLS = 64
_PER_POOL = 4  # requests in flight on one pool before the next one is used (and connections it keeps)


class SSEStream(EventStream):
    """The `data:` payloads of an httpx `text/event-stream` response, decoded (`models._sse`)."""

    def __init__(self, response: httpx.Response, provider: str) -> None:
        self._response = response
        super().__init__(provider)

    def _chunks(self) -> AsyncIterator[bytes]:
        return self._response.aiter_bytes()

    def _broken(self) -> tuple[type[BaseException], ...]:
        import httpx

        return (httpx.HTTPError,)

    def _unavailable(self, exc: BaseException) -> ProviderUnavailableError:
        return _unavailable(exc, "the connection broke", self._provider)

    async def _release(self) -> None:
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

        base_url, headers = with_url_credentials(base_url, headers)
        self.base_url = base_url.rstrip("/")
        self.provider = provider
        self._headers = {"content-type": "application/json", "accept": "application/json", **headers}
        self._stream_headers = {**self._headers, "accept": "text/event-stream"}
        self._own = client is None
        limits = httpx.Limits(
            max_connections=_MAX_CONNECTIONS, max_keepalive_connections=_KEEP_ALIVE, keepalive_expiry=30
        )
        timeout = httpx.Timeout(_DEFAULT_TIMEOUT, connect=_CONNECT_TIMEOUT)
        # The client's own pools, used directly (`_send`) when no proxy applies: a request then skips the
        # client's layers (URL merging, auth and redirect loops, cookie jar, event hooks, its log line). With
        # a proxy in the environment the request goes through the client, which applies it (`trust_env`).
        #
        # Several small pools, not one big one, filled in order (`_pool`): httpcore's pool scans its
        # connections for every request and every release, and for each idle one counts the idle ones again:
        # quadratic in the connections kept alive. One uvicorn worker with 50 chats keeps ~50, and that scan
        # was 15% of a turn's CPU (bench/README.md); pools of a few connections each cost almost nothing. Each
        # keeps as many idle connections as it takes requests at once: the scan also polls every idle
        # connection (a system call each), so a pool that kept 16 made later requests pay for 16 polls.
        self._transports: list[httpx.AsyncHTTPTransport] = []
        if client is None and not _proxied(self.base_url):
            shard = httpx.Limits(
                max_connections=_MAX_CONNECTIONS // _POOLS,
                max_keepalive_connections=_PER_POOL,
                keepalive_expiry=30,
            )
            tls = httpx.create_ssl_context()  # one for all pools: making one loads the CA bundle (~30 ms)
            self._transports = [httpx.AsyncHTTPTransport(limits=shard, verify=tls) for _ in range(_POOLS)]
            client = httpx.AsyncClient(timeout=timeout, transport=self._transports[0], headers=self._headers)
        self._in_flight = [0] * _POOLS
        self._client = client or httpx.AsyncClient(timeout=timeout, limits=limits, headers=self._headers)
        self._timeouts: dict[float, httpx.Timeout] = {}
        self._urls: dict[str, httpx.URL] = {}

    def _pool(self) -> int:
        """The first pool with room (so that one request at a time always reuses one connection), else
        the least busy."""
        counts = self._in_flight
        for index, count in enumerate(counts):
            if count < _PER_POOL:
                return index
        return counts.index(min(counts))

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

    async def _send(self, path: str, body: bytes, timeout_s: float | None, *, stream: bool) -> httpx.Response:
        """The response of one POST (its body not read yet when `stream`)."""
        if not self._transports:
            return await self._client.send(self._request(path, body, timeout_s, stream=stream), stream=stream)
        import httpx

        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = httpx.URL(self.base_url + path)
        limit = self._client.timeout if timeout_s is None else self._timeout(timeout_s)
        request = httpx.Request(
            "POST",
            url,
            headers=self._stream_headers if stream else self._headers,
            content=body,
            extensions={"timeout": limit.as_dict()},
        )
        index = self._pool()
        self._in_flight[index] += 1
        try:
            response = await self._transports[index].handle_async_request(request)
        except BaseException:
            self._in_flight[index] -= 1
            raise
        response.request = request
        response.stream = _counted_class()(response.stream, self._in_flight, index)
        if not stream:
            try:
                await response.aread()
            finally:
                await response.aclose()
        return response

    async def post(self, path: str, body: bytes, *, timeout_s: float | None = None) -> Any:
        """POST `body` (encoded JSON); the decoded JSON answer (a 2xx) or a `ProviderError`."""
        import httpx

        try:
            response = await self._send(path, body, timeout_s, stream=False)
        except httpx.HTTPError as exc:
            raise _unavailable(exc, "could not reach the provider", self.provider) from exc
        content = response.content
        if not 200 <= response.status_code < 300:
            raise _status_error(response, content, self.provider)
        return json_body(content, response.status_code, self.provider)

    async def stream(self, path: str, body: bytes, *, timeout_s: float | None = None) -> SSEStream:
        """POST `body` and open its event stream (a non-2xx answer raises its `ProviderError`)."""
        import httpx

        try:
            response = await self._send(path, body, timeout_s, stream=True)
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
            await self._client.aclose()  # closes the first pool
            for transport in self._transports[1:]:
                await transport.aclose()


@functools.cache
def _counted_class() -> type:
    """An `httpx.AsyncByteStream` around a response body that leaves its pool's in-flight count when
    closed, once (made on first use: httpx is imported lazily)."""
    import httpx

    class Counted(httpx.AsyncByteStream):
        __slots__ = ("_counts", "_index", "_open", "_stream")

        def __init__(self, stream: Any, counts: list[int], index: int) -> None:
            self._stream = stream
            self._counts = counts
            self._index = index
            self._open = True

        def __aiter__(self) -> AsyncIterator[bytes]:
            return self._stream.__aiter__()  # type: ignore[no-any-return]

        async def aclose(self) -> None:
            if self._open:
                self._open = False
                self._counts[self._index] -= 1
            await self._stream.aclose()

    return Counted


def with_url_credentials(base_url: str, headers: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """`base_url` without its userinfo, and `headers` with that userinfo as their authorization.

    `http://KEY@gateway:8000/v1` (the form docs/service.md shows) carries the gateway's credentials in the
    URL. They are sent as HTTP Basic authorization, as the SDK transport (httpx's client), curl and every
    browser send a URL's userinfo, in place of any other authorization header; and they leave the URL, so
    that no transport sees a URL with credentials beside an authorization header (aiohttp refuses that) and
    no error or log line carries them.
    """
    import base64
    import urllib.parse

    parts = urllib.parse.urlsplit(base_url)
    if "@" not in parts.netloc:
        return base_url, dict(headers)
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    plain = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}".encode()
    kept = {name: value for name, value in headers.items() if name.lower() != "authorization"}
    kept["authorization"] = "Basic " + base64.b64encode(plain).decode("ascii")
    return urllib.parse.urlunsplit(parts._replace(netloc=host)), kept


def _proxied(url: str) -> bool:
    """Whether the environment names a proxy for `url` (httpx's client would use it: `trust_env`)."""
    import urllib.request

    proxies = urllib.request.getproxies()
    if not proxies:
        return False
    scheme = url.split(":", 1)[0].lower()
    return bool(proxies.get(scheme) or proxies.get("all"))


def _unavailable(exc: BaseException, what: str, provider: str) -> ProviderUnavailableError:
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
