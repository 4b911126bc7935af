"""Driving a run: its task, its events mapped to the service's, and its end stored under the lease.

`RunDriver` holds what every run needs (database, agent, confirmation store, observer, leases) and turns an
agent event stream into a `RunHandle`: `launch` starts the run's own task, `_drive` maps each agent event
to a service event, `finish` stores the run's new messages and its end in one transaction (only while the
run still holds its conversation's lease), `_fail` marks a run that crashed in the server. A stop
(`stop`, or the heartbeat's news of a stop recorded by another process: `_stops`) cancels the run's task:
the model stream is closed, a running call is cancelled by the executor, and `_stopped` stores what the
run did so far, its cut answer flagged `stopped`. `ChatService` (`_service`) starts runs through it;
`_decisions` continues paused ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from toolrun import agent as ag  # the agent's events share their names with toolrun.server.events
from toolrun.agent import Agent, AgentEvent, AgentRun
from toolrun.models import SystemMessage
from toolrun.models._history import clean_text
from toolrun.server import _db
from toolrun.server._fixed import Fixed, transaction
from toolrun.server._handle import RunHandle
from toolrun.server._leases import Leases
from toolrun.server._observe import Observer
from toolrun.server._results import content_views
from toolrun.server._statements import (
    FINISH_CONVERSATION,
    FINISH_RUN,
    INSERT_MESSAGES,
    LeaseLost,
    encode_row,
)
from toolrun.server._stops import STOPPED_CALL, Trace
from toolrun.server._users import Principal
from toolrun.server._views import api_arguments, message_view, pending_item
from toolrun.server.events import (
    ConfirmationRequired,
    RunError,
    RunFinished,
    RunStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallProgress,
    ToolCallStarted,
)
from toolrun.store import ConfirmationStore
from toolrun.tools import ToolContext

__all__ = ["Job", "RunDriver"]

logger = logging.getLogger("toolrun.server")

_LOST = (
    "This run lost its conversation (it was deleted, or taken over after this server missed its "
    "heartbeats); nothing more of it is saved."
)


_rc = _db.run_confirmations
_DELETE_DECIDED = Fixed(_rc.delete().where(_rc.c.confirmation_id == sa.bindparam("b_conf")))
_HELD_BY_RUN = Fixed(sa.select(_rc.c.confirmation_id).where(_rc.c.run_id == sa.bindparam("b_rid")))
_INSERT_HELD = Fixed(_rc.insert(), columns=("confirmation_id", "run_id", "user_id", "conversation_id"))


@dataclass(kw_only=True)
class Job:
    """One run as the driver follows it."""

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
    views: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Call id → what its result showed beside JSON (images, files by URL): kept on its stored message, so a
    reloaded conversation shows them again."""
    trace: Trace = field(default_factory=Trace)
    """Its events so far, for what a stop stores."""
    stopping: bool = False
    """A stop was asked for and its task cancelled."""
    finishing: bool = False
    """The run reached its end and is writing it: too late to stop."""


def _message_rows(job: Job, messages: Iterable[dict[str, Any]], now: float) -> list[dict[str, Any]]:
    """The rows of a run's new messages (numbered after the conversation's last), each also appended to
    the job's history as the API shows it."""
    rows = []
    for i, data in enumerate(messages):
        data = _with_views(data, job.views)
        rows.append(
            {
                "conversation_id": job.conversation_id,
                "user_id": job.principal.user_id,
                "run_id": job.run_id,
                "seq": job.next_seq + i,
                "role": data["role"],
                "data": encode_row(data),
                "created_at": now,
            }
        )
        job.history.append(message_view(job.next_seq + i, job.run_id, data))
    return rows


