"""What only the SQL stores have: tables, prefixes, engines, the database clock, housekeeping.

The behaviour every backend shares is in test_contract.py.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from toolrun.store import PendingConfirmation
from toolrun.store.sql import (
    SQLCache,
    SQLConfirmationStore,
    SQLRateLimitStore,
    SQLStores,
    create_sql_stores,
)

from .conftest import POSTGRES_URL, eventually, open_postgres, unique


@pytest.fixture(params=["sqlite", "postgresql"])
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A database URL; for PostgreSQL, checked reachable first (fails with how to start it)."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'stores.db'}"
        return
    probe = await open_postgres(unique("probe"))
    await probe.aclose()
    yield POSTGRES_URL


@pytest.fixture
async def stores(url: str) -> AsyncIterator[SQLStores]:
    made = create_sql_stores(url, table_prefix=unique("t") + "_")
    await made.create_tables()
    try:
        yield made
    finally:
        await made.drop_tables()
        await made.aclose()


async def table_names(stores: SQLStores) -> set[str]:
    async with stores.engine.connect() as conn:
        names = await conn.run_sync(lambda sync: sa.inspect(sync).get_table_names())
    return {n for n in names if n.startswith(stores.confirmations.table_prefix)}


def test_this_sqlite_supports_returning() -> None:
    assert sqlite3.sqlite_version_info >= (3, 35, 0)


async def test_tables_are_prefixed_and_create_is_idempotent(stores: SQLStores) -> None:
    prefix = stores.confirmations.table_prefix
    names = ("confirmations", "rate_limits", "cache", "approval_rules", "artifacts")
    names += ("paused_runs", "paused_run_confirmations")
    expected = {f"{prefix}{name}" for name in names}
    assert await table_names(stores) == expected
    await stores.create_tables()  # again: nothing changes, nothing fails
    await stores.confirmations.create_tables()
    assert await table_names(stores) == expected
    await stores.drop_tables()
    assert await table_names(stores) == set()
    await stores.create_tables()
    assert await table_names(stores) == expected


async def test_processes_creating_tables_at_once_both_succeed(url: str) -> None:
    prefix = unique("t") + "_"
    first, second = (create_sql_stores(url, table_prefix=prefix) for _ in range(2))
    try:
        await asyncio.gather(first.create_tables(), second.create_tables())
        await first.confirmations.add(_pending())
        assert await second.confirmations.get("conf_1") is not None
    finally:
        await first.drop_tables()
        await first.aclose()
        await second.aclose()


async def test_json_is_stored_as_readable_text(stores: SQLStores) -> None:
    item = _pending(metadata={"source": "chat", "n": [1, 2]})
    await stores.confirmations.add(item)
    t = stores.confirmations.table
    async with stores.engine.connect() as conn:
        row = (await conn.execute(sa.select(t.c.call, t.c.metadata))).one()
    assert isinstance(row.call, str) and json.loads(row.call) == dict(item.call)
    assert isinstance(row.metadata, str) and json.loads(row.metadata) == {"source": "chat", "n": [1, 2]}


async def test_create_tables_adds_run_id_to_a_table_made_before_it(url: str) -> None:
    prefix = unique("t") + "_"
    name = f"{prefix}confirmations"
    stores = create_sql_stores(url, table_prefix=prefix)
    try:
        async with stores.engine.begin() as conn:  # the table as the previous version made it
            await conn.execute(
                sa.text(
                    f"CREATE TABLE {name} (id VARCHAR PRIMARY KEY, user_id VARCHAR NOT NULL, tool_name "
                    "VARCHAR NOT NULL, arguments_hash VARCHAR NOT NULL, call TEXT NOT NULL, summary TEXT NOT "
                    "NULL, created_at DOUBLE PRECISION NOT NULL, expires_at DOUBLE PRECISION NOT NULL, "
                    "conversation_id VARCHAR, metadata TEXT NOT NULL)"
                )
            )
            now = time.time()
            await conn.execute(
                sa.text(
                    f"INSERT INTO {name} VALUES ('conf_old', 'u1', 'delete_task', 'h', '{{}}', 's', "
                    f"{now}, {now + 60}, NULL, '{{}}')"
                )
            )
        await stores.create_tables()
        await stores.create_tables()  # idempotent
        old = await stores.confirmations.get("conf_old")
        assert old is not None and old.run_id is None
        await stores.confirmations.add(_pending(run_id="run_1"))
        new = await stores.confirmations.get("conf_1")
        assert new is not None and new.run_id == "run_1"
    finally:
        await stores.drop_tables()
        await stores.aclose()


async def test_the_three_stores_share_one_engine(stores: SQLStores) -> None:
    assert stores.owns_engine
    assert stores.confirmations.engine is stores.engine
    assert stores.rate_limits.engine is stores.engine
    assert stores.cache.engine is stores.engine


async def test_a_given_engine_stays_open_after_aclose(url: str) -> None:
    engine = create_async_engine(url)
    try:
        prefix = unique("t") + "_"
        for store_type in (SQLConfirmationStore, SQLRateLimitStore, SQLCache):
            async with store_type(engine, table_prefix=prefix) as store:
                await store.create_tables()
        shared = create_sql_stores(engine, table_prefix=prefix)
        assert not shared.owns_engine
        async with shared:
            await shared.cache.set("k", b"v", ttl=60)
        async with engine.connect() as conn:  # still usable: aclose left it alone
            assert (await conn.execute(sa.text("SELECT 1"))).scalar() == 1
        await shared.drop_tables()
    finally:
        await engine.dispose()


async def test_a_store_made_from_a_url_closes_its_engine(tmp_path: Path) -> None:
    store = SQLCache(f"sqlite+aiosqlite:///{tmp_path / 'own.db'}")
    await store.create_tables()
    await store.set("k", b"v", ttl=60)
    pool = store.engine.pool
    assert pool.checkedin() >= 1
    await store.aclose()
    assert pool.checkedin() == 0  # its connections are closed


@pytest.mark.parametrize("prefix", ["Toolrun_", "1x_", "a-b_", "x" * 41, "t; drop table x", "é_"])
def test_unsafe_table_prefixes_are_refused(prefix: str) -> None:
    with pytest.raises(ValueError, match="table_prefix"):
        SQLCache("sqlite+aiosqlite://", table_prefix=prefix)
    with pytest.raises(ValueError, match="table_prefix"):
        create_sql_stores("sqlite+aiosqlite://", table_prefix=prefix)


def test_unsupported_databases_and_sync_engines_are_refused() -> None:
    with pytest.raises(ValueError, match="SQLite and PostgreSQL"):
        SQLConfirmationStore("mysql+aiomysql://user@127.0.0.1/db")
    with pytest.raises(ValueError, match="SQLite and PostgreSQL"):
        create_sql_stores("mssql+aioodbc://user@127.0.0.1/db")
    sync_engine = sa.create_engine("sqlite://")
    try:
        with pytest.raises(TypeError, match="AsyncEngine"):
            SQLRateLimitStore(sync_engine)  # type: ignore[arg-type]
    finally:
        sync_engine.dispose()


async def test_engine_options_only_go_with_a_url(tmp_path: Path) -> None:
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'x.db'}")
    try:
        with pytest.raises(ValueError, match="engine_options"):
            SQLCache(engine, engine_options={"echo": True})
        with pytest.raises(ValueError, match="engine_options"):
            create_sql_stores(engine, engine_options={"echo": True})
    finally:
        await engine.dispose()


def test_sqlite_without_returning_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 34, 1))
    with pytest.raises(RuntimeError, match=r"3\.35"):
        SQLConfirmationStore("sqlite+aiosqlite://")
    with pytest.raises(RuntimeError, match=r"3\.35"):
        create_sql_stores("sqlite+aiosqlite://")


async def test_buckets_run_on_the_database_clock(stores: SQLStores) -> None:
    before = time.time()
    await stores.rate_limits.acquire("k", limit=2, period=10)
    after = time.time()
    t = stores.rate_limits.table
    async with stores.engine.connect() as conn:
        row = (await conn.execute(sa.select(t.c.updated_at, t.c.full_at, t.c.tokens))).one()
    # The database's clock is this machine's: its epoch seconds fall within our own reading.
    assert before - 1 <= row.updated_at <= after + 1
    assert row.tokens == pytest.approx(1.0, abs=1e-6)
    assert row.full_at == pytest.approx(row.updated_at + 5.0, abs=1e-6)  # one token at 2 per 10 s


async def test_purge_full_forgets_only_refilled_buckets(stores: SQLStores) -> None:
    rl = stores.rate_limits
    await rl.acquire("fast", limit=10, period=0.2)  # full again after 0.02 s
    await rl.acquire("slow", limit=1, period=3600)

    async def fast_purged() -> bool:
        return await rl.purge_full() == 1

    await eventually(fast_purged, within=5.0)
    assert await rl.purge_full() == 0
    assert not (await rl.acquire("slow", limit=1, period=3600)).allowed  # still limited
    assert (await rl.acquire("fast", limit=10, period=0.2)).remaining == pytest.approx(9, abs=0.1)


async def test_cache_purge_expired(stores: SQLStores) -> None:
    await stores.cache.set("short", b"1", ttl=0.05)
    await stores.cache.set("long", b"2", ttl=60)

    async def purged() -> bool:
        return await stores.cache.purge_expired() == 1

    await eventually(purged, within=5.0)
    assert await stores.cache.purge_expired() == 0
    assert await stores.cache.get("long") == b"2"


def _pending(**extra: object) -> PendingConfirmation:
    now = time.time()
    return PendingConfirmation(
        id="conf_1",
        user_id="u1",
        tool_name="delete_task",
        arguments_hash="h" * 32,
        call={"id": "c1", "name": "delete_task", "arguments": '{"task_id": "t1"}'},
        summary="delete t1",
        created_at=now,
        expires_at=now + 60,
        **extra,  # type: ignore[arg-type]
    )
