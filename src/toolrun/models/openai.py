"""`OpenAIModel`: OpenAI or any compatible server (vLLM, Ollama, llama.cpp, LM Studio), Chat Completions.

The official `openai` SDK is imported on first use, never at `import toolrun`. Install it with
`pip install toolrun[openai]`.

```python
model = OpenAIModel("gpt-4o-mini")                                          # OPENAI_API_KEY from the env
local = OpenAIModel("llama3.1", base_url="http://127.0.0.1:11434/v1")      # Ollama: no key needed
sdk = OpenAIModel("gpt-4o-mini", transport="sdk")                          # through the official SDK
```

Three transports send the same bodies and read the same answers with the same parser:

- `"aiohttp"` (the default unless you pass `client=`, when aiohttp is installed): toolrun's own client
  (`models._aiohttp`), the body encoded with msgspec (the tool definitions encoded once and reused while
  they do not change), posted on a pooled keep-alive aiohttp connection, the answer decoded with msgspec
  into plain dicts. It skips the SDK's typed request and response objects, which cost more CPU than the
  rest of a chat turn when the model is fast (bench/README.md, "The chat service"), and httpcore's
  per-request machinery (bench/README.md, "Model client on aiohttp"). With a proxy in the environment it
  takes the httpx path, which applies it.
- `"httpx"`: the same client on httpx's transports (`models._http`); the default without aiohttp.
- `"sdk"`: the official `openai.AsyncOpenAI` (`client=` implies it): its configuration, proxies, Azure
  subclasses and hooks.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from toolrun.formats.openai import chat_call_id
from toolrun.models._base import RetryPolicy
from toolrun.models._client import _SDKClientModel
from toolrun.models._errors import ProviderAuthError, ProviderError, ProviderResponseError
from toolrun.models._messages import (
    AssistantMessage,
    FinishReason,
    Message,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    StreamEvent,
    SystemMessage,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from toolrun.models._stream import StreamAssembler
from toolrun.tools import ToolCall

if TYPE_CHECKING:
    from types import ModuleType

    from toolrun.models._aiohttp import AioHTTPClient, AioSSEStream
    from toolrun.models._http import HTTPClient, SSEStream

__all__ = ["OpenAIModel"]

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
}

_OFFICIAL_HOST = "api.openai.com"
_OFFICIAL_URL = "https://api.openai.com/v1"
_COMPLETIONS = "/chat/completions"
_NO_KEY = (
    "The api_key client option must be set either by passing api_key to OpenAIModel or by setting the "
    "OPENAI_API_KEY environment variable."
)
_encode = msgspec.json.encode


def _finish(reason: Any) -> FinishReason | None:
    if reason is None:
        return None
    return _FINISH.get(str(reason), "other")


def _arguments_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments or "{}"
    if arguments is None:
        return "{}"
    return json.dumps(dict(arguments), ensure_ascii=False)


def _usage(data: Any) -> Usage:
    if not isinstance(data, Mapping):
        return Usage(requests=1)
    details = data.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    return Usage(
        input_tokens=int(data.get("prompt_tokens") or 0),
        output_tokens=int(data.get("completion_tokens") or 0),
        cache_read_tokens=int(cached or 0),
        requests=1,
    )


class OpenAIModel(_SDKClientModel):
    """A model behind the OpenAI Chat Completions API, on OpenAI or any compatible server.

    Args:
        model_name: The model, e.g. `"gpt-4o-mini"` or `"llama3.1"`.
        base_url: The server's API root (`http://127.0.0.1:11434/v1` for Ollama, `http://host:8000/v1` for
            vLLM). Default: OpenAI (or `OPENAI_BASE_URL`).
        api_key: Default: `OPENAI_API_KEY`. With a `base_url` and no key anywhere, a placeholder is sent
            (local servers need none, but the SDK insists on one).
        client: An `openai.AsyncOpenAI` you configured yourself (not with `base_url`/`api_key`); you keep
            ownership and close it. Its own retries are turned off in the copy toolrun uses.
        strict_tools: Send strict tool definitions (`"strict": true`, closed schemas). Default: on for
            OpenAI's own API, off for other servers (many reject or ignore it).
        max_retries: Shorthand for `retry=RetryPolicy(max_retries=...)`.
        retry: How transient failures (429, 5xx, timeouts, connection errors) are retried.
        settings: Default settings for every request.
        stream_usage: Ask for token usage at the end of streams (`stream_options.include_usage`); turn off
            for servers that reject it.
        system_role: The role of system messages: `"system"`, or `"developer"` for OpenAI reasoning models.
        transport: `"aiohttp"` or `"httpx"` (toolrun's lean client on a pooled connection, msgspec on both
            ends, over aiohttp or httpx) or `"sdk"` (the official `openai` SDK). Default `"auto"`: the SDK
            when you pass `client=`, else aiohttp where it is installed, else httpx. All send the same body
            and raise the same errors.
    """

    provider = "openai"
    _sdk_keywords = ("model", "messages", "stream")
    _stream_item = "a stream chunk"

    def __init__(
        self,
        model_name: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: Any = None,
        strict_tools: bool | None = None,
        max_retries: int | None = None,
        retry: RetryPolicy | None = None,
        settings: ModelSettings | None = None,
        stream_usage: bool = True,
        system_role: str = "system",
        transport: Literal["auto", "sdk", "httpx", "aiohttp"] = "auto",
    ) -> None:
        if transport not in ("auto", "sdk", "httpx", "aiohttp"):
            raise ValueError(f"transport must be 'auto', 'sdk', 'httpx' or 'aiohttp', not {transport!r}.")
        if transport in ("httpx", "aiohttp") and client is not None:
            raise ValueError("client= is an openai SDK client: use transport='sdk' (or leave it 'auto').")
        if not model_name:
            raise ValueError("OpenAIModel needs a model name, e.g. OpenAIModel('gpt-4o-mini').")
        super().__init__(
            model_name,
            base_url=base_url,
            api_key=api_key,
            client=client,
            max_retries=max_retries,
            retry=retry,
            settings=settings,
        )
        official = base_url is None or _OFFICIAL_HOST in base_url
        self.strict_tools = strict_tools if strict_tools is not None else official
        self.stream_usage = stream_usage
        self.system_role = system_role
        # OpenAI deprecated `max_tokens` for `max_completion_tokens`; compatible servers know the old name.
        self._max_tokens_field = "max_completion_tokens" if official else "max_tokens"
        from toolrun.models import _aiohttp

        if transport == "auto":
            transport = "sdk" if client is not None else "aiohttp" if _aiohttp.available() else "httpx"
        elif transport == "aiohttp" and not _aiohttp.available():
            raise ImportError("transport='aiohttp' needs aiohttp: pip install toolrun[openai] (or aiohttp).")
        self.transport: Literal["sdk", "httpx", "aiohttp"] = transport
        self._http_client: HTTPClient | AioHTTPClient | None = None
        # Encoded tool definitions, by the identity of the definition dicts (kept alive here, so an id is
        # never reused while its entry exists). A registry returns the same dicts until its tools change.
        self._encoded_tools: dict[tuple[int, ...], tuple[list[Any], bytes]] = {}

    @property
    def name(self) -> str:
        if self.base_url is None:
            return f"openai:{self.model_name}"
        from toolrun.models._http import with_url_credentials

        url, _ = with_url_credentials(self.base_url, {})  # a URL's credentials never reach a name or a log
        return f"openai-compatible:{url}:{self.model_name}"

    # --------------------------------------------------------------------------------------------------
    # The SDK

    @staticmethod
    def _sdk_module() -> ModuleType:
        import openai

        return openai

    def _new_client(self, sdk: ModuleType) -> Any:
        api_key = self._api_key
        if api_key is None and self.base_url is not None:
            import os

            api_key = os.environ.get("OPENAI_API_KEY") or "not-needed"
        return sdk.AsyncOpenAI(api_key=api_key, base_url=self.base_url, max_retries=0)

    async def _send(self, client: Any, arguments: dict[str, Any]) -> Any:
        return await client.chat.completions.create(**arguments)

    # --------------------------------------------------------------------------------------------------
    # toolrun's own transports, aiohttp and httpx (see the module docstring)

    def _http(self) -> HTTPClient | AioHTTPClient:
        if self._http_client is None:
            from toolrun.models._http import HTTPClient, _proxied

            base_url = self.base_url or os.environ.get("OPENAI_BASE_URL") or _OFFICIAL_URL
            api_key = self._api_key or os.environ.get("OPENAI_API_KEY")
            if api_key is None:
                if self.base_url is None:
                    raise ProviderAuthError(_NO_KEY, provider=self.provider)
                api_key = "not-needed"
            headers = {"authorization": f"Bearer {api_key}"}
            for variable, header in (
                ("OPENAI_ORG_ID", "openai-organization"),
                ("OPENAI_PROJECT_ID", "openai-project"),
            ):
                value = os.environ.get(variable)
                if value and _OFFICIAL_HOST in base_url:
                    headers[header] = value
            if self.transport == "aiohttp" and not _proxied(base_url):
                from toolrun.models._aiohttp import AioHTTPClient

                self._http_client = AioHTTPClient(base_url, headers=headers, provider=self.provider)
            else:
                self._http_client = HTTPClient(base_url, headers=headers, provider=self.provider)
        return self._http_client

    def encode_body(self, request: ModelRequest, *, stream: bool = False) -> bytes:
        """The exact bytes the httpx transport posts: `build_body` plus the settings' `extra_body`."""
        settings = self.settings.merge(request.settings)
        body = self.build_body(request, stream=stream)
        if settings.extra_body:
            body.update(settings.extra_body)
        tools = body.pop("tools", None)
        encoded = _encode(body)
        if not tools:
            return encoded
        key = tuple(map(id, tools))
        hit = self._encoded_tools.get(key)
        if hit is None:
            if len(self._encoded_tools) >= 16:
                self._encoded_tools.clear()
            hit = self._encoded_tools[key] = (tools, _encode(tools))
        # `encoded` is a JSON object with at least "model": splice the tools in before its closing brace.
        return encoded[:-1] + b',"tools":' + hit[1] + b"}"

    def _prepare(self, request: ModelRequest, *, stream: bool) -> Any:
        if self.transport == "sdk":
            return super()._prepare(request, stream=stream)
        timeout = self.settings.merge(request.settings).timeout
        return self.encode_body(request, stream=stream), timeout

    async def _complete(self, payload: Any) -> dict[str, Any]:
        if self.transport == "sdk":
            return await super()._complete(payload)
        body, timeout = payload
        data = await self._http().post(_COMPLETIONS, body, timeout_s=timeout)
        return self._as_dict(data, "the response")

    async def _open_stream(self, payload: Any) -> SSEStream | AioSSEStream | Any:
        if self.transport == "sdk":
            return await super()._open_stream(payload)
        body, timeout = payload
        return await self._http().stream(_COMPLETIONS, body, timeout_s=timeout)

    def _map_stream_error(self, exc: BaseException) -> ProviderError | None:
        if self.transport == "sdk":
            return super()._map_stream_error(exc)
        if isinstance(exc, ProviderError):
            return exc
        if isinstance(exc, Warning):
            return None
        return ProviderResponseError(f"{type(exc).__name__}: {exc}", provider=self.provider)

    async def aclose(self) -> None:
        """Close the HTTP client toolrun created (a client you passed in stays yours to close)."""
        http, self._http_client = self._http_client, None
        if http is not None:
            await http.aclose()
        await super().aclose()

    # --------------------------------------------------------------------------------------------------
    # Request building

    def _message(self, message: Message, request: ModelRequest) -> dict[str, Any]:
        if isinstance(message, SystemMessage):
            return {"role": self.system_role, "content": message.content}
        if isinstance(message, UserMessage):
            return {"role": "user", "content": message.content}
        if isinstance(message, AssistantMessage):
            out: dict[str, Any] = {"role": "assistant", "content": message.content or None}
            if message.tool_calls:
                out["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": request.wire_name(call.name),
                            "arguments": _arguments_text(call.arguments),
                        },
                    }
                    for call in message.tool_calls
                ]
            elif out["content"] is None:
                out["content"] = ""
            return out
        if isinstance(message, ToolResultMessage):
            return {"role": "tool", "tool_call_id": message.call_id, "content": message.content}
        raise TypeError(f"Not a message: {message!r}")

    def _messages(self, request: ModelRequest) -> list[dict[str, Any]]:
        """The messages; after each run of tool messages whose results carry images or files, one user
        message with them (tool messages take text only; see `toolrun.formats.openai`)."""
        out: list[dict[str, Any]] = []
        pending: list[ToolResultMessage] = []
        for message in request.messages:
            if pending and not isinstance(message, ToolResultMessage):
                out.extend(_followups(pending))
                pending = []
            out.append(self._message(message, request))
            if isinstance(message, ToolResultMessage) and message.parts:
                pending.append(message)
        if pending:
            out.extend(_followups(pending))
        return out

    def build_body(self, request: ModelRequest, *, stream: bool = False) -> dict[str, Any]:
        """The Chat Completions request body (without `extra_body`): exactly what is sent."""
        settings = self.settings.merge(request.settings)
        body: dict[str, Any] = {
            "model": self.model_name,
            "messages": self._messages(request),
        }
        if len(request.tools):
            strict = settings.strict_tools if settings.strict_tools is not None else self.strict_tools
            body["tools"] = request.tools.definitions("openai", strict=strict)
            choice = settings.tool_choice
            if choice in ("auto", "none", "required"):
                body["tool_choice"] = choice
            elif choice is not None:
                body["tool_choice"] = {"type": "function", "function": {"name": request.wire_name(choice)}}
            if settings.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = settings.parallel_tool_calls
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        if settings.top_p is not None:
            body["top_p"] = settings.top_p
        if settings.max_tokens is not None:
            body[self._max_tokens_field] = settings.max_tokens
        if settings.stop is not None:
            body["stop"] = list(settings.stop)
        if settings.seed is not None:
            body["seed"] = settings.seed
        if stream:
            body["stream"] = True
            if self.stream_usage:
                body["stream_options"] = {"include_usage": True}
        return body

    # --------------------------------------------------------------------------------------------------
    # Response parsing

    def parse_response(self, data: Mapping[str, Any], request: ModelRequest) -> ModelResponse:
        """A `ModelResponse` from a Chat Completions response body."""
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            raise ProviderResponseError(
                f"the response has no choices: {json.dumps(data, default=str)[:300]}", provider=self.provider
            )
        message = choices[0].get("message")
        if not isinstance(message, Mapping):
            raise ProviderResponseError("the first choice has no message object", provider=self.provider)
        text = message.get("content") or message.get("refusal") or ""
        if isinstance(text, list):  # some compatible servers answer with content parts
            text = "".join(
                p.get("text") or "" for p in text if isinstance(p, Mapping) and p.get("type") == "text"
            )
        if not isinstance(text, str):
            raise ProviderResponseError(f"message content is not text: {text!r:.200}", provider=self.provider)
        calls = []
        for raw_call in message.get("tool_calls") or ():
            function = raw_call.get("function") if isinstance(raw_call, Mapping) else None
            if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
                raise ProviderResponseError(f"malformed tool call: {raw_call!r:.200}", provider=self.provider)
            arguments = function.get("arguments")
            try:
                call_id = chat_call_id(raw_call.get("id"))
            except TypeError as exc:
                raise ProviderResponseError(f"malformed tool call: {exc}", provider=self.provider) from exc
            calls.append(
                ToolCall(
                    id=call_id,
                    name=request.tools.original_name(function["name"]),
                    arguments=arguments if isinstance(arguments, str | Mapping) else None,
                )
            )
        provider_reason = choices[0].get("finish_reason")
        reason = _finish(provider_reason)
        if calls and reason == "stop":
            reason = "tool_calls"  # some compatible servers say "stop" after tool calls
        return ModelResponse(
            text=text,
            tool_calls=calls,
            usage=_usage(data.get("usage")),
            finish_reason=reason,
            provider_finish_reason=str(provider_reason) if provider_reason is not None else None,
            model_name=data.get("model"),
            response_id=data.get("id"),
            raw=dict(data),
        )

    # --------------------------------------------------------------------------------------------------
    # Streaming

    def _stream_unfinished(self, asm: StreamAssembler, *, done: bool) -> str | None:
        if asm.finish_reason is not None:
            return None
        return f"the stream ended after {asm.chunks} chunks without a finish_reason"

    def _stream_events(self, chunk: dict[str, Any], asm: StreamAssembler) -> list[StreamEvent]:
        asm.chunks += 1
        asm.raw = chunk
        if chunk.get("id") and asm.response_id is None:
            asm.response_id = str(chunk["id"])
        if chunk.get("model") and asm.model_name is None:
            asm.model_name = str(chunk["model"])
        if chunk.get("usage"):
            asm.usage = _usage(chunk["usage"])
        events: list[StreamEvent] = []
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            text = delta.get("content") or delta.get("refusal")
            if isinstance(text, str) and text:
                events.append(asm.text(text))
            for fragment in delta.get("tool_calls") or ():
                if not isinstance(fragment, Mapping):
                    continue
                key = fragment.get("index")
                if key is None:  # servers that omit it send each call whole, or id first then pieces
                    key = asm.last_key() if not fragment.get("id") and asm.has_calls else fragment.get("id")
                function = fragment.get("function") or {}
                arguments = function.get("arguments")
                if arguments is not None and not isinstance(arguments, str):
                    arguments = json.dumps(arguments, ensure_ascii=False)
                events.append(
                    asm.tool_fragment(
                        key, id=fragment.get("id"), name=function.get("name"), arguments=arguments
                    )
                )
            if choice.get("finish_reason") is not None:
                asm.provider_finish_reason = str(choice["finish_reason"])
                asm.finish_reason = _finish(choice["finish_reason"])
        return events


def _followups(messages: list[ToolResultMessage]) -> list[dict[str, Any]]:
    from toolrun.formats.openai import OpenAIChatFormat
    from toolrun.results import ToolResult

    results = [ToolResult(call_id=m.call_id, tool_name=m.tool_name, content=m.parts) for m in messages]
    return OpenAIChatFormat().content_followups(results)
