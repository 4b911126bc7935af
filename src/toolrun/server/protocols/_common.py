"""Pieces every wire format shares: how a tool call's arguments and result look on the wire, which
confirmation belongs to which call, and the reading of a decision from a request's JSON."""

from __future__ import annotations

import json
from typing import Any

from toolrun.approvals._decisions import Approve, InvalidDecisionError, check_decision
from toolrun.server.events import ConfirmationRequired, ToolCallFinished

__all__ = [
    "CallTracker",
    "DecisionError",
    "arguments_text",
    "is_denied",
    "result_payload",
    "strict_decision",
]


class DecisionError(ValueError):
    """A request a protocol cannot act on: malformed, or a decision that is not exactly `true`/`false`."""


def arguments_text(arguments: Any) -> str:
    """Arguments as JSON text, as a model streams them (a model's unparsable text stays as it is)."""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments if arguments is not None else {}, ensure_ascii=False, default=str)


def result_payload(event: ToolCallFinished) -> dict[str, Any]:
    """What a front-end shows of a result: status, value or error, and how long it took (ms)."""
    payload: dict[str, Any] = {"status": event.status, "duration_ms": event.duration_ms}
    if event.status == "ok":
        payload["value"] = event.result
    if event.error is not None:
        payload["error"] = {k: event.error.get(k) for k in ("code", "message", "retryable", "recover_action")}
    if event.content:
        payload["content"] = event.content  # images and files by URL, never inline bytes
    return payload


def is_denied(event: ToolCallFinished) -> bool:
    """Whether a result says a person refused the call (it never ran)."""
    error = event.error or {}
    details = error.get("details") or {}
    return error.get("code") == "CONFIRMATION_DENIED" and details.get("reason") == "denied"


def strict_decision(value: Any, *, field: str) -> bool:
    """Whether the decision in a request's JSON `field` approves. The one check of a decision
    (`toolrun.approvals`) reads it, so `"false"`, `0`, `1` or `null` are refused as at every other door (a
    loose reading of `"false"` as truthy would run a call the person refused); JSON holds no `Approve` or
    `Deny` objects, so only `true` and `false` pass. The refusal names the field."""
    try:
        return isinstance(check_decision(field, value), Approve)
    except InvalidDecisionError:
        raise DecisionError(
            f"{field} must be true or false (a JSON boolean), not {json.dumps(value)[:40]}."
        ) from None


class CallTracker:
    """Pairs each `ConfirmationRequired` with the call it holds (the call that just finished with
    `confirmation_required`, same tool), since the pending record names the confirmation, not the call."""

    def __init__(self) -> None:
        self._waiting: list[ToolCallFinished] = []
        self.call_of: dict[str, str] = {}
        """confirmation id → tool call id."""

    def finished(self, event: ToolCallFinished) -> None:
        if event.status == "confirmation_required":
            self._waiting.append(event)

    def confirmation(self, event: ConfirmationRequired) -> str | None:
        """The tool call id the confirmation belongs to, if this stream saw it."""
        pending = event.pending
        confirmation_id = str(pending.get("confirmation_id", ""))
        call_id = pending.get("call_id")
        if isinstance(call_id, str):
            self.call_of[confirmation_id] = call_id
            return call_id
        for index in range(len(self._waiting) - 1, -1, -1):
            if self._waiting[index].tool == pending.get("tool"):
                found = self._waiting.pop(index).call_id
                self.call_of[confirmation_id] = found
                return found
        return None
