"""`ChatService`: one internal event stream per run, with conversations and paused runs in the database.

This is the interface every wire format adapts (toolrun SSE and JSON here; AG-UI and the AI SDK stream in
their own modules); an adapter never touches the agent or the executor: `start_message` / `start_decision`
give a `RunHandle` (or raise `ServiceError` before any event), whose events it maps and whose `result()` is
the `/chat` body. A run works in its own task under a conversation lease renewed by a heartbeat, so a client
that leaves stops nothing and a killed process's run becomes `interrupted`; a paused run lives in the
database and a decision loads it from there, never from the request (docs/service.md: "The internal
event stream"; "Storage, migrations, scaling").

The parts, imports one way (down this list): `_views` (records as the API shows them), `_handle`
(`RunHandle`), `_fixed` (the turn's statements, straight on SQLite), `_statements` (claim, release,
history), `_runs` (`RunDriver`: a run's task, events and end), `_decisions` (approve/deny, edit previews,
closing expired pauses), `_reads` (conversations and pending items), and this module's `ChatService`.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Mapping
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from toolrun.agent import Agent
from toolrun.models import Message, UserMessage
from toolrun.server import _decisions, _reads
from toolrun.server._admission import Admission
from toolrun.server._errors import ServiceError
from toolrun.server._fixed import transaction
from toolrun.server._handle import RunHandle
from toolrun.server._holder import this_process
from toolrun.server._observe import Observer
from toolrun.server._runs import Job, RunDriver
from toolrun.server._statements import (
    INSERT_CONVERSATION,
    INSERT_MESSAGES,
    INSERT_RUN,
    Pending,
    claim,
    encode_row,
    load_history,
)
from toolrun.server._stops import request_stop
from toolrun.server._text import conversation_title, message_problem, title_problem
from toolrun.server._users import Principal
from toolrun.server._views import iso_time, message_view, pending_item
from toolrun.store import ConfirmationStore

__all__ = ["ChatService", "RunHandle", "iso_time", "pending_item"]

_PENDING_CONFLICT = (
    "This conversation waits for a decision on a pending action; approve or deny it first "
    "(GET /api/v1/confirmations)."
)


class ChatService(RunDriver):
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
        super().__init__(
            engine=engine,
            agent=agent,
            confirmations=confirmations,
            model_name=model_name,
            demo=demo,
            run_timeout=run_timeout,
            observer=observer,
            lease_seconds=lease_seconds,
        )
        self.admission = Admission(max_runs)
        self._closing = False

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
        except Pending as paused:
            if conversation_id is None:  # pragma: no cover - a new conversation has no paused run
                raise
            user = principal.user_id
            if not await _decisions.abandon_if_expired(self, user, conversation_id, paused.run_id):
                raise ServiceError(409, "confirmation_pending", _PENDING_CONFLICT) from None
        try:
            return await self._start_message(principal, message, conversation_id)
        except Pending:
            raise ServiceError(409, "confirmation_pending", _PENDING_CONFLICT) from None

    async def _start_message(
        self, principal: Principal, message: str, conversation_id: str | None
    ) -> RunHandle:
        user = principal.user_id
        run_id = "run_" + secrets.token_hex(10)
        now = time.time()
        lease = self.leases.until(now)
        async with transaction(self.engine) as conn:
            if conversation_id is None:
                conversation_id = "conv_" + secrets.token_hex(10)
                title = conversation_title(message)
                await INSERT_CONVERSATION.execute(
                    conn,
                    {
                        "id": conversation_id,
                        "user_id": user,
                        "title": title,
                        "created_at": now,
                        "updated_at": now,
                        "lease_until": lease,
                        "lease_owner": run_id,
                        "lease_holder": this_process(),
                    },
                )
                history: list[dict[str, Any]] = []
                stored: list[Message] = []
            else:
                await claim(conn, user, conversation_id, run_id, lease, now, pending_run_id=None)
                history, stored = await load_history(conn, conversation_id)
            seq = len(history)
            user_message = UserMessage(content=message)
            await INSERT_MESSAGES.execute(
                conn,
                {
                    "conversation_id": conversation_id,
                    "user_id": user,
                    "run_id": run_id,
                    "seq": seq,
                    "role": "user",
                    "data": encode_row(user_message.to_dict()),
                    "created_at": now,
                },
            )
            await INSERT_RUN.execute(
                conn,
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
        job = Job(
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
        ctx = self.context(principal, conversation_id, run_id)
        return self.launch(job, self.agent.stream(messages, context=ctx), system_offset=True)

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
            handle = await _decisions.decision_run(
                self, principal, confirmation_id, approve=approve, arguments=arguments, reason=reason
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
        return await _decisions.preview_edit(self, principal, confirmation_id, arguments)

    async def stop(self, principal: Principal, conversation_id: str) -> dict[str, Any]:
        """Stop the run working on the user's conversation (the page's Stop).

        The request is recorded on the run's row: the run stops at once when this process runs it, else at
        its own process's next heartbeat (`_stops`). It ends `stopped`, its answer so far kept and flagged.

        Raises:
            ServiceError: 404 for an unknown (or another user's) conversation; 409 `not_running` when no
                run works on it.
        """
        run_id = await request_stop(self.engine, principal.user_id, conversation_id)
        self.stop_here(run_id)
        return {"conversation_id": conversation_id, "run_id": run_id, "status": "stopping"}

    async def rename_conversation(
        self, principal: Principal, conversation_id: str, title: str
    ) -> dict[str, Any]:
        """Give the user's conversation a new title; the conversation as listed.

        Raises:
            ServiceError: 422 for a blank, too long or control-character title; 404 for an unknown (or
                another user's) conversation.
        """
        title = " ".join(title.split()) if title.strip() else title
        problem = title_problem(title)
        if problem is not None:
            raise ServiceError(422, "invalid_title", problem)
        return await _reads.rename_conversation(self.engine, principal, conversation_id, title)

    # -- reading --------------------------------------------------------------------------------------------

    async def pending(self, principal: Principal) -> list[dict[str, Any]]:
        """The user's pending confirmations (unexpired), oldest first, from the confirmation store."""
        return await _reads.pending(self.engine, self.confirmations, principal)

    async def list_conversations(
        self, principal: Principal, *, limit: int = 50, offset: int = 0
    ) -> list[dict[str, Any]]:
        return await _reads.list_conversations(self.engine, principal, limit=limit, offset=offset)

    async def get_conversation(self, principal: Principal, conversation_id: str) -> dict[str, Any]:
        return await _reads.get_conversation(self.engine, self.confirmations, principal, conversation_id)

    async def thread_state(self, principal: Principal, conversation_id: str) -> dict[str, Any] | None:
        """The user texts and pending confirmations of the user's conversation, None if it is not theirs
        (what the AG-UI and AI SDK routes check a thread against; `_reads.thread_state`)."""
        return await _reads.thread_state(self.engine, self.confirmations, principal, conversation_id)

    async def delete_conversation(self, principal: Principal, conversation_id: str) -> None:
        """Delete a conversation with its messages, runs and pending confirmations (409 while a run works).

        The conversation's row goes first, in one statement that also checks no run holds its lease: on
        PostgreSQL it waits for a claim in flight and sees its result (a decision that claimed first → 409;
        one that comes after → it finds nothing, 404), and a run that lost its lease finds no row to finish
        in. So after a 204 nothing of the conversation runs or is written.
        """
        await _reads.delete_conversation(self.engine, self.confirmations, principal, conversation_id)

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
