"""The statements every chat turn runs, on SQLite without SQLAlchemy's per-statement machinery.

A turn runs about ten fixed statements (claim, stale-run check, history, the user's message and the run
row at its start; lease check, new messages and the run's end at its finish). Through SQLAlchemy Core each
costs ≈100–150 µs of CPU here — the compiled-cache lookup, the execution context, the result object —
while `sqlite3` runs it in a few µs. `Fixed` keeps the Core statement (every database, PostgreSQL
included, runs that) and, on the service's own SQLite engine (`_sqlite.InlineConnection` under the
pool), compiles it once to its SQL and parameter order and runs it on the `sqlite3` connection of the
same checked-out connection: the same transaction, the same `sqlite3` calls SQLAlchemy's dialect would
make (`cursor.execute(sql, params)`; `sqlite3` opens its implicit transaction before the first write, as
it does under Core), and the commit or rollback of the surrounding `engine.begin()` block ends it.

What falls back to Core: any other driver (PostgreSQL, a plain aiosqlite engine in a test), and a
statement whose compiled form needs more of SQLAlchemy's help than its bind processors (applied here as
Core applies them: `Double` → `float`): result processors, expanding or literal-rendered parameters;
checked when it is compiled.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.util import greenlet_spawn

from toolrun.server._sqlite import InlineConnection

__all__ = ["Conn", "Fixed", "RawTransaction", "raw_sqlite", "transaction"]


def raw_sqlite(conn: AsyncConnection) -> sqlite3.Connection | None:
    """The `sqlite3` connection under `conn` when it is the service's inline SQLite, else None.

    `conn` must be checked out (inside `engine.begin()` / `engine.connect()`): reading its DBAPI
    connection then does no I/O."""
    sync = conn.sync_connection
    if sync is None:
        return None
    driver = sync.connection.driver_connection
    return driver._conn if isinstance(driver, InlineConnection) else None


class _Compiled:
    __slots__ = ("defaults", "names", "processors", "sql")

    def __init__(
        self,
        sql: str,
        names: tuple[str, ...],
        defaults: dict[str, Any],
        processors: dict[int, Callable[[Any], Any]],
    ) -> None:
        self.sql = sql
        self.names = names
        self.defaults = defaults
        self.processors = processors
        """Position → the dialect's bind processor (`Double`: `float(value)`), as Core applies them."""


