"""The read side of the chat service: pending confirmations, conversations, their messages; and deleting one.

Functions of the database and the confirmation store only (no agent, no runs): `ChatService` exposes them
as its methods.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from toolrun.models._history import clean_text
from toolrun.server import _db, _recovery
from toolrun.server._errors import ServiceError, not_found
from toolrun.server._fixed import Fixed, transaction
from toolrun.server._holder import holder_gone
from toolrun.server._statements import decode_row, load_history
from toolrun.server._users import Principal
from toolrun.server._views import iso_time, message_view, pending_item
from toolrun.store import ConfirmationStore

__all__ = ["delete_conversation", "get_conversation", "list_conversations", "pending", "thread_state"]


async def pending(
    engine: AsyncEngine, confirmations: ConfirmationStore, principal: Principal
) -> list[dict[str, Any]]:
    """The user's pending confirmations (unexpired), oldest first, from the confirmation store."""
    records = await confirmations.list_pending(principal.user_id, now=time.time())
    if not records:
        return []
    rc = _db.run_confirmations
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                sa.select(rc.c.confirmation_id, rc.c.run_id, rc.c.conversation_id).where(
                    rc.c.user_id == principal.user_id, rc.c.confirmation_id.in_([r.id for r in records])
                )
            )
        ).all()
    links = {r[0]: (r[1], r[2]) for r in rows}
    return [
        pending_item(r, run_id=links[r.id][0], conversation_id=links[r.id][1])
        for r in records
        if r.id in links
    ]


async def list_conversations(
    engine: AsyncEngine, principal: Principal, *, limit: int = 50, offset: int = 0
) -> list[dict[str, Any]]:
    c = _db.conversations
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                sa.select(c.c.id, c.c.title, c.c.created_at, c.c.updated_at, c.c.pending_run_id)
                .where(c.c.user_id == principal.user_id)
                .order_by(c.c.updated_at.desc(), c.c.id)
                .limit(limit)
                .offset(offset)
            )
        ).all()
    return [
        {
            "id": r[0],
            "title": r[1],
            "created_at": iso_time(r[2]),
            "updated_at": iso_time(r[3]),
            "awaiting_confirmation": r[4] is not None,
        }
        for r in rows
    ]


# Built once: the AG-UI and AI SDK routes read a thread's conversation on every turn, and building a Core
# statement and its cache key costs more CPU than SQLite takes to run it.
_c, _r = _db.conversations, _db.runs
_CONVERSATION = sa.select(
    _c.c.id,
    _c.c.title,
    _c.c.created_at,
    _c.c.updated_at,
    _c.c.pending_run_id,
    _c.c.lease_until,
    _c.c.lease_holder,
).where(_c.c.id == sa.bindparam("b_cid"), _c.c.user_id == sa.bindparam("b_uid"))
_LAST_RUN = (
    sa.select(_r.c.id, _r.c.status, _r.c.partial)
    .where(_r.c.conversation_id == sa.bindparam("b_cid"), _r.c.user_id == sa.bindparam("b_uid"))
    .order_by(_r.c.created_at.desc())
    .limit(1)
)
_OWNED = sa.select(_c.c.id).where(_c.c.id == sa.bindparam("b_cid"), _c.c.user_id == sa.bindparam("b_uid"))
_m = _db.messages
_USER_MESSAGES = (
    sa.select(_m.c.data)
    .where(_m.c.conversation_id == sa.bindparam("b_cid"), _m.c.role == "user")
    .order_by(_m.c.seq)
)


async def get_conversation(
    engine: AsyncEngine, confirmations: ConfirmationStore, principal: Principal, conversation_id: str
) -> dict[str, Any]:
    ids = {"b_cid": conversation_id, "b_uid": principal.user_id}
    async with engine.connect() as conn:
        row = (await conn.execute(_CONVERSATION, ids)).first()
        if row is None:
            raise not_found("conversation")
        history, _ = await load_history(conn, conversation_id)
        last = (await conn.execute(_LAST_RUN, ids)).first()
    status = None if last is None else last[1]
    if (
        last is not None
        and status == "running"
        and (row[5] is None or row[5] < time.time() or holder_gone(row[6]))
    ):
        # A dead process's run (its lease lapsed, or its process is gone): shown as what it is, its answer
        # so far flagged interrupted, before the next message closes it in the records (`_recovery`).
        status = "interrupted"
        if last[2]:
            seq = history[-1]["seq"] + 1 if history else 0
            history.append(message_view(seq, last[0], _recovery.interrupted_message(last[2])))
    mine = [
        p for p in await pending(engine, confirmations, principal) if p["conversation_id"] == conversation_id
    ]
    return {
        "id": row[0],
        "title": row[1],
        "created_at": iso_time(row[2]),
        "updated_at": iso_time(row[3]),
        "awaiting_confirmation": row[4] is not None,
        "last_run": None if last is None else {"run_id": last[0], "status": status},
        "messages": history,
        "pending": mine,
    }


