"""What the service writes when it closes a run that a crash (or an expiry) cut: only what is known.

- A run left `running` by a dead process (its lease lapsed: `_leases`) becomes `interrupted` when its
  conversation is next claimed, and the answer it had so far (saved by its heartbeat) is kept as an
  assistant message flagged `interrupted` (the API shows the flag; the page marks the message).
- A paused run whose calls can no longer be decided is closed with one result per held call, and each
  says what the records show: a confirmation still pending (expired) → it did not run (the executor
  consumes a confirmation before it runs the call, so an unconsumed one never ran); consumed → the audit
  trail is asked: it ran and ended ok / with an error, or it was declined; with no audit record, its
  result is unknown ("may or may not have taken effect"). Never "did not run" for an approved call.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from toolrun.agent import AgentRun
from toolrun.models import AssistantMessage, ToolResultMessage
from toolrun.server import _db
from toolrun.server._fixed import Conn, Fixed
from toolrun.store import ConfirmationStore
from toolrun.tools import ToolCall

__all__ = [
    "INTERRUPTED",
    "confirmation_state",
    "held_call_result",
    "held_calls",
    "interrupt_stale_runs",
    "interrupted_message",
    "next_seq",
]

INTERRUPTED = "The server stopped while this run was working."
"""The error of a run a crash cut."""

EXPIRED = "Error CONFIRMATION_EXPIRED: the user did not decide in time; the action did not run."

_r, _m, _a = _db.runs, _db.messages, _db.audit
# Run on every claim of a conversation: built once (building a statement costs more than SQLite runs it).
_STALE = Fixed(
    sa.select(_r.c.id, _r.c.partial).where(
        _r.c.conversation_id == sa.bindparam("b_cid"),
        _r.c.status == "running",
        _r.c.id != sa.bindparam("b_owner"),
    )
)


_LAST_SEQ = Fixed(sa.select(sa.func.max(_m.c.seq)).where(_m.c.conversation_id == sa.bindparam("b_cid")))
_INTERRUPT = Fixed(
    _r.update()
    .where(_r.c.id == sa.bindparam("b_rid"), _r.c.status == "running")
    .values(status="interrupted", error=INTERRUPTED, partial=None, updated_at=sa.bindparam("b_now"))
)
_INSERT_MESSAGES = Fixed(
    _m.insert(), columns=("conversation_id", "user_id", "run_id", "seq", "role", "data", "created_at")
)


async def next_seq(conn: Conn, conversation_id: str) -> int:
    """The sequence number the conversation's next message gets."""
    rows = await _LAST_SEQ.rows(conn, {"b_cid": conversation_id})
    last = rows[0][0] if rows else None
    return 0 if last is None else int(last) + 1


def interrupted_message(text: str) -> dict[str, Any]:
    """The stored form of a partial answer a crash cut (`interrupted: true` beside the message)."""
    return {**AssistantMessage(content=text).to_dict(), "interrupted": True}


async def interrupt_stale_runs(conn: Conn, conversation_id: str, user: str, owner: str, now: float) -> None:
    """Close the runs a dead process left `running` in this conversation (whose lease `owner` now holds)."""
    stale = await _STALE.rows(conn, {"b_cid": conversation_id, "b_owner": owner})
    if not stale:
        return
    await _INTERRUPT.executemany(conn, [{"b_rid": row[0], "b_now": now} for row in stale])
    kept = [(row[0], row[1]) for row in stale if row[1]]
    if kept:
        seq = await next_seq(conn, conversation_id)
        await _INSERT_MESSAGES.executemany(
            conn,
            [
                {
                    "conversation_id": conversation_id,
                    "user_id": user,
                    "run_id": run_id,
                    "seq": seq + i,
                    "role": "assistant",
                    "data": json.dumps(interrupted_message(text)),
                    "created_at": now,
                }
                for i, (run_id, text) in enumerate(kept)
            ],
        )


async def _audited(
    conn: AsyncConnection, confirmation_id: str, user: str
) -> tuple[str, str, str | None] | None:
    row = (
        await conn.execute(
            sa.select(_a.c.action, _a.c.outcome, _a.c.code)
            .where(_a.c.confirmation_id == confirmation_id, _a.c.user_id == user, _a.c.action != "execute")
            .order_by(_a.c.timestamp.desc())
            .limit(1)
        )
    ).first()
    return None if row is None else (str(row[0]), str(row[1]), row[2])


async def confirmation_state(confirmations: ConfirmationStore, confirmation_id: str, now: float) -> str:
    """`pending` (can still be decided), `expired` (never consumed: its call never ran), `consumed` (taken
    by a run, before its call ran) or `unknown` (no record). Ask before opening a transaction: the store
    has connections of its own, and SQLite's pool holds one."""
    record = await confirmations.get(confirmation_id)
    if record is not None:
        return "expired" if record.expired(now) else "pending"
    consumed_at = getattr(confirmations, "consumed_at", None)
    if consumed_at is not None and await consumed_at(confirmation_id) is not None:
        return "consumed"
    return "unknown"


async def held_call_result(
    conn: AsyncConnection, call: ToolCall, confirmation_id: str | None, state: str, user: str
) -> ToolResultMessage:
    """The result of a call that was held for a decision, for a run being closed: what the records show
    (`state` from `confirmation_state`)."""

    def message(content: str, *, error: bool = True) -> ToolResultMessage:
        return ToolResultMessage(call_id=call.id, tool_name=call.name, content=content, is_error=error)

    if confirmation_id is None or state in ("expired", "pending"):
        return message(EXPIRED)  # never consumed: the executor never started it
    if state != "consumed":
        return message(
            "Error RESULT_UNKNOWN: the server has no record of this action's confirmation any more, so "
            "whether it ran is unknown: it may or may not have taken effect. Check before you try it again."
        )
    audited = await _audited(conn, confirmation_id, user)
    if audited is not None and audited[0] == "deny":
        return message(f"Error CONFIRMATION_DENIED: the user declined to run {call.name!r}; it did not run.")
    if audited is not None and audited[1] == "ok":
        return message(
            "The user approved this action and it ran to the end (the audit trail records it), but the "
            "server stopped before its result was saved: the result is not available.",
            error=False,
        )
    if audited is not None:
        code = audited[2] or "EXECUTION_FAILED"
        return message(
            f"Error {code}: the user approved this action and it ran, but it ended with {code} "
            f"({audited[1]}); the server stopped before its result was saved."
        )
    return message(
        "Error RESULT_UNKNOWN: the user approved this action and it started, but the server stopped before "
        "its result was saved: it may or may not have taken effect. Check before you try it again."
    )


def held_calls(run: AgentRun) -> list[tuple[ToolCall, Any]]:
    """Each call of the run's last batch with its result (None for a call still held for a decision)."""
    results = {r.call.id: r.result for r in run.tool_calls if r.step == run.steps}
    out: list[tuple[ToolCall, Any]] = []
    for call in run.batch:
        result = results.get(call.id)
        out.append((call, None if result is None or result.status == "confirmation_required" else result))
    return out
