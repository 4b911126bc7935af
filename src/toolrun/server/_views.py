"""How the service shows its records through the API: messages, pending confirmations, times.

Pure functions of stored data (no database, no agent): the run driver, the read side and the routes all
render through them, so a message or a pending item looks the same wherever it appears.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec

from toolrun._unicode import clean_json, clean_text
from toolrun.models._history import MAX_ARGUMENT_DEPTH, json_depth_over, text_depth_over
from toolrun.store import PendingConfirmation

__all__ = ["api_arguments", "iso_time", "message_view", "pending_item"]


_decode = msgspec.json.decode  # the same values as `json.loads` for strict JSON, several times faster


def iso_time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def api_arguments(raw: Any) -> Any:
    """A call's arguments for the API: decoded JSON when it is, the text otherwise; always clean Unicode.

    Conversations written before the model boundary may hold anything: nesting too deep to serialise stays
    text, and lone surrogates become U+FFFD, so such a conversation still reads.
    """
    if isinstance(raw, str):
        if text_depth_over(raw, MAX_ARGUMENT_DEPTH):
            return clean_text(raw)
        try:
            value = _decode(raw)
        except msgspec.DecodeError:
            # Not strict JSON (NaN, 1e400, an escaped lone surrogate): read it the stdlib's way, as before.
            try:
                value = json.loads(raw)
            except ValueError:
                return clean_text(raw)
        return value if raw.isascii() and "\\u" not in raw else clean_json(value)
    if isinstance(raw, Mapping):
        if json_depth_over(raw, MAX_ARGUMENT_DEPTH):
            return clean_text(json.dumps(raw, default=str)[:10_000])
        return clean_json(raw)
    return {} if raw is None else raw


def pending_item(
    record: PendingConfirmation, *, run_id: str | None, conversation_id: str | None
) -> dict[str, Any]:
    """A pending confirmation as the API shows it, from the confirmation store's own record."""
    return {
        "confirmation_id": record.id,
        "tool": record.tool_name,
        "arguments": api_arguments(record.call.get("arguments")),
        "summary": record.summary,
        "preview": record.preview,
        "expires_at": iso_time(record.expires_at),
        "run_id": run_id,
        "conversation_id": conversation_id or record.conversation_id,
    }


def message_view(seq: int, run_id: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """A stored message as the API shows it."""
    role = data.get("role")
    view: dict[str, Any] = {
        "seq": seq,
        "run_id": run_id,
        "role": role,
        "content": clean_text(data.get("content") or ""),
        "tool_calls": None,
        "call_id": None,
        "tool_name": None,
        "is_error": None,
        "interrupted": data.get("interrupted") is True,
        "content_items": None,
        "stopped": data.get("stopped") is True,
    }
    if role == "assistant":
        view["tool_calls"] = [
            {
                "id": clean_text(str(c.get("id"))),
                "name": clean_text(str(c.get("name"))),
                "arguments": api_arguments(c.get("arguments")),
            }
            for c in data.get("tool_calls") or ()
        ]
    elif role == "tool":
        view["call_id"] = data.get("call_id")
        view["tool_name"] = data.get("tool_name")
        view["is_error"] = bool(data.get("is_error"))
        shown = data.get("content_views")
        if isinstance(shown, list) and shown:
            view["content_items"] = [item for item in shown if isinstance(item, dict)]
    return view
