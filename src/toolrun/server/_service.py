"""`ChatService`: one internal event stream per run, with conversations and paused runs in the database.

This is the interface every wire format adapts (toolrun SSE and JSON here; AG-UI and the AI SDK stream in
their own modules). An adapter never touches the agent or the executor:

```python
service: ChatService = request.app.state.toolrun.chat          # see toolrun.server.deps.get_chat_service
handle = await service.start_message(principal, "add Buy milk", conversation_id=None)
handle = await service.start_decision(principal, confirmation_id, approve=True)
# both raise ServiceError (404/409) BEFORE any event, so a route can still answer with an error status

async for event in handle:             # toolrun.server._events: RunStarted, TextDelta, ToolCallStarted,
    ...                                  # ToolCallFinished, ConfirmationRequired, RunFinished | RunError
response = await handle.result()       # or: drain and get the RunFinished body (the /chat JSON)
```

How a run is kept safe:

- The run executes in its own task, not in the request's: a client that disconnects stops receiving
  events, and the run goes on to its next safe point (its end, or a pause for confirmation) and is stored.
- A conversation has a lease (`lease_until`, `lease_owner`): one run at a time works on it; a second
  message or decision meanwhile answers 409. The lease is short (`lease_seconds`) and renewed by a
  heartbeat while the run works (`_leases`), so a lease left by a killed process lapses within seconds; a
  run it left `running` becomes `interrupted` when the conversation is next claimed, and its answer so far
  is kept, flagged interrupted (`_recovery`). A run writes its end only while it still holds the lease
  (checked in the transaction that writes), so nothing lands in a conversation taken over or deleted.
- A paused run lives in `toolrun_runs.state` (the server's own JSON of it) and `toolrun_run_confirmations`
  maps each confirmation id to it. A decision loads the run from there, never from the request; the
  executor's confirmation store consumes the approval atomically, so an approved call runs once even when
  two processes race for it (the loser of the lease gets 409; a stale decision gets 404).
- Pending items in responses come from the confirmation store's records (tool, arguments, summary,
  expiry), never from what a client sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from toolrun.agent import Agent, AgentEvent, AgentRun, Approve, Deny
from toolrun.agent import ConfirmationRequired as AgentConfirmationRequired
from toolrun.agent import RunFinished as AgentRunFinished
from toolrun.agent import TextDelta as AgentTextDelta
from toolrun.agent import ToolCallFinished as AgentToolCallFinished
from toolrun.agent import ToolCallProgress as AgentToolCallProgress
from toolrun.agent import ToolCallStarted as AgentToolCallStarted
from toolrun.models import (
    Message,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
    clean_text,
    history_problems,
    message_from_dict,
    repair_history,
)
from toolrun.models._history import MAX_ARGUMENT_DEPTH, json_depth_over, text_depth_over
from toolrun.results import ErrorCode
from toolrun.server import _db, _recovery
from toolrun.server._admission import Admission
from toolrun.server._errors import ServiceError, not_found
from toolrun.server._events import (
    ConfirmationRequired,
    RunError,
    RunFinished,
    RunStarted,
    ServiceEvent,
    TextDelta,
    ToolCallFinished,
    ToolCallProgress,
    ToolCallStarted,
)
from toolrun.server._leases import Leases
from toolrun.server._observe import Observer
from toolrun.server._results import content_views
from toolrun.server._text import message_problem
from toolrun.server._users import Principal
from toolrun.store import ConfirmationStore
from toolrun.store import PendingConfirmation as StoredConfirmation
from toolrun.tools import ToolContext

__all__ = ["ChatService", "RunHandle", "iso_time", "pending_item"]

logger = logging.getLogger("toolrun.server")

_END = object()

_PENDING_CONFLICT = (
    "This conversation waits for a decision on a pending action; approve or deny it first "
    "(GET /api/v1/confirmations)."
)


# The statements of every turn, built once: building a Core statement and its cache key costs more CPU
# than SQLite takes to run it.
_bp = sa.bindparam
_c, _r, _m = _db.conversations, _db.runs, _db.messages
_CLAIM_WHERE = (_c.c.id == _bp("b_cid"), _c.c.user_id == _bp("b_uid"))
_LEASE_FREE = sa.or_(_c.c.lease_until.is_(None), _c.c.lease_until < _bp("b_now"))
_CLAIM_FREE = (
    _c.update()
    .where(*_CLAIM_WHERE, _c.c.pending_run_id.is_(None), _LEASE_FREE)
    .values(lease_until=_bp("b_lease"), lease_owner=_bp("b_owner"))
)
_CLAIM_PAUSED = (
    _c.update()
    .where(*_CLAIM_WHERE, _c.c.pending_run_id == _bp("b_pending"), _LEASE_FREE)
    .values(lease_until=_bp("b_lease"), lease_owner=_bp("b_owner"))
)
_HISTORY = (
    sa.select(_m.c.seq, _m.c.run_id, _m.c.data).where(_m.c.conversation_id == _bp("b_cid")).order_by(_m.c.seq)
)
_INSERT_MESSAGES = _m.insert()
_INSERT_RUN = _r.insert()
_FINISH_RUN = (
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
# nothing. First statement of `_finish`'s transaction: on PostgreSQL it locks the row until the commit.
_FINISH_CONVERSATION = (
    _c.update()
    .where(*_CLAIM_WHERE, _c.c.lease_owner == _bp("b_owner"))
    .values(pending_run_id=_bp("b_pending"), updated_at=_bp("b_now"), lease_until=None, lease_owner=None)
)

_LOST = (
    "This run lost its conversation (it was deleted, or taken over after this server missed its "
    "heartbeats); nothing more of it is saved."
)


class _LeaseLost(Exception):
    """Internal: the run no longer holds its conversation's lease."""


