"""Decisions on paused runs: approve or deny a pending confirmation, preview an edit, and close a paused run
whose confirmations can no longer be decided.

A decision loads its run from `toolrun_runs.state` (the server's own record), never from the request; the
executor's confirmation store consumes the approval atomically, so an approved call runs once even when two
processes race for it (the loser of the lease gets 409; a stale decision gets 404).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from toolrun.agent import AgentRun
from toolrun.approvals import Approve, Deny
from toolrun.models import ToolResultMessage
from toolrun.results import ErrorCode
from toolrun.server import _db, _recovery
from toolrun.server._errors import ServiceError, not_found
from toolrun.server._handle import RunHandle
from toolrun.server._runs import Job, RunDriver
from toolrun.server._statements import claim, load_history, release
from toolrun.server._users import Principal

__all__ = ["abandon_if_expired", "decision_run", "preview_edit"]

_r = _db.runs


async def decision_run(
    runs: RunDriver,
    principal: Principal,
    confirmation_id: str,
    *,
    approve: bool,
    arguments: Mapping[str, Any] | None,
    reason: str | None,
) -> RunHandle:
    """Claim the paused run of `confirmation_id` and continue it with the decision (see
    `ChatService.start_decision`)."""
    user = principal.user_id
    now = time.time()
    lease = runs.leases.until(now)
    rc = _db.run_confirmations
    async with runs.engine.begin() as conn:
        row = (
            await conn.execute(
                sa.select(rc.c.run_id, rc.c.conversation_id).where(
                    rc.c.confirmation_id == confirmation_id, rc.c.user_id == user
                )
            )
        ).first()
        if row is None:
            raise not_found("pending confirmation")
        run_id, conversation_id = row[0], row[1]
        await claim(conn, user, conversation_id, run_id, lease, now, pending_run_id=run_id)
        state_row = (
            await conn.execute(
                sa.select(_db.runs.c.state).where(
                    _db.runs.c.id == run_id,
                    _db.runs.c.user_id == user,
                    _db.runs.c.status == "awaiting_confirmation",
                )
            )
        ).first()
        if state_row is None or state_row[0] is None:
            raise not_found("pending confirmation")
        history, _stored = await load_history(conn, conversation_id)
    saved = json.loads(state_row[0])
    run = AgentRun.from_json(saved["run"])
    if confirmation_id not in {p.confirmation_id for p in run.pending}:
        await release(runs.engine, conversation_id, run_id)
        raise not_found("pending confirmation")
    job = Job(
        principal=principal,
        run_id=run_id,
        conversation_id=conversation_id,
        history=history,
        persisted=int(saved["persisted"]),
        next_seq=len(history),
        resumed=True,
        started=now,
    )
    ctx = runs.context(principal, conversation_id, run_id)
    decision: Approve | Deny = Approve(arguments=arguments) if approve else Deny(reason=reason)
    if approve and arguments is not None:
        checked = await runs.agent.executor.preview_edit(
            confirmation_id, ctx.evolve(run_id=run.run_id), arguments
        )
        if checked.error is not None:
            await release(runs.engine, conversation_id, run_id)
            if checked.error.code == ErrorCode.INVALID_ARGUMENTS:
                raise ServiceError(422, "invalid_arguments", checked.error.render())
            raise not_found("pending confirmation")
    events = runs.agent.stream_resume(run, {confirmation_id: decision}, context=ctx)
    return runs.launch(job, events, system_offset=False, decided=[confirmation_id])


async def preview_edit(
    runs: RunDriver, principal: Principal, confirmation_id: str, arguments: Mapping[str, Any]
) -> dict[str, Any]:
    """What approving with edited `arguments` would do (preview, summary, arguments, changes), from
    the server's records; decides nothing.

    Raises:
        ServiceError: 404 for an unknown, decided or another user's confirmation; 422 for arguments
            the tool refuses.
    """
    rc = _db.run_confirmations
    async with runs.engine.connect() as conn:
        row = (
            await conn.execute(
                sa.select(rc.c.run_id, rc.c.conversation_id).where(
                    rc.c.confirmation_id == confirmation_id, rc.c.user_id == principal.user_id
                )
            )
        ).first()
    record = await runs.confirmations.get(confirmation_id)
    if row is None or record is None or record.user_id != principal.user_id:
        raise not_found("pending confirmation")
    ctx = runs.context(principal, row[1], row[0]).evolve(run_id=record.run_id)
    checked = await runs.agent.executor.preview_edit(confirmation_id, ctx, arguments)
    if checked.error is not None:
        if checked.error.code == ErrorCode.INVALID_ARGUMENTS:
            raise ServiceError(422, "invalid_arguments", checked.error.render())
        raise not_found("pending confirmation")
    return dict(checked.value)


async def abandon_if_expired(runs: RunDriver, user: str, conversation_id: str, run_id: str) -> bool:
    """Close a paused run none of whose confirmations can be decided any more (expired, or consumed by
    a decision whose run a crash cut), so the conversation can go on.

    Every held call gets a result in the history (every tool call of a turn must have one before the
    model sees the conversation again) that says what the records show (`_recovery.held_call_result`:
    "did not run" only for a confirmation never consumed), the answer a cut run had so far is kept
    (flagged interrupted), and the run ends `failed` (all expired) or `interrupted` (a decision was
    being carried out). False when a confirmation can still be decided (the conversation stays paused).
    """
    rc = _db.run_confirmations
    async with runs.engine.connect() as conn:
        ids = [
            r[0]
            for r in await conn.execute(
                sa.select(rc.c.confirmation_id).where(rc.c.run_id == run_id, rc.c.user_id == user)
            )
        ]
    now = time.time()
    states: dict[str, str] = {}
    for cid in ids:
        states[cid] = await _recovery.confirmation_state(runs.confirmations, cid, now)
        if states[cid] == "pending":
            return False
    async with runs.engine.begin() as conn:
        c = _db.conversations
        claimed = await conn.execute(
            c.update()
            .where(
                c.c.id == conversation_id,
                c.c.user_id == user,
                c.c.pending_run_id == run_id,
                sa.or_(c.c.lease_until.is_(None), c.c.lease_until < now),
            )
            .values(pending_run_id=None, updated_at=now, lease_until=None, lease_owner=None)
        )
        if claimed.rowcount != 1:
            lease = (
                await conn.execute(
                    sa.select(c.c.lease_until).where(c.c.id == conversation_id, c.c.user_id == user)
                )
            ).scalar_one_or_none()
            if lease is not None and lease >= now:  # a run holds it (a decision being carried out)
                raise ServiceError(
                    409,
                    "conversation_busy",
                    "A run is already working on this conversation; wait for it to finish.",
                )
            return True  # someone else moved it on meanwhile: just try again
        saved = (await conn.execute(sa.select(_r.c.state, _r.c.partial).where(_r.c.id == run_id))).first()
        seq = await _recovery.next_seq(conn, conversation_id)
        decided = any(state != "expired" for state in states.values())
        datas: list[dict[str, Any]] = []
        if saved is not None and saved[0] is not None:
            run = AgentRun.from_json(json.loads(saved[0])["run"])
            held = {p.call.id: p.confirmation_id for p in run.pending}
            for call, result in _recovery.held_calls(run):
                if result is None:
                    cid = held.get(call.id)
                    state = states.get(cid, "unknown") if cid is not None else "expired"
                    message = await _recovery.held_call_result(conn, call, cid, state, user)
                else:
                    message = ToolResultMessage.from_result(result)
                datas.append(message.to_dict())
        if saved is not None and saved[1]:
            datas.append(_recovery.interrupted_message(saved[1]))
            decided = True
        if datas:
            await conn.execute(
                _db.messages.insert(),
                [
                    {
                        "conversation_id": conversation_id,
                        "user_id": user,
                        "run_id": run_id,
                        "seq": seq + i,
                        "role": data["role"],
                        "data": json.dumps(data),
                        "created_at": now,
                    }
                    for i, data in enumerate(datas)
                ],
            )
        await conn.execute(
            _db.runs.update()
            .where(_db.runs.c.id == run_id)
            .values(
                status="interrupted" if decided else "failed",
                state=None,
                partial=None,
                error=_recovery.INTERRUPTED
                if decided
                else "The pending confirmation expired before a decision.",
                updated_at=now,
            )
        )
        await conn.execute(rc.delete().where(rc.c.run_id == run_id))
    return True
