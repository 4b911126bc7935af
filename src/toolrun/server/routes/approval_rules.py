"""`GET|POST /api/v1/approval-rules` and `DELETE /api/v1/approval-rules/{id}`: the user's standing approvals.

A rule says "always allow this for me" (or "always deny") for one tool, optionally only for some argument
values, until it expires. Calls it decides are not held; each is audited with the rule's id. Without rules
the default stays: every call that needs confirmation is asked.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any, Literal

from fastapi import APIRouter, Path, Response
from pydantic import BaseModel, ConfigDict, Field

from toolrun._unicode import clean_json, clean_text
from toolrun.server._errors import PROBLEM_RESPONSES, ServiceError, not_found
from toolrun.server._rules import RuleRefused, check_rule
from toolrun.server._views import iso_time
from toolrun.server.deps import CurrentUser, State
from toolrun.server.schemas import ClientArguments, ClientText
from toolrun.store import ApprovalRule

router = APIRouter(prefix="/api/v1", tags=["approval rules"], responses=PROBLEM_RESPONSES)

MAX_DAYS = 366
"""The longest a rule may last: a standing approval is re-confirmed at least once a year."""


class RuleRequest(BaseModel):
    """A new standing approval of the signed-in user."""

    model_config = ConfigDict(extra="forbid")

    tool: str = Field(min_length=1, max_length=128, description="The tool's registered name.")
    decision: Literal["allow", "deny"] = Field(default="allow", description="Run without asking, or refuse.")
    arguments: ClientArguments | None = Field(
        default=None,
        description="Only calls whose arguments equal these values (each a named argument of the tool).",
    )
    expires_at: datetime = Field(description=f"ISO 8601; in the future, at most {MAX_DAYS} days away.")
    note: ClientText | None = Field(
        default=None, max_length=200, description="What the rule is for, for lists."
    )


class RuleView(BaseModel):
    id: str
    tool: str
    decision: Literal["allow", "deny"]
    arguments: dict[str, Any] | None
    expires_at: str | None = Field(description="ISO 8601 UTC.")
    created_at: str = Field(description="ISO 8601 UTC.")
    expired: bool
    note: str | None


class RuleList(BaseModel):
    rules: list[RuleView]


def _view(rule: ApprovalRule, now: float) -> dict[str, Any]:
    # Cleaned for the answer: a rule added through the library (or stored before this door refused such
    # text) may hold a lone surrogate; it still lists, so it can be removed.
    return {
        "id": rule.id,
        "tool": clean_text(rule.tool),
        "decision": rule.decision,
        "arguments": clean_json(rule.arguments) if rule.arguments is not None else None,
        "expires_at": iso_time(rule.expires_at) if rule.expires_at is not None else None,
        "created_at": iso_time(rule.created_at),
        "expired": rule.expired(now),
        "note": clean_text(rule.note) if rule.note is not None else None,
    }


@router.get("/approval-rules", response_model=RuleList)
async def list_rules(user: CurrentUser, state: State) -> Any:
    """The user's standing approvals, oldest first (expired ones too, marked)."""
    now = time.time()
    rules = await state.executor.approval_rules.list_rules(user.user_id)
    return {"rules": [_view(r, now) for r in rules]}


@router.post("/approval-rules", response_model=RuleView, status_code=201)
async def add_rule(body: RuleRequest, user: CurrentUser, state: State) -> Any:
    """Add a standing approval for one of the tools that ask for confirmation (404 for a tool the user
    cannot call or that does not exist, as for any other record that is not theirs; 422 for a tool that
    never asks, an argument the tool does not take, or an expiry in the past or too far)."""
    try:
        tool = check_rule(state.registry, body.tool, user.roles, body.arguments)
    except RuleRefused as refused:
        raise ServiceError(refused.status, refused.code, refused.message) from None
    expires = body.expires_at if body.expires_at.tzinfo else body.expires_at.replace(tzinfo=UTC)
    now = time.time()
    seconds = expires.timestamp()
    if not now < seconds <= now + MAX_DAYS * 86400:
        raise ServiceError(
            422, "invalid_expiry", f"expires_at must be in the future and at most {MAX_DAYS} days away."
        )
    try:
        rule = await state.executor.approval_rules.add(
            ApprovalRule(
                user_id=user.user_id,
                tool=tool.name,
                decision=body.decision,
                arguments=body.arguments,
                expires_at=seconds,
                note=body.note,
            )
        )
    except ValueError as exc:
        raise ServiceError(422, "too_many_rules", str(exc)) from None
    return _view(rule, now)


@router.delete("/approval-rules/{rule_id}", status_code=204)
async def remove_rule(
    user: CurrentUser, state: State, rule_id: str = Path(min_length=1, max_length=64)
) -> Response:
    """Revoke one of the user's standing approvals (404 when there is no such rule of theirs)."""
    if not await state.executor.approval_rules.remove(rule_id, user_id=user.user_id):
        raise not_found("approval rule")
    return Response(status_code=204)
