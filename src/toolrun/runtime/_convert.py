"""Turning a handler's return value into a JSON-safe `ToolResult` value, bounded in size."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pydantic_core

from toolrun.results import ToolResult
from toolrun.tools import Tool

__all__ = ["fast_output_types", "ok_result", "truncate"]

_SCALARS = frozenset({int, bool, float, type(None)})


def _marker(total: int, shown: int) -> str:
    return (
        f"… [truncated by toolrun: the result has {total:,} characters; only the first {shown:,} are shown]"
    )


def truncate(value: Any, max_chars: int | None) -> tuple[Any, int | None]:
    """`(value, None)` when its JSON text fits in `max_chars` characters; otherwise the text cut to
    `max_chars` characters plus a visible marker, and the original length.

    A string value is measured (and cut) as the string itself; anything else as its compact JSON.
    """
    if max_chars is None:
        return value, None
    kind = type(value)
    if kind is str:
        if len(value) <= max_chars:
            return value, None
        return value[:max_chars] + _marker(len(value), max_chars), len(value)
    if kind in _SCALARS:
        return value, None
    try:
        data = pydantic_core.to_json(value)
    except Exception:  # lone surrogates and the like: the slower encoder copes
        data = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    if len(data) <= max_chars:  # bytes >= characters
        return value, None
    text = data.decode("utf-8", "surrogatepass")
    if len(text) <= max_chars:
        return value, None
    return text[:max_chars] + _marker(len(text), max_chars), len(text)


_FAST_TYPES: dict[str, tuple[type, ...]] = {
    "integer": (int,),
    "string": (str,),
    "boolean": (bool,),
    "number": (int, float),
    "null": (type(None),),
}


def fast_output_types(tool: Tool) -> tuple[bool, tuple[type, ...]]:
    """(whether to check results at all, exact types that certainly fit and need no validation)."""
    if not tool.has_output_type:
        return False, ()
    schema = tool.output_schema
    if isinstance(schema, dict) and set(schema) <= {"type", "title", "description"}:
        kind = schema.get("type")
        if isinstance(kind, str) and kind in _FAST_TYPES:
            return True, _FAST_TYPES[kind]
    return True, ()


# ------------------------------------------------------------------------------------------------------
# A successful ToolResult, built without the keyword-argument constructor (a third of the cost; this runs
# once per call). Only while ToolResult is the plain dataclass this expects; otherwise the constructor.

_RESULT_FIELDS = (
    "call_id",
    "tool_name",
    "status",
    "value",
    "message",
    "error",
    "confirmation_id",
    "duration",
    "attempts",
    "cached",
    "exclude_value_from_context",
    "metadata",
    "content",
)
_new = object.__new__


def _plain_dataclass() -> bool:
    try:
        names = tuple(f.name for f in dataclasses.fields(ToolResult))
    except TypeError:
        return False
    return (
        names == _RESULT_FIELDS
        and "__slots__" not in vars(ToolResult)
        and not hasattr(ToolResult, "__post_init__")
        and ToolResult().__dict__.keys() == set(_RESULT_FIELDS)
    )


if _plain_dataclass():

    def ok_result(call_id: str, tool_name: str, value: Any, attempts: int) -> ToolResult:
        """`ToolResult(call_id=..., tool_name=..., status="ok", value=..., attempts=...)`, faster."""
        result: ToolResult = _new(ToolResult)
        result.__dict__ = {  # one dict built from a literal: cheaper than `update(**kwargs)`
            "call_id": call_id,
            "tool_name": tool_name,
            "status": "ok",
            "value": value,
            "message": None,
            "error": None,
            "confirmation_id": None,
            "duration": 0.0,
            "attempts": attempts,
            "cached": False,
            "exclude_value_from_context": False,
            "metadata": {},
            "content": (),
        }
        return result

else:  # pragma: no cover - ToolResult changed shape: stay correct

    def ok_result(call_id: str, tool_name: str, value: Any, attempts: int) -> ToolResult:
        return ToolResult(call_id=call_id, tool_name=tool_name, status="ok", value=value, attempts=attempts)