def _with_views(data: dict[str, Any], views: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """A tool message's stored form with the views of its content (`content_views`: URLs, not bytes)."""
    shown = views.get(data.get("call_id") or "") if data.get("role") == "tool" else None
    return {**data, "content_views": shown} if shown else data


class RunDriver:
    """Starts runs in tasks of their own and stores their ends (see the module docstring).

    Args:
        engine: The service's database.
        agent: The agent (model, tools, executor) every run uses.
        confirmations: The executor's confirmation store (the source of pending items).
        model_name: The model's name for events and responses.
        demo: Whether the model is the demo stand-in.
        run_timeout: Seconds a run may take.
        observer: Logs and metrics.
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
        lease_seconds: float = 15.0,
    ) -> None:
        self.engine = engine
        self.agent = agent
        self.confirmations = confirmations
        self.model_name = model_name
        self.demo = demo
        self.run_timeout = run_timeout
        self.observer = observer if observer is not None else Observer()
        self.leases = Leases(engine, seconds=lease_seconds)
        self._tasks: set[asyncio.Task[None]] = set()
        self._stops: dict[str, Callable[[], None]] = {}
        self.stop_agent_run: Callable[[str], Awaitable[object]] | None = None
        """Stops what the agent runs outside the run's own task (a durable run's workflow), by the run's
        id; called when a stop ends a run (`TOOLRUN_DURABLE=dbos` sets it)."""

    @property
    def model_info(self) -> dict[str, Any]:
        return {"name": self.model_name, "demo": self.demo}

    def context(self, principal: Principal, conversation_id: str, run_id: str) -> ToolContext[Any]:
        return ToolContext(
            user_id=principal.user_id,
            roles=principal.roles,
            conversation_id=conversation_id,
            trace_id=run_id,
            deadline=time.time() + self.run_timeout,
        )

    def launch(
        self,
        job: Job,
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

        def stop() -> None:
            if not job.stopping and not job.finishing and not task.done():
                job.stopping = True
                task.cancel()

        self._stops[job.run_id] = stop
        task.add_done_callback(lambda _t: self._stops.pop(job.run_id, None))
        self.leases.hold(
            job.run_id,
            partial=lambda: "".join(job.partial),
            on_lost=lambda: task.cancel() and None,
            on_stop=stop,
        )
        return handle

    def stop_here(self, run_id: str) -> bool:
        """Stop `run_id` at once when this process runs it (else its own process's heartbeat will)."""
        stop = self._stops.get(run_id)
        if stop is None:
            return False
        stop()
        return True

    async def _drive(
        self,
        job: Job,
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
        trace = job.trace
        try:
            async for event in events:
                if isinstance(event, ag.TextDelta):
                    if event.step != turn:
                        turn = event.step
                        message_id = f"msg_{run_id}_{turn}"
                        if partial:
                            partial.append("\n\n")
                    partial.append(event.text)
                    trace.text(event.step, event.text)
                    handle._put(TextDelta(run_id=run_id, message_id=message_id, text=event.text))
                elif isinstance(event, ag.ToolCallStarted):
                    trace.started(event.step, event.call)
                    handle._put(
                        ToolCallStarted(
                            run_id=run_id,
                            call_id=event.call.id,
                            tool=event.call.name,
                            arguments=api_arguments(event.call.arguments),
                        )
                    )
                elif isinstance(event, ag.ToolCallProgress):
                    handle._put(
                        ToolCallProgress(
                            run_id=run_id,
                            call_id=event.call.id,
                            tool=event.call.name,
                            progress=event.progress,
                            total=event.total,
                            message=event.message,
                            partial=event.partial,
                        )
                    )
                elif isinstance(event, ag.ToolCallFinished):
                    result = event.result
                    trace.finished(event.step, event.call, result)
                    content = (
                        await content_views(self.agent.executor, result, job.principal.user_id)
                        if result.content
                        else []
                    )
                    if content:
                        job.views[event.call.id] = content
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
                elif isinstance(event, ag.ConfirmationRequired):
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
                elif isinstance(event, ag.RunFinished):
                    job.finishing = True
                    self.leases.release(run_id)  # the end is written under the lease, checked there
                    response = await self.finish(job, event.run, system_offset, decided)
                    obs.run_finished(
                        job.principal.user_id,
                        job.conversation_id,
                        run_id,
                        event.run,
                        time.time() - job.started,
                        job.resumed,
                    )
                    handle._put(RunFinished(run_id=run_id, response=response))
        except asyncio.CancelledError as exc:
            if job.stopping and not self.leases.lost(run_id):
                # Stopped: the cancellation was ours; the run ends here, as far as it went.
                current = asyncio.current_task()
                if current is not None:
                    current.uncancel()
                await self._close(events)
                await self._end_stopped(job, handle, decided)
            else:
                await self._lost(job, handle, events, exc)
                if not self.leases.lost(run_id):
                    raise  # cancelled by someone else than the heartbeat: let it be cancelled
        except LeaseLost as exc:
            await self._lost(job, handle, events, exc)
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

    @staticmethod
    async def _close(events: AsyncIterator[AgentEvent]) -> None:
        closer = getattr(events, "aclose", None)
        if closer is not None:
            with contextlib.suppress(BaseException):
                await closer()

    async def _lost(
        self, job: Job, handle: RunHandle, events: AsyncIterator[AgentEvent], exc: BaseException
    ) -> None:
        """Lost the conversation (deleted, or taken over): stop, write nothing more, say so."""
        run_id = job.run_id
        self.observer.run_error(job.principal.user_id, job.conversation_id, run_id, exc, "lease_lost")
        handle._put(RunError(run_id=run_id, code="run_interrupted", message=_LOST))
        await self._close(events)

    async def _end_stopped(self, job: Job, handle: RunHandle, decided: Sequence[str]) -> None:
        run_id = job.run_id
        if self.stop_agent_run is not None:
            try:  # a durable run's workflow: no step of it starts again, and the one in flight is cancelled
                await self.stop_agent_run(run_id)
            except Exception as exc:  # the run still ends stopped here; say why its workflow may go on
                logger.warning(
                    json.dumps({"event": "agent_stop_failed", "run_id": run_id, "error": type(exc).__name__})
                )
        for call in job.trace.unfinished():  # each card says what became of its call
            handle._put(
                ToolCallFinished(
                    run_id=run_id,
                    call_id=call.id,
                    tool=call.name,
                    status="error",
                    result=None,
                    error={"code": "STOPPED", "message": STOPPED_CALL.removeprefix("Error STOPPED: ")},
                    duration_ms=0.0,
                    content=[],
                )
            )
        self.leases.release(run_id)
        try:
            response = await self._stopped(job, decided)
        except LeaseLost:
            handle._put(RunError(run_id=run_id, code="run_interrupted", message=_LOST))
            return
        except Exception as exc:
            error_id = "err_" + secrets.token_hex(6)
            self.observer.run_error(job.principal.user_id, job.conversation_id, run_id, exc, error_id)
            with contextlib.suppress(Exception):
                await self._fail(job, error_id)
            handle._put(
                RunError(
                    run_id=run_id,
                    code="internal_error",
                    message=f"The run failed on the server (error id {error_id}).",
                )
            )
            return
        handle._put(RunFinished(run_id=run_id, response=response))

    async def _stopped(self, job: Job, decided: Sequence[str]) -> dict[str, Any]:
        """Store a stopped run: what it did so far (`Trace.messages`) and its end, under its lease."""
        now = time.time()
        user = job.principal.user_id
        rows = _message_rows(job, job.trace.messages(), now)
        async with transaction(self.engine) as conn:
            held = await FINISH_CONVERSATION.execute(
                conn,
                {
                    "b_cid": job.conversation_id,
                    "b_uid": user,
                    "b_owner": job.run_id,
                    "b_pending": None,
                    "b_now": now,
                },
            )
            if held != 1:
                raise LeaseLost()
            await INSERT_MESSAGES.executemany(conn, rows)
            await FINISH_RUN.execute(
                conn,
                {"b_rid": job.run_id, "b_status": "stopped", "b_state": None, "b_error": None, "b_now": now},
            )
            await _DELETE_DECIDED.executemany(conn, [{"b_conf": cid} for cid in decided])
        return {
            "conversation_id": job.conversation_id,
            "run_id": job.run_id,
            "status": "stopped",
            "output": job.trace.output(),
            "error": None,
            "messages": job.history,
            "pending": [],
            "model": self.model_info,
        }

    async def finish(
        self, job: Job, run: AgentRun, system_offset: bool, decided: Sequence[str]
    ) -> dict[str, Any]:
        # `run.run_id` stays the agent's own (confirmations may be bound to it); the service's run id is
        # `job.run_id`, in the API, the logs and the audit trail (as the context's trace id).
        start = job.persisted
        if system_offset and run.messages and isinstance(run.messages[0], SystemMessage):
            start += 1
        new = run.messages[start:]
        now = time.time()
        user = job.principal.user_id
        rows = _message_rows(job, (msg.to_dict() for msg in new), now)
        paused = run.status == "awaiting_confirmation"
        state = json.dumps({"run": run.to_json(), "persisted": len(run.messages)}) if paused else None
        async with transaction(self.engine) as conn:
            held = await FINISH_CONVERSATION.execute(
                conn,
                {
                    "b_cid": job.conversation_id,
                    "b_uid": user,
                    "b_owner": job.run_id,
                    "b_pending": job.run_id if paused else None,
                    "b_now": now,
                },
            )
            if held != 1:
                raise LeaseLost()
            await INSERT_MESSAGES.executemany(conn, rows)
            await FINISH_RUN.execute(
                conn,
                {
                    "b_rid": job.run_id,
                    "b_status": run.status,
                    "b_state": state,
                    "b_error": clean_text(run.error) if run.error else None,
                    "b_now": now,
                },
            )
            await _DELETE_DECIDED.executemany(conn, [{"b_conf": cid} for cid in decided])
            if paused:
                known = set(decided)
                fresh = [p for p in run.pending if p.confirmation_id not in known]
                existing = {r[0] for r in await _HELD_BY_RUN.rows(conn, {"b_rid": job.run_id})}
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
                await _INSERT_HELD.executemany(conn, add)
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

    async def _fail(self, job: Job, error_id: str) -> None:
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
