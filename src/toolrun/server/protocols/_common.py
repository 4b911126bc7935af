"""Pieces every wire format shares: how a tool call's arguments and result look on the wire, and the
strict reading of an approval decision."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from toolrun.results import ErrorCode, ToolResult
from toolrun.tools import ToolCall

__all__ = [
    "DecisionError",
    "call_arguments",
    "call_arguments_text",
    "is_denied",
    "result_payload",
    "strict_decision",
]


class DecisionError(ValueError):
    """An approval decision that is not exactly `true` or `false` (a string, a number, null...)."""


def call_arguments(call: ToolCall) -> Any:
    """The call's arguments as JSON values (a model's unparsable arguments stay a string)."""
    args = call.arguments
    if args is None:
        return {}
    if isinstance(args, Mapping):
        return dict(args)
    try:
        return json.loads(args)
    except ValueError:
        return args


def call_arguments_text(call: ToolCall) -> str:
    """The call's arguments as JSON text, as a model streams them."""
    args = call.arguments
    if isinstance(args, str):
        return args
    return json.dumps(dict(args) if args is not None else {}, ensure_ascii=False, default=str)


def result_payload(result: ToolResult) -> dict[str, Any]:
    """What a front-end shows of a result: status, value or error, and how long it took (ms)."""
    payload: dict[str, Any] = {"status": result.status, "duration_ms": round(result.duration * 1000, 1)}
    if result.status == "ok":
        payload["value"] = None if result.exclude_value_from_context else result.value
    if result.message is not None:
        payload["message"] = result.message
    if result.error is not None:
        payload["error"] = {
            "code": str(result.error.code),
            "message": result.error.message,
            "retryable": result.error.retryable,
            "recover_action": result.error.recover_action,
        }
    return payload


def is_denied(result: ToolResult) -> bool:
    """Whether a result says a person refused the call (it never ran)."""
    return (
        result.error is not None
        and result.error.code == ErrorCode.CONFIRMATION_DENIED
        and result.error.details.get("reason") == "denied"
    )


def strict_decision(value: Any, *, field: str) -> bool:
    """`True` or `False`, only from a JSON boolean: `"false"`, `0`, `1` or `null` are refused (a loose
    reading of `"false"` as truthy would run a call the person refused)."""
    if value is True or value is False:
        return bool(value)
    raise DecisionError(f"{field} must be true or false (a JSON boolean), not {json.dumps(value)[:40]}.")
