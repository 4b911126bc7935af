"""`AnthropicModel`: Claude through the Messages API (`tool_use` / `tool_result` blocks).

The official `anthropic` SDK is imported on first use, never at `import toolrun`. Install it with
`pip install toolrun[anthropic]`.

How toolrun's neutral conversation maps onto the Messages API:

- system messages (wherever they stand) are joined, in order, into the request's `system` field;
- an assistant turn is `text` and `tool_use` blocks (`input` is an object);
- tool results are `tool_result` blocks in a *user* turn, and consecutive results (and a user message
  right after them) are merged into one user turn, results first, since the API wants turns to alternate;
- a turn holding blocks toolrun does not model — `thinking` (which the API wants back in a tool-use loop),
  server tools (`server_tool_use` and their results: tool search, code execution, web search), tool calls
  made from code (`tool_use` with a `caller`: programmatic tool calling) — keeps its blocks verbatim in
  `AssistantMessage.provider_data["anthropic"]`, and the next request sends them back as they came, with
  the code-execution `container` the turn ran in. The tool calls in those blocks are still the client's
  calls: they run through the executor and every gate, like any other call;
- a turn Anthropic paused (`stop_reason: "pause_turn"`: its own server-tool loop ran long) is continued
  at once, the paused content sent back as the last assistant turn, up to `PAUSE_CONTINUATIONS` times,
  and the parts come back as one response whose blocks are one assistant turn. Ended there, a paused
  turn would leave a `server_tool_use` without its result in the history, and every later request of the
  conversation would be refused ("tool use ... was found without a corresponding ..._tool_result block").
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from toolrun._unicode import clean_json
from toolrun.models._base import RetryPolicy
from toolrun.models._client import _SDKClientModel
from toolrun.models._errors import ProviderResponseError
from toolrun.models._messages import (
    AssistantMessage,
    FinalResponse,
    FinishReason,
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

__all__ = ["AnthropicModel"]

DEFAULT_MAX_TOKENS = 4096
"""Anthropic requires `max_tokens`; this is sent when neither the model nor the request sets one."""

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}


def _finish(reason: Any) -> FinishReason | None:
    if reason is None:
        return None
    return _FINISH.get(str(reason), "other")


def _input_object(arguments: Any) -> dict[str, Any]:
    """`tool_use.input` must be an object. Text that is not one (a malformed call the model made and was
    told about) is kept under one key so the model still sees what it sent."""
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if not arguments:
        return {}
    try:
        decoded = json.loads(arguments)
    except ValueError:
        decoded = None
    return decoded if isinstance(decoded, dict) else {"_invalid_arguments": arguments}


PAUSE_CONTINUATIONS = 8
"""How many times one turn that Anthropic paused (`pause_turn`) is continued before it is returned as it
stands (its `provider_finish_reason` still `"pause_turn"`)."""

_REPLAY_LIMIT = 1_000_000
"""Characters of blocks a turn may keep for replay; a larger turn falls back to its text and calls."""


def _plain(block: Mapping[str, Any]) -> bool:
    """A block toolrun models fully: text without citations, or a direct `tool_use`."""
    kind = block.get("type")
    if kind == "text":
        return not block.get("citations")
    if kind == "tool_use":
        caller = block.get("caller")
        return caller is None or (isinstance(caller, Mapping) and caller.get("type") == "direct")
    return False


def _replay(blocks: list[Any], container: Any) -> dict[str, Any] | None:
    """What the next request must send back of this turn (None when its text and calls say it all)."""
    if all(isinstance(b, Mapping) and _plain(b) for b in blocks) and not container:
        return None
    kept: dict[str, Any] = {"content": clean_json([dict(b) for b in blocks if isinstance(b, Mapping)])}
    if isinstance(container, Mapping) and isinstance(container.get("id"), str):
        kept["container"] = {"id": container["id"], "expires_at": container.get("expires_at")}
    text = json.dumps(kept, ensure_ascii=False, default=str)  # the SDK's objects (a datetime) as JSON
    if len(text) > _REPLAY_LIMIT:
        return None
    return {"anthropic": json.loads(text)}


def _turn_blocks(text: str, calls: Sequence[ToolCall], request: ModelRequest) -> list[dict[str, Any]]:
    """The blocks of an assistant turn that is its text and calls: a text block (none for text of only
    white space, which requests refuse), then a `tool_use` block per call."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text.strip() else []
    blocks += [
        {
            "type": "tool_use",
            "id": call.id,
            "name": request.wire_name(call.name),
            "input": _input_object(call.arguments),
        }
        for call in calls
    ]
    return blocks


