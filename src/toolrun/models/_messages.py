"""Provider-neutral conversation data: messages, requests, responses, usage and stream events.

Every type here is a small `kw_only` dataclass with `to_dict()` / `from_dict()` giving plain JSON data, so an
agent run can be written to JSON in one process and resumed in another. Messages carry a `"role"` key in
their JSON form:

```json
{"role": "system", "content": "You manage tasks."}
{"role": "user", "content": "Delete task t1"}
{"role": "assistant", "content": "",
 "tool_calls": [{"id": "c1", "name": "delete_task", "arguments": "{\\"task_id\\": \\"t1\\"}"}]}
{"role": "tool", "call_id": "c1", "tool_name": "delete_task", "content": "{\\"deleted\\":true}",
 "is_error": false}
```

Tool names in messages are always the *registered* names; model clients translate them to and from the
provider-safe aliases on the wire.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeAlias

from toolrun._unicode import clean_text
from toolrun.registry import ToolRegistry, ToolSet
from toolrun.tools import Tool, ToolCall

if TYPE_CHECKING:
    from toolrun.content import Content
    from toolrun.results import ToolResult

__all__ = [
    "AssistantMessage",
    "FinalResponse",
    "FinishReason",
    "Message",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "ModelTextDelta",
    "StreamEvent",
    "SystemMessage",
    "ToolCallDelta",
    "ToolCallReady",
    "ToolChoice",
    "ToolResultMessage",
    "Usage",
    "UserMessage",
    "message_from_dict",
    "messages_from_json",
    "messages_to_json",
]

FinishReason = Literal["stop", "tool_calls", "length", "content_filter", "error", "other"]
"""Why the model stopped, normalised across providers (the provider's own word is kept beside it)."""

_FINISH_REASONS: frozenset[str] = frozenset(FinishReason.__args__)  # type: ignore[attr-defined]

ToolChoice: TypeAlias = str
"""`"auto"` (the model decides), `"none"` (no tool), `"required"` (some tool); any other string names the
one tool the model must call (its registered name)."""


# ------------------------------------------------------------------------------------------------------
# Messages


@dataclass(kw_only=True, slots=True)
class SystemMessage:
    """Instructions for the model. Anthropic has no system turn: its client sends these as `system`."""

    role: ClassVar[Literal["system"]] = "system"
    content: str
    """The instructions."""

    def to_dict(self) -> dict[str, Any]:
        return {"role": "system", "content": self.content}


@dataclass(kw_only=True, slots=True)
class UserMessage:
    """What the user said (text only; images and files are not modelled yet)."""

    role: ClassVar[Literal["user"]] = "user"
    content: str
    """The user's text."""

    def to_dict(self) -> dict[str, Any]:
        return {"role": "user", "content": self.content}


@dataclass(kw_only=True, slots=True)
class AssistantMessage:
    """What the model said: text, tool calls, or both."""

    role: ClassVar[Literal["assistant"]] = "assistant"
    content: str = ""
    """The model's text (may be empty when it only called tools)."""
    tool_calls: list[ToolCall] = field(default_factory=list)
    """The calls it made, with registered tool names, in the order it made them."""
    provider_data: Mapping[str, Any] | None = None
    """What the provider that wrote this turn needs back verbatim on the next request, keyed by provider
    (`{"anthropic": {"content": [...blocks], "container": {...}}}`: thinking blocks, server-tool blocks,
    programmatic tool calls, the code-execution container). Plain JSON; other providers ignore it, and a
    model replays it only while the turn's tool calls are the ones it wrote (same ids, same order)."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "role": "assistant",
            "content": self.content,
            "tool_calls": [c.to_dict() for c in self.tool_calls],
        }
        if self.provider_data:
            out["provider_data"] = dict(self.provider_data)
        return out


@dataclass(kw_only=True, slots=True)
class ToolResultMessage:
    """A tool's result, sent back to the model as the answer to one call."""

    role: ClassVar[Literal["tool"]] = "tool"
    call_id: str
    """The id of the `ToolCall` this answers."""
    tool_name: str
    """The tool's registered name (Gemini matches results by name; logs read better with it)."""
    content: str
    """What the model reads: `ToolResult.render()`."""
    is_error: bool = False
    """Whether the call failed (Anthropic marks such results `is_error`)."""
    parts: tuple[Content, ...] = ()
    """For a result with content (`ToolResult.content`): what the model is shown, in order — the value
    as a `Text` first (when there is one), then the images, files and text blocks. `content` keeps the text
    form (with a note per image or file) for places that take text only. Empty for plain results."""

    @classmethod
    def from_result(cls, result: ToolResult) -> ToolResultMessage:
        """The message for an executor's `ToolResult` (its `render()` text, flagged when it is an error;
        with its content items as `parts`)."""
        if result.content and result.status == "ok":
            from toolrun.formats._content import parts

            items = tuple(parts(result))
        else:
            items = ()
        return cls(
            call_id=result.call_id,
            tool_name=result.tool_name,
            # A tool may return text no provider takes (a file name read with surrogateescape).
            content=clean_text(result.render()),
            is_error=result.status == "error",
            parts=items,
        )

    def to_dict(self) -> dict[str, Any]:
        out = {
            "role": "tool",
            "call_id": self.call_id,
            "tool_name": self.tool_name,
            "content": self.content,
            "is_error": self.is_error,
        }
        if self.parts:
            out["parts"] = [item.to_dict() for item in self.parts]
        return out


Message: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolResultMessage
"""One turn of a conversation."""


def _system_from_dict(data: Mapping[str, Any]) -> SystemMessage:
    return SystemMessage(content=data["content"])


def _user_from_dict(data: Mapping[str, Any]) -> UserMessage:
    return UserMessage(content=data["content"])


def _assistant_from_dict(data: Mapping[str, Any]) -> AssistantMessage:
    extra = data.get("provider_data")
    calls = data.get("tool_calls")
    return AssistantMessage(
        content=data.get("content") or "",
        tool_calls=[ToolCall.from_dict(c) for c in calls] if calls else [],
        provider_data=extra if extra is not None and isinstance(extra, Mapping) and extra else None,
    )


def _tool_result_from_dict(data: Mapping[str, Any]) -> ToolResultMessage:
    items: tuple[Content, ...] = ()
    if data.get("parts"):
        from toolrun.content import content_from_dict

        items = tuple(content_from_dict(item) for item in data["parts"])
    return ToolResultMessage(
        call_id=data["call_id"],
        tool_name=data.get("tool_name", ""),
        content=data["content"],
        is_error=bool(data.get("is_error", False)),
        parts=items,
    )


_FROM_DICT: dict[Any, Callable[[Mapping[str, Any]], Message]] = {
    "system": _system_from_dict,
    "user": _user_from_dict,
    "assistant": _assistant_from_dict,
    "tool": _tool_result_from_dict,
}


def message_from_dict(data: Mapping[str, Any]) -> Message:
    """Rebuild a message from its `to_dict()` form (dispatching on `"role"`)."""
    role = data.get("role")
    build = _FROM_DICT.get(role) if isinstance(role, str) else None
    if build is None:
        raise ValueError(f"Not a message: unknown role {role!r} (expected system, user, assistant or tool).")
    return build(data)


def messages_to_json(messages: Iterable[Message]) -> str:
    """A conversation as a JSON array."""
    return json.dumps([m.to_dict() for m in messages], ensure_ascii=False)


def messages_from_json(text: str | bytes) -> list[Message]:
    """A conversation from `messages_to_json` output."""
    return [message_from_dict(item) for item in json.loads(text)]


# ------------------------------------------------------------------------------------------------------
# Usage, settings, request, response


@dataclass(kw_only=True, slots=True)
class Usage:
    """Tokens spent. Responses carry the usage of one request; add them up with `+`."""

    input_tokens: int = 0
    """Prompt tokens, including cached ones."""
    output_tokens: int = 0
    """Generated tokens."""
    cache_read_tokens: int = 0
    """Input tokens served from the provider's prompt cache (a part of `input_tokens`)."""
    cache_write_tokens: int = 0
    """Input tokens written to the provider's prompt cache (Anthropic)."""
    requests: int = 0
    """Model requests this covers (1 on a response)."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            requests=self.requests + other.requests,
        )

    def to_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Usage:
        names = {f.name for f in fields(cls)}
        return cls(**{k: int(v) for k, v in data.items() if k in names})


@dataclass(kw_only=True, slots=True, frozen=True)
class ModelSettings:
    """Per-request knobs. `None` means "not set": the model's default (or the server's) applies.

    Settings given to a model's constructor are its defaults; a request's settings override them field by
    field (`defaults.merge(request.settings)`).
    """

    temperature: float | None = None
    """Sampling temperature."""
    top_p: float | None = None
    """Nucleus sampling."""
    max_tokens: int | None = None
    """Most tokens to generate (Anthropic requires one: its client defaults to 4096)."""
    stop: tuple[str, ...] | None = None
    """Stop sequences."""
    seed: int | None = None
    """Sampling seed, where the provider supports one (OpenAI-compatible servers)."""
    tool_choice: ToolChoice | None = None
    """`"auto"`, `"none"`, `"required"`, or the name of the one tool to call."""
    parallel_tool_calls: bool | None = None
    """Whether the model may make several calls in one turn (False: at most one)."""
    strict_tools: bool | None = None
    """Send strict tool definitions (OpenAI structured outputs, Anthropic strict tool use)."""
    timeout: float | None = None
    """Seconds for one HTTP request (each retry gets its own)."""
    extra_body: Mapping[str, Any] | None = None
    """Extra JSON fields merged into the request body (provider features toolrun does not model)."""

    def merge(self, override: ModelSettings | None) -> ModelSettings:
        """These settings with every field set in `override` replaced."""
        if override is None:
            return self
        changes = {f.name: v for f in fields(override) if (v := getattr(override, f.name)) is not None}
        return replace(self, **changes) if changes else self

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                out[f.name] = (
                    list(value) if f.name == "stop" else dict(value) if f.name == "extra_body" else value
                )
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelSettings:
        values = dict(data)
        if values.get("stop") is not None:
            values["stop"] = tuple(values["stop"])
        return cls(**values)


def _as_toolset(tools: Sequence[Tool] | ToolSet | None) -> ToolSet:
    if isinstance(tools, ToolSet):
        return tools
    return ToolRegistry(tools or ())


@dataclass(init=False, slots=True)
class ModelRequest:
    """One call to a model: the conversation so far, the tools it may call, and settings.

    `tools` may be a list of `Tool`s or any `ToolSet` (a registry or a view); a list is wrapped in a
    `ToolRegistry` once, which gives names providers cannot take a stable alias.
    """

    messages: list[Message]
    """The conversation, oldest first."""
    tools: ToolSet
    """The tools the model may call."""
    settings: ModelSettings | None = None
    """Overrides of the model's default settings."""

    def __init__(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool] | ToolSet | None = None,
        settings: ModelSettings | None = None,
    ) -> None:
        self.messages = list(messages)
        self.tools = _as_toolset(tools)
        self.settings = settings

    def wire_name(self, name: str) -> str:
        """The name to send a provider for the tool registered as `name` (unknown names pass through)."""
        tool = self.tools.find(name)
        return self.tools.wire_name(tool.name) if tool is not None else name


