"""SQL stores on SQLAlchemy's async Core: SQLite (the embedded default) and PostgreSQL (shared state).

```python
from toolrun.store.sql import create_sql_stores

stores = create_sql_stores("postgresql+asyncpg://app@127.0.0.1:5432/app")   # or "sqlite+aiosqlite:///x.db"
await stores.create_tables()                                                # idempotent
executor = ToolExecutor(registry, confirmations=stores.confirmations, rate_limits=stores.rate_limits,
                        cache=stores.cache, hash_key=SHARED_KEY)
...
await stores.aclose()
```

Each store works on one `AsyncEngine` (made from a URL, or yours), in its own tables named
`<table_prefix>confirmations`, `<table_prefix>rate_limits`, `<table_prefix>cache`. JSON is stored as text
and times as `time.time()` seconds in double precision columns, so a row reads the same on both engines.

## Why every operation is atomic

Every operation is ONE SQL statement, run in autocommit mode: the database's own statement-level
atomicity is the whole argument, there is no read-then-write in Python and no transaction to get wrong.

- `SQLConfirmationStore.consume` is `UPDATE ... SET consumed_at = :now WHERE id = :id AND user_id = :user
  AND consumed_at IS NULL RETURNING ...`. PostgreSQL: the second of two racing updates blocks on the first
  one's row lock, then re-checks the row, finds it consumed and updates nothing. SQLite: writers are
  serialised by the database lock. Either way exactly one caller gets the row back; a wrong user matches
  nothing, so the row stays. The consumed row stays too, as a record that it was consumed (committed
  before the approved call runs: after a crash, `consumed_at` tells "approved and taken by a run" from
  "never decided"); `get` and `list_pending` no longer see it, `purge_expired` deletes it with the rest.
- `SQLRateLimitStore.acquire` is one `INSERT ... ON CONFLICT (key) DO UPDATE ... RETURNING` that refills
  the bucket and takes the cost in SQL. PostgreSQL guarantees the upsert an atomic insert-or-update
  outcome, and its `DO UPDATE` works on the latest committed row under a row lock, so two racing
  acquires see each other's result. SQLite runs the statement under its write lock, held from the
  statement's first read to its commit: the lock `BEGIN IMMEDIATE` would take up front, without a
  transaction around it, so there is no read-then-upgrade window (and no `SQLITE_BUSY` deadlock). This
  is the single-UPSERT variant of the "lock the row, refill, take" recipe: one round trip instead of
  four, and nothing held across awaits. The statement records its decision in the row (`granted`) because
  `RETURNING` only sees the new row.
- The clock of a bucket and of a cache entry is the DATABASE's (`statement_timestamp()` on PostgreSQL,
  `julianday('now')` on SQLite), so processes on several hosts agree on when a token comes back. A
  statement that waited for a row lock may see a `now` older than the row's: the refill is clamped at
  zero and `updated_at` never moves back, so a late statement can only grant less, never more.
- Confirmations keep the caller's `time.time()` (`created_at`, `expires_at` come from the executor), as
  the in-memory store does.
- `SQLRunStore.claim` is `UPDATE <runs> SET claim_token = :token ... WHERE run_id = (SELECT run_id FROM
  <run_confirmations> WHERE confirmation_id = :cid AND user_id = :user) AND user_id = :user AND
  (claimed_until IS NULL OR claimed_until < :now) RETURNING ...`. PostgreSQL: the second of two racing
  claims blocks on the first one's row lock, then re-checks the row, finds it claimed and updates
  nothing; SQLite serialises the writers. Exactly one decider gets the paused run. Its `save` and
  `delete` change two tables, in one transaction.

The module needs SQLAlchemy 2 (the `sql` extra) and is never imported by `import toolrun`; import it
as `from toolrun.store.sql import ...`. SQLite needs 3.35 or later (for `RETURNING`).
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Self

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from toolrun.store._memory import new_rule_id
from toolrun.store._protocols import (
    ApprovalRule,
    Artifact,
    PausedRun,
    PendingConfirmation,
    RateLimitDecision,
    check_rule_text,
)
from toolrun.store._schema import create_all_locked

__all__ = [
    "DEFAULT_TABLE_PREFIX",
    "SQLApprovalRuleStore",
    "SQLArtifactStore",
    "SQLCache",
    "SQLConfirmationStore",
    "SQLRateLimitStore",
    "SQLRunStore",
    "SQLStores",
    "create_sql_stores",
]

DEFAULT_TABLE_PREFIX = "toolrun_"
"""Tables are named `toolrun_confirmations`, `toolrun_rate_limits`, `toolrun_cache` by default."""

# Lowercase only: PostgreSQL folds unquoted names to lowercase, and a name that needs quoting is a trap
# for whoever queries the tables by hand. 40 characters leave room for index names under PostgreSQL's 63.
_PREFIX_RE = re.compile(r"(?:[a-z_][a-z0-9_]{0,39})?\Z")
_DIALECTS = ("sqlite", "postgresql")
_SQLITE_RETURNING = (3, 35, 0)

# The database's clock, as `time.time()` seconds. `statement_timestamp()` is fixed for one statement,
# and SQLite's 'now' is fixed for one step, so every use within one statement sees the same instant.
_NOW = {
    "postgresql": "CAST(EXTRACT(EPOCH FROM statement_timestamp()) AS DOUBLE PRECISION)",
    "sqlite": "((julianday('now') - 2440587.5) * 86400.0)",
}


def _check_url(url: str) -> None:
    backend = sa.make_url(url).get_backend_name()
    if backend not in _DIALECTS:
        raise ValueError(f"The SQL stores support SQLite and PostgreSQL, not {backend!r} (from the URL).")


def _check_engine(engine: AsyncEngine) -> str:
    if not isinstance(engine, AsyncEngine):
        raise TypeError(
            f"Expected an AsyncEngine (sqlalchemy.ext.asyncio.create_async_engine), not {type(engine)!r}."
        )
    name = engine.dialect.name
    if name not in _DIALECTS:
        raise ValueError(f"The SQL stores support SQLite and PostgreSQL, not {name!r}.")
    if name == "sqlite" and sqlite3.sqlite_version_info < _SQLITE_RETURNING:
        raise RuntimeError(
            f"SQLite {sqlite3.sqlite_version} is too old for the SQL stores: they need 3.35 or later "
            "(DELETE ... RETURNING makes consuming a confirmation atomic)."
        )
    return name


def _check_prefix(prefix: str) -> str:
    if not isinstance(prefix, str) or not _PREFIX_RE.match(prefix):
        raise ValueError(
            f"table_prefix must be lowercase letters, digits and underscores (at most 40, not starting "
            f"with a digit); got {prefix!r}."
        )
    return prefix


def _make_engine(url: str, options: Mapping[str, Any] | None) -> AsyncEngine:
    _check_url(url)
    return create_async_engine(url, **dict(options or {}))


class _SQLStore:
    """What the three stores share: the engine, its dialect, their tables, create/drop, close."""

    def __init__(
        self,
        engine: AsyncEngine | str,
        *,
        table_prefix: str = DEFAULT_TABLE_PREFIX,
        engine_options: Mapping[str, Any] | None = None,
    ) -> None:
        prefix = _check_prefix(table_prefix)
        if isinstance(engine, str):
            engine = _make_engine(engine, engine_options)
            self._owns_engine = True
        else:
            if engine_options:
                raise ValueError("engine_options apply to an engine made from a URL, not to a given engine.")
            self._owns_engine = False
        try:
            self._dialect = _check_engine(engine)
        except Exception:
            if self._owns_engine:
                engine.sync_engine.dispose()
            raise
        self.engine: AsyncEngine = engine
        """The engine (yours, or made from the URL and then closed by `aclose`)."""
        self.table_prefix = prefix
        """The prefix of this store's table names."""
        self.metadata = sa.MetaData()
        """This store's tables only (each store creates and drops its own)."""
        # Single statements run in autocommit: atomic by themselves, and one round trip (no BEGIN/COMMIT).
        self._auto = engine.execution_options(isolation_level="AUTOCOMMIT")
        self._now: sa.ColumnElement[float] = sa.literal_column(_NOW[self._dialect], sa.Double())

    def _insert(self, table: sa.Table) -> Any:
        # The dialect's own INSERT: both spell ON CONFLICT the same way in SQLAlchemy.
        if self._dialect == "postgresql":
            return postgresql.insert(table)
        return sqlite_dialect.insert(table)

    def _greatest(self, a: Any, b: Any) -> Any:
        return sa.func.greatest(a, b) if self._dialect == "postgresql" else sa.func.max(a, b)

    def _least(self, a: Any, b: Any) -> Any:
        return sa.func.least(a, b) if self._dialect == "postgresql" else sa.func.min(a, b)

    async def create_tables(self) -> None:
        """Create this store's tables and indexes if they do not exist (safe to call every start, from any
        number of processes at once: they take turns under toolrun's schema lock, and the first makes
        the tables)."""
        async with self.engine.begin() as conn:
            await conn.run_sync(self._create_tables)

    def _create_tables(self, connection: sa.Connection) -> None:
        create_all_locked(connection, self.metadata)

    async def drop_tables(self) -> None:
        """Drop this store's tables (and everything in them)."""
        async with self.engine.begin() as conn:
            await conn.run_sync(self.metadata.drop_all, checkfirst=True)

    async def aclose(self) -> None:
        """Close the engine if this store made it from a URL (a given engine stays yours to close)."""
        if self._owns_engine:
            await self.engine.dispose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class SQLConfirmationStore(_SQLStore):
    """Pending confirmations in the table `<table_prefix>confirmations`, one row each.

    `consume` is a single `UPDATE ... RETURNING` filtered by id, user and "not consumed yet": of any number
    of concurrent consumers, across processes and hosts, exactly one gets the row (see the module
    docstring), and the row stays as a record of it (`consumed_at`). Expired and consumed rows stay until
    `purge_expired` (call it now and then, e.g. from a periodic task).

    Args:
        engine: A database URL (`"sqlite+aiosqlite:///toolrun.db"`,
            `"postgresql+asyncpg://user@host/db"`) or an `AsyncEngine` you own and close.
        table_prefix: Prefix of the table name (lowercase letters, digits, `_`).
        engine_options: Keyword arguments for `create_async_engine` when `engine` is a URL.
    """

    def __init__(
        self,
        engine: AsyncEngine | str,
        *,
        table_prefix: str = DEFAULT_TABLE_PREFIX,
        engine_options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(engine, table_prefix=table_prefix, engine_options=engine_options)
        name = f"{self.table_prefix}confirmations"
        self.table = sa.Table(
            name,
            self.metadata,
            sa.Column("id", sa.String(), primary_key=True),
            sa.Column("user_id", sa.String(), nullable=False),
            sa.Column("tool_name", sa.String(), nullable=False),
            sa.Column("arguments_hash", sa.String(), nullable=False),
            sa.Column("call", sa.Text(), nullable=False),  # JSON
            sa.Column("summary", sa.Text(), nullable=False),
            sa.Column("created_at", sa.Double(), nullable=False),
            sa.Column("expires_at", sa.Double(), nullable=False),
            sa.Column("conversation_id", sa.String(), nullable=True),
            sa.Column("run_id", sa.String(), nullable=True),
            sa.Column("metadata", sa.Text(), nullable=False),  # JSON
            sa.Column("preview", sa.Text(), nullable=True),
            sa.Column("consumed_at", sa.Double(), nullable=True),  # when it was taken; NULL: pending
            sa.Index(f"{name}_user", "user_id", "created_at"),
            sa.Index(f"{name}_expiry", "expires_at"),
        )

    async def create_tables(self) -> None:
        """Create the table if it does not exist; add the `run_id`, `preview` and `consumed_at` columns to
        a table made before it had them (with Alembic's operations, under the same schema lock).

        The columns are nullable, so rows written by older versions stay readable (not bound to a run, no
        preview, not consumed). Safe to call on every start, from several processes at once.
        """
        await super().create_tables()

    def _create_tables(self, connection: sa.Connection) -> None:
        super()._create_tables(connection)
        present = {c["name"] for c in sa.inspect(connection).get_columns(self.table.name)}
        missing = [name for name in ("run_id", "preview", "consumed_at") if name not in present]
        if missing:
            from alembic.operations import Operations
            from alembic.runtime.migration import MigrationContext

            operations = Operations(MigrationContext.configure(connection))
            for name in missing:
                column = self.table.c[name]
                operations.add_column(self.table.name, sa.Column(name, column.type, nullable=True))

    async def add(self, pending: PendingConfirmation) -> None:
        """Keep `pending` (a confirmation with the same id is replaced)."""
        row = {
            "id": pending.id,
            "user_id": pending.user_id,
            "tool_name": pending.tool_name,
            "arguments_hash": pending.arguments_hash,
            "call": json.dumps(dict(pending.call), separators=(",", ":")),
            "summary": pending.summary,
            "created_at": pending.created_at,
            "expires_at": pending.expires_at,
            "conversation_id": pending.conversation_id,
            "run_id": pending.run_id,
            "metadata": json.dumps(dict(pending.metadata), separators=(",", ":")),
            "preview": pending.preview,
            "consumed_at": None,
        }
        insert = self._insert(self.table).values(row)
        stmt = insert.on_conflict_do_update(
            index_elements=[self.table.c.id],
            set_={k: insert.excluded[k] for k in row if k != "id"},
        )
        async with self._auto.connect() as conn:
            await conn.execute(stmt)

    async def get(self, confirmation_id: str) -> PendingConfirmation | None:
        """The pending confirmation, without using it; None when unknown or already used."""
        t = self.table
        stmt = sa.select(t).where(t.c.id == confirmation_id, t.c.consumed_at.is_(None))
        async with self._auto.connect() as conn:
            row = (await conn.execute(stmt)).mappings().first()
        return None if row is None else _pending(row)

    async def consume(self, confirmation_id: str, *, user_id: str) -> PendingConfirmation | None:
        """Atomically delete and return the confirmation if it belongs to `user_id` (else None, untouched).

        An expired confirmation is returned like any other: the caller checks `expired()`.
        """
        t = self.table
        stmt = (
            sa.update(t)
            .where(t.c.id == confirmation_id, t.c.user_id == user_id, t.c.consumed_at.is_(None))
            .values(consumed_at=time.time())
            .returning(*t.c)  # the row itself: no window between reading and taking
        )
        async with self._auto.connect() as conn:
            row = (await conn.execute(stmt)).mappings().first()
        return None if row is None else _pending(row)

    async def consumed_at(self, confirmation_id: str) -> float | None:
        """When the confirmation was consumed (approved or denied and taken by its run); None when it is
        pending, unknown or purged. Written before an approved call runs: a crash cannot lose it."""
        t = self.table
        stmt = sa.select(t.c.consumed_at).where(t.c.id == confirmation_id)
        async with self._auto.connect() as conn:
            value = (await conn.execute(stmt)).scalar_one_or_none()
        return None if value is None else float(value)

    async def list_pending(self, user_id: str, *, now: float) -> list[PendingConfirmation]:
        """The confirmations of `user_id` not expired at `now`, oldest first."""
        t = self.table
        stmt = (
            sa.select(t)
            .where(t.c.user_id == user_id, t.c.expires_at > now, t.c.consumed_at.is_(None))
            .order_by(t.c.created_at, t.c.id)
        )
        async with self._auto.connect() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return [_pending(row) for row in rows]

    async def purge_expired(self, now: float) -> int:
        """Delete the confirmations expired at `now` (consumed ones too); return how many still pending."""
        t = self.table
        stmt = sa.delete(t).where(t.c.expires_at <= now).returning(t.c.consumed_at)
        async with self._auto.connect() as conn:
            consumed = (await conn.execute(stmt)).scalars().all()
        return sum(1 for value in consumed if value is None)


def _pending(row: sa.RowMapping) -> PendingConfirmation:
    return PendingConfirmation(
        id=row["id"],
        user_id=row["user_id"],
        tool_name=row["tool_name"],
        arguments_hash=row["arguments_hash"],
        call=json.loads(row["call"]),
        summary=row["summary"],
        created_at=float(row["created_at"]),
        expires_at=float(row["expires_at"]),
        conversation_id=row["conversation_id"],
        run_id=row["run_id"],
        metadata=json.loads(row["metadata"]),
        preview=row["preview"],
    )


class SQLRunStore(_SQLStore):
    """Paused agent runs in `<table_prefix>paused_runs`, and the confirmations each waits for in
    `<table_prefix>paused_run_confirmations`: every process on the database can decide any of them.

    `claim` is one `UPDATE ... RETURNING` (see the module docstring): of any number of concurrent
    decisions on one run, across processes and hosts, exactly one gets it. Times are the caller's
    `time.time()`, as for confirmations. Expired runs stay until `purge_expired` (call it now and then).

    Args:
        engine: A database URL or an `AsyncEngine` you own and close.
        table_prefix: Prefix of the table names (lowercase letters, digits, `_`).
        engine_options: Keyword arguments for `create_async_engine` when `engine` is a URL.
    """

    def __init__(
        self,
        engine: AsyncEngine | str,
        *,
        table_prefix: str = DEFAULT_TABLE_PREFIX,
        engine_options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(engine, table_prefix=table_prefix, engine_options=engine_options)
        name = f"{self.table_prefix}paused_runs"
        self.table = sa.Table(
            name,
            self.metadata,
            sa.Column("run_id", sa.String(), primary_key=True),
            sa.Column("user_id", sa.String(), nullable=False),
            sa.Column("conversation_id", sa.String(), nullable=True),
            sa.Column("data", sa.Text(), nullable=False),  # the run's signed JSON
            sa.Column("confirmation_ids", sa.Text(), nullable=False),  # JSON array
            sa.Column("expires_at", sa.Double(), nullable=False),
            sa.Column("claim_token", sa.String(), nullable=True),  # NULL: waiting for a decision
            sa.Column("claimed_until", sa.Double(), nullable=True),
            sa.Index(f"{name}_expiry", "expires_at"),
        )
        self.confirmations = sa.Table(
            f"{self.table_prefix}paused_run_confirmations",
            self.metadata,
            sa.Column("confirmation_id", sa.String(), primary_key=True),
            sa.Column("run_id", sa.String(), nullable=False, index=True),
            sa.Column("user_id", sa.String(), nullable=False),
        )

    async def save(self, run: PausedRun) -> None:
        """Keep `run`, unclaimed, replacing any run of the same id (one transaction)."""
        t, c = self.table, self.confirmations
        row = {
            "run_id": run.run_id,
            "user_id": run.user_id,
            "conversation_id": run.conversation_id,
            "data": run.data,
            "confirmation_ids": json.dumps(list(run.confirmation_ids)),
            "expires_at": float(run.expires_at),
            "claim_token": None,
            "claimed_until": None,
        }
        insert = self._insert(t).values(row)
        upsert = insert.on_conflict_do_update(
            index_elements=[t.c.run_id], set_={k: insert.excluded[k] for k in row if k != "run_id"}
        )
        ids = list(run.confirmation_ids)
        async with self.engine.begin() as conn:
            await conn.execute(upsert)
            await conn.execute(
                sa.delete(c).where(sa.or_(c.c.run_id == run.run_id, c.c.confirmation_id.in_(ids)))
            )
            if ids:
                await conn.execute(
                    c.insert(),
                    [{"confirmation_id": i, "run_id": run.run_id, "user_id": run.user_id} for i in ids],
                )

    async def claim(
        self, confirmation_id: str, *, user_id: str, token: str, until: float, now: float
    ) -> PausedRun | None:
        """Atomically take the run waiting for `confirmation_id` if it is `user_id`'s and nobody holds it
        (one statement); None otherwise, and nothing changes."""
        t, c = self.table, self.confirmations
        owner = (
            sa.select(c.c.run_id)
            .where(c.c.confirmation_id == confirmation_id, c.c.user_id == user_id)
            .scalar_subquery()
        )
        stmt = (
            sa.update(t)
            .where(
                t.c.run_id == owner,
                t.c.user_id == user_id,
                sa.or_(t.c.claimed_until.is_(None), t.c.claimed_until < now),
            )
            .values(claim_token=token, claimed_until=until)
            .returning(*t.c)
        )
        async with self._auto.connect() as conn:
            row = (await conn.execute(stmt)).mappings().first()
        return None if row is None else _paused(row)

    async def find(self, confirmation_id: str, *, user_id: str) -> PausedRun | None:
        """The run waiting for `confirmation_id`, without claiming it; None when unknown or another user's."""
        t, c = self.table, self.confirmations
        stmt = (
            sa.select(t)
            .join(c, c.c.run_id == t.c.run_id)
            .where(c.c.confirmation_id == confirmation_id, c.c.user_id == user_id, t.c.user_id == user_id)
        )
        async with self._auto.connect() as conn:
            row = (await conn.execute(stmt)).mappings().first()
        return None if row is None else _paused(row)

    async def release(self, run_id: str, *, token: str) -> bool:
        """Put a claimed run back if `token` still holds it."""
        t = self.table
        stmt = (
            sa.update(t)
            .where(t.c.run_id == run_id, t.c.claim_token == token)
            .values(claim_token=None, claimed_until=None)
        )
        async with self._auto.connect() as conn:
            result = await conn.execute(stmt)
        return result.rowcount > 0

    async def delete(self, run_id: str) -> bool:
        """Forget a run and its confirmation ids (one transaction)."""
        t, c = self.table, self.confirmations
        async with self.engine.begin() as conn:
            await conn.execute(sa.delete(c).where(c.c.run_id == run_id))
            result = await conn.execute(sa.delete(t).where(t.c.run_id == run_id))
        return result.rowcount > 0

    async def purge_expired(self, now: float) -> int:
        """Delete the runs expired at `now` that nobody holds (and their confirmation ids); how many."""
        t, c = self.table, self.confirmations
        gone = sa.and_(t.c.expires_at <= now, sa.or_(t.c.claimed_until.is_(None), t.c.claimed_until < now))
        async with self.engine.begin() as conn:
            ids = (await conn.execute(sa.delete(t).where(gone).returning(t.c.run_id))).scalars().all()
            if ids:
                await conn.execute(sa.delete(c).where(c.c.run_id.in_(list(ids))))
        return len(ids)


def _paused(row: sa.RowMapping) -> PausedRun:
    return PausedRun(
        run_id=row["run_id"],
        user_id=row["user_id"],
        conversation_id=row["conversation_id"],
        data=row["data"],
        confirmation_ids=tuple(json.loads(row["confirmation_ids"])),
        expires_at=float(row["expires_at"]),
        claim_token=row["claim_token"],
        claimed_until=None if row["claimed_until"] is None else float(row["claimed_until"]),
    )


class SQLApprovalRuleStore(_SQLStore):
    """Standing approvals (`ApprovalRule`) in the table `<table_prefix>approval_rules`, one row each.

    Args:
        engine: A database URL or an `AsyncEngine` you own and close.
        table_prefix: Prefix of the table name (lowercase letters, digits, `_`).
        engine_options: Keyword arguments for `create_async_engine` when `engine` is a URL.
        max_rules_per_user: How many rules one user may keep (`add` raises `ValueError` past it).
    """

    def __init__(
        self,
        engine: AsyncEngine | str,
        *,
        table_prefix: str = DEFAULT_TABLE_PREFIX,
        engine_options: Mapping[str, Any] | None = None,
        max_rules_per_user: int = 200,
    ) -> None:
        super().__init__(engine, table_prefix=table_prefix, engine_options=engine_options)
        name = f"{self.table_prefix}approval_rules"
        self.max_rules_per_user = max_rules_per_user
        self.table = sa.Table(
            name,
            self.metadata,
            sa.Column("id", sa.String(64), primary_key=True),
            sa.Column("user_id", sa.String(), nullable=False),
            sa.Column("tool", sa.String(), nullable=False),
            sa.Column("decision", sa.String(8), nullable=False),
            sa.Column("arguments", sa.Text(), nullable=True),  # JSON
            sa.Column("expires_at", sa.Double(), nullable=True),
            sa.Column("created_at", sa.Double(), nullable=False),
            sa.Column("note", sa.Text(), nullable=True),
            sa.Index(f"{name}_user_tool", "user_id", "tool"),
        )

    async def add(self, rule: ApprovalRule) -> ApprovalRule:
        """Keep `rule` (its id and creation time filled in when empty); returns what was stored.

        Raises:
            ValueError: a lone surrogate or NUL in the rule's text (`check_rule_text`; nothing is
                stored), or the user already has `max_rules_per_user` rules.
        """
        check_rule_text(rule)
        stored = ApprovalRule.from_dict(
            {**rule.to_dict(), "id": rule.id or new_rule_id(), "created_at": rule.created_at or time.time()}
        )
        t = self.table
        async with self.engine.begin() as conn:
            count = (
                await conn.execute(
                    sa.select(sa.func.count()).select_from(t).where(t.c.user_id == rule.user_id)
                )
            ).scalar_one()
            if count >= self.max_rules_per_user:
                raise ValueError(f"Too many approval rules for one user (at most {self.max_rules_per_user}).")
            await conn.execute(
                t.insert().values(
                    id=stored.id,
                    user_id=stored.user_id,
                    tool=stored.tool,
                    decision=stored.decision,
                    arguments=None
                    if stored.arguments is None
                    else json.dumps(dict(stored.arguments), separators=(",", ":")),
                    expires_at=stored.expires_at,
                    created_at=stored.created_at,
                    note=stored.note,
                )
            )
        return stored

    async def list_rules(self, user_id: str, *, tool: str | None = None) -> list[ApprovalRule]:
        """The rules of `user_id` (for `tool` only, if given), oldest first."""
        t = self.table
        stmt = sa.select(t).where(t.c.user_id == user_id)
        if tool is not None:
            stmt = stmt.where(t.c.tool == tool)
        async with self._auto.connect() as conn:
            rows = (await conn.execute(stmt.order_by(t.c.created_at, t.c.id))).mappings().all()
        return [
            ApprovalRule.from_dict(
                {**row, "arguments": None if row["arguments"] is None else json.loads(row["arguments"])}
            )
            for row in rows
        ]

    async def remove(self, rule_id: str, *, user_id: str) -> bool:
        """Delete one of `user_id`'s rules; False when there is no such rule of theirs."""
        t = self.table
        stmt = sa.delete(t).where(t.c.id == rule_id, t.c.user_id == user_id)
        async with self._auto.connect() as conn:
            result = await conn.execute(stmt)
        return result.rowcount > 0

    def empty(self) -> bool | None:
        return None  # other processes may add rules: always ask the database


class SQLRateLimitStore(_SQLStore):
    """Token buckets in the table `<table_prefix>rate_limits`, one row per key.

    `acquire` is one upsert that refills and takes in SQL, on the database's clock: concurrent callers in
    any number of processes never take more tokens than the bucket holds (see the module docstring).
    Each row also records when its bucket will be full again; `purge_full` deletes such rows (a full
    bucket and no bucket are the same thing), so idle keys do not pile up.

    Args:
        engine: A database URL or an `AsyncEngine` you own and close.
        table_prefix: Prefix of the table name (lowercase letters, digits, `_`).
        engine_options: Keyword arguments for `create_async_engine` when `engine` is a URL.
    """

    def __init__(
        self,
        engine: AsyncEngine | str,
        *,
        table_prefix: str = DEFAULT_TABLE_PREFIX,
        engine_options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(engine, table_prefix=table_prefix, engine_options=engine_options)
        name = f"{self.table_prefix}rate_limits"
        self.table = sa.Table(
            name,
            self.metadata,
            sa.Column("key", sa.String(), primary_key=True),
            sa.Column("tokens", sa.Double(), nullable=False),
            sa.Column("updated_at", sa.Double(), nullable=False),
            sa.Column("full_at", sa.Double(), nullable=False),
            sa.Column("granted", sa.Boolean(), nullable=False),
            sa.Index(f"{name}_full", "full_at"),
        )

    async def acquire(self, key: str, *, limit: int, period: float, cost: float = 1.0) -> RateLimitDecision:
        """Refill the bucket `key` (capacity `limit`, `limit` tokens per `period` seconds) and take `cost`.

        Raises:
            ValueError: `limit` below 1 or `period` not a positive number of seconds.
        """
        _check_limit(limit, period)
        t, now = self.table, self._now
        capacity, rate = float(limit), limit / period
        cap, per_second, take = (_double(v) for v in (capacity, rate, float(cost)))

        # A new bucket starts full: the first decision is known without reading anything.
        first_granted = capacity >= cost
        first_tokens = capacity - cost if first_granted else capacity
        insert = self._insert(t).values(
            key=key,
            tokens=first_tokens,
            updated_at=now,
            full_at=now + (capacity - first_tokens) / rate,
            granted=first_granted,
        )
        # An existing one: refill for the time since its last update (never negative: a statement that
        # waited on the row lock may hold an older `now`), capped at capacity, then take if enough.
        since = self._greatest(_double(0.0), now - t.c.updated_at)
        refilled = self._least(cap, t.c.tokens + since * per_second)
        enough = refilled >= take
        tokens = sa.case((enough, refilled - take), else_=refilled)
        updated = self._greatest(t.c.updated_at, now)
        stmt = insert.on_conflict_do_update(
            index_elements=[t.c.key],
            set_={
                "tokens": tokens,
                "updated_at": updated,
                "full_at": updated + (cap - tokens) / per_second,
                "granted": enough,
            },
        ).returning(t.c.tokens, t.c.granted)
        async with self._auto.connect() as conn:
            row = (await conn.execute(stmt)).one()
        remaining, granted = float(row[0]), bool(row[1])
        if granted:
            return RateLimitDecision(allowed=True, remaining=remaining, retry_after=0.0)
        return RateLimitDecision(allowed=False, remaining=remaining, retry_after=(cost - remaining) / rate)

    async def reset(self, key: str | None = None) -> None:
        """Refill one bucket (or all of them) by forgetting it."""
        stmt = sa.delete(self.table)
        if key is not None:
            stmt = stmt.where(self.table.c.key == key)
        async with self._auto.connect() as conn:
            await conn.execute(stmt)

    async def purge_full(self) -> int:
        """Delete the buckets that have refilled completely (they mean no limit is in effect); how many."""
        stmt = sa.delete(self.table).where(self.table.c.full_at <= self._now)
        async with self._auto.connect() as conn:
            result = await conn.execute(stmt)
        return max(0, result.rowcount)


def _double(value: float) -> sa.ColumnElement[float]:
    # Typed binds: asyncpg wants to know a parameter is float8, not guess from an expression around it.
    return sa.literal(value, sa.Double())


def _check_limit(limit: int, period: float) -> None:
    # `not period > 0` also refuses NaN; an infinite period would make the rate 0 and retry_after infinite.
    if limit < 1 or not period > 0 or period == float("inf"):
        raise ValueError("limit must be >= 1 and period a positive number of seconds.")


class SQLCache(_SQLStore):
    """The result cache in the table `<table_prefix>cache`: bytes with an expiry on the database's clock.

    Expired rows are never returned; they are replaced by the next `set` of their key, and
    `purge_expired` deletes the rest (call it now and then).

    Args:
        engine: A database URL or an `AsyncEngine` you own and close.
        table_prefix: Prefix of the table name (lowercase letters, digits, `_`).
        engine_options: Keyword arguments for `create_async_engine` when `engine` is a URL.
    """

    def __init__(
        self,
        engine: AsyncEngine | str,
        *,
        table_prefix: str = DEFAULT_TABLE_PREFIX,
        engine_options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(engine, table_prefix=table_prefix, engine_options=engine_options)
        name = f"{self.table_prefix}cache"
        self.table = sa.Table(
            name,
            self.metadata,
            sa.Column("key", sa.String(), primary_key=True),
            sa.Column("value", sa.LargeBinary(), nullable=False),
            sa.Column("expires_at", sa.Double(), nullable=False),
            sa.Index(f"{name}_expiry", "expires_at"),
        )

    async def get(self, key: str) -> bytes | None:
        """The value under `key`, or None when absent or expired."""
        t = self.table
        stmt = sa.select(t.c.value).where(t.c.key == key, t.c.expires_at > self._now)
        async with self._auto.connect() as conn:
            value = (await conn.execute(stmt)).scalar_one_or_none()
        return None if value is None else bytes(value)

    async def set(self, key: str, value: bytes, *, ttl: float) -> None:
        """Store `value` for `ttl` seconds (nothing is stored when `ttl` is not positive)."""
        if not ttl > 0:
            return
        expires = self._now + _double(float(ttl))
        insert = self._insert(self.table).values(key=key, value=bytes(value), expires_at=expires)
        stmt = insert.on_conflict_do_update(
            index_elements=[self.table.c.key],
            set_={"value": insert.excluded.value, "expires_at": insert.excluded.expires_at},
        )
        async with self._auto.connect() as conn:
            await conn.execute(stmt)

    async def delete(self, key: str) -> None:
        """Forget `key` (no error when absent)."""
        stmt = sa.delete(self.table).where(self.table.c.key == key)
        async with self._auto.connect() as conn:
            await conn.execute(stmt)

    async def clear(self) -> None:
        """Forget every entry of this cache's table."""
        async with self._auto.connect() as conn:
            await conn.execute(sa.delete(self.table))

    async def purge_expired(self) -> int:
        """Delete the expired entries; return how many."""
        stmt = sa.delete(self.table).where(self.table.c.expires_at <= self._now)
        async with self._auto.connect() as conn:
            result = await conn.execute(stmt)
        return max(0, result.rowcount)


class SQLArtifactStore(_SQLStore):
    """Whole results and stored content (images, files) in `<table_prefix>artifacts`, shared by every
    process on the database and kept across restarts (the in-memory store is one process's only).

    `get` answers None for an unknown id, another owner's artifact and an expired one alike (one
    statement: `WHERE id = :id AND owner IS NOT DISTINCT FROM :owner AND expires_at > :now`). Times are the
    caller's `time.time()`, as the executor stamps `expires_at`. Every `purge_every`-th `put` also deletes
    the expired rows (an indexed range delete), so the table does not grow without bound.

    Args:
        engine: A database URL or an `AsyncEngine` you own and close.
        table_prefix: Prefix of the table name (lowercase letters, digits, `_`).
        engine_options: Keyword arguments for `create_async_engine` when `engine` is a URL.
        purge_every: Delete expired rows on every this many `put`s (0: never; call `purge_expired`).
        clock: The clock that `expires_at` is compared with.
    """

    def __init__(
        self,
        engine: AsyncEngine | str,
        *,
        table_prefix: str = DEFAULT_TABLE_PREFIX,
        engine_options: Mapping[str, Any] | None = None,
        purge_every: int = 100,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(engine, table_prefix=table_prefix, engine_options=engine_options)
        name = f"{self.table_prefix}artifacts"
        self.table = sa.Table(
            name,
            self.metadata,
            sa.Column("id", sa.String(), primary_key=True),
            sa.Column("owner", sa.String(), nullable=True),
            sa.Column("tool_name", sa.String(), nullable=False),
            sa.Column("text", sa.Text(), nullable=False),
            sa.Column("data", sa.LargeBinary(), nullable=True),
            sa.Column("media_type", sa.String(), nullable=True),
            sa.Column("name", sa.String(), nullable=True),
            sa.Column("expires_at", sa.Double(), nullable=False),
            sa.Index(f"{name}_expiry", "expires_at"),
        )
        self._purge_every = purge_every
        self._puts = 0
        self._clock = clock

    async def put(self, artifact: Artifact) -> None:
        """Keep `artifact` (an id already present is replaced)."""
        values = {
            "id": artifact.id,
            "owner": artifact.owner,
            "tool_name": artifact.tool_name,
            "text": artifact.text,
            "data": artifact.data,
            "media_type": artifact.media_type,
            "name": artifact.name,
            "expires_at": float(artifact.expires_at),
        }
        insert = self._insert(self.table).values(**values)
        stmt = insert.on_conflict_do_update(
            index_elements=[self.table.c.id], set_={k: insert.excluded[k] for k in values if k != "id"}
        )
        async with self._auto.connect() as conn:
            await conn.execute(stmt)
        self._puts += 1
        if self._purge_every and self._puts % self._purge_every == 0:
            await self.purge_expired()

    async def get(self, artifact_id: str, owner: str | None) -> Artifact | None:
        """The artifact, or None when it is unknown, another owner's or expired."""
        t = self.table
        stmt = sa.select(t).where(
            t.c.id == artifact_id, t.c.owner.is_not_distinct_from(owner), t.c.expires_at > self._clock()
        )
        async with self._auto.connect() as conn:
            row = (await conn.execute(stmt)).mappings().one_or_none()
        if row is None:
            return None
        return Artifact(
            id=row["id"],
            owner=row["owner"],
            tool_name=row["tool_name"],
            text=row["text"],
            expires_at=row["expires_at"],
            data=None if row["data"] is None else bytes(row["data"]),
            media_type=row["media_type"],
            name=row["name"],
        )

    async def purge_expired(self) -> int:
        """Delete the expired artifacts; return how many."""
        stmt = sa.delete(self.table).where(self.table.c.expires_at <= self._clock())
        async with self._auto.connect() as conn:
            result = await conn.execute(stmt)
        return max(0, result.rowcount)


@dataclass(frozen=True, kw_only=True)
class SQLStores:
    """The SQL stores on one engine, from `create_sql_stores`."""

    engine: AsyncEngine
    """The shared engine."""
    confirmations: SQLConfirmationStore
    """For `ToolExecutor(confirmations=...)`."""
    rate_limits: SQLRateLimitStore
    """For `ToolExecutor(rate_limits=...)`."""
    cache: SQLCache
    """For `ToolExecutor(cache=...)`."""
    approval_rules: SQLApprovalRuleStore
    """For `ToolExecutor(approval_rules=...)`."""
    artifacts: SQLArtifactStore
    """For `ToolExecutor(artifacts=...)`: whole results and stored content, shared by every process."""
    runs: SQLRunStore
    """For `Agent(runs=...)`: paused runs, decided from any process with `Agent.decide`."""
    owns_engine: bool
    """Whether `aclose` disposes the engine (it was made from a URL)."""

    def _stores(self) -> tuple[_SQLStore, ...]:
        return (
            self.confirmations,
            self.rate_limits,
            self.cache,
            self.approval_rules,
            self.artifacts,
            self.runs,
        )

    async def create_tables(self) -> None:
        """Create the stores' tables if missing (idempotent)."""
        for store in self._stores():
            await store.create_tables()

    async def drop_tables(self) -> None:
        """Drop the stores' tables."""
        for store in self._stores():
            await store.drop_tables()

    async def aclose(self) -> None:
        """Dispose the engine if it was made from a URL."""
        if self.owns_engine:
            await self.engine.dispose()

    async def __aenter__(self) -> SQLStores:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def create_sql_stores(
    engine: AsyncEngine | str,
    *,
    table_prefix: str = DEFAULT_TABLE_PREFIX,
    engine_options: Mapping[str, Any] | None = None,
) -> SQLStores:
    """The confirmation, run, rate-limit, approval-rule and artifact stores and the cache on ONE engine
    (one connection pool).

    Args:
        engine: A database URL (`"sqlite+aiosqlite:///toolrun.db"`,
            `"postgresql+asyncpg://user@host/db"`) or an `AsyncEngine` you own and close.
        table_prefix: Prefix of the three table names (lowercase letters, digits, `_`).
        engine_options: Keyword arguments for `create_async_engine` when `engine` is a URL.

    Returns:
        The stores; `await stores.create_tables()` before first use, `await stores.aclose()` at the end.
    """
    _check_prefix(table_prefix)
    if isinstance(engine, str):
        shared = _make_engine(engine, engine_options)
        owns = True
    else:
        if engine_options:
            raise ValueError("engine_options apply to an engine made from a URL, not to a given engine.")
        shared, owns = engine, False
    try:
        return SQLStores(
            engine=shared,
            confirmations=SQLConfirmationStore(shared, table_prefix=table_prefix),
            rate_limits=SQLRateLimitStore(shared, table_prefix=table_prefix),
            cache=SQLCache(shared, table_prefix=table_prefix),
            approval_rules=SQLApprovalRuleStore(shared, table_prefix=table_prefix),
            artifacts=SQLArtifactStore(shared, table_prefix=table_prefix),
            runs=SQLRunStore(shared, table_prefix=table_prefix),
            owns_engine=owns,
        )
    except Exception:
        if owns:
            shared.sync_engine.dispose()
        raise
