"""The lean model client on aiohttp: the same interface as `models._http.HTTPClient`, far less CPU a request.

`HTTPClient` (httpx) spends most of a streamed request's CPU in httpcore: its HTTP/1.1 state machine over
anyio (a lock and cancel scopes per step, an event object per h11 event), `aiter_lines` over decoded text
and the pool's scan of its connections. aiohttp parses responses in C, runs on asyncio's own transports
and keeps released connections in a LIFO queue per origin, so a request costs far less CPU
(bench/README.md, "Model client on aiohttp"). The rest is the same as `HTTPClient`: msgspec on both ends,
the stream's `data:` lines split on bytes and decoded without a text copy, the same `ProviderError`s
(`_errors.error_from_status`), a stream read to its end when closed so its connection is reused.

Errors, all at this one boundary (`raise ... from` aiohttp's own exception):

- a non-2xx answer: `error_from_status` (class by status, the body's message, `retry_after`), caused by an
  `aiohttp.ClientResponseError`;
- could not connect, the connection broke, the answer stalled past the timeout: `ProviderUnavailableError`;
- a body or event that is not JSON: `ProviderResponseError`.

A server may close a kept-alive connection just as a request goes out on it (its idle timeout). A request
that got no byte of answer on a *reused* connection is sent once more on a fresh one: a completion request
changes nothing on the server, and the retry policy above this client retries the same failure anyway, only
later and counted as a failure. On a fresh connection, or once any of the answer arrived, it is not.
"""

from __future__ import annotations

import contextvars
import functools
import ssl
import weakref
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from toolrun.models._errors import (
    ProviderError,
    ProviderUnavailableError,
    error_from_status,
)
from toolrun.models._http import with_url_credentials
from toolrun.models._sse import EventStream, json_body

if TYPE_CHECKING:
    import aiohttp

__all__ = ["AioHTTPClient", "AioSSEStream", "available"]

_CONNECT_TIMEOUT = 30.0  # see models._http: a busy loop takes long to come back to a new connection
_DEFAULT_TIMEOUT = 600.0  # between two reads of the answer, as httpx's read timeout (not the whole stream)
_MAX_CONNECTIONS = 1024
_KEEP_ALIVE_SECONDS = 30.0

# Set by `_Connector.connect` in the task that sends: whether the request went out on a connection that had
# carried an earlier one (a context variable: concurrent requests each see their own).
_reused: contextvars.ContextVar[bool] = contextvars.ContextVar("toolrun_aiohttp_reused", default=False)


def available() -> bool:
    """Whether aiohttp can be imported (it comes with the `openai` and `server` extras)."""
    import importlib.util

    return importlib.util.find_spec("aiohttp") is not None


def _ssl_context() -> ssl.SSLContext:
    """The CA bundle httpx (and so the SDKs) verify against, certifi's, where it is installed; else the
    system's."""
    try:
        import certifi
    except ImportError:  # pragma: no cover - certifi comes with httpx
        return ssl.create_default_context()
    return ssl.create_default_context(cafile=certifi.where())


class AioSSEStream(EventStream):
    """The `data:` payloads of an aiohttp `text/event-stream` response, decoded (`models._sse`)."""

    def __init__(self, response: aiohttp.ClientResponse, provider: str) -> None:
        self._response = response
        super().__init__(provider)

    def _chunks(self) -> AsyncIterator[bytes]:
        return self._response.content.iter_any()

    def _broken(self) -> tuple[type[BaseException], ...]:
        import aiohttp

        return (aiohttp.ClientError, TimeoutError)

    def _unavailable(self, exc: BaseException) -> ProviderUnavailableError:
        return _unavailable(exc, "the connection broke", self._provider)

    async def _release(self) -> None:
        self._response.release()


