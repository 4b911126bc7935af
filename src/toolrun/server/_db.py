"""The service's tables and engine. The schema is owned by the Alembic migrations in `migrations/`;
these `Table` objects describe it for queries (the migration test checks they agree).

Every row carries the `user_id` it belongs to, and every query of a user's data filters on it.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from toolrun.server._sqlite import InlineEngine, connect_inline

__all__ = ["create_engine", "metadata"]

logger = logging.getLogger("toolrun.server")

metadata = sa.MetaData()

users = sa.Table(
    "toolrun_users",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("name", sa.String(64), nullable=False, unique=True),
    sa.Column("roles", sa.Text(), nullable=False),  # JSON list
    sa.Column("created_at", sa.Double(), nullable=False),
    sa.Column("disabled", sa.Boolean(), nullable=False, server_default=sa.false()),
)

tokens = sa.Table(
    "toolrun_tokens",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("user_id", sa.String(40), nullable=False, index=True),
    sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("label", sa.String(64), nullable=True),
    sa.Column("created_at", sa.Double(), nullable=False),
    sa.Column("revoked_at", sa.Double(), nullable=True),
)

conversations = sa.Table(
    "toolrun_conversations",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("user_id", sa.String(40), nullable=False),
    sa.Column("title", sa.String(120), nullable=False),
    sa.Column("created_at", sa.Double(), nullable=False),
    sa.Column("updated_at", sa.Double(), nullable=False),
    sa.Column("pending_run_id", sa.String(40), nullable=True),  # the run awaiting a decision, if any
    sa.Column("lease_until", sa.Double(), nullable=True),  # a run is working on it until then
    sa.Column("lease_owner", sa.String(40), nullable=True),
    sa.Column("lease_holder", sa.String(200), nullable=True),  # the process that took it (`_holder`)
    sa.Index("toolrun_conversations_user", "user_id", "updated_at"),
)

messages = sa.Table(
    "toolrun_messages",
    metadata,
    sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
    sa.Column("conversation_id", sa.String(40), nullable=False),
    sa.Column("user_id", sa.String(40), nullable=False),
    sa.Column("run_id", sa.String(40), nullable=False),
    sa.Column("seq", sa.Integer(), nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("data", sa.Text(), nullable=False),  # Message.to_dict() as JSON
    sa.Column("created_at", sa.Double(), nullable=False),
    sa.UniqueConstraint("conversation_id", "seq", name="toolrun_messages_conversation_seq"),
)

runs = sa.Table(
    "toolrun_runs",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("user_id", sa.String(40), nullable=False),
    sa.Column("conversation_id", sa.String(40), nullable=False),
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("state", sa.Text(), nullable=True),  # AgentRun.to_json() while it can resume
    sa.Column("error", sa.Text(), nullable=True),
    sa.Column("model", sa.String(200), nullable=False),
    sa.Column("partial", sa.Text(), nullable=True),  # the answer so far of a working run (its heartbeat)
    sa.Column("stop_requested_at", sa.Double(), nullable=True),  # POST .../stop asked it to stop
    sa.Column("created_at", sa.Double(), nullable=False),
    sa.Column("updated_at", sa.Double(), nullable=False),
    sa.Index("toolrun_runs_conversation", "conversation_id", "created_at"),
    sa.Index("toolrun_runs_user", "user_id"),
)

run_confirmations = sa.Table(
    "toolrun_run_confirmations",
    metadata,
    sa.Column("confirmation_id", sa.String(64), primary_key=True),
    sa.Column("run_id", sa.String(40), nullable=False, index=True),
    sa.Column("user_id", sa.String(40), nullable=False),
    sa.Column("conversation_id", sa.String(40), nullable=False),
    sa.Index("toolrun_run_confirmations_conversation", "conversation_id", "user_id"),
)

audit = sa.Table(
    "toolrun_audit",
    metadata,
    sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
    sa.Column("timestamp", sa.Double(), nullable=False),
    sa.Column("action", sa.String(16), nullable=False),
    sa.Column("tool", sa.String(128), nullable=True),
    sa.Column("call_id", sa.String(128), nullable=False),
    sa.Column("run_id", sa.String(128), nullable=True),
    sa.Column("conversation_id", sa.String(128), nullable=True),
    sa.Column("user_id", sa.String(128), nullable=True),
    sa.Column("arguments_hash", sa.String(128), nullable=True),
    sa.Column("outcome", sa.String(32), nullable=False),
    sa.Column("code", sa.String(64), nullable=True),
    sa.Column("duration_ms", sa.Double(), nullable=False),
    sa.Column("attempts", sa.Integer(), nullable=False),
    sa.Column("cached", sa.Boolean(), nullable=False),
    sa.Column("error_id", sa.String(64), nullable=True),
    sa.Column("confirmation_id", sa.String(64), nullable=True),
    sa.Column("rule_id", sa.String(64), nullable=True),  # the standing approval that decided the call
    sa.Index("toolrun_audit_user_time", "user_id", "timestamp"),
    sa.Index("toolrun_audit_confirmation", "confirmation_id"),
)


def create_engine(url: str, *, busy_seconds: float = 5.0, **options: Any) -> AsyncEngine:
    """The service's engine: SQLite (WAL, one connection, statements run on the loop: see `_sqlite`), or
    PostgreSQL with a pool. `busy_seconds`: how long a SQLite statement waits for another process's write
    lock (migrations, which wait for each other under the schema lock, take longer)."""
    if url.startswith("sqlite"):
        # SQLite has one writer at a time, and its busy handler waits by sleeping: under concurrency, several
        # connections spend their time in those sleeps. One connection makes every statement queue on the
        # pool instead (an asyncio wait), which is far faster; WAL still lets other processes read.
        if "poolclass" not in options:
            options.setdefault("pool_size", 1)
            options.setdefault("max_overflow", 0)
            # Closing a Connection already rolls back what it began; the pool's second rollback would
            # only cost another round trip to aiosqlite's thread.
            options.setdefault("pool_reset_on_return", None)
        database = sa.make_url(url).database or ":memory:"
        engine = InlineEngine(
            create_async_engine(
                url,
                async_creator=functools.partial(connect_inline, database, busy_seconds=busy_seconds),
                **options,
            ).sync_engine
        )

        @event.listens_for(engine.sync_engine, "connect")
        def _pragmas(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute(f"PRAGMA busy_timeout={int(busy_seconds * 1000)}")  # before WAL, which may wait
            if database != ":memory:":
                cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        return engine
    if "poolclass" not in options:
        options.setdefault("pool_size", 10)
        options.setdefault("max_overflow", 20)
    options.setdefault("pool_pre_ping", True)
    return create_async_engine(url, **options)


def now() -> float:
    return time.time()
