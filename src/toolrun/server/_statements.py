"""The conversation-side SQL of a turn: claiming a conversation's lease, releasing it, loading its history.

The statements every turn runs are built once at import: building a Core statement and its cache key costs
more CPU than SQLite takes to run it. Run driving (`_runs`), decisions (`_decisions`) and the read side
(`_reads`) use these; nothing here knows the agent.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from toolrun.models import Message, history_problems
from toolrun.models._history import repair_history
from toolrun.models._messages import message_from_dict
from toolrun.server import _db, _recovery
from toolrun.server._errors import ServiceError, not_found
from toolrun.server._fixed import Conn, Fixed
from toolrun.server._holder import holder_gone, this_process
from toolrun.server._views import message_view

__all__ = [
    "FINISH_CONVERSATION",
    "FINISH_RUN",
    "INSERT_CONVERSATION",
    "INSERT_MESSAGES",
    "INSERT_RUN",
    "LeaseLost",
    "Pending",
    "claim",
    "decode_row",
    "encode_row",
    "load_history",
    "release",
]

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.decode


def encode_row(data: Any) -> str:
    """A message's JSON for its row: msgspec (≈5× the stdlib's speed, UTF-8 as is); the stdlib for what
    msgspec refuses (a lone surrogate: escaped, so the row still reads) — same data either way."""
    try:
        return _encode(data).decode()
    except (UnicodeEncodeError, TypeError, ValueError, OverflowError):
        return json.dumps(data)


def decode_row(text: str | bytes) -> Any:
    """A row's JSON: msgspec, or the stdlib for what msgspec refuses (an escaped lone surrogate, which older
    rows and `encode_row`'s fallback hold)."""
    try:
        return _decode(text)
    except msgspec.DecodeError:
        return json.loads(text)


_bp = sa.bindparam
_c, _r, _m = _db.conversations, _db.runs, _db.messages
_CLAIM_WHERE = (_c.c.id == _bp("b_cid"), _c.c.user_id == _bp("b_uid"))
_TAKE: dict[str, Any] = {
    "lease_until": _bp("b_lease"),
    "lease_owner": _bp("b_owner"),
    "lease_holder": _bp("b_holder"),
}
# A claim first takes a released lease (`lease_until IS NULL`: the last run ended and wrote its end, or it
# paused), and only if there is none, an expired one: only then can a run a dead process left `running`
# be there to close (`_recovery.interrupt_stale_runs`), so a continuing conversation skips that query.
_CLAIM_FREE = Fixed(
    _c.update().where(*_CLAIM_WHERE, _c.c.pending_run_id.is_(None), _c.c.lease_until.is_(None)).values(_TAKE)
)
_CLAIM_FREE_EXPIRED = Fixed(
    _c.update()
    .where(*_CLAIM_WHERE, _c.c.pending_run_id.is_(None), _c.c.lease_until < _bp("b_now"))
    .values(_TAKE)
)
_CLAIM_PAUSED = Fixed(
    _c.update()
    .where(*_CLAIM_WHERE, _c.c.pending_run_id == _bp("b_pending"), _c.c.lease_until.is_(None))
    .values(_TAKE)
)
_CLAIM_PAUSED_EXPIRED = Fixed(
    _c.update()
    .where(*_CLAIM_WHERE, _c.c.pending_run_id == _bp("b_pending"), _c.c.lease_until < _bp("b_now"))
    .values(_TAKE)
)
# A lease a dead process of this host left (`_holder`): taken only as it was read, so of two claims that
# both found it dead one wins.
_CLAIM_LEFT = Fixed(
    _c.update()
    .where(*_CLAIM_WHERE, _c.c.lease_owner == _bp("b_left"), _c.c.lease_holder == _bp("b_left_holder"))
    .values(_TAKE)
)
_CLAIM_STATE = Fixed(
    sa.select(_c.c.pending_run_id, _c.c.lease_until, _c.c.lease_owner, _c.c.lease_holder).where(*_CLAIM_WHERE)
)
_HISTORY = Fixed(
    sa.select(_m.c.seq, _m.c.run_id, _m.c.data).where(_m.c.conversation_id == _bp("b_cid")).order_by(_m.c.seq)
)
INSERT_CONVERSATION = Fixed(
    _c.insert(),
    columns=(
        "id",
        "user_id",
        "title",
        "created_at",
        "updated_at",
        "lease_until",
        "lease_owner",
        "lease_holder",
    ),
)
INSERT_MESSAGES = Fixed(
    _m.insert(), columns=("conversation_id", "user_id", "run_id", "seq", "role", "data", "created_at")
)
INSERT_RUN = Fixed(
    _r.insert(), columns=("id", "user_id", "conversation_id", "status", "model", "created_at", "updated_at")
)
FINISH_RUN = Fixed(
    _r.update()
    .where(_r.c.id == _bp("b_rid"))
    .values(
        status=_bp("b_status"),
        state=_bp("b_state"),
        error=_bp("b_error"),
        updated_at=_bp("b_now"),
        partial=None,
    )
)
# Only while the run still holds its lease: a run taken over (or whose conversation was deleted) writes
# nothing. First statement of `RunDriver.finish`'s transaction: on PostgreSQL it locks the row until the
# commit.
FINISH_CONVERSATION = Fixed(
    _c.update()
    .where(*_CLAIM_WHERE, _c.c.lease_owner == _bp("b_owner"))
    .values(pending_run_id=_bp("b_pending"), updated_at=_bp("b_now"), lease_until=None, lease_owner=None)
)