class AioHTTPClient:
    """POST JSON bodies to one API root on aiohttp; answers as dicts, failures as `ProviderError`s.

    The session is made on the first request (aiohttp wants a running event loop) and keeps up to 1,024
    connections, idle ones for 30 s.

    Args:
        base_url: The API root, e.g. `http://127.0.0.1:8000/v1`.
        headers: Sent with every request (authorization, API version).
        provider: `ProviderError.provider` for every error raised.
    """

    def __init__(self, base_url: str, *, headers: Mapping[str, str], provider: str) -> None:
        base_url, headers = with_url_credentials(base_url, headers)  # aiohttp refuses both at once
        self.base_url = base_url.rstrip("/")
        self.provider = provider
        self._headers = {"content-type": "application/json", "accept": "application/json", **headers}
        self._stream_headers = {**self._headers, "accept": "text/event-stream"}
        self._session: aiohttp.ClientSession | None = None
        self._urls: dict[str, Any] = {}
        self._timeouts: dict[float | None, aiohttp.ClientTimeout] = {}

    def _open(self) -> aiohttp.ClientSession:
        import aiohttp

        connector = _connector_class()(
            limit=_MAX_CONNECTIONS,
            keepalive_timeout=_KEEP_ALIVE_SECONDS,
            ssl=_ssl_context() if self.base_url.startswith("https:") else True,
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),  # as the httpx path: a model API sets no cookies to keep
            timeout=self._timeout(None),
        )
        return self._session

    def _timeout(self, seconds: float | None) -> aiohttp.ClientTimeout:
        timeout = self._timeouts.get(seconds)
        if timeout is None:
            import aiohttp

            # httpx's semantics, which the other transports keep: `seconds` between two reads of the answer
            # (a long stream may take longer in all) and for a free connection when all 1,024 are busy
            # (httpx's pool timeout), connecting within 30 s at most. A kept-alive connection taken from
            # the pool starts no timer.
            read = _DEFAULT_TIMEOUT if seconds is None else seconds
            timeout = self._timeouts[seconds] = aiohttp.ClientTimeout(
                total=None, connect=read, sock_connect=min(read, _CONNECT_TIMEOUT), sock_read=read
            )
        return timeout

    async def _send(self, path: str, body: bytes, timeout_s: float | None, *, stream: bool) -> Any:
        """The response of one POST (its body not read yet). A reused connection that the server closed
        before answering gets the request once more, on a fresh connection (module docstring)."""
        import aiohttp

        session = self._session or self._open()
        url = self._urls.get(path)
        if url is None:
            import yarl

            url = self._urls[path] = yarl.URL(self.base_url + path)
        headers = self._stream_headers if stream else self._headers
        timeout = self._timeout(timeout_s)
        for attempt in (1, 2):
            _reused.set(False)
            try:
                return await session.post(url, data=body, headers=headers, timeout=timeout)
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
                if attempt == 2 or not _reused.get():
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def post(self, path: str, body: bytes, *, timeout_s: float | None = None) -> Any:
        """POST `body` (encoded JSON); the decoded JSON answer (a 2xx) or a `ProviderError`."""
        import aiohttp

        try:
            response = await self._send(path, body, timeout_s, stream=False)
            try:
                content = await response.read()
            finally:
                response.release()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _unavailable(exc, "could not reach the provider", self.provider) from exc
        if not 200 <= response.status < 300:
            raise _status_error(response, content, self.provider)
        return json_body(content, response.status, self.provider)

    async def stream(self, path: str, body: bytes, *, timeout_s: float | None = None) -> AioSSEStream:
        """POST `body` and open its event stream (a non-2xx answer raises its `ProviderError`)."""
        import aiohttp

        try:
            response = await self._send(path, body, timeout_s, stream=True)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _unavailable(exc, "could not reach the provider", self.provider) from exc
        if not 200 <= response.status < 300:
            try:
                content = await response.read()
            except (aiohttp.ClientError, TimeoutError):
                content = b""
            finally:
                response.release()
            raise _status_error(response, content, self.provider)
        return AioSSEStream(response, self.provider)

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()


@functools.cache
def _connector_class() -> type[aiohttp.TCPConnector]:
    """aiohttp's connector, noting in `_reused` whether the connection it hands out carried a request
    before (made on first use: aiohttp is imported lazily)."""
    import aiohttp

    class Connector(aiohttp.TCPConnector):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self._used: weakref.WeakSet[Any] = weakref.WeakSet()

        async def connect(self, req: Any, traces: Any, timeout: Any) -> Any:  # noqa: ASYNC109 (aiohttp's)
            connection = await super().connect(req, traces, timeout)
            protocol = connection.protocol
            if protocol in self._used:
                _reused.set(True)
            else:
                self._used.add(protocol)
            return connection

    return Connector


def _unavailable(exc: BaseException, what: str, provider: str) -> ProviderUnavailableError:
    """The `ProviderUnavailableError` of a transport failure: a timeout says so, anything else says `what`
    happened and aiohttp's own words."""
    if isinstance(exc, TimeoutError):  # aiohttp's timeouts are `asyncio.TimeoutError`s too
        return ProviderUnavailableError("the request timed out", provider=provider)
    return ProviderUnavailableError(f"{what}: {type(exc).__name__}: {exc}", provider=provider)


def _status_error(response: aiohttp.ClientResponse, content: bytes, provider: str) -> ProviderError:
    """The `ProviderError` of a non-2xx answer, caused by aiohttp's own `ClientResponseError`."""
    import aiohttp

    error = error_from_status(response.status, response.headers, content, provider=provider)
    error.__cause__ = aiohttp.ClientResponseError(
        response.request_info,
        response.history,
        status=response.status,
        message=response.reason or "",
        headers=response.headers,
    )
    return error