class Fixed:
    """A statement built once, run through Core or straight on SQLite (see the module docstring).

    Args:
        statement: The Core statement (its bound parameters named, or its columns for an insert).
        columns: For an insert: the columns every row gives (the parameters are keyed by column name).
    """

    __slots__ = ("_compiled", "columns", "statement")

    def __init__(
        self,
        statement: sa.Update | sa.Insert | sa.Delete | sa.Select[Any],
        *,
        columns: Sequence[str] | None = None,
    ) -> None:
        self.statement = statement
        self.columns = tuple(columns) if columns is not None else None
        self._compiled: dict[str, _Compiled | None] = {}

    def compiled(self, dialect: Dialect) -> _Compiled | None:
        """The SQL and parameter order for `dialect`, or None when only Core can run it as it should."""
        key = dialect.name
        if key in self._compiled:
            return self._compiled[key]
        kwargs: dict[str, Any] = {"dialect": dialect}
        if self.columns is not None:
            kwargs["column_keys"] = list(self.columns)
        c: Any = self.statement.compile(**kwargs)
        plain = (
            c.positiontup is not None
            and not c.literal_execute_params
            and not c.post_compile_params
            and not any(
                getattr(col.type, "_cached_result_processor", None) is not None
                and col.type._cached_result_processor(dialect, None) is not None
                for col in getattr(self.statement, "selected_columns", ())
            )
        )
        # Values only for the statement's own literals (`status = 'running'`, `partial=None`): a parameter
        # the caller must give stays required, as under Core (a KeyError rather than a silent NULL).
        defaults = {n: b.effective_value for n, b in c.binds.items() if not b.required}
        processors = {
            i: c._bind_processors[n] for i, n in enumerate(c.positiontup or ()) if n in c._bind_processors
        }
        result = _Compiled(c.string, tuple(c.positiontup), defaults, processors) if plain else None
        self._compiled[key] = result
        return result

    def _params(self, compiled: _Compiled, params: Mapping[str, Any]) -> list[Any]:
        defaults = compiled.defaults
        if self.columns is not None:  # an insert: every named column must be given
            values = [params[name] for name in compiled.names]
        else:
            values = [params[name] if name in params else defaults[name] for name in compiled.names]
        for i, process in compiled.processors.items():
            if values[i] is not None:
                values[i] = process(values[i])
        return values

    def _target(self, conn: Conn) -> tuple[sqlite3.Connection | None, _Compiled | None]:
        if isinstance(conn, RawTransaction):
            compiled = self.compiled(conn.dialect)
            if compiled is None:  # every Fixed of the turn compiles plainly (tests/server/test_fixed.py)
                raise RuntimeError(f"This statement needs SQLAlchemy Core: {self.statement}")
            return conn.sqlite, compiled
        raw = raw_sqlite(conn)
        return raw, (self.compiled(conn.dialect) if raw is not None else None)

    async def execute(self, conn: Conn, params: Mapping[str, Any]) -> int:
        """Run it once; the number of rows it changed."""
        raw, compiled = self._target(conn)
        if raw is None or compiled is None:
            assert isinstance(conn, AsyncConnection)
            return int((await conn.execute(self.statement, dict(params))).rowcount)
        cursor = raw.execute(compiled.sql, self._params(compiled, params))
        try:
            return cursor.rowcount
        finally:
            cursor.close()

    async def executemany(self, conn: Conn, rows: Sequence[Mapping[str, Any]]) -> None:
        """Run it once per row of parameters (an insert of several rows)."""
        if not rows:
            return
        raw, compiled = self._target(conn)
        if raw is None or compiled is None:
            assert isinstance(conn, AsyncConnection)
            await conn.execute(self.statement, [dict(r) for r in rows])
            return
        raw.executemany(compiled.sql, [self._params(compiled, r) for r in rows]).close()

    async def rows(self, conn: Conn, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """Run a query; all its rows."""
        raw, compiled = self._target(conn)
        if raw is None or compiled is None:
            assert isinstance(conn, AsyncConnection)
            return [tuple(row) for row in (await conn.execute(self.statement, dict(params))).all()]
        cursor = raw.execute(compiled.sql, self._params(compiled, params))
        try:
            return cursor.fetchall()
        finally:
            cursor.close()


class RawTransaction:
    """A transaction on the service's SQLite connection, checked out of the engine's pool without a
    SQLAlchemy `Connection` around it (`transaction`). Only `Fixed` statements run in it."""

    __slots__ = ("dialect", "sqlite")

    def __init__(self, sqlite: sqlite3.Connection, dialect: Dialect) -> None:
        self.sqlite = sqlite
        self.dialect = dialect


Conn = AsyncConnection | RawTransaction
"""Where a `Fixed` statement runs: a Core connection (in a transaction), or a `RawTransaction`."""


class transaction:
    """`engine.begin()` for the turn's own transactions, whose every statement is `Fixed`.

    On the service's inline SQLite it checks the one connection out of the pool (`raw_connection`: the
    same queue, timeout and `PoolTimeout` as `engine.begin()`), yields a `RawTransaction`, commits on a
    clean exit and rolls back otherwise (a commit that fails is rolled back too), then returns the
    connection in place; no SQLAlchemy `Connection`, `Transaction` or greenlet hop per step (≈90 µs of
    CPU a transaction here). Anywhere else it is `engine.begin()` and yields its `AsyncConnection`.
    """

    __slots__ = ("_begin", "_engine", "_fairy", "_raw")

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._fairy: Any = None
        self._raw: sqlite3.Connection | None = None
        self._begin: Any = None

    async def __aenter__(self) -> Conn:
        engine = self._engine
        if engine.dialect.name == "sqlite":
            fairy = await engine.raw_connection()
            driver = fairy.driver_connection
            if isinstance(driver, InlineConnection):
                self._fairy, self._raw = fairy, driver._conn
                return RawTransaction(driver._conn, engine.dialect)
            await greenlet_spawn(fairy.close)
        self._begin = engine.begin()
        conn: AsyncConnection = await self._begin.__aenter__()
        return conn

    async def __aexit__(self, kind: Any, value: Any, traceback: Any) -> None:
        raw = self._raw
        if raw is None:
            await self._begin.__aexit__(kind, value, traceback)
            return
        try:
            if kind is None:
                raw.commit()
        finally:
            try:
                if raw.in_transaction:  # an error, or a commit that failed: nothing half-done goes back
                    raw.rollback()
            finally:
                fairy, self._fairy, self._raw = self._fairy, None, None
                await greenlet_spawn(fairy.close)
