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
from sqlalchemy.ext.asyncio import AsyncConnection

from toolrun.server._sqlite import InlineConnection

__all__ = ["Fixed", "raw_sqlite"]


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
        self, statement: sa.Update | sa.Insert | sa.Select[Any], *, columns: Sequence[str] | None = None
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

    async def execute(self, conn: AsyncConnection, params: Mapping[str, Any]) -> int:
        """Run it once; the number of rows it changed."""
        raw = raw_sqlite(conn)
        compiled = self.compiled(conn.dialect) if raw is not None else None
        if raw is None or compiled is None:
            return int((await conn.execute(self.statement, dict(params))).rowcount)
        cursor = raw.execute(compiled.sql, self._params(compiled, params))
        try:
            return cursor.rowcount
        finally:
            cursor.close()

    async def executemany(self, conn: AsyncConnection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Run it once per row of parameters (an insert of several rows)."""
        if not rows:
            return
        raw = raw_sqlite(conn)
        compiled = self.compiled(conn.dialect) if raw is not None else None
        if raw is None or compiled is None:
            await conn.execute(self.statement, [dict(r) for r in rows])
            return
        raw.executemany(compiled.sql, [self._params(compiled, r) for r in rows]).close()

    async def rows(self, conn: AsyncConnection, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """Run a query; all its rows."""
        raw = raw_sqlite(conn)
        compiled = self.compiled(conn.dialect) if raw is not None else None
        if raw is None or compiled is None:
            return [tuple(row) for row in (await conn.execute(self.statement, dict(params))).all()]
        cursor = raw.execute(compiled.sql, self._params(compiled, params))
        try:
            return cursor.fetchall()
        finally:
            cursor.close()
