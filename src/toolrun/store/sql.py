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

The stores live in private modules by concern (`_sql_base`, the shared base and checks;
`_sql_confirmations`, `_sql_runs`, `_sql_limits`, `_sql_artifacts`); import them from this module.

The module needs SQLAlchemy 2 (the `sql` extra) and is never imported by `import toolrun`; import it
as `from toolrun.store.sql import ...`. SQLite needs 3.35 or later (for `RETURNING`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from toolrun.store._sql_artifacts import SQLArtifactStore
from toolrun.store._sql_base import DEFAULT_TABLE_PREFIX, _check_prefix, _make_engine, _SQLStore
from toolrun.store._sql_confirmations import SQLApprovalRuleStore, SQLConfirmationStore
from toolrun.store._sql_limits import SQLCache, SQLRateLimitStore
from toolrun.store._sql_runs import SQLRunStore

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
