"""The offline model of an App that brings none (`TOOLRUN_MODEL` unset): it calls a tool when asked as
`/tool_name {"argument": "value"}` and otherwise says how, so a new app can be tried before any model key."""

from __future__ import annotations

import json
import uuid
from typing import Any

from toolrun.models import FunctionModel, Message, ModelResponse, ToolResultMessage, UserMessage
from toolrun.tools import Tool, ToolCall

__all__ = ["generic_demo_model"]


def _help(tools: list[Tool]) -> str:
    names = ", ".join(t.name for t in tools) or "none"
    return (
        "This is the offline demo (no TOOLRUN_MODEL is set). Call a tool yourself as "
        '`/tool_name {"argument": "value"}`. Tools: ' + names + "."
    )


def _answer(messages: list[Message], tools: list[Tool]) -> ModelResponse:
    results: list[ToolResultMessage] = []
    for message in reversed(messages):
        if isinstance(message, ToolResultMessage):
            results.append(message)
        else:
            break
    if results:
        return ModelResponse(text="\n".join(f"{r.tool_name}: {r.content}" for r in reversed(results)))
    last = messages[-1] if messages else None
    text = last.content if isinstance(last, UserMessage) else ""
    if not text.startswith("/"):
        return ModelResponse(text=_help(tools))
    name, _, raw = text[1:].strip().partition(" ")
    if name not in {t.name for t in tools}:
        return ModelResponse(text=f"No tool {name!r} here. " + _help(tools))
    try:
        arguments: Any = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return ModelResponse(text='The arguments are not JSON, e.g. /add_note {"text": "buy milk"}.')
    call = ToolCall(id=f"call_{uuid.uuid4().hex[:12]}", name=name, arguments=json.dumps(arguments))
    return ModelResponse(tool_calls=[call])


def generic_demo_model() -> FunctionModel:
    """The offline model of an App without a `demo_model` (named `demo`)."""
    return FunctionModel(_answer, name="demo", max_recorded=1)