_rc = _db.run_confirmations
_THREAD_OWNED = Fixed(_OWNED)
_THREAD_USER_MESSAGES = Fixed(_USER_MESSAGES)
_THREAD_HELD = Fixed(
    sa.select(_rc.c.confirmation_id)
    .where(_rc.c.conversation_id == sa.bindparam("b_cid"), _rc.c.user_id == sa.bindparam("b_uid"))
    .limit(1)
)


async def thread_state(
    engine: AsyncEngine, confirmations: ConfirmationStore, principal: Principal, conversation_id: str
) -> dict[str, Any] | None:
    """What a front-end protocol checks a thread against on every request (`routes._threads`): the texts of
    the conversation's user messages, oldest first, as `get_conversation` shows them, and its pending
    confirmations; None when the conversation is not this user's. Reads only those: not the whole history
    with its views, nor the last run.

    Its three reads are fixed statements (`_fixed`: straight on the service's SQLite), and the
    confirmation store is asked only when the conversation holds a call at all (a row in
    `toolrun_run_confirmations`, which a decision deletes): `pending` lists only confirmations that have
    such a row, so with none it has nothing to list, and most turns hold none."""
    ids = {"b_cid": conversation_id, "b_uid": principal.user_id}
    async with transaction(engine) as conn:
        if not await _THREAD_OWNED.rows(conn, ids):
            return None
        rows = await _THREAD_USER_MESSAGES.rows(conn, {"b_cid": conversation_id})
        holds = bool(await _THREAD_HELD.rows(conn, ids))
    texts = [clean_text(decode_row(row[0]).get("content") or "") for row in rows]
    mine = []
    if holds:
        mine = [
            p
            for p in await pending(engine, confirmations, principal)
            if p["conversation_id"] == conversation_id
        ]
    return {"user_texts": texts, "pending": mine}


async def rename_conversation(
    engine: AsyncEngine, principal: Principal, conversation_id: str, title: str
) -> dict[str, Any]:
    """Set the title of the user's conversation (404 for another's or an unknown one); it as listed."""
    c = _db.conversations
    async with engine.begin() as conn:
        done = await conn.execute(
            c.update().where(c.c.id == conversation_id, c.c.user_id == principal.user_id).values(title=title)
        )
        if done.rowcount != 1:
            raise not_found("conversation")
        row = (
            await conn.execute(
                sa.select(c.c.id, c.c.title, c.c.created_at, c.c.updated_at, c.c.pending_run_id).where(
                    c.c.id == conversation_id
                )
            )
        ).one()
    return {
        "id": row[0],
        "title": row[1],
        "created_at": iso_time(row[2]),
        "updated_at": iso_time(row[3]),
        "awaiting_confirmation": row[4] is not None,
    }


async def delete_conversation(
    engine: AsyncEngine, confirmations: ConfirmationStore, principal: Principal, conversation_id: str
) -> None:
    """Delete a conversation with its messages, runs and pending confirmations (409 while a run works).

    The conversation's row goes first, in one statement that also checks no run holds its lease: on
    PostgreSQL it waits for a claim in flight and sees its result (a decision that claimed first → 409;
    one that comes after → it finds nothing, 404), and a run that lost its lease finds no row to finish
    in. So after a 204 nothing of the conversation runs or is written.
    """
    user = principal.user_id
    c = _db.conversations
    now = time.time()
    async with engine.begin() as conn:
        gone = await conn.execute(
            c.delete().where(
                c.c.id == conversation_id,
                c.c.user_id == user,
                sa.or_(c.c.lease_until.is_(None), c.c.lease_until < now),
            )
        )
        if gone.rowcount != 1:
            found = (
                await conn.execute(
                    sa.select(c.c.lease_owner, c.c.lease_holder).where(
                        c.c.id == conversation_id, c.c.user_id == user
                    )
                )
            ).first()
            if found is None:
                raise not_found("conversation")
            if not holder_gone(found[1]):
                raise ServiceError(
                    409, "conversation_busy", "A run is working on this conversation; try again."
                )
            # Its run's process is gone (a restart): deleted at once, as the lease was read.
            left = await conn.execute(
                c.delete().where(
                    c.c.id == conversation_id, c.c.lease_owner == found[0], c.c.lease_holder == found[1]
                )
            )
            if left.rowcount != 1:
                raise ServiceError(
                    409, "conversation_busy", "A run is working on this conversation; try again."
                )
        rc = _db.run_confirmations
        ids = [
            r[0]
            for r in await conn.execute(
                sa.select(rc.c.confirmation_id).where(
                    rc.c.conversation_id == conversation_id, rc.c.user_id == user
                )
            )
        ]
        await conn.execute(rc.delete().where(rc.c.conversation_id == conversation_id, rc.c.user_id == user))
        await conn.execute(
            _db.messages.delete().where(
                _db.messages.c.conversation_id == conversation_id, _db.messages.c.user_id == user
            )
        )
        await conn.execute(
            _db.runs.delete().where(_db.runs.c.conversation_id == conversation_id, _db.runs.c.user_id == user)
        )
    for cid in ids:  # the approvals can no longer resume anything: withdraw them
        with contextlib.suppress(Exception):
            await confirmations.consume(cid, user_id=user)