class LeaseLost(Exception):
    """Internal: the run no longer holds its conversation's lease."""


class Pending(Exception):
    """Internal: the conversation has a paused run (its id in `run_id`)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id


async def claim(
    conn: Conn,
    user: str,
    conversation_id: str,
    run_id: str,
    lease: float,
    now: float,
    *,
    pending_run_id: str | None,
) -> None:
    params = {
        "b_cid": conversation_id,
        "b_uid": user,
        "b_now": now,
        "b_lease": lease,
        "b_owner": run_id,
        "b_holder": this_process(),
    }
    if pending_run_id is None:
        released, expired = _CLAIM_FREE, _CLAIM_FREE_EXPIRED
    else:
        released, expired = _CLAIM_PAUSED, _CLAIM_PAUSED_EXPIRED
        params["b_pending"] = pending_run_id
    if await released.execute(conn, params) == 1:
        return  # a released lease: every run before this one wrote its end (see `_CLAIM_FREE`)
    if await expired.execute(conn, params) == 1:
        # A run a killed process left behind can no longer finish: say so, and keep what it had said.
        await _recovery.interrupt_stale_runs(conn, conversation_id, user, run_id, now)
        return
    rows = await _CLAIM_STATE.rows(conn, params)
    if not rows:
        raise not_found("conversation")
    row = rows[0]
    left = row[1] is not None and row[1] >= now and row[0] == pending_run_id and holder_gone(row[3])
    # Held by a process of this host that died (a restart): taken at once, not a lease later.
    if left and await _CLAIM_LEFT.execute(conn, {**params, "b_left": row[2], "b_left_holder": row[3]}) == 1:
        await _recovery.interrupt_stale_runs(conn, conversation_id, user, run_id, now)
        return
    if row[1] is not None and row[1] >= now:
        raise ServiceError(
            409,
            "conversation_busy",
            "A run is already working on this conversation; wait for it to finish.",
        )
    if pending_run_id is None:
        raise Pending(row[0])
    raise not_found("pending confirmation")


async def release(engine: AsyncEngine, conversation_id: str, run_id: str) -> None:
    """Give up the lease a run holds (a decision that turned out to have nothing to decide)."""
    c = _db.conversations
    async with engine.begin() as conn:
        await conn.execute(
            c.update()
            .where(c.c.id == conversation_id, c.c.lease_owner == run_id)
            .values(lease_until=None, lease_owner=None)
        )


async def load_history(conn: Conn, conversation_id: str) -> tuple[list[dict[str, Any]], list[Message]]:
    """The conversation's stored messages: as the API shows them, and as the model gets them."""
    rows = await _HISTORY.rows(conn, {"b_cid": conversation_id})
    views: list[dict[str, Any]] = []
    stored: list[Message] = []
    for seq, run_id, data in rows:
        d = decode_row(data)
        views.append(message_view(seq, run_id, d))
        stored.append(message_from_dict(d))
    if history_problems(stored, open_tail=True):
        # Written before the model boundary kept every history valid: what the model sees is repaired
        # (the rows stay as they were; see toolrun.models._history.repair_history).
        stored = repair_history(stored)
    return views, stored
