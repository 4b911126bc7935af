"""What every SQL store shares: the checks of URL, engine and table prefix, and `_SQLStore`.

`_SQLStore` holds the engine, its dialect, the database's clock as a SQL expression and one store's own
tables, which it creates under toolrun's schema lock (`toolrun.store._schema`) and drops. The stores in
the other `_sql_*` modules subclass it; `toolrun.store.sql` is where they are imported from.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Mapping
from typing import Any, Self

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from toolrun.store._schema import create_all_locked

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
            "(UPDATE ... RETURNING makes consuming a confirmation atomic)."
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
    """What the SQL stores share: the engine, its dialect, their tables, create/drop, close.

    A store defines its tables in `_define_tables`, which the constructor calls last.
    """

    table: sa.Table
    """This store's table (its first, where it has more)."""

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
        self._define_tables()

    def _define_tables(self) -> None:
        """Define this store's tables in `self.metadata`, named with `self.table_prefix`; set `self.table`."""
        raise NotImplementedError

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