class _Pending(Exception):
    """Internal: the conversation has a paused run (its id in `run_id`)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id


def iso_time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def _arguments(raw: Any) -> Any:
    """A call's arguments for the API: decoded JSON when it is, the text otherwise; always clean Unicode.

    Conversations written before the model boundary may hold anything: nesting too deep to serialise stays
    text, and lone surrogates become U+FFFD, so such a conversation still reads.
    """
    if isinstance(raw, str):
        if text_depth_over(raw, MAX_ARGUMENT_DEPTH):
            return clean_text(raw)
        try:
            value = json.loads(raw)
        except ValueError:
            return clean_text(raw)
        return value if raw.isascii() and "\\u" not in raw else _clean(value)
    if isinstance(raw, Mapping):
        if json_depth_over(raw, MAX_ARGUMENT_DEPTH):
            return clean_text(json.dumps(raw, default=str)[:10_000])
        return _clean(dict(raw))
    return {} if raw is None else raw


def _clean(value: Any) -> Any:
    """Decoded JSON with clean strings (keys too)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(str(k)): _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def pending_item(
    record: StoredConfirmation, *, run_id: str | None, conversation_id: str | None
) -> dict[str, Any]:
    """A pending confirmation as the API shows it, from the confirmation store's own record."""
    return {
        "confirmation_id": record.id,
        "tool": record.tool_name,
        "arguments": _arguments(record.call.get("arguments")),
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
    }
    if role == "assistant":
        view["tool_calls"] = [
            {
                "id": clean_text(str(c.get("id"))),
                "name": clean_text(str(c.get("name"))),
                "arguments": _arguments(c.get("arguments")),
            }
            for c in data.get("tool_calls") or ()
        ]
    elif role == "tool":
        view["call_id"] = data.get("call_id")
        view["tool_name"] = data.get("tool_name")
        view["is_error"] = bool(data.get("is_error"))
    return view


class RunHandle:
    """The events of one run, as it happens. Iterate it (once), or `await result()`."""

    def __init__(self, run_id: str, conversation_id: str) -> None:
        self.run_id = run_id
        self.conversation_id = conversation_id
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None

    def _put(self, event: ServiceEvent) -> None:
        self._queue.put_nowait(event)

    def _close(self) -> None:
        self._queue.put_nowait(_END)

    async def __aiter__(self) -> AsyncIterator[ServiceEvent]:
        while True:
            item = await self._queue.get()
            if item is _END:
                return
            yield item

    async def result(self) -> dict[str, Any]:
        """Drain the stream; the `RunFinished` body (raises `ServiceError` 500 after a `RunError`)."""
        final: dict[str, Any] | None = None
        error: RunError | None = None
        async for event in self:
            if isinstance(event, RunFinished):
                final = event.response
            elif isinstance(event, RunError):
                error = event
        if final is None:
            detail = error.message if error is not None else "The run ended without a result."
            raise ServiceError(500, "internal_error", detail)
        return final


