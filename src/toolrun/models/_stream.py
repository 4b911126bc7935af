"""Reassembling a streamed response: text pieces and tool-call fragments keyed by index."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from toolrun.models._messages import (
    FinishReason,
    ModelResponse,
    ModelTextDelta,
    ToolCallDelta,
    ToolCallReady,
    Usage,
)
from toolrun.tools import ToolCall

__all__ = ["StreamAssembler"]


@dataclass(slots=True)
class _PartialCall:
    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    ready: ToolCall | None = None


def _identity(name: str) -> str:
    return name


class StreamAssembler:
    """Collects stream fragments into a `ModelResponse`, emitting neutral events as it goes.

    Tool-call fragments are keyed by an index the provider gives (OpenAI: `tool_calls[].index`; Anthropic:
    the content block index). Fragments of several calls may interleave; each call's argument text is the
    concatenation of its own fragments in arrival order. Calls are numbered 0, 1, ... in the order their
    first fragment arrived, whatever the provider's keys are.

    Args:
        original_name: Maps a wire name back to the registered tool name.
        decode_arguments: Turn each call's argument text into a dict when it is a JSON object (Anthropic,
            whose non-streamed calls carry objects); otherwise keep the text (OpenAI).
    """

    def __init__(
        self, original_name: Callable[[str], str] = _identity, *, decode_arguments: bool = False
    ) -> None:
        self._original_name = original_name
        self._decode = decode_arguments
        self._text: list[str] = []
        self._calls: dict[Any, _PartialCall] = {}
        self._order: dict[Any, int] = {}
        self.usage = Usage(requests=1)
        self.finish_reason: FinishReason | None = None
        self.provider_finish_reason: str | None = None
        self.model_name: str | None = None
        self.response_id: str | None = None
        self.raw: Any = None
        self.provider_data: dict[str, Any] | None = None
        self.chunks = 0

    @property
    def has_calls(self) -> bool:
        return bool(self._calls)

    def text(self, piece: str) -> ModelTextDelta:
        self._text.append(piece)
        return ModelTextDelta(text=piece)

    def tool_fragment(
        self, key: Any, *, id: str | None = None, name: str | None = None, arguments: str | None = None
    ) -> ToolCallDelta:
        """Add a fragment of the call keyed `key`; a new key opens a new call."""
        call = self._calls.get(key)
        opened = call is None
        if call is None:
            call = self._calls[key] = _PartialCall()
            self._order[key] = len(self._order)
        if id and call.id is None:
            call.id = id
        if name:
            # Names arrive whole from every server seen; concatenating (as OpenAI's own accumulator does)
            # also covers a server that splits them.
            call.name += name
        if arguments:
            call.arguments.append(arguments)
        return ToolCallDelta(
            index=self._order[key],
            id=call.id if opened or id else None,
            name=self._original_name(call.name) if name else None,
            arguments_delta=arguments or "",
        )

    def last_key(self) -> Any:
        """The key of the most recently opened call (for servers that omit the index)."""
        return next(reversed(self._order)) if self._order else None

    def finish_call(self, key: Any) -> ToolCallReady | None:
        """Close the call keyed `key` (its arguments are complete); None if there is no such call."""
        call = self._calls.get(key)
        if call is None:
            return None
        if call.ready is None:
            call.ready = self._build(call)
        return ToolCallReady(index=self._order[key], call=call.ready)

    def finish_all(self) -> list[ToolCallReady]:
        """Close every call not closed yet, in order."""
        events = []
        for key, call in self._calls.items():
            if call.ready is None:
                ready = self.finish_call(key)
                if ready is not None:
                    events.append(ready)
        return events

    def _build(self, call: _PartialCall) -> ToolCall:
        text = "".join(call.arguments)
        arguments: Any = text or "{}"
        if self._decode:
            try:
                decoded = json.loads(arguments)
            except ValueError:
                decoded = None
            if isinstance(decoded, dict):
                arguments = decoded
        if call.id is None:
            call.id = f"call_{uuid.uuid4().hex[:24]}"  # a server that sent none; stable once given
        return ToolCall(id=call.id, name=self._original_name(call.name), arguments=arguments)

    def response(self, *, partial: bool = False) -> ModelResponse:
        """The response so far; `partial` marks a stream that broke off (`finish_reason="error"`)."""
        calls = [c.ready if c.ready is not None else self._build(c) for c in self._calls.values()]
        reason = self.finish_reason
        if partial:
            reason = "error"
        elif calls and reason == "stop":
            reason = "tool_calls"  # some OpenAI-compatible servers say "stop" after tool calls
        return ModelResponse(
            text="".join(self._text),
            tool_calls=calls,
            usage=self.usage,
            finish_reason=reason,
            provider_finish_reason=self.provider_finish_reason,
            model_name=self.model_name,
            response_id=self.response_id,
            raw=self.raw,
            provider_data=self.provider_data,
        )
