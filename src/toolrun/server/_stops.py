"""Stopping a working run: the request, recorded on the run's row, and what a stopped run leaves behind.

`POST /api/v1/conversations/{id}/stop` may reach any process of a deployment, while the run works in
one of them. So the request is written on the run's row (`toolrun_runs.stop_requested_at`,
`request_stop`); the process that runs it stops it at once when the run is its own, and otherwise sees
the request at its next lease heartbeat (`_leases`, `STOP_REQUESTED`).

A stopped run ends as the person left it, and its history stays valid for every provider: `Trace`
follows the run's events (text by model step, calls started and finished) and, on a stop, gives the
messages to store: each model step's text with its calls, each call's result — the real one when it
finished, else an error saying the person stopped it and that it may or may not have taken effect (the
executor cancelled it and recorded it `cancelled`) — and the answer so far, flagged `stopped`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from toolrun.models import AssistantMessage, ToolResultMessage
from toolrun.results import ToolResult
from toolrun.server import _db
from toolrun.server._errors import ServiceError, not_found
from toolrun.tools import ToolCall

__all__ = ["STOPPED_CALL", "STOP_REQUESTED", "Trace", "request_stop", "stopped_message"]

STOPPED_CALL = (
    "Error STOPPED: the user stopped the run while this call was working; it was cancelled and may or "
    "may not have taken effect."
)
"""What the model reads for a call the stop cancelled."""

_NOTHING = "Nothing is running in this conversation (its last answer is finished, or waits for a decision)."

_c, _r = _db.conversations, _db.runs
_LEASE = sa.select(_c.c.lease_owner, _c.c.lease_until).where(
    _c.c.id == sa.bindparam("b_cid"), _c.c.user_id == sa.bindparam("b_uid")
)
_MARK = (
    _r.update()
    .where(
        _r.c.id == sa.bindparam("b_rid"),
        _r.c.user_id == sa.bindparam("b_uid"),
        _r.c.status == "running",
    )
    .values(stop_requested_at=sa.bindparam("b_now"))
)
STOP_REQUESTED = sa.select(_r.c.id).where(
    _r.c.id.in_(sa.bindparam("b_ids", expanding=True)), _r.c.stop_requested_at.is_not(None)
)
"""Which of the given runs were asked to stop (the heartbeat's question)."""


async def request_stop(engine: AsyncEngine, user_id: str, conversation_id: str) -> str:
    """Record a stop for the run working on the user's conversation; its run id.

    Raises:
        ServiceError: 404 for an unknown (or another user's) conversation; 409 `not_running` when no run
            works on it (finished, paused for a decision, or left by a dead process).
    """
    now = time.time()
    async with engine.begin() as conn:
        row = (await conn.execute(_LEASE, {"b_cid": conversation_id, "b_uid": user_id})).first()
        if row is None:
            raise not_found("conversation")
        owner, until = row
        if owner is None or until is None or until < now:
            raise ServiceError(409, "not_running", _NOTHING)
        marked = await conn.execute(_MARK, {"b_rid": owner, "b_uid": user_id, "b_now": now})
        if marked.rowcount != 1:
            raise ServiceError(409, "not_running", _NOTHING)
    return str(owner)


def stopped_message(text: str) -> dict[str, Any]:
    """The stored form of the answer a stop cut (`stopped: true` beside the message)."""
    return {**AssistantMessage(content=text).to_dict(), "stopped": True}


@dataclass
class _Step:
    text: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    results: dict[str, ToolResult] = field(default_factory=dict)


@dataclass
class Trace:
    """A run's events as far as they went (see the module docstring)."""

    steps: dict[int, _Step] = field(default_factory=dict)
    held: list[ToolResult] = field(default_factory=list)
    """Results of calls held for a decision before this run (a resumed run's first results)."""

    def _step(self, step: int) -> _Step:
        return self.steps.setdefault(step, _Step())

    def text(self, step: int, text: str) -> None:
        self._step(step).text.append(text)

    def started(self, step: int, call: ToolCall) -> None:
        self._step(step).calls.append(call)

    def finished(self, step: int, call: ToolCall, result: ToolResult) -> None:
        known = self.steps.get(step)
        if known is not None and any(c.id == call.id for c in known.calls):
            known.results[call.id] = result
        else:
            self.held.append(result)

    def unfinished(self) -> list[ToolCall]:
        """The calls started and not finished (those the stop cancels)."""
        return [c for s in self.steps.values() for c in s.calls if c.id not in s.results]

    def messages(self) -> list[dict[str, Any]]:
        """The messages a stopped run stores (each as `Message.to_dict()`), in order."""
        out: list[dict[str, Any]] = [ToolResultMessage.from_result(r).to_dict() for r in self.held]
        for _, step in sorted(self.steps.items()):
            text = "".join(step.text)
            if not step.calls:
                if text.strip():
                    out.append(stopped_message(text))
                continue
            out.append(AssistantMessage(content=text, tool_calls=list(step.calls)).to_dict())
            for call in step.calls:
                result = step.results.get(call.id)
                if result is not None:
                    out.append(ToolResultMessage.from_result(result).to_dict())
                else:
                    out.append(
                        ToolResultMessage(
                            call_id=call.id, tool_name=call.name, content=STOPPED_CALL, is_error=True
                        ).to_dict()
                    )
        return out

    def output(self) -> str | None:
        """The text of the last model step, when it made no call (the answer the stop cut)."""
        if not self.steps:
            return None
        last = self.steps[max(self.steps)]
        return "".join(last.text) if not last.calls and last.text else None