@dataclass(kw_only=True, slots=True)
class ModelResponse:
    """What a model answered: text, tool calls, usage and why it stopped."""

    text: str = ""
    """The model's text (empty when it only called tools)."""
    tool_calls: list[ToolCall] = field(default_factory=list)
    """Calls to run, with registered tool names (aliases already mapped back)."""
    usage: Usage = field(default_factory=Usage)
    """Tokens spent on this request."""
    finish_reason: FinishReason | None = None
    """Why the model stopped; defaults to `"tool_calls"` when there are calls, else `"stop"`."""
    provider_finish_reason: str | None = None
    """The provider's own word for it (`"end_turn"`, `"tool_use"`, `"stop"`, ...)."""
    model_name: str | None = None
    """The model that answered, as the provider reported it."""
    response_id: str | None = None
    """The provider's id for this response."""
    raw: Any = field(default=None, compare=False, repr=False)
    """The provider's response as plain data (streams: the last chunk); not part of `to_dict()`."""
    provider_data: Mapping[str, Any] | None = None
    """What the provider needs back on the next request (see `AssistantMessage.provider_data`)."""

    def __post_init__(self) -> None:
        if self.finish_reason is None:
            self.finish_reason = "tool_calls" if self.tool_calls else "stop"

    @classmethod
    def from_text(cls, text: str, **kwargs: Any) -> ModelResponse:
        """A final answer."""
        return cls(text=text, **kwargs)

    @classmethod
    def from_tool_calls(
        cls, *calls: ToolCall | tuple[str, Any], text: str = "", **kwargs: Any
    ) -> ModelResponse:
        """A response calling tools. Each call is a `ToolCall` or a `(name, arguments)` pair.

        ```python
        ModelResponse.from_tool_calls(("get_weather", {"city": "Paris"}), ("get_time", {}))
        ```
        """
        built = [c if isinstance(c, ToolCall) else ToolCall(name=c[0], arguments=c[1]) for c in calls]
        return cls(text=text, tool_calls=built, **kwargs)

    def to_message(self) -> AssistantMessage:
        """The assistant turn to append to the conversation."""
        return AssistantMessage(
            content=self.text, tool_calls=list(self.tool_calls), provider_data=self.provider_data
        )

    def to_dict(self) -> dict[str, Any]:
        out = {
            "text": self.text,
            "tool_calls": [c.to_dict() for c in self.tool_calls],
            "usage": self.usage.to_dict(),
            "finish_reason": self.finish_reason,
            "provider_finish_reason": self.provider_finish_reason,
            "model_name": self.model_name,
            "response_id": self.response_id,
        }
        if self.provider_data:
            out["provider_data"] = dict(self.provider_data)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelResponse:
        reason = data.get("finish_reason")
        extra = data.get("provider_data")
        return cls(
            text=data.get("text") or "",
            tool_calls=[ToolCall.from_dict(c) for c in data.get("tool_calls") or ()],
            usage=Usage.from_dict(data.get("usage") or {}),
            finish_reason=reason if reason in _FINISH_REASONS else None,
            provider_finish_reason=data.get("provider_finish_reason"),
            model_name=data.get("model_name"),
            response_id=data.get("response_id"),
            provider_data=extra if isinstance(extra, Mapping) else None,
        )


