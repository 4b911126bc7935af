"""The service on durable runs (`TOOLRUN_DURABLE=dbos`): the chat agent as a `DurableAgent`, DBOS's life
inside the app's, and the runs a killed process left finished into the service's own tables.

A run the process follows live is stored by `ChatService` as usual (its event stream ends with the run).
A run recovered after a crash (by this process restarted, or by another one whose lease outlived the dead
one's) has nobody following it: the agent's `on_state` hook stores its answer, or its pause, the way
`ChatService` would, as long as the conversation is still leased to it (else the service already gave
the run up as failed, and the conversation went on without it).
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

import sqlalchemy as sa

from toolrun.agent import AgentRun
from toolrun.integrations.dbos import DurableAgent, ExecutorLease, JobStore, dbos_config
from toolrun.server import _db
from toolrun.server._runs import Job
from toolrun.server._service import ChatService
from toolrun.server._settings import Settings
from toolrun.server._statements import load_history
from toolrun.server._users import Principal
from toolrun.tools import ToolContext

__all__ = ["DurableRuntime"]


class DurableRuntime:
    """Builds the durable chat agent and runs DBOS for the app's lifetime (`start` in the lifespan)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.service: ChatService | None = None
        if settings.durable_database_url is not None:
            self.database_url = settings.durable_database_url
        elif settings.is_sqlite:
            self.database_url = f"sqlite:///{(settings.data_dir / 'dbos.sqlite').resolve()}"
        else:
            self.database_url = settings.database_url
        if settings.durable_executor_id is not None:
            self.executor_id = settings.durable_executor_id
        elif settings.is_sqlite:
            self.executor_id = "local"
        else:
            self.executor_id = f"{socket.gethostname()}-{os.getpid()}"
        self._lease: ExecutorLease | None = None
        self._agent: DurableAgent | None = None
        if settings.is_sqlite:
            settings.data_dir.mkdir(parents=True, exist_ok=True)
        self.jobs = JobStore(
            self.database_url, max_running_per_user=settings.max_jobs_per_user, threads=settings.job_threads
        )

    def agent(self, *args: Any, **kwargs: Any) -> DurableAgent:
        """The chat agent (`Agent`'s arguments), its recovered runs stored by `store_recovered`."""
        self._agent = DurableAgent(
            *args, name="chat", on_state=self.store_recovered, jobs=self.jobs, **kwargs
        )
        return self._agent

    def bind(self, service: ChatService) -> None:
        self.service = service
        if self._agent is not None:
            service.stop_agent_run = self._agent.stop  # a stop cancels the run's workflow too

    def start(self) -> None:
        """Launch DBOS (from inside the app's event loop: recovered runs run on it) and the lease."""
        from dbos import DBOS

        DBOS(config=dbos_config(self.database_url, executor_id=self.executor_id, polling_interval=0.2))
        DBOS.launch()
        self._lease = ExecutorLease(
            self.database_url, executor_id=self.executor_id, seconds=self.settings.durable_lease_seconds
        )
        self._lease.start()

    def stop(self) -> None:
        from dbos import DBOS

        if self._lease is not None:
            self._lease.stop()
        if self._agent is not None:
            self._agent.release()  # the name "chat" is free for the next app of this process
        DBOS.destroy()
        self.jobs.close()

    async def store_recovered(self, run: AgentRun, ctx: ToolContext[Any]) -> None:
        """Store the state of a run nobody in this process follows, as `ChatService` stores its own."""
        service = self.service
        run_id, conversation_id, user = ctx.trace_id, ctx.conversation_id, ctx.user_id
        if service is None or run_id is None or conversation_id is None or user is None:
            return
        c = _db.conversations
        async with service.engine.connect() as conn:
            owner = (
                await conn.execute(
                    sa.select(c.c.lease_owner).where(c.c.id == conversation_id, c.c.user_id == user)
                )
            ).scalar()
            if owner != run_id:
                return  # stored already, or given up as failed when the conversation was claimed again
            history, stored = await load_history(conn, conversation_id)
        job = Job(
            principal=Principal(user_id=user, name=user, roles=ctx.roles),
            run_id=run_id,
            conversation_id=conversation_id,
            history=history,
            persisted=len(stored),
            next_seq=len(history),
            resumed=False,
            started=time.time(),
        )
        await service.finish(job, run, True, ())
