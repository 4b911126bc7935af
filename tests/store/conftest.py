"""Backends for the store tests: memory, SQLite (a file in tmp_path), PostgreSQL and Redis (the real servers).

PostgreSQL and Redis tests never skip: an unreachable server FAILS the test with a message saying which
server and how `.ci/run` starts it. Every test gets its own table prefix / key prefix, dropped or deleted
at teardown, so tests can run against a shared server.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from sqlalchemy import text

from servers import POSTGRES_URL, REDIS_URL
from toolrun.store import (
    CacheStore,
    ConfirmationStore,
    InMemoryCache,
    InMemoryConfirmationStore,
    InMemoryRateLimitStore,
    RateLimitStore,
)
from toolrun.store.redis import RedisStores, create_redis_stores
from toolrun.store.sql import SQLStores, create_sql_stores

_HOW_TO_START = {
    "postgresql": (
        f"PostgreSQL at {POSTGRES_URL} (trust auth)",
        "`.ci/run` starts it with `pg_ctlcluster --skip-systemctl-redirect <version> main start` when "
        "`pg_isready -h 127.0.0.1 -p 5432` fails; the database must exist (`createdb -h 127.0.0.1 -U "
        "postgres test`). Set TOOLRUN_TEST_POSTGRES_URL to use another server.",
    ),
    "redis": (
        f"Redis at {REDIS_URL}",
        "`.ci/run` starts it with `redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 ...` "
        "when `redis-cli -h 127.0.0.1 ping` fails. Set TOOLRUN_TEST_REDIS_URL to use another server.",
    ),
}


def server_unreachable(server: str, exc: BaseException) -> None:
    """Fail (never skip) the test: the server is part of the suite."""
    what, how = _HOW_TO_START[server]
    pytest.fail(f"{what} is unreachable ({type(exc).__name__}: {exc}). {how}", pytrace=False)


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:12]}"


async def open_postgres(prefix: str, **engine_options: Any) -> SQLStores:
    """Stores on a new engine (its own pool); fails the test if PostgreSQL does not answer."""
    stores = create_sql_stores(POSTGRES_URL, table_prefix=prefix, engine_options=engine_options or None)
    try:
        async with asyncio.timeout(5), stores.engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
    except Exception as exc:
        await stores.aclose()
        server_unreachable("postgresql", exc)
    return stores


async def open_redis(prefix: str) -> RedisStores:
    """Stores on a new client (its own pool); fails the test if Redis does not answer."""
    stores = create_redis_stores(REDIS_URL, key_prefix=prefix)
    try:
        async with asyncio.timeout(5):
            await stores.client.ping()
    except Exception as exc:
        await stores.aclose()
        server_unreachable("redis", exc)
    return stores


async def delete_redis_prefix(prefix: str) -> None:
    client = Redis.from_url(REDIS_URL)
    try:
        keys = [key async for key in client.scan_iter(match=prefix + "*", count=500)]
        if keys:
            await client.unlink(*keys)
    finally:
        await client.aclose()


@dataclass
class Backend:
    """One backend's three stores, plus `peers`: more stores on the same state through their own
    engines / clients / connections, as other processes would have."""

    name: str
    confirmations: ConfirmationStore
    rate_limits: RateLimitStore
    cache: CacheStore
    _open_peer: Callable[[], Any]
    _closers: list[Callable[[], Any]] = field(default_factory=list)

    async def peers(self, count: int, *, connections: int = 10) -> list[Any]:
        """`count` independent store sets, each with `connections` connections already open, so that
        concurrent calls really race in the server instead of queueing for a connection."""
        made = []
        for _ in range(count):
            stores = await self._open_peer()
            if stores is not self:
                self._closers.append(stores.aclose)
                await _warm(stores, connections)
            made.append(stores)
        return made

    async def aclose(self) -> None:
        for close in reversed(self._closers):
            await close()


async def _warm(stores: Any, connections: int) -> None:
    engine = getattr(stores, "engine", None)
    if engine is not None:
        async with contextlib.AsyncExitStack() as stack:
            conns = [await stack.enter_async_context(engine.connect()) for _ in range(connections)]
            await asyncio.gather(*(c.execute(text("SELECT 1")) for c in conns))
        return
    # Concurrent pings find no idle connection, so the pool opens one each (and keeps them).
    await asyncio.gather(*(stores.client.ping() for _ in range(connections)))


BACKENDS = ("memory", "sqlite", "postgresql", "redis")


@pytest.fixture(params=BACKENDS)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """The stores of each backend, isolated per test and cleaned up after it."""
    name: str = request.param
    if name == "memory":
        confirmations = InMemoryConfirmationStore()
        rate_limits = InMemoryRateLimitStore()
        cache = InMemoryCache()
        b = Backend(name, confirmations, rate_limits, cache, _open_peer=lambda: _same(b))
        yield b
        return
    if name in ("sqlite", "postgresql"):
        prefix = unique("t") + "_"
        peer_options = {"pool_size": 10, "max_overflow": 0}
        if name == "sqlite":
            url = f"sqlite+aiosqlite:///{tmp_path / 'stores.db'}"
            main = create_sql_stores(url, table_prefix=prefix)

            async def open_peer() -> SQLStores:
                return create_sql_stores(url, table_prefix=prefix, engine_options=peer_options)

        else:
            main = await open_postgres(prefix)

            async def open_peer() -> SQLStores:
                return await open_postgres(prefix, **peer_options)

        await main.create_tables()
        b = Backend(name, main.confirmations, main.rate_limits, main.cache, _open_peer=open_peer)
        try:
            yield b
        finally:
            await b.aclose()
            await main.drop_tables()
            await main.aclose()
        return
    prefix = unique("toolrun-test:") + ":"
    main_r = await open_redis(prefix)

    async def open_redis_peer() -> RedisStores:
        return await open_redis(prefix)

    b = Backend(name, main_r.confirmations, main_r.rate_limits, main_r.cache, _open_peer=open_redis_peer)
    try:
        yield b
    finally:
        await b.aclose()
        await main_r.aclose()
        await delete_redis_prefix(prefix)


async def _same(b: Backend) -> Backend:
    return b  # one process: the in-memory stores are their own peers


def spread(items: Iterable[Any], over: list[Any]) -> list[tuple[Any, Any]]:
    """Pair each item with a peer, round robin."""
    return [(item, over[i % len(over)]) for i, item in enumerate(items)]


async def eventually(check: Callable[[], Any], *, within: float = 5.0, every: float = 0.02) -> Any:
    """Poll the async `check` until it returns something truthy; fail after `within` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        value = await check()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"not true within {within} s (last value {value!r})")
        await asyncio.sleep(every)
