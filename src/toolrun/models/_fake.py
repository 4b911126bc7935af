"""Shared by the test models: turning script items into responses, usage estimates, synthesised streams."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from typing import Any, TypeAlias

from toolrun.models._messages import (
    AssistantMessage,
    FinalResponse,
    Message,
    ModelResponse,
    ModelTextDelta,
    StreamEvent,
    ToolCallDelta,
    ToolCallReady,
    Usage,
)
from toolrun.tools import ToolCall

__all__ = ["ResponseLike", "coerce_response", "estimate_usage", "synthesize_stream"]

ResponseLike: TypeAlias = str | ToolCall | Sequence[ToolCall] | ModelResponse
"""What test models accept as a response: final text, one call, several parallel calls, or the whole thing."""

_WORDS = re.compile(r"\S+\s*|\s+")


def coerce_response(item: Any) -> ModelResponse:
    """A fresh `ModelResponse` from a `ResponseLike` (copies, so a script can be replayed safely)."""
    if isinstance(item, ModelResponse):
        return dataclasses.replace(item, tool_calls=[dataclasses.replace(c) for c in item.tool_calls])
    if isinstance(item, str):
        return ModelResponse(text=item)
    if isinstance(item, ToolCall):
        return ModelResponse(tool_calls=[dataclasses.replace(item)])
    if isinstance(item, Sequence) and item and all(isinstance(c, ToolCall) for c in item):
        return ModelResponse(tool_calls=[dataclasses.replace(c) for c in item])
    raise TypeError(
        f"Not a response: {item!r}. Use a str (final text), a ToolCall, a list of ToolCalls (parallel "
        "calls) or a ModelResponse."
    )


def _tokens(text: str) -> int:
    return (len(text) + 3) // 4  # about four characters a token: enough for budgets in tests


def _arguments_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    try:
        return json.dumps(dict(arguments) if arguments is not None else {}, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        # what a hostile script may hold (nesting too deep, no JSON data): the agent's boundary refuses it;
        # a test model must hand it over, not fail on it
        return "{}"


def estimate_usage(messages: Sequence[Message], response: ModelResponse) -> Usage:
    """A rough, deterministic token count for test models (about four characters a token)."""
    prompt = 0
    for message in messages:
        prompt += 4 + _tokens(message.content)
        if isinstance(message, AssistantMessage):
            prompt += sum(_tokens(c.name) + _tokens(_arguments_text(c.arguments)) for c in message.tool_calls)
    output = _tokens(response.text) + sum(
        _tokens(c.name) + _tokens(_arguments_text(c.arguments)) for c in response.tool_calls
    )
    return Usage(input_tokens=prompt, output_tokens=output, requests=1)


def with_usage(messages: Sequence[Message], response: ModelResponse) -> ModelResponse:
    """`response`, with an estimated usage if it carries none."""
    if response.usage.total_tokens == 0:
        response.usage = estimate_usage(messages, response)
    return response


def synthesize_stream(response: ModelResponse) -> list[StreamEvent]:
    """The events a streaming provider would send for `response`: words, then each call, then the end."""
    events: list[StreamEvent] = [ModelTextDelta(text=piece) for piece in _WORDS.findall(response.text)]
    for index, call in enumerate(response.tool_calls):
        events.append(
            ToolCallDelta(
                index=index, id=call.id, name=call.name, arguments_delta=_arguments_text(call.arguments)
            )
        )
        events.append(ToolCallReady(index=index, call=call))
    events.append(FinalResponse(response=response))
    return events