def _blocks(response: ModelResponse, request: ModelRequest) -> list[dict[str, Any]]:
    """A response's content blocks as the next request sends them back: its kept blocks, or (a turn of plain
    text and calls) the blocks its text and calls make."""
    data = (response.provider_data or {}).get("anthropic")
    kept = data.get("content") if isinstance(data, Mapping) else None
    if isinstance(kept, list):
        return [dict(b) for b in kept if isinstance(b, Mapping)]
    return _turn_blocks(response.text, response.tool_calls, request)


def _stranded(blocks: list[dict[str, Any]]) -> bool:
    """Whether a stored turn holds a server tool's call without its result and no client call: a paused
    turn that was never continued (its continuations ran out, or it was stored before toolrun continued
    paused turns). Sent back before other messages, the API refuses it, and with it every later request
    of the conversation; its text and calls are sent instead. (With a client call the API runs the
    server tool itself when the client's result comes, so such a turn is sent as it is.)"""
    calls = {b.get("id") for b in blocks if b.get("type") == "server_tool_use"}
    if not calls or any(b.get("type") == "tool_use" for b in blocks):
        return False
    answered = {b.get("tool_use_id") for b in blocks if str(b.get("type", "")).endswith("_tool_result")}
    return not calls <= answered


def _continued(request: ModelRequest, paused: ModelResponse) -> ModelRequest:
    """The request that continues a paused turn: the conversation, then the turn so far as it came."""
    turn = AssistantMessage(
        content=paused.text, tool_calls=list(paused.tool_calls), provider_data=paused.provider_data
    )
    return ModelRequest([*request.messages, turn], request.tools, request.settings)


def _joined(request: ModelRequest, first: ModelResponse, then: ModelResponse) -> ModelResponse:
    """A paused turn and its continuation as one response: one assistant turn of both parts' blocks."""
    data = (then.provider_data or {}).get("anthropic") or (first.provider_data or {}).get("anthropic")
    container = data.get("container") if isinstance(data, Mapping) else None
    return ModelResponse(
        text=first.text + then.text,
        tool_calls=[*first.tool_calls, *then.tool_calls],
        usage=first.usage + then.usage,
        finish_reason=then.finish_reason,
        provider_finish_reason=then.provider_finish_reason,
        model_name=then.model_name or first.model_name,
        response_id=then.response_id,
        raw=then.raw,
        provider_data=_replay(_blocks(first, request) + _blocks(then, request), container),
    )