@dataclass(kw_only=True)
class _Job:
    principal: Principal
    run_id: str
    conversation_id: str
    history: list[dict[str, Any]]
    """Stored messages before this run (API views), for the response."""
    persisted: int
    """How many of the agent run's messages are already stored (its system message counts)."""
    next_seq: int
    resumed: bool
    started: float
    partial: list[str] = field(default_factory=list)
    """The text this run has streamed so far (its heartbeat saves it: kept if a crash cuts the run)."""


class ChatService:
    """Runs chats for users: new messages and decisions, each as one event stream (see the module doc).

    Args:
        engine: The service's database.
        agent: The agent (model, tools, executor) every run uses.
        confirmations: The executor's confirmation store (the source of pending items).
        model_name: The model's name for events and responses.
        demo: Whether the model is the demo stand-in.
        run_timeout: Seconds a run may take.
        observer: Logs and metrics.
        max_runs: Runs in flight at once in this process; more are refused with 503 (`_admission`).
        lease_seconds: The conversation lease a working run holds, renewed every third of it.
    """

    def __init__(
        self,
        *,
        engine: AsyncEngine,
        agent: Agent,
        confirmations: ConfirmationStore,
        model_name: str,
        demo: bool,
        run_timeout: float = 120.0,
        observer: Observer | None = None,
        max_runs: int | None = None,
        lease_seconds: float = 15.0,
    ) -> None:
        self.engine = engine
        self.admission = Admission(max_runs)
        self.agent = agent
        self.confirmations = confirmations
        self.model_name = model_name
        self.demo = demo
        self.run_timeout = run_timeout
        self.observer = observer if observer is not None else Observer()
        self.leases = Leases(engine, seconds=lease_seconds)
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False

    @property
    def model_info(self) -> dict[str, Any]:
        return {"name": self.model_name, "demo": self.demo}

    # -- starting runs ------------------------------------------------------------------------------------

    async def start_message(
        self, principal: Principal, message: str, *, conversation_id: str | None = None
    ) -> RunHandle:
        """Claim the conversation (a new one when `conversation_id` is None) and start a run for `message`.

        Raises:
            ServiceError: 422 for a message no door takes (blank, too long, NUL, a lone surrogate: see
                `toolrun.server._text`); 404 for an unknown (or another user's) conversation; 409 when it has
                a run working or a confirmation pending; 503 (`overloaded`, with `retry_after`) when the
                process already runs `max_runs` runs.
        """
        self._check_open()
        problem = message_problem(message)
        if problem is not None:
            raise ServiceError(422, "invalid_message", problem)
        self.admission.enter()
        try:
            handle = await self._message_run(principal, message, conversation_id)
        except BaseException:
            self.admission.leave()
            raise
        return self._counted(handle)

    async def _message_run(
        self, principal: Principal, message: str, conversation_id: str | None
    ) -> RunHandle:
        try:
            return await self._start_message(principal, message, conversation_id)
        except _Pending as paused:
            if conversation_id is None:  # pragma: no cover - a new conversation has no paused run
                raise
            if not await self._abandon_if_expired(principal.user_id, conversation_id, paused.run_id):
                raise ServiceError(409, "confirmation_pending", _PENDING_CONFLICT) from None
        try:
            return await self._start_message(principal, message, conversation_id)
        except _Pending:
            raise ServiceError(409, "confirmation_pending", _PENDING_CONFLICT) from None

    async def _start_message(
        self, principal: Principal, message: str, conversation_id: str | None
    ) -> RunHandle:
        user = principal.user_id
        run_id = "run_" + secrets.token_hex(10)
        now = time.time()
        lease = self.leases.until(now)
        async with self.engine.begin() as conn:
            if conversation_id is None:
                conversation_id = "conv_" + secrets.token_hex(10)
                title = clean_text(" ".join(message.split()))[:80] or "Conversation"
                await conn.execute(
                    _db.conversations.insert().values(
                        id=conversation_id,
                        user_id=user,
                        title=title,
                        created_at=now,
                        updated_at=now,
                        lease_until=lease,
                        lease_owner=run_id,
                    )
                )
                history: list[dict[str, Any]] = []
                stored: list[Message] = []
            else:
                await self._claim(conn, user, conversation_id, run_id, lease, now, pending_run_id=None)
                history, stored = await self._history(conn, conversation_id)
            seq = len(history)
            user_message = UserMessage(content=message)
            await conn.execute(
                _INSERT_MESSAGES,
                {
                    "conversation_id": conversation_id,
                    "user_id": user,
                    "run_id": run_id,
                    "seq": seq,
                    "role": "user",
                    "data": json.dumps(user_message.to_dict()),
                    "created_at": now,
                },
            )
            await conn.execute(
                _INSERT_RUN,
                {
                    "id": run_id,
                    "user_id": user,
                    "conversation_id": conversation_id,
                    "status": "running",
                    "model": self.model_name,
                    "created_at": now,
                    "updated_at": now,
                },
            )
        history.append(message_view(seq, run_id, user_message.to_dict()))
        job = _Job(
            principal=principal,
            run_id=run_id,
            conversation_id=conversation_id,
            history=history,
            persisted=len(stored) + 1,
            next_seq=seq + 1,
            resumed=False,
            started=now,
        )
        messages = [*stored, user_message]
        ctx = self._context(principal, conversation_id, run_id)
        return self._launch(job, self.agent.stream(messages, context=ctx), system_offset=True)

    async def start_decision(
        self,
        principal: Principal,
        confirmation_id: str,
        *,
        approve: bool,
        arguments: Mapping[str, Any] | None = None,
        reason: str | None = None,
    ) -> RunHandle:
        """Approve or deny a pending confirmation and continue its run.

        With `arguments` (approving only), the person's edited arguments replace the model's: validated
        first (422, nothing decided), previewed again, bound to the approval; the model is told what
        changed. With `reason` (denying), the model receives the person's words.

        Raises:
            ServiceError: 404 for an unknown, decided or another user's confirmation; 409 when its
                conversation has a run working right now; 422 for edited arguments the tool refuses;
                503 (`overloaded`) past `max_runs`.
        """
        self._check_open()
        self.admission.enter()
        try:
            handle = await self._decision_run(
                principal, confirmation_id, approve=approve, arguments=arguments, reason=reason
            )
        except BaseException:
            self.admission.leave()
            raise
        return self._counted(handle)

    def _counted(self, handle: RunHandle) -> RunHandle:
        """The admitted run leaves the count when its task ends (a client that left does not end it)."""
        assert handle.task is not None
        handle.task.add_done_callback(lambda _task: self.admission.leave())
        return handle

    async def _decision_run(
        self,
        principal: Principal,
        confirmation_id: str,
        *,
        approve: bool,
        arguments: Mapping[str, Any] | None,
        reason: str | None,
    ) -> RunHandle:
        user = principal.user_id
        now = time.time()
        lease = self.leases.until(now)
        rc = _db.run_confirmations
        async with self.engine.begin() as conn:
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
            await self._claim(conn, user, conversation_id, run_id, lease, now, pending_run_id=run_id)
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
            history, _stored = await self._history(conn, conversation_id)
        saved = json.loads(state_row[0])
        run = AgentRun.from_json(saved["run"])
        if confirmation_id not in {p.confirmation_id for p in run.pending}:
            await self._release(conversation_id, run_id)
            raise not_found("pending confirmation")
        job = _Job(
            principal=principal,
            run_id=run_id,
            conversation_id=conversation_id,
            history=history,
            persisted=int(saved["persisted"]),
            next_seq=len(history),
            resumed=True,
            started=now,
        )
        ctx = self._context(principal, conversation_id, run_id)
        decision: Approve | Deny = Approve(arguments=arguments) if approve else Deny(reason=reason)
        if approve and arguments is not None:
            checked = await self.agent.executor.preview_edit(
                confirmation_id, ctx.evolve(run_id=run.run_id), arguments
            )
            if checked.error is not None:
                await self._release(conversation_id, run_id)
                if checked.error.code == ErrorCode.INVALID_ARGUMENTS:
                    raise ServiceError(422, "invalid_arguments", checked.error.render())
                raise not_found("pending confirmation")
        events = self.agent.stream_resume(run, {confirmation_id: decision}, context=ctx)
        return self._launch(job, events, system_offset=False, decided=[confirmation_id])

    async def preview_edit(
        self, principal: Principal, confirmation_id: str, arguments: Mapping[str, Any]
    ) -> dict[str, Any]:
        """What approving with edited `arguments` would do (preview, summary, arguments, changes), from
        the server's records; decides nothing.

        Raises:
            ServiceError: 404 for an unknown, decided or another user's confirmation; 422 for arguments
                the tool refuses.
        """
        self._check_open()
        rc = _db.run_confirmations
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    sa.select(rc.c.run_id, rc.c.conversation_id).where(
                        rc.c.confirmation_id == confirmation_id, rc.c.user_id == principal.user_id
                    )
                )
            ).first()
        record = await self.confirmations.get(confirmation_id)
        if row is None or record is None or record.user_id != principal.user_id:
            raise not_found("pending confirmation")
        ctx = self._context(principal, row[1], row[0]).evolve(run_id=record.run_id)
        checked = await self.agent.executor.preview_edit(confirmation_id, ctx, arguments)
        if checked.error is not None:
            if checked.error.code == ErrorCode.INVALID_ARGUMENTS:
                raise ServiceError(422, "invalid_arguments", checked.error.render())
            raise not_found("pending confirmation")
        return dict(checked.value)

    async def _abandon_if_expired(self, user: str, conversation_id: str, run_id: str) -> bool:
        """Close a paused run none of whose confirmations can be decided any more (expired, or consumed by
        a decision whose run a crash cut), so the conversation can go on.

        Every held call gets a result in the history (every tool call of a turn must have one before the
        model sees the conversation again) that says what the records show (`_recovery.held_call_result`:
        "did not run" only for a confirmation never consumed), the answer a cut run had so far is kept
        (flagged interrupted), and the run ends `failed` (all expired) or `interrupted` (a decision was
        being carried out). False when a confirmation can still be decided (the conversation stays paused).
        """
        rc = _db.run_confirmations
        async with self.engine.connect() as conn:
            ids = [
                r[0]
                for r in await conn.execute(
                    sa.select(rc.c.confirmation_id).where(rc.c.run_id == run_id, rc.c.user_id == user)
                )
            ]
        now = time.time()
        states: dict[str, str] = {}
        for cid in ids:
            states[cid] = await _recovery.confirmation_state(self.confirmations, cid, now)
            if states[cid] == "pending":
                return False
        async with self.engine.begin() as conn:
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

    # -- reading --------------------------------------------------------------------------------------------

    async def pending(self, principal: Principal) -> list[dict[str, Any]]:
        """The user's pending confirmations (unexpired), oldest first, from the confirmation store."""
        records = await self.confirmations.list_pending(principal.user_id, now=time.time())
        if not records:
            return []
        rc = _db.run_confirmations
        async with self.engine.connect() as conn:
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
        self, principal: Principal, *, limit: int = 50, offset: int = 0
    ) -> list[dict[str, Any]]:
        c = _db.conversations
        async with self.engine.connect() as conn:
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

    async def get_conversation(self, principal: Principal, conversation_id: str) -> dict[str, Any]:
        c = _db.conversations
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    sa.select(
                        c.c.id, c.c.title, c.c.created_at, c.c.updated_at, c.c.pending_run_id, c.c.lease_until
                    ).where(c.c.id == conversation_id, c.c.user_id == principal.user_id)
                )
            ).first()
            if row is None:
                raise not_found("conversation")
            history, _ = await self._history(conn, conversation_id)
            r = _db.runs
            last = (
                await conn.execute(
                    sa.select(r.c.id, r.c.status, r.c.partial)
                    .where(r.c.conversation_id == conversation_id, r.c.user_id == principal.user_id)
                    .order_by(r.c.created_at.desc())
                    .limit(1)
                )
            ).first()
        status = None if last is None else last[1]
        if last is not None and status == "running" and (row[5] is None or row[5] < time.time()):
            # A dead process's run (its lease lapsed): shown as what it is, its answer so far flagged
            # interrupted, before the next message closes it in the records (`_recovery`).
            status = "interrupted"
            if last[2]:
                seq = history[-1]["seq"] + 1 if history else 0
                history.append(message_view(seq, last[0], _recovery.interrupted_message(last[2])))
        pending = [p for p in await self.pending(principal) if p["conversation_id"] == conversation_id]
        return {
            "id": row[0],
            "title": row[1],
            "created_at": iso_time(row[2]),
            "updated_at": iso_time(row[3]),
            "awaiting_confirmation": row[4] is not None,
            "last_run": None if last is None else {"run_id": last[0], "status": status},
            "messages": history,
            "pending": pending,
        }

    async def delete_conversation(self, principal: Principal, conversation_id: str) -> None:
        """Delete a conversation with its messages, runs and pending confirmations (409 while a run works).

        The conversation's row goes first, in one statement that also checks no run holds its lease: on
        PostgreSQL it waits for a claim in flight and sees its result (a decision that claimed first → 409;
        one that comes after → it finds nothing, 404), and a run that lost its lease finds no row to finish
        in. So after a 204 nothing of the conversation runs or is written.
        """
        user = principal.user_id
        c = _db.conversations
        now = time.time()
        async with self.engine.begin() as conn:
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
                        sa.select(c.c.id).where(c.c.id == conversation_id, c.c.user_id == user)
                    )
                ).first()
                if found is None:
                    raise not_found("conversation")
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
            await conn.execute(
                rc.delete().where(rc.c.conversation_id == conversation_id, rc.c.user_id == user)
            )
            await conn.execute(
                _db.messages.delete().where(
                    _db.messages.c.conversation_id == conversation_id, _db.messages.c.user_id == user
                )
            )
            await conn.execute(
                _db.runs.delete().where(
                    _db.runs.c.conversation_id == conversation_id, _db.runs.c.user_id == user
                )
            )
        for cid in ids:  # the approvals can no longer resume anything: withdraw them
            with contextlib.suppress(Exception):
                await self.confirmations.consume(cid, user_id=user)

    # -- lifecycle -------------------------------------------------------------------------------------------

    async def aclose(self, grace: float = 30.0) -> None:
        """Refuse new runs and wait (up to `grace` seconds) for the running ones to reach a safe point."""
        self._closing = True
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=grace)
        await self.leases.aclose()

    def _check_open(self) -> None:
        if self._closing:
            raise ServiceError(503, "shutting_down", "The server is shutting down; try again shortly.")

    # -- internals -----------------------------------------------------------------------------------------

    def _context(self, principal: Principal, conversation_id: str, run_id: str) -> ToolContext[Any]:
        return ToolContext(
            user_id=principal.user_id,
            roles=principal.roles,
            conversation_id=conversation_id,
            trace_id=run_id,
            deadline=time.time() + self.run_timeout,
        )

    async def _claim(
        self,
        conn: AsyncConnection,
        user: str,
        conversation_id: str,
        run_id: str,
        lease: float,
        now: float,
        *,
        pending_run_id: str | None,
    ) -> None:
        c = _db.conversations
        params = {"b_cid": conversation_id, "b_uid": user, "b_now": now, "b_lease": lease, "b_owner": run_id}
        if pending_run_id is None:
            result = await conn.execute(_CLAIM_FREE, params)
        else:
            result = await conn.execute(_CLAIM_PAUSED, {**params, "b_pending": pending_run_id})
        if result.rowcount == 1:
            # A run a killed process left behind can no longer finish: say so, and keep what it had said.
            await _recovery.interrupt_stale_runs(conn, conversation_id, user, run_id, now)
            return
        row = (
            await conn.execute(
                sa.select(c.c.pending_run_id, c.c.lease_until).where(
                    c.c.id == conversation_id, c.c.user_id == user
                )
            )
        ).first()
        if row is None:
            raise not_found("conversation")
        if row[1] is not None and row[1] >= now:
            raise ServiceError(
                409,
                "conversation_busy",
                "A run is already working on this conversation; wait for it to finish.",
            )
        if pending_run_id is None:
            raise _Pending(row[0])
        raise not_found("pending confirmation")

    async def _release(self, conversation_id: str, run_id: str) -> None:
        c = _db.conversations
        async with self.engine.begin() as conn:
            await conn.execute(
                c.update()
                .where(c.c.id == conversation_id, c.c.lease_owner == run_id)
                .values(lease_until=None, lease_owner=None)
            )

    async def _history(
        self, conn: AsyncConnection, conversation_id: str
    ) -> tuple[list[dict[str, Any]], list[Message]]:
        rows = (await conn.execute(_HISTORY, {"b_cid": conversation_id})).all()
        views: list[dict[str, Any]] = []
        stored: list[Message] = []
        for seq, run_id, data in rows:
            d = json.loads(data)
            views.append(message_view(seq, run_id, d))
            stored.append(message_from_dict(d))
        if history_problems(stored, open_tail=True):
            # Written before the model boundary kept every history valid: what the model sees is repaired
            # (the rows stay as they were; see toolrun.models.repair_history).
            stored = repair_history(stored)
        return views, stored

    def _launch(
        self,
        job: _Job,
        events: AsyncIterator[AgentEvent],
        *,
        system_offset: bool,
        decided: Sequence[str] = (),
    ) -> RunHandle:
        handle = RunHandle(job.run_id, job.conversation_id)
        task = asyncio.get_running_loop().create_task(
            self._drive(job, handle, events, system_offset, decided)
        )
        handle.task = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        self.leases.hold(
            job.run_id, partial=lambda: "".join(job.partial), on_lost=lambda: task.cancel() and None
        )
        return handle

    async def _drive(
        self,
        job: _Job,
        handle: RunHandle,
        events: AsyncIterator[AgentEvent],
        system_offset: bool,
        decided: Sequence[str],
    ) -> None:
        run_id = job.run_id
        obs = self.observer
        handle._put(
            RunStarted(
                run_id=run_id,
                conversation_id=job.conversation_id,
                model=self.model_name,
                demo=self.demo,
                resumed=job.resumed,
            )
        )
        message_id = f"msg_{run_id}_0"
        turn = 0
        partial = job.partial
        try:
            async for event in events:
                if isinstance(event, AgentTextDelta):
                    if event.step != turn:
                        turn = event.step
                        message_id = f"msg_{run_id}_{turn}"
                        if partial:
                            partial.append("\n\n")
                    partial.append(event.text)
                    handle._put(TextDelta(run_id=run_id, message_id=message_id, text=event.text))
                elif isinstance(event, AgentToolCallStarted):
                    handle._put(
                        ToolCallStarted(
                            run_id=run_id,
                            call_id=event.call.id,
                            tool=event.call.name,
                            arguments=_arguments(event.call.arguments),
                        )
                    )
                elif isinstance(event, AgentToolCallProgress):
                    handle._put(
                        ToolCallProgress(
                            run_id=run_id,
                            call_id=event.call.id,
                            tool=event.call.name,
                            progress=event.progress,
                            total=event.total,
                            message=event.message,
                        )
                    )
                elif isinstance(event, AgentToolCallFinished):
                    result = event.result
                    content = (
                        await content_views(self.agent.executor, result, job.principal.user_id)
                        if result.content
                        else []
                    )
                    handle._put(
                        ToolCallFinished(
                            run_id=run_id,
                            call_id=event.call.id,
                            tool=event.call.name,
                            status=result.status,
                            result=result.value if result.status == "ok" else None,
                            error=result.error.to_dict() if result.error is not None else None,
                            duration_ms=round(result.duration * 1000, 3),
                            content=content,
                        )
                    )
                    obs.tool_call(job.principal.user_id, job.conversation_id, run_id, event.call, result)
                elif isinstance(event, AgentConfirmationRequired):
                    record = await self.confirmations.get(event.confirmation_id)
                    if record is not None and record.user_id == job.principal.user_id:
                        handle._put(
                            ConfirmationRequired(
                                run_id=run_id,
                                pending=pending_item(
                                    record, run_id=run_id, conversation_id=job.conversation_id
                                ),
                            )
                        )
                elif isinstance(event, AgentRunFinished):
                    self.leases.release(run_id)  # the end is written under the lease, checked there
                    response = await self._finish(job, event.run, system_offset, decided)
                    obs.run_finished(
                        job.principal.user_id,
                        job.conversation_id,
                        run_id,
                        event.run,
                        time.time() - job.started,
                        job.resumed,
                    )
                    handle._put(RunFinished(run_id=run_id, response=response))
        except (_LeaseLost, asyncio.CancelledError) as exc:
            # Lost the conversation (deleted, or taken over): stop, write nothing more, say so.
            obs.run_error(job.principal.user_id, job.conversation_id, run_id, exc, "lease_lost")
            handle._put(RunError(run_id=run_id, code="run_interrupted", message=_LOST))
            closer = getattr(events, "aclose", None)
            if closer is not None:
                with contextlib.suppress(BaseException):
                    await closer()
            if isinstance(exc, asyncio.CancelledError) and not self.leases.lost(run_id):
                raise  # cancelled by someone else than the heartbeat: let it be cancelled
        except Exception as exc:
            error_id = "err_" + secrets.token_hex(6)
            obs.run_error(job.principal.user_id, job.conversation_id, run_id, exc, error_id)
            with contextlib.suppress(Exception):
                await self._fail(job, error_id)
            handle._put(
                RunError(
                    run_id=run_id,
                    code="internal_error",
                    message=f"The run failed on the server (error id {error_id}).",
                )
            )
        finally:
            self.leases.release(run_id)
            handle._close()

    async def _finish(
        self, job: _Job, run: AgentRun, system_offset: bool, decided: Sequence[str]
    ) -> dict[str, Any]:
        # `run.run_id` stays the agent's own (confirmations may be bound to it); the service's run id is
        # `job.run_id`, in the API, the logs and the audit trail (as the context's trace id).
        start = job.persisted
        if system_offset and run.messages and isinstance(run.messages[0], SystemMessage):
            start += 1
        new = run.messages[start:]
        now = time.time()
        user = job.principal.user_id
        rows = []
        for i, msg in enumerate(new):
            data = msg.to_dict()
            rows.append(
                {
                    "conversation_id": job.conversation_id,
                    "user_id": user,
                    "run_id": job.run_id,
                    "seq": job.next_seq + i,
                    "role": data["role"],
                    "data": json.dumps(data),
                    "created_at": now,
                }
            )
            job.history.append(message_view(job.next_seq + i, job.run_id, data))
        paused = run.status == "awaiting_confirmation"
        state = json.dumps({"run": run.to_json(), "persisted": len(run.messages)}) if paused else None
        rc = _db.run_confirmations
        async with self.engine.begin() as conn:
            held = await conn.execute(
                _FINISH_CONVERSATION,
                {
                    "b_cid": job.conversation_id,
                    "b_uid": user,
                    "b_owner": job.run_id,
                    "b_pending": job.run_id if paused else None,
                    "b_now": now,
                },
            )
            if held.rowcount != 1:
                raise _LeaseLost()
            if rows:
                await conn.execute(_INSERT_MESSAGES, rows)
            await conn.execute(
                _FINISH_RUN,
                {
                    "b_rid": job.run_id,
                    "b_status": run.status,
                    "b_state": state,
                    "b_error": clean_text(run.error) if run.error else None,
                    "b_now": now,
                },
            )
            if decided:
                await conn.execute(rc.delete().where(rc.c.confirmation_id.in_(list(decided))))
            if paused:
                known = set(decided)
                fresh = [p for p in run.pending if p.confirmation_id not in known]
                existing = {
                    r[0]
                    for r in await conn.execute(
                        sa.select(rc.c.confirmation_id).where(rc.c.run_id == job.run_id)
                    )
                }
                add = [
                    {
                        "confirmation_id": p.confirmation_id,
                        "run_id": job.run_id,
                        "user_id": user,
                        "conversation_id": job.conversation_id,
                    }
                    for p in fresh
                    if p.confirmation_id not in existing
                ]
                if add:
                    await conn.execute(rc.insert(), add)
        pending: list[dict[str, Any]] = []
        for p in run.pending if paused else ():
            record = await self.confirmations.get(p.confirmation_id)
            if record is not None and record.user_id == user:
                pending.append(pending_item(record, run_id=job.run_id, conversation_id=job.conversation_id))
        return {
            "conversation_id": job.conversation_id,
            "run_id": job.run_id,
            "status": run.status,
            "output": run.output,
            "error": run.error,
            "messages": job.history,
            "pending": pending,
            "model": self.model_info,
        }

    async def _fail(self, job: _Job, error_id: str) -> None:
        now = time.time()
        async with self.engine.begin() as conn:
            await conn.execute(
                _db.runs.update()
                .where(_db.runs.c.id == job.run_id, _db.runs.c.status == "running")
                .values(status="failed", error=f"Server error {error_id}.", updated_at=now)
            )
            c = _db.conversations
            await conn.execute(
                c.update()
                .where(c.c.id == job.conversation_id, c.c.lease_owner == job.run_id)
                .values(lease_until=None, lease_owner=None, updated_at=now)
            )
