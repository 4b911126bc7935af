"""Confirming a destructive call with the human behind an MCP client.

The executor holds the call back (`confirmation_required`, a `PendingConfirmation` in its store: bound to
the user, the tool and the keyed argument hash, expiring, single use). This module asks the person:

- 2025 protocol versions: an `elicitation/create` request sent while the `tools/call` waits.
- 2026-07-28: an `InputRequiredResult` whose `requestState` is sealed here: the confirmation id, the
  principal, the tool, the argument hash and the expiry, MAC'd with the executor's key (keyed BLAKE2b, the
  key of its argument hashes). The client retries `tools/call` with the user's answer and the state; the
  state is checked (MAC, expiry, principal, tool, arguments) and the confirmation is consumed through
  `executor.approve` / `executor.deny`, so a state works once.

A client that cannot ask its user (no form elicitation) gets an `isError` result saying the action needs
confirmation: the pending call is withdrawn and nothing runs.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

import mcp_types as types

from toolrun.results import ErrorCode, ToolResult
from toolrun.runtime import ToolExecutor

__all__ = [
    "CONFIRM_KEY",
    "INVALID_STATE",
    "Sealer",
    "confirmation_form",
    "decision_of",
    "expired_state",
    "needs_confirmation",
    "reason_of",
]

CONFIRM_KEY = "toolrun_confirm"
"""The key of toolrun's confirmation in `inputRequests` / `inputResponses`."""

_PREFIX = "tr1."
_LABEL = b"toolrun/mcp/request-state/v1\x00"


class Sealer:
    """Seals and opens the `requestState` of a confirmation round with the executor's key."""

    def __init__(self, executor: ToolExecutor, clock: Callable[[], float] = time.time) -> None:
        self._hasher = executor.hasher
        self._clock = clock

    def arguments_hash(self, arguments: Mapping[str, Any] | None) -> str:
        """The keyed hash of the arguments as the client sent them."""
        return self._hasher.raw(dict(arguments) if arguments else {})

    def seal(
        self, *, confirmation_id: str, principal: str, tool: str, arguments_hash: str, ttl: float
    ) -> str:
        claims = {
            "c": confirmation_id,
            "p": principal,
            "t": tool,
            "a": arguments_hash,
            "e": self._clock() + ttl,
        }
        body = base64.urlsafe_b64encode(json.dumps(claims, separators=(",", ":")).encode()).decode()
        return f"{_PREFIX}{body}.{self._hasher.digest(_LABEL + body.encode())}"

    def open(self, token: object) -> dict[str, Any] | None:
        """The claims of a token this server sealed, or None (malformed or tampered)."""
        if not isinstance(token, str) or not token.startswith(_PREFIX) or len(token) > 4096:
            return None
        body, _, tag = token[len(_PREFIX) :].rpartition(".")
        if not body or not hmac.compare_digest(tag, self._hasher.digest(_LABEL + body.encode())):
            return None
        try:
            claims = json.loads(base64.urlsafe_b64decode(body.encode()))
        except (ValueError, binascii.Error):
            return None
        if not isinstance(claims, dict) or not all(isinstance(claims.get(k), str) for k in "cpta"):
            return None
        if not isinstance(claims.get("e"), int | float):
            return None
        return claims

    def expired(self, claims: Mapping[str, Any]) -> bool:
        return not self._clock() < float(claims["e"])


def confirmation_form(summary: str) -> types.ElicitRequestFormParams:
    """The question put to the person: what would run (the tool's preview, from the server's records,
    when it has one), a yes/no field, and an optional reason for a refusal (the model receives it)."""
    return types.ElicitRequestFormParams(
        message=f"Allow this action? {summary}",
        requested_schema={
            "type": "object",
            "properties": {
                "approve": {
                    "type": "boolean",
                    "title": "Approve",
                    "description": "Run this action now.",
                    "default": False,
                },
                "reason": {
                    "type": "string",
                    "title": "Reason",
                    "description": "If you refuse: why (the assistant is told).",
                    "maxLength": 2000,
                },
            },
            "required": ["approve"],
        },
    )


def reason_of(answer: types.ElicitResult | None) -> str | None:
    """The person's reason for refusing, when the form carried one."""
    if answer is None or answer.action != "accept":
        return None
    reason = (answer.content or {}).get("reason")
    return reason.strip()[:2000] if isinstance(reason, str) and reason.strip() else None


def decision_of(answer: types.ElicitResult | None) -> str:
    """`"approve"`, `"decline"`, `"cancel"` or `"invalid"`: only an accepted form whose `approve` is the
    boolean `true` approves; `false` declines; a missing `approve` or any other value (`"no"`, `"true"`,
    `1`) is `"invalid"`, and nothing runs (the same rule as every other door that takes a decision)."""
    if answer is None or answer.action == "cancel":
        return "cancel"
    if answer.action != "accept":
        return "decline"
    approve = (answer.content or {}).get("approve")
    if approve is True:
        return "approve"
    return "decline" if approve is False else "invalid"


INVALID_STATE = (
    "Invalid requestState: it was not issued by this server for this user, tool and arguments (or was "
    "altered); nothing ran. Call the tool again without requestState to ask for a new confirmation."
)
"""The JSON-RPC error (`INVALID_PARAMS`) for a `requestState` this server did not seal for this call."""


def needs_confirmation(call_id: str, tool_name: str) -> ToolResult:
    """The fail-closed answer to a client that cannot ask its user."""
    return ToolResult.error_result(
        ErrorCode.CONFIRMATION_DENIED,
        f"The tool {tool_name!r} needs confirmation by a person, and this MCP client cannot ask its user "
        "(it does not support form elicitation); the action did not run.",
        recover_action="Tell the user this action must be confirmed in a client that can ask them.",
        details={"reason": "confirmation_unsupported"},
        call_id=call_id,
        tool_name=tool_name,
    )


def expired_state(call_id: str, tool_name: str) -> ToolResult:
    return ToolResult.error_result(
        ErrorCode.CONFIRMATION_EXPIRED,
        "The confirmation for this action has expired; the action did not run.",
        recover_action="Call the tool again to ask the user to confirm this action.",
        details={"reason": "expired"},
        call_id=call_id,
        tool_name=tool_name,
    )
