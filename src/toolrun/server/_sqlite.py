"""SQLite without a thread hop per statement: an aiosqlite-compatible connection that runs on the loop.

aiosqlite runs every call in a worker thread and hands the result back through a queue. A chat turn is
two dozen such calls (cursor, execute, fetch, close, commit), and on a busy machine each hand-over costs
about half a millisecond of GIL and scheduler convoy — more than the SQL itself, which takes
microseconds on a local file. SQLAlchemy's aiosqlite dialect accepts any object with aiosqlite's
interface (`async_creator`), so this module provides one whose coroutines run the `sqlite3` call
directly and return.

Trade-off: a statement that has to wait for another process's write lock blocks the event loop for that
wait (bounded by `busy_timeout`). The service keeps one connection per process (no waiting inside a
process), and writes are short; several processes writing one SQLite file heavily should use PostgreSQL.

One connection is enough only if it goes back to the pool as soon as a block of statements is done.
SQLAlchemy's `AsyncConnection.__aexit__` closes the connection in a task of its own (so a cancellation
cannot abandon the close halfway), which returns it one event-loop iteration later: on a loop busy with 200
chats that is milliseconds to seconds per transaction, every other transaction queues behind it, and the
pool's 30 s timeout fires (bench/README.md). Here the close is itself inline — nothing in it can be
interrupted — so `InlineEngine` closes in place and the connection is free again before the `async with`
block has even returned.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

__all__ = ["InlineEngine", "connect_inline"]


class _ClosingInPlace(AsyncConnection):
    async def __aexit__(self, type_: Any, value: Any, traceback: Any) -> None:
        await self.close()  # inline statements: the close never waits, so it needs no task of its own


class InlineEngine(AsyncEngine):
    """An `AsyncEngine` over `connect_inline` connections whose `async with` blocks return the connection
    to the pool in place (see the module docstring). Build it around a sync engine:
    `InlineEngine(create_async_engine(...).sync_engine)`."""

    _connection_cls = _ClosingInPlace


class _Cursor:
    __slots__ = ("_cursor",)

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._cursor = cursor

    async def __aenter__(self) -> _Cursor:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._cursor.close()

    @property
    def description(self) -> Any:
        return self._cursor.description

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    @property
    def lastrowid(self) -> int | None:
        return self._cursor.lastrowid

    @property
    def arraysize(self) -> int:
        return self._cursor.arraysize

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        self._cursor.arraysize = value

    async def execute(self, sql: str, parameters: Any = None) -> _Cursor:
        if parameters is None:
            self._cursor.execute(sql)
        else:
            self._cursor.execute(sql, parameters)
        return self

    async def executemany(self, sql: str, parameters: Iterable[Any]) -> _Cursor:
        self._cursor.executemany(sql, parameters)
        return self

    async def fetchone(self) -> Any:
        return self._cursor.fetchone()

    async def fetchmany(self, size: int | None = None) -> Sequence[Any]:
        return self._cursor.fetchmany(size if size is not None else self._cursor.arraysize)

    async def fetchall(self) -> Sequence[Any]:
        return self._cursor.fetchall()

    async def close(self) -> None:
        self._cursor.close()


class _Immediate:
    """Stands in for aiosqlite's request queue (SQLAlchemy sets the isolation level through it)."""

    def put_nowait(self, item: tuple[asyncio.Future[Any], Any]) -> None:
        future, function = item
        try:
            future.set_result(function())
        except Exception as exc:
            future.set_exception(exc)


class InlineConnection:
    """The subset of `aiosqlite.Connection` that SQLAlchemy's aiosqlite dialect uses."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._connection: sqlite3.Connection | None = conn
        self._tx = _Immediate()

    @property
    def isolation_level(self) -> str | None:
        return self._conn.isolation_level

    @isolation_level.setter
    def isolation_level(self, value: str | None) -> None:
        self._conn.isolation_level = value  # type: ignore[assignment]  # "" (legacy default) is valid too

    def cursor(self) -> _Cursor:
        return _Cursor(self._conn.cursor())

    async def execute(self, sql: str, parameters: Any = None) -> _Cursor:
        return await self.cursor().execute(sql, parameters)

    async def commit(self) -> None:
        self._conn.commit()

    async def rollback(self) -> None:
        self._conn.rollback()

    async def close(self) -> None:
        if self._connection is not None:
            self._connection = None
            self._conn.close()

    async def create_function(self, *args: Any, **kwargs: Any) -> None:
        self._conn.create_function(*args, **kwargs)

    def stop(self) -> None:
        if self._connection is not None:
            self._connection = None
            self._conn.close()


async def connect_inline(database: str, *, busy_seconds: float = 5.0) -> InlineConnection:
    """Open `database` (a path or `:memory:`) for `create_async_engine(..., async_creator=...)`."""
    return InlineConnection(sqlite3.connect(database, timeout=busy_seconds, check_same_thread=False))