def _replayed(message: AssistantMessage) -> list[dict[str, Any]] | None:
    """The turn's blocks as the API sent them, while its calls are still exactly the ones in them."""
    data = (message.provider_data or {}).get("anthropic")
    blocks = data.get("content") if isinstance(data, Mapping) else None
    if not isinstance(blocks, list):
        return None
    ids = [b.get("id") for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool_use"]
    if ids != [c.id for c in message.tool_calls]:
        return None  # the boundary renamed or refused a call: the blocks no longer describe this turn
    return [sent for sent in map(_input_block, blocks) if sent is not None]


def _input_block(block: Mapping[str, Any]) -> dict[str, Any] | None:
    """A kept block as a request takes it (None: a block no request takes), for what responses carry and
    requests refuse, as agents running against the API report it: a text block's `citations: null` (a
    request takes a list of citations or no field) and an SDK's `parsed_output`; a text block with no
    visible text ("text content blocks must contain non-whitespace text"); a tool search's result typed by
    its variant (`tool_search_tool_regex_tool_result`, `..._bm25_tool_result`), for which requests take
    `tool_search_tool_result`."""
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        if not isinstance(text, str) or not text.strip():
            return None
        return {
            key: value
            for key, value in block.items()
            if key != "parsed_output" and (key != "citations" or value)
        }
    if isinstance(kind, str) and kind.startswith("tool_search_tool_") and kind.endswith("_tool_result"):
        return {**block, "type": "tool_search_tool_result"}
    return dict(block)


def _container(messages: Sequence[Any]) -> str | None:
    """The code-execution container the conversation's latest turn ran in, for the next request."""
    for message in reversed(messages):
        if isinstance(message, AssistantMessage) and message.provider_data:
            data = message.provider_data.get("anthropic")
            found = data.get("container") if isinstance(data, Mapping) else None
            if isinstance(found, Mapping) and isinstance(found.get("id"), str):
                return str(found["id"])
    return None


def _usage(data: Any, into: Usage | None = None) -> Usage:
    """Anthropic's `input_tokens` excludes cached tokens; toolrun's includes them."""
    usage = into or Usage(requests=1)
    if not isinstance(data, Mapping):
        return usage
    cache_read = data.get("cache_read_input_tokens")
    cache_write = data.get("cache_creation_input_tokens")
    if cache_read is not None:
        usage.cache_read_tokens = int(cache_read)
    if cache_write is not None:
        usage.cache_write_tokens = int(cache_write)
    if data.get("input_tokens") is not None:
        usage.input_tokens = int(data["input_tokens"]) + usage.cache_read_tokens + usage.cache_write_tokens
    if data.get("output_tokens") is not None:
        usage.output_tokens = int(data["output_tokens"])
    return usage


class AnthropicModel(_SDKClientModel):
    """A Claude model behind the Anthropic Messages API.

    Args:
        model_name: e.g. `"claude-haiku-4-5"`.
        base_url: The API root without `/v1` (default: Anthropic, or `ANTHROPIC_BASE_URL`).
        api_key: Default: `ANTHROPIC_API_KEY`.
        client: An `anthropic.AsyncAnthropic` you configured yourself (not with `base_url`/`api_key`); you
            keep ownership and close it. Its own retries are turned off in the copy toolrun uses.
        strict_tools: Send tool definitions in strict mode (Anthropic strict tool use). Default off.
        max_retries: Shorthand for `retry=RetryPolicy(max_retries=...)`.
        retry: How transient failures (429, 5xx, 529 overloaded, timeouts) are retried.
        settings: Default settings for every request.
        max_tokens: Sent when the settings give no `max_tokens` (the API requires one).
    """

    provider = "anthropic"
    _sdk_keywords = ("model", "messages", "max_tokens", "stream")
    _stream_item = "a stream event"

    def __init__(
        self,
        model_name: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: Any = None,
        strict_tools: bool = False,
        max_retries: int | None = None,
        retry: RetryPolicy | None = None,
        settings: ModelSettings | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> None:
        if not model_name:
            raise ValueError("AnthropicModel needs a model name, e.g. AnthropicModel('claude-haiku-4-5').")
        super().__init__(
            model_name,
            base_url=base_url,
            api_key=api_key,
            client=client,
            max_retries=max_retries,
            retry=retry,
            settings=settings,
        )
        self.strict_tools = strict_tools
        self.max_tokens = max_tokens

    @property
    def name(self) -> str:
        return f"anthropic:{self.model_name}"

    # --------------------------------------------------------------------------------------------------
    # The SDK

    @staticmethod
    def _sdk_module() -> ModuleType:
        import anthropic

        return anthropic

    def _new_client(self, sdk: ModuleType) -> Any:
        return sdk.AsyncAnthropic(api_key=self._api_key, base_url=self.base_url, max_retries=0)

    async def _send(self, client: Any, arguments: dict[str, Any]) -> Any:
        return await client.messages.create(**arguments)

    # --------------------------------------------------------------------------------------------------
    # Paused turns (`pause_turn`): continued until the turn ends

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Send the conversation and tools; return the whole response, a paused turn continued (see the
        module docstring)."""
        response = await super().request(request)
        for _ in range(PAUSE_CONTINUATIONS):
            if response.provider_finish_reason != "pause_turn":
                break
            response = _joined(request, response, await super().request(_continued(request, response)))
        return response

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Stream the response; a paused turn is continued in a new stream whose deltas follow, and one
        `FinalResponse` holds the whole turn."""
        whole: ModelResponse | None = None
        for _ in range(PAUSE_CONTINUATIONS + 1):
            part: ModelResponse | None = None
            async for event in super().stream(request if whole is None else _continued(request, whole)):
                if isinstance(event, FinalResponse):
                    part = event.response
                else:
                    yield event
            assert part is not None  # the base stream ends with its FinalResponse or raises
            whole = part if whole is None else _joined(request, whole, part)
            if part.provider_finish_reason != "pause_turn":
                break
        assert whole is not None
        yield FinalResponse(response=whole)

    # --------------------------------------------------------------------------------------------------
    # Request building

    def _turns(self, request: ModelRequest) -> tuple[list[str], list[dict[str, Any]]]:
        system: list[str] = []
        turns: list[dict[str, Any]] = []

        def push(role: str, blocks: list[dict[str, Any]]) -> None:
            if not blocks:
                return
            if turns and turns[-1]["role"] == role:
                turns[-1]["content"].extend(blocks)
            else:
                turns.append({"role": role, "content": blocks})

        last = len(request.messages) - 1
        for position, message in enumerate(request.messages):
            if isinstance(message, SystemMessage):
                system.append(message.content)
            elif isinstance(message, UserMessage):
                push("user", [{"type": "text", "text": message.content}] if message.content else [])
            elif isinstance(message, ToolResultMessage):
                block: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": message.call_id,
                    "content": _result_content(message),
                }
                if message.is_error:
                    block["is_error"] = True
                push("user", [block])
            elif isinstance(message, AssistantMessage):
                replay = _replayed(message)
                if replay is not None and position < last and _stranded(replay):
                    replay = None  # its text and calls only: the conversation can go on
                if replay is not None:
                    push("assistant", replay)
                    continue
                push("assistant", _turn_blocks(message.content, message.tool_calls, request))
            else:
                raise TypeError(f"Not a message: {message!r}")
        for turn in turns:
            if turn["role"] == "user":  # tool results must open the user turn that answers the calls
                turn["content"].sort(key=lambda b: b["type"] != "tool_result")
        return system, turns

    def build_body(self, request: ModelRequest, *, stream: bool = False) -> dict[str, Any]:
        """The Messages API request body (without `extra_body`): exactly what is sent."""
        settings = self.settings.merge(request.settings)
        system, turns = self._turns(request)
        body: dict[str, Any] = {
            "model": self.model_name,
            "max_tokens": settings.max_tokens if settings.max_tokens is not None else self.max_tokens,
            "messages": turns,
        }
        if system:
            body["system"] = "\n\n".join(system)
        container = _container(request.messages)
        if container is not None:
            body["container"] = container
        if len(request.tools):
            strict = settings.strict_tools if settings.strict_tools is not None else self.strict_tools
            body["tools"] = request.tools.definitions("anthropic", strict=strict)
            choice: dict[str, Any] | None = None
            if settings.tool_choice == "auto":
                choice = {"type": "auto"}
            elif settings.tool_choice == "required":
                choice = {"type": "any"}
            elif settings.tool_choice == "none":
                choice = {"type": "none"}
            elif settings.tool_choice is not None:
                choice = {"type": "tool", "name": request.wire_name(settings.tool_choice)}
            if settings.parallel_tool_calls is False:
                choice = choice or {"type": "auto"}
                if choice["type"] != "none":
                    choice["disable_parallel_tool_use"] = True
            if choice is not None:
                body["tool_choice"] = choice
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        if settings.top_p is not None:
            body["top_p"] = settings.top_p
        if settings.stop is not None:
            body["stop_sequences"] = list(settings.stop)
        if stream:
            body["stream"] = True
        return body

    # --------------------------------------------------------------------------------------------------
    # Response parsing

    def parse_response(self, data: Mapping[str, Any], request: ModelRequest) -> ModelResponse:
        """A `ModelResponse` from a Messages API response body."""
        content = data.get("content")
        if not isinstance(content, list):
            raise ProviderResponseError(
                f"the response has no content list: {json.dumps(data, default=str)[:300]}",
                provider=self.provider,
            )
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in content:
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind == "text":
                texts.append(str(block.get("text") or ""))
            elif kind == "tool_use":
                if not isinstance(block.get("name"), str) or not isinstance(block.get("id"), str):
                    raise ProviderResponseError(
                        f"malformed tool_use block: {block!r:.200}", provider=self.provider
                    )
                arguments = block.get("input")
                calls.append(
                    ToolCall(
                        id=block["id"],
                        name=request.tools.original_name(block["name"]),
                        arguments=arguments if isinstance(arguments, Mapping | str) else None,
                    )
                )
            elif kind is None:
                raise ProviderResponseError(
                    f"malformed content block: {block!r:.200}", provider=self.provider
                )
            # thinking and server-tool blocks are kept for the next request (provider_data)
        provider_reason = data.get("stop_reason")
        return ModelResponse(
            text="".join(texts),
            tool_calls=calls,
            usage=_usage(data.get("usage")),
            finish_reason=_finish(provider_reason),
            provider_finish_reason=str(provider_reason) if provider_reason is not None else None,
            model_name=data.get("model"),
            response_id=data.get("id"),
            raw=dict(data),
            provider_data=_replay(content, data.get("container")),
        )

    # --------------------------------------------------------------------------------------------------
    # Streaming

    def _stream_assembler(self, request: ModelRequest) -> StreamAssembler:
        return _Assembler(request.tools.original_name, decode_arguments=True)

    def _stream_done(self, item: dict[str, Any]) -> bool:
        return item.get("type") == "message_stop"

    def _stream_unfinished(self, asm: StreamAssembler, *, done: bool) -> str | None:
        return None if done else f"the stream ended after {asm.chunks} events without message_stop"

    def _stream_events(self, event: dict[str, Any], asm: StreamAssembler) -> list[StreamEvent]:
        asm.chunks += 1
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            asm.response_id = message.get("id")
            asm.model_name = message.get("model")
            asm.usage = _usage(message.get("usage"))
            return []
        if kind == "content_block_start":
            block = event.get("content_block") or {}
            cast(_Assembler, asm).open_block(event.get("index"), block)
            if block.get("type") == "tool_use":
                cast(_Assembler, asm).tool_blocks.add(event.get("index"))
                initial = block.get("input")
                return [
                    asm.tool_fragment(
                        event.get("index"),
                        id=block.get("id"),
                        name=block.get("name"),
                        arguments=json.dumps(initial) if initial else None,
                    )
                ]
            if block.get("type") == "text" and block.get("text"):
                return [asm.text(block["text"])]
            return []
        if kind == "content_block_delta":
            delta = event.get("delta") or {}
            cast(_Assembler, asm).add_delta(event.get("index"), delta)
            if delta.get("type") == "text_delta" and delta.get("text"):
                return [asm.text(delta["text"])]
            if delta.get("type") == "input_json_delta":
                # Only `tool_use` blocks are the client's calls; a `server_tool_use` block (tool search,
                # code execution, web search) streams its input the same way but runs at Anthropic.
                if event.get("index") not in cast(_Assembler, asm).tool_blocks:
                    return []
                return [asm.tool_fragment(event.get("index"), arguments=delta.get("partial_json") or None)]
            return []  # thinking / signature / citations deltas: kept in the turn's blocks only
        if kind == "content_block_stop":
            cast(_Assembler, asm).close_block(event.get("index"))
            ready = asm.finish_call(event.get("index"))
            return [ready] if ready is not None else []
        if kind == "message_delta":
            delta = event.get("delta") or {}
            if delta.get("stop_reason") is not None:
                asm.provider_finish_reason = str(delta["stop_reason"])
                asm.finish_reason = _finish(delta["stop_reason"])
            _usage(event.get("usage"), into=asm.usage)
            asm.raw = event
            blocks = cast(_Assembler, asm).blocks
            asm.provider_data = _replay([blocks[k] for k in sorted(blocks)], delta.get("container"))
            return []
        return []


def _result_content(message: ToolResultMessage) -> Any:
    """The text, or for a result with content its `text` / `image` / `document` blocks."""
    if not message.parts or message.is_error:
        return message.content
    from toolrun.formats.anthropic import AnthropicFormat
    from toolrun.results import ToolResult

    result = ToolResult(call_id=message.call_id, tool_name=message.tool_name, content=message.parts)
    return AnthropicFormat().tool_result_message(result)["content"]


_STREAMED = {
    "text_delta": ("text", "text"),
    "thinking_delta": ("thinking", "thinking"),
    "input_json_delta": ("input", "partial_json"),
}
"""A delta type → (the block field it extends, the delta key holding the piece)."""


class _Assembler(StreamAssembler):
    """The stream assembler, knowing which content blocks are the client's `tool_use` calls."""

    def __init__(self, original_name: Callable[[str], str], *, decode_arguments: bool) -> None:
        super().__init__(original_name, decode_arguments=decode_arguments)
        self.tool_blocks: set[Any] = set()
        """Indexes of the `tool_use` blocks opened so far."""
        self.blocks: dict[int, dict[str, Any]] = {}
        """Every content block as it will be replayed, by index (built from its start and its deltas)."""
        self._pieces: dict[int, dict[str, list[str]]] = {}
        """A block's streamed fields (`text`, `thinking`, the `input` JSON) in pieces, joined when it
        closes (one join, not a copy of the growing string per delta)."""

    def open_block(self, index: Any, block: Mapping[str, Any]) -> None:
        if isinstance(index, int) and isinstance(block, Mapping):
            self.blocks[index] = dict(block)
            self._pieces[index] = {}

    def add_delta(self, index: Any, delta: Mapping[str, Any]) -> None:
        pieces = self._pieces.get(index) if isinstance(index, int) else None
        if pieces is None:
            return
        kind = delta.get("type")
        field, key = _STREAMED.get(str(kind), (None, None))
        if field is not None and key is not None:
            pieces.setdefault(field, []).append(str(delta.get(key) or ""))
        elif kind == "signature_delta":
            self.blocks[index]["signature"] = delta.get("signature")
        elif kind == "citations_delta":
            self.blocks[index].setdefault("citations", []).append(delta.get("citation"))

    def close_block(self, index: Any) -> None:
        pieces = self._pieces.pop(index, None) if isinstance(index, int) else None
        if not pieces:
            return
        block = self.blocks[index]
        for field in ("text", "thinking"):
            if field in pieces:
                block[field] = str(block.get(field) or "") + "".join(pieces[field])
        if "input" in pieces:
            text = "".join(pieces["input"])
            try:
                block["input"] = json.loads(text or "{}")
            except ValueError:
                block["input"] = {"_invalid_arguments": text}