# ------------------------------------------------------------------------------------------------------
# Stream events


@dataclass(kw_only=True, slots=True)
class ModelTextDelta:
    """A piece of the model's text, in order."""

    kind: ClassVar[Literal["text_delta"]] = "text_delta"
    text: str


@dataclass(kw_only=True, slots=True)
class ToolCallDelta:
    """A piece of one tool call. The first piece of a call carries its `id` and `name`."""

    kind: ClassVar[Literal["tool_call_delta"]] = "tool_call_delta"
    index: int
    """Which call of this response (0, 1, ...); pieces of several calls may interleave."""
    id: str | None = None
    """The call id, on the piece that opens the call."""
    name: str | None = None
    """The registered tool name, on the piece that opens the call."""
    arguments_delta: str = ""
    """A fragment of the arguments' JSON text (fragments are not valid JSON on their own)."""


@dataclass(kw_only=True, slots=True)
class ToolCallReady:
    """A tool call whose arguments are complete (Anthropic: at its block's end; others: at the end)."""

    kind: ClassVar[Literal["tool_call_ready"]] = "tool_call_ready"
    index: int
    call: ToolCall


@dataclass(kw_only=True, slots=True)
class FinalResponse:
    """The whole response, always the last event of a stream that completed."""

    kind: ClassVar[Literal["final"]] = "final"
    response: ModelResponse


StreamEvent: TypeAlias = ModelTextDelta | ToolCallDelta | ToolCallReady | FinalResponse
"""What `Model.stream()` yields: deltas, calls as they complete, then exactly one `FinalResponse`."""
