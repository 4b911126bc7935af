"""The decision grammar: what a person's answer to a held call is, the one check of it, and its JSON form.

A decision is exactly `True` or `Approve(...)` (approve) or `False` or `Deny(...)` (deny). Every door that
takes one — `Agent.resume`, `DurableAgent.decide`, the service's wire protocols — reads it with
`check_decision`, so a loose value (`"no"`, `1`, `None`) is refused the same way everywhere, before
anything runs. `encode_decision` / `decode_decision` carry a decision as JSON (a workflow's message).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from toolrun.exceptions import ToolrunError

__all__ = [
    "Approve",
    "Decision",
    "Deny",
    "InvalidDecisionError",
    "check_decision",
    "check_decisions",
    "decode_decision",
    "encode_decision",
]


@dataclass(frozen=True, kw_only=True)
class Approve:
    """A decision for `Agent.resume`: approve, optionally with the person's own arguments.

    With `arguments`, the edited call is validated (an invalid edit raises `ValueError` before anything
    of the resume runs), previewed again, bound to the new arguments and run once; the model is told what
    the person changed. `True` in `approvals` means `Approve()`.
    """

    arguments: Mapping[str, Any] | None = None
    """The arguments to run with instead of the model's (all of them, as JSON data); None: as held."""


@dataclass(frozen=True, kw_only=True)
class Deny:
    """A decision for `Agent.resume`: refuse, optionally saying why; the model receives the reason.
    `False` in `approvals` means `Deny()`."""

    reason: str | None = None
    """The person's own words, for the model (never logged)."""


Decision: TypeAlias = bool | Approve | Deny
"""A person's answer to a held call: `True`/`Approve(...)` approves, `False`/`Deny(...)` refuses."""


class InvalidDecisionError(ToolrunError, ValueError):
    """A decision that is not `True`/`Approve(...)` (approve) or `False`/`Deny(...)` (deny).

    Anything else — `"no"`, `"false"`, `1`, `None`, `{"approve": False}`, `("deny", "why")` — is refused
    before anything runs: a loose reading would approve on any truthy value.

    Attributes:
        confirmation_id: The id whose decision was refused.
    """

    def __init__(self, confirmation_id: str, value: Any, problem: str | None = None) -> None:
        if problem is None:
            shown = repr(value)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            problem = (
                "must be True (approve) or False (deny) (or Approve(...) / Deny(...)), "
                f"not {type(value).__name__} {shown}"
            )
        super().__init__(f"The decision for confirmation {confirmation_id!r} {problem}. Nothing was run.")
        self.confirmation_id = confirmation_id


def check_decision(confirmation_id: Any, value: Any) -> Approve | Deny:
    """The decision `value` as `Approve` or `Deny` (`True` is `Approve()`, `False` is `Deny()`).

    Raises:
        InvalidDecisionError: `value` is anything else (naming `confirmation_id`).
    """
    if value is True:
        return Approve()
    if value is False:
        return Deny()
    if isinstance(value, Approve | Deny):
        return value
    raise InvalidDecisionError(str(confirmation_id), value)


def check_decisions(approvals: Mapping[str, Any]) -> None:
    """`check_decision` for every value of `approvals` (confirmation id → decision).

    Raises:
        TypeError: `approvals` is not a mapping.
        InvalidDecisionError: a value is not a decision.
    """
    if not isinstance(approvals, Mapping):
        raise TypeError(f"approvals must be a mapping of confirmation id to a decision, not {approvals!r}.")
    for confirmation_id, value in approvals.items():
        check_decision(confirmation_id, value)


def encode_decision(confirmation_id: str, value: Any) -> bool | dict[str, Any]:
    """A decision as JSON: `True`/`Approve()` and `False`/`Deny()` as booleans, `Approve(arguments=...)` as
    `{"approve": true, "arguments": {...}}`, `Deny(reason=...)` as `{"approve": false, "reason": "..."}`.

    Raises:
        InvalidDecisionError: `value` is not a decision, its edited arguments are not a JSON object, or its
            reason is not text (nothing is sent).
    """
    decision = check_decision(confirmation_id, value)
    if isinstance(decision, Approve):
        if decision.arguments is None:
            return True
        if not isinstance(decision.arguments, Mapping):
            raise InvalidDecisionError(
                confirmation_id, value, "has edited arguments that are not a JSON object"
            )
        arguments = dict(decision.arguments)
        try:
            json.dumps(arguments)
        except (TypeError, ValueError):
            raise InvalidDecisionError(
                confirmation_id, value, "has edited arguments that are not JSON data"
            ) from None
        return {"approve": True, "arguments": arguments}
    if decision.reason is None:
        return False
    if not isinstance(decision.reason, str):
        raise InvalidDecisionError(confirmation_id, value, "has a reason that is not text")
    return {"approve": False, "reason": decision.reason}


def decode_decision(value: Any) -> Decision | None:
    """A decision as `encode_decision` wrote it; None when `value` is not one (nothing of it may run)."""
    if value is True or value is False:
        return bool(value)
    if not isinstance(value, Mapping):
        return None
    approve = value.get("approve")
    if (
        approve is True
        and isinstance(value.get("arguments"), Mapping)
        and set(value) == {"approve", "arguments"}
    ):
        return Approve(arguments=dict(value["arguments"]))
    if approve is False and isinstance(value.get("reason"), str) and set(value) == {"approve", "reason"}:
        return Deny(reason=value["reason"])
    return None
