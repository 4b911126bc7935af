"""`JobStore`: background jobs (calls of `@tool(background=True)` tools in durable runs), one row each.

The job itself is a DBOS workflow (it survives restarts); this table is what people and models see of it:
whose it is, where it stands, its progress and its result, and whether a model turn has seen the result.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import sqlalchemy as sa

from toolrun._unicode import clean_json, clean_text
from toolrun.results import ToolResult
from toolrun.store._schema import create_all_locked

__all__ = ["ACTIVE_STATUSES", "FINAL_STATUSES", "JobLimitError", "JobStore"]

_T = TypeVar("_T")

FINAL_STATUSES = ("completed", "failed", "cancelled")
"""A job in one of these is over."""

ACTIVE_STATUSES = ("running", "cancelling")
"""A job in one of these still runs code, and counts against its user's `max_running_per_user`:
`cancelling` is a running job whose user asked it to stop. Only the job's runner ends it, once its tool's
code has really stopped (a sync tool's thread cannot be stopped: it is waited for), and as it really
ended: `cancelled`, or as it finished when it finished before the cancel reached it."""


class JobLimitError(Exception):
    """The user has as many running jobs as allowed."""


class JobStore:
    """Jobs in the table `toolrun_jobs` of `database_url` (sync or async SQLAlchemy URL; the DBOS system
    database will do). Every method is async (the work runs on the store's own threads, not the loop's
    default executor: DBOS installs its own there and shuts it down with `DBOS.destroy()`).

    Args:
        database_url: Where the table lives (created if missing).
        max_running_per_user: Running jobs one user may have; another start is refused.
        threads: Worker threads for the blocking (`def`) tools of the jobs, a pool of their own (default:
            `min(32, cpu_count + 4)`): however many jobs block, the executor's threads stay free for the
            sync tools of chat turns. A job whose tool finds every one of them taken waits for one (it
            still counts against its user); its time box starts when its tool starts.
    """

    def __init__(
        self, database_url: str, *, max_running_per_user: int = 5, threads: int | None = None
    ) -> None:
        from toolrun.integrations._dbos_steps import sync_url

        if max_running_per_user < 1:
            raise ValueError("max_running_per_user must be at least 1.")
        if threads is not None and threads < 1:
            raise ValueError("threads must be at least 1.")
        self.max_running_per_user = max_running_per_user
        self.threads = threads
        self._workers: ThreadPoolExecutor | None = None
        self._engine = sa.create_engine(sync_url(database_url))
        self.table = sa.Table(
            "toolrun_jobs",
            sa.MetaData(),
            sa.Column("id", sa.String(64), primary_key=True),
            sa.Column("user_id", sa.String(200), nullable=False, index=True),
            sa.Column("conversation_id", sa.String(200), nullable=True, index=True),
            sa.Column("run_id", sa.String(200), nullable=True),
            sa.Column("tool", sa.String(200), nullable=False),
            sa.Column("status", sa.String(20), nullable=False),
            sa.Column("progress", sa.Text, nullable=True),  # JSON {progress, total, message}
            sa.Column("result", sa.Text, nullable=True),  # JSON ToolResult.to_dict()
            sa.Column("delivered", sa.Boolean, nullable=False, default=False),
            sa.Column("created_at", sa.Float, nullable=False),
            sa.Column("updated_at", sa.Float, nullable=False),
        )
        with self._engine.begin() as db:  # processes starting together make it once
            create_all_locked(db, self.table.metadata)
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="toolrun-jobs")

    @property
    def thread_pool(self) -> ThreadPoolExecutor:
        """The worker threads of the jobs' blocking tools (created on first use)."""
        if self._workers is None:
            self._workers = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="toolrun-job")
        return self._workers

    def close(self) -> None:
        if self._workers is not None:  # a blocking tool cannot be stopped: its thread is not waited for
            self._workers.shutdown(wait=False, cancel_futures=True)
            self._workers = None
        self._pool.shutdown(wait=True)
        self._engine.dispose()

    async def _in_thread(self, fn: Callable[[], _T]) -> _T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    async def create(
        self, job_id: str, *, user_id: str, tool: str, conversation_id: str | None, run_id: str | None
    ) -> None:
        """Record a new running job (again for the same id: nothing changes).

        Raises:
            JobLimitError: the user already has `max_running_per_user` running jobs.
        """

        def create() -> None:
            t, now = self.table, time.time()
            running = (
                sa.select(sa.func.count())
                .where(t.c.user_id == user_id, t.c.status.in_(ACTIVE_STATUSES))
                .scalar_subquery()
            )
            values = sa.select(
                sa.literal(job_id),
                sa.literal(user_id),
                sa.literal(conversation_id, sa.String),
                sa.literal(run_id, sa.String),
                sa.literal(tool),
                sa.literal("running"),
                sa.literal(False),
                sa.literal(now),
                sa.literal(now),
            ).where(running < self.max_running_per_user)
            columns = ["id", "user_id", "conversation_id", "run_id", "tool", "status", "delivered"]
            # RETURNING says whether the row went in: an INSERT ... SELECT's rowcount is the driver's to
            # report, and psycopg 3 under SQLAlchemy 2.1 reports -1 for it.
            insert = (
                sa.insert(t).from_select([*columns, "created_at", "updated_at"], values).returning(t.c.id)
            )
            with self._engine.begin() as db:
                if db.execute(sa.select(t.c.id).where(t.c.id == job_id)).first() is not None:
                    return  # started before (a replayed start)
                if db.dialect.name == "postgresql":  # one start per user at a time: the count holds
                    db.execute(sa.select(sa.func.pg_advisory_xact_lock(sa.func.hashtext(user_id))))
                # One statement: SQLite runs it under its write lock, so the count and the insert agree.
                if db.execute(insert).first() is None:
                    raise JobLimitError(f"{self.max_running_per_user} jobs running")

        await self._in_thread(create)

    async def get(self, job_id: str, user_id: str) -> dict[str, Any] | None:
        """The user's job, as the API shows it; None when unknown or someone else's."""
        t = self.table
        rows = await self._select(sa.select(t).where(t.c.id == job_id, t.c.user_id == user_id))
        return rows[0] if rows else None

    async def list_jobs(self, user_id: str, *, limit: int = 100) -> list[dict[str, Any]]:
        """The user's jobs, newest first."""
        t = self.table
        return await self._select(
            sa.select(t).where(t.c.user_id == user_id).order_by(t.c.created_at.desc()).limit(limit)
        )

    async def status(self, job_id: str) -> str | None:
        t = self.table
        rows = await self._select(sa.select(t).where(t.c.id == job_id))
        return str(rows[0]["status"]) if rows else None

    async def progress(self, job_id: str, progress: float, total: float | None, message: str | None) -> None:
        """Store the tool's latest report (its message cleaned: see `toolrun._unicode`)."""
        data = json.dumps(
            {"progress": progress, "total": total, "message": clean_text(message or "") or None}
        )
        t = self.table
        await self._execute(
            sa.update(t)
            .where(t.c.id == job_id, t.c.status == "running")
            .values(progress=data, updated_at=time.time())
        )

    async def finish(self, job_id: str, result: ToolResult) -> None:
        """Store the result; the status follows it: `cancelled` for the runner's cancel result of a job
        whose user asked it to stop, else `completed` or `failed` (a job that finished as the cancel
        landed stays as it finished)."""
        t = self.table
        status: Any = "completed" if result.status == "ok" else "failed"
        error = result.error
        if error is not None and (error.details or {}).get("cancelled") is True:
            status = sa.case((t.c.status.in_(("cancelling", "cancelled")), "cancelled"), else_=status)
        await self._execute(
            sa.update(t)
            .where(t.c.id == job_id)
            .values(
                status=status,
                # tool output: cleaned, so every read of the row can be sent (toolrun._unicode)
                result=json.dumps(clean_json(result.to_dict()), default=str),
                updated_at=time.time(),
            )
        )

    async def cancel(self, job_id: str, user_id: str) -> dict[str, Any] | None:
        """Ask the user's running job to stop: it is `cancelling` (and still counts against the user)
        until its runner has stopped its tool; the job, or None."""
        t = self.table
        await self._execute(
            sa.update(t)
            .where(t.c.id == job_id, t.c.user_id == user_id, t.c.status == "running")
            .values(status="cancelling", updated_at=time.time())
        )
        return await self.get(job_id, user_id)

    async def take_finished(self, user_id: str, conversation_id: str) -> list[dict[str, Any]]:
        """The conversation's finished jobs no model turn has seen yet, now marked seen."""

        def take() -> list[dict[str, Any]]:
            t = self.table
            with self._engine.begin() as db:
                rows = db.execute(
                    sa.select(t)
                    .where(
                        t.c.user_id == user_id,
                        t.c.conversation_id == conversation_id,
                        t.c.status.in_(FINAL_STATUSES),
                        t.c.delivered.is_(False),
                    )
                    .order_by(t.c.updated_at)
                ).all()
                taken = []
                for row in rows:
                    claimed = db.execute(
                        sa.update(t)
                        .where(t.c.id == row.id, t.c.delivered.is_(False))
                        .values(delivered=True)
                        .returning(t.c.id)
                    ).first()
                    if claimed is not None:
                        taken.append(_view(row._mapping))
                return taken

        return await self._in_thread(take)

    async def _select(self, statement: Any) -> list[dict[str, Any]]:
        def select() -> list[dict[str, Any]]:
            with self._engine.connect() as db:
                return [_view(row._mapping) for row in db.execute(statement)]

        return await self._in_thread(select)

    async def _execute(self, statement: Any) -> None:
        def execute() -> None:
            with self._engine.begin() as db:
                db.execute(statement)

        await self._in_thread(execute)


def _view(row: Any) -> dict[str, Any]:
    """A row as the API shows it (JSON cleaned again: rows written before the cleaning may hold escaped
    lone surrogates)."""
    return {
        "id": row["id"],
        "tool": row["tool"],
        "status": row["status"],
        "conversation_id": row["conversation_id"],
        "run_id": row["run_id"],
        "progress": clean_json(json.loads(row["progress"])) if row["progress"] else None,
        "result": clean_json(json.loads(row["result"])) if row["result"] else None,
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }
