"""`_SDKClientModel`: what `OpenAIModel` and `AnthropicModel` share around their provider's SDK.

The base class holds the plumbing that does not depend on the wire format:

- the client's lifecycle: the SDK is imported and its client built on first use, with the SDK's own
  retries off (a client the user passed in is copied with `with_options`, and stays theirs to close);
- the one boundary where SDK exceptions become `ProviderError`s (`raise ... from exc`);
- `request`: one retried call, its result read by the subclass's `parse_response`;
- `stream`: opened under the retry policy, read item by item until the subclass says it is done; a break-off
  becomes a `ProviderStreamError` carrying what had arrived, and the SDK stream is always closed.

A subclass says which SDK and endpoint it talks to, how to build its request body, and how to read a
response and each stream item. Those are the hooks below; nothing else differs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar, Self

from toolrun.models._base import RetryPolicy
from toolrun.models._errors import (
    ProviderError,
    ProviderResponseError,
    ProviderStreamError,
    map_sdk_error,
    map_stream_error,
)
from toolrun.models._messages import FinalResponse, ModelRequest, ModelResponse, ModelSettings, StreamEvent
from toolrun.models._stream import StreamAssembler

if TYPE_CHECKING:
    from types import ModuleType

__all__ = ["_SDKClientModel"]


class _SDKClientModel(ABC):
    """A `Model` behind a provider's official async SDK. See the module docstring for what it shares."""

    provider: ClassVar[str]
    """`ProviderError.provider` for every error this client raises."""
    _sdk_keywords: ClassVar[tuple[str, ...]]
    """Body fields passed to the SDK call as keywords (those it needs to pick its return type); the rest of
    the body travels as `extra_body`."""
    _stream_item: ClassVar[str]
    """What one stream item is called in errors (`"a stream event"`)."""

    def __init__(
        self,
        model_name: str,
        *,
        base_url: str | None,
        api_key: str | None,
        client: Any,
        max_retries: int | None,
        retry: RetryPolicy | None,
        settings: ModelSettings | None,
    ) -> None:
        if client is not None and (base_url is not None or api_key is not None):
            raise ValueError("Pass either client= or base_url=/api_key=, not both: the client has its own.")
        if retry is not None and max_retries is not None:
            raise ValueError("Pass either retry= or max_retries=, not both.")
        self.model_name = model_name
        self.base_url = base_url
        self._api_key = api_key
        self._given_client = client
        self._client: Any = None
        self.retry = retry or RetryPolicy(max_retries=2 if max_retries is None else max_retries)
        self.settings = settings or ModelSettings()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model_name!r}, base_url={self.base_url!r})"

    # --------------------------------------------------------------------------------------------------
    # Hooks

    @staticmethod
    @abstractmethod
    def _sdk_module() -> ModuleType:
        """Import the provider's SDK (only ever on first use)."""

    @abstractmethod
    def _new_client(self, sdk: ModuleType) -> Any:
        """The SDK's async client built from `base_url` and `api_key`, with `max_retries=0`."""

    @abstractmethod
    async def _send(self, client: Any, arguments: dict[str, Any]) -> Any:
        """Call the endpoint with the SDK keyword `arguments`."""

    @abstractmethod
    def build_body(self, request: ModelRequest, *, stream: bool = False) -> dict[str, Any]:
        """The request body (without `extra_body`): exactly what is sent."""

    @abstractmethod
    def parse_response(self, data: Mapping[str, Any], request: ModelRequest) -> ModelResponse:
        """A `ModelResponse` from a response body."""

    def _stream_assembler(self, request: ModelRequest) -> StreamAssembler:
        """The assembler for one stream (arguments kept as text unless a subclass decodes them)."""
        return StreamAssembler(request.tools.original_name)

    @abstractmethod
    def _stream_events(self, item: dict[str, Any], asm: StreamAssembler) -> list[StreamEvent]:
        """Feed one stream item to `asm`; the neutral events it gives."""

    def _stream_done(self, item: dict[str, Any]) -> bool:
        """Whether `item` ends the stream, so nothing after it is read (by default: read to the end)."""
        return False

    @abstractmethod
    def _stream_unfinished(self, asm: StreamAssembler, *, done: bool) -> str | None:
        """Why a stream that ended here is incomplete, or None if it is whole.

        Args:
            asm: Everything that arrived.
            done: Whether an item ended the stream (`_stream_done`) rather than the SDK stream running out.
        """

    # --------------------------------------------------------------------------------------------------
    # Client lifecycle

    @contextmanager
    def _provider_errors(self) -> Iterator[None]:
        """The one boundary where SDK exceptions become `ProviderError`s (others pass unchanged)."""
        try:
            yield
        except Exception as exc:
            error = map_sdk_error(exc, provider=self.provider, sdk=self._sdk_module())
            if error is None:
                raise
            raise error from exc

    def _sdk(self) -> Any:
        if self._client is None:
            sdk = self._sdk_module()
            with self._provider_errors():
                if self._given_client is not None:
                    self._client = self._given_client.with_options(max_retries=0)
                else:
                    self._client = self._new_client(sdk)
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client toolrun created (a client you passed in stays yours to close)."""
        client, self._client = self._client, None
        if client is not None and self._given_client is None:
            await client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # --------------------------------------------------------------------------------------------------
    # The Model protocol

    def _call_arguments(self, request: ModelRequest, *, stream: bool = False) -> dict[str, Any]:
        """Keyword arguments for the SDK call.

        Only the parameters the SDK needs to pick its return type travel as keywords; the rest of the body,
        already in wire form, goes as `extra_body`, so toolrun does not depend on which fields a given SDK
        version declares (SDKs add and drop them often). The settings' `extra_body` wins over both.
        """
        settings = self.settings.merge(request.settings)
        body = self.build_body(request, stream=stream)
        arguments: dict[str, Any] = {key: body.pop(key) for key in self._sdk_keywords if key in body}
        if settings.extra_body:
            body.update(settings.extra_body)
        if body:
            arguments["extra_body"] = body
        if settings.timeout is not None:
            arguments["timeout"] = settings.timeout
        return arguments

    async def _create(self, arguments: dict[str, Any]) -> Any:
        client = self._sdk()
        with self._provider_errors():
            return await self._send(client, arguments)

    def _as_dict(self, obj: Any, what: str) -> dict[str, Any]:
        """The SDK's (leniently built) object as plain data; anything but a JSON object is malformed."""
        to_dict = getattr(obj, "to_dict", None)
        data = to_dict(warnings=False) if callable(to_dict) else obj
        if not isinstance(data, dict):
            raise ProviderResponseError(
                f"{what} is not a JSON object: {str(data)[:200]!r}", provider=self.provider
            )
        return data

    # Transport hooks: the SDK by default; `OpenAIModel(transport="httpx")` overrides them with its own
    # HTTP client. `payload` is whatever `_prepare` built once per call (retries reuse it).

    def _prepare(self, request: ModelRequest, *, stream: bool) -> Any:
        return self._call_arguments(request, stream=stream)

    async def _complete(self, payload: Any) -> dict[str, Any]:
        """One non-streaming call: the response as plain data."""
        return self._as_dict(await self._create(payload), "the response")

    async def _open_stream(self, payload: Any) -> Any:
        """Open a stream: an object with `__aiter__` (items as SDK objects or dicts) and `close()`."""
        return await self._create(payload)

    def _map_stream_error(self, exc: BaseException) -> ProviderError | None:
        return map_stream_error(exc, provider=self.provider, sdk=self._sdk_module())

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Send the conversation and tools; return the whole response (retried per `retry`)."""
        payload = self._prepare(request, stream=False)

        async def attempt() -> ModelResponse:
            return self.parse_response(await self._complete(payload), request)

        return await self.retry.call(attempt)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Send the conversation and tools; yield deltas as they arrive, then one `FinalResponse`.

        Retried only until the stream opens; a stream that breaks off or ends incomplete raises
        `ProviderStreamError` with the partial response.
        """
        payload = self._prepare(request, stream=True)
        sdk_stream = await self.retry.call(lambda: self._open_stream(payload))
        assembler = self._stream_assembler(request)
        done = False
        iterator = sdk_stream.__aiter__()
        try:
            while not done:
                try:
                    item = self._as_dict(await iterator.__anext__(), self._stream_item)
                except StopAsyncIteration:
                    break
                except Exception as exc:
                    error = self._map_stream_error(exc)
                    if error is None:
                        raise
                    raise ProviderStreamError(
                        f"the stream broke off: {error.message}",
                        partial=assembler.response(partial=True),
                        provider=self.provider,
                        status_code=error.status_code,
                        body=error.body,
                    ) from exc
                done = self._stream_done(item)
                for event in self._stream_events(item, assembler):
                    yield event
        finally:
            await sdk_stream.close()
        problem = self._stream_unfinished(assembler, done=done)
        if problem is not None:
            raise ProviderStreamError(
                problem, partial=assembler.response(partial=True), provider=self.provider
            )
        for ready in assembler.finish_all():
            yield ready
        yield FinalResponse(response=assembler.response())
