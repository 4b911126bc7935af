"""`server/_fixed`: the turn's fixed statements run straight on the service's SQLite connection, in the
transaction of the `engine.begin()` block around them, with Core's results; anything else (PostgreSQL, a
plain aiosqlite engine) runs them through Core. And a claim of a released lease skips the stale-run query.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from toolrun.server import _db, _recovery, _runs, _statements
from toolrun.server._fixed import Fixed, RawTransaction, raw_sqlite, transaction
from toolrun.server._recovery import INTERRUPTED

from .conftest import postgres_url  # noqa: F401  (the fixture)

_r = _db.runs
_RUN = Fixed(
    _r.insert(), columns=("id", "user_id", "conversation_id", "status", "model", "created_at", "updated_at")
)
_END = Fixed(
    _r.update().where(_r.c.id == sa.bindparam("b_rid")).values(status=sa.bindparam("b_status"), partial=None)
)
_RUNNING = Fixed(
    sa.select(_r.c.id, _r.c.created_at)
    .where(_r.c.conversation_id == sa.bindparam("b_cid"), _r.c.status == "running")
    .order_by(_r.c.id)
)


def _run(run_id: str, created: Any = 1) -> dict[str, Any]:
    return {
        "id": run_id,
        "user_id": "u1",
        "conversation_id": "c1",
        "status": "running",
        "model": "m",
        "created_at": created,
        "updated_at": 2.5,
    }


async def _engine(url: str) -> AsyncEngine:
    engine = _db.create_engine(url)
    async with engine.begin() as conn:
        await conn.run_sync(_db.metadata.create_all)
    return engine


@pytest.fixture
async def inline(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    engine = await _engine(f"sqlite+aiosqlite:///{tmp_path}/inline.db")
    yield engine
    await engine.dispose()


def _core_statements(engine: AsyncEngine) -> list[str]:
    seen: list[str] = []

    @event.listens_for(engine.sync_engine, "before_cursor_execute")
    def _seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    return seen


async def _exercise(engine: AsyncEngine) -> dict[str, Any]:
    """The same calls on any engine; what they returned and what the table holds."""
    async with engine.begin() as conn:
        await _RUN.execute(conn, _run("r1", created=1))  # an int for a Double: a float, as under Core
        await _RUN.executemany(conn, [_run("r2", 2.0), _run("r3", 3.0)])
        changed = await _END.execute(conn, {"b_rid": "r2", "b_status": "completed"})
        missing = await _END.execute(conn, {"b_rid": "nope", "b_status": "completed"})
        running = await _RUNNING.rows(conn, {"b_cid": "c1"})
    try:
        async with engine.begin() as conn:
            await _RUN.execute(conn, _run("r4"))
            raise RuntimeError("rolled back with the transaction")
    except RuntimeError:
        pass
    kind = "typeof(created_at)" if engine.dialect.name == "sqlite" else "pg_typeof(created_at)::text"
    async with engine.connect() as conn:
        query = f"SELECT id, status, {kind} FROM toolrun_runs ORDER BY id"
        stored = (await conn.execute(sa.text(query))).all()
    return {
        "changed": changed,
        "missing": missing,
        "running": running,
        "stored": [tuple(r) for r in stored],
    }


async def test_on_the_inline_engine_they_bypass_core_and_give_cores_results(
    inline: AsyncEngine, tmp_path: Path
) -> None:
    core_seen = _core_statements(inline)
    got = await _exercise(inline)
    assert not [s for s in core_seen if "toolrun_runs" in s and "typeof" not in s]  # none went through Core
    plain = create_async_engine(f"sqlite+aiosqlite:///{tmp_path}/plain.db")  # aiosqlite: Core runs them
    async with plain.begin() as conn:
        await conn.run_sync(_db.metadata.create_all)
        assert raw_sqlite(conn) is None
    plain_seen = _core_statements(plain)
    try:
        assert await _exercise(plain) == got
    finally:
        await plain.dispose()
    assert len([s for s in plain_seen if s.startswith(("INSERT", "UPDATE", "SELECT toolrun_runs"))]) == 6
    assert got == {
        "changed": 1,
        "missing": 0,
        "running": [("r1", 1.0), ("r3", 3.0)],
        "stored": [("r1", "running", "real"), ("r2", "completed", "real"), ("r3", "running", "real")],
    }


async def test_a_missing_parameter_fails_as_under_core(inline: AsyncEngine) -> None:
    async with inline.begin() as conn:
        assert isinstance(raw_sqlite(conn), sqlite3.Connection)
        with pytest.raises(KeyError):
            await _END.execute(conn, {"b_rid": "r1"})  # no b_status: never a silent NULL


async def test_on_postgresql_they_run_through_core(postgres_url: str) -> None:  # noqa: F811
    engine = await _engine(postgres_url)
    try:
        async with engine.connect() as conn:
            assert raw_sqlite(conn) is None
        got = await _exercise(engine)
    finally:
        await engine.dispose()
    assert got["changed"] == 1 and got["missing"] == 0
    assert got["running"] == [("r1", 1.0), ("r3", 3.0)]
    assert got["stored"] == [
        ("r1", "running", "double precision"),
        ("r2", "completed", "double precision"),
        ("r3", "running", "double precision"),
    ]


# -- claims -------------------------------------------------------------------------------------------------


async def _conversation(engine: AsyncEngine, *, lease_until: float | None, owner: str | None) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            _db.conversations.insert().values(
                id="c1",
                user_id="u1",
                title="t",
                created_at=1.0,
                updated_at=1.0,
                lease_until=lease_until,
                lease_owner=owner,
            )
        )
        await _RUN.execute(conn, _run("r_old"))  # a run its process left `running`


async def _claim_tracing(engine: AsyncEngine, run_id: str, now: float, how: str) -> list[str]:
    traced: list[str] = []
    opened = engine.begin() if how == "core" else transaction(engine)
    async with opened as conn:
        raw = conn.sqlite if isinstance(conn, RawTransaction) else raw_sqlite(conn)
        assert raw is not None
        raw.set_trace_callback(traced.append)
        try:
            await _statements.claim(conn, "u1", "c1", run_id, now + 15, now, pending_run_id=None)
        finally:
            raw.set_trace_callback(None)
    return traced


async def _status(engine: AsyncEngine, run_id: str) -> tuple[str, str | None]:
    async with engine.connect() as conn:
        row = (await conn.execute(sa.select(_r.c.status, _r.c.error).where(_r.c.id == run_id))).one()
    return row[0], row[1]


HOW = pytest.mark.parametrize("how", ["core", "raw"])


@HOW
async def test_a_released_lease_is_claimed_without_the_stale_run_query(inline: AsyncEngine, how: str) -> None:
    await _conversation(inline, lease_until=None, owner=None)
    traced = await _claim_tracing(inline, "r_new", 100.0, how)
    # the claim alone: no SELECT of toolrun_runs
    assert [s.split()[0] for s in traced if s != "BEGIN "] == ["UPDATE"]
    # (a run left `running` under a released lease cannot happen: every release writes the run's end)
    assert await _status(inline, "r_old") == ("running", None)


@HOW
async def test_an_expired_lease_is_claimed_and_its_stale_run_closed(inline: AsyncEngine, how: str) -> None:
    await _conversation(inline, lease_until=50.0, owner="r_old")
    async with inline.begin() as conn:
        await conn.execute(_db.runs.update().values(partial="half an answer"))
    traced = await _claim_tracing(inline, "r_new", 100.0, how)
    assert any("FROM toolrun_runs" in s for s in traced)
    assert await _status(inline, "r_old") == ("interrupted", INTERRUPTED)
    async with inline.connect() as conn:
        kept = (await conn.execute(sa.select(_db.messages.c.run_id, _db.messages.c.data))).all()
    assert [(r[0], json.loads(r[1])) for r in kept] == [
        ("r_old", _recovery.interrupted_message("half an answer"))
    ]


@HOW
async def test_a_held_lease_is_not_claimed(inline: AsyncEngine, how: str) -> None:
    await _conversation(inline, lease_until=200.0, owner="r_old")
    with pytest.raises(_statements.ServiceError) as caught:
        await _claim_tracing(inline, "r_new", 100.0, how)
    assert caught.value.status == 409
    assert await _status(inline, "r_old") == ("running", None)


# -- transactions -------------------------------------------------------------------------------------------


def test_every_fixed_statement_of_the_turn_runs_without_core(inline: AsyncEngine) -> None:
    # A RawTransaction has no Core connection to fall back to: each must compile to plain SQL.
    found = [
        v for module in (_statements, _recovery, _runs) for v in vars(module).values() if isinstance(v, Fixed)
    ]
    assert len(found) >= 15
    assert [f.statement for f in found if f.compiled(inline.dialect) is None] == []


async def _write(engine: AsyncEngine, *run_ids: str) -> None:
    async with transaction(engine) as conn:
        for run_id in run_ids:
            await _RUN.execute(conn, _run(run_id))


async def _write_then_fail(engine: AsyncEngine, run_id: str) -> None:
    async with transaction(engine) as conn:
        await _RUN.execute(conn, _run(run_id))
        raise RuntimeError("boom")


async def _ids(engine: AsyncEngine) -> list[str]:
    async with engine.connect() as conn:
        return [r[0] for r in (await conn.execute(sa.select(_r.c.id).order_by(_r.c.id))).all()]


async def test_a_raw_transaction_commits_rolls_back_and_returns_its_connection(inline: AsyncEngine) -> None:
    pool: Any = inline.sync_engine.pool
    async with transaction(inline) as conn:
        assert isinstance(conn, RawTransaction)
        assert pool.checkedout() == 1  # the pool's one connection: others wait for it, as with begin()
        await _RUN.execute(conn, _run("r1"))
    assert pool.checkedout() == 0
    with pytest.raises(RuntimeError):
        await _write_then_fail(inline, "r2")
    assert pool.checkedout() == 0
    with pytest.raises(sqlite3.IntegrityError):
        await _write(inline, "r3", "r1")  # a duplicate key: the statement fails, r3 goes too
    async with transaction(inline) as conn:
        assert isinstance(conn, RawTransaction)
        assert not conn.sqlite.in_transaction  # nothing half-done came back with the connection
    assert await _ids(inline) == ["r1"]


async def test_a_raw_transaction_refused_by_another_writers_lock_is_rolled_back(
    inline: AsyncEngine, tmp_path: Path
) -> None:
    other = sqlite3.connect(tmp_path / "inline.db", timeout=0)
    try:
        async with transaction(inline) as conn:
            await _RUN.execute(conn, _run("r1"))
        other.execute("BEGIN IMMEDIATE")  # another process's write lock: our next write cannot happen
        assert isinstance(conn, RawTransaction)
        conn.sqlite.execute("PRAGMA busy_timeout=50")
        with pytest.raises(sqlite3.OperationalError):
            await _write(inline, "r2")
        other.rollback()
        async with transaction(inline) as conn:
            assert isinstance(conn, RawTransaction)
            assert not conn.sqlite.in_transaction
            conn.sqlite.execute("PRAGMA busy_timeout=5000")
    finally:
        other.close()
    assert await _ids(inline) == ["r1"]


async def test_elsewhere_a_transaction_is_engine_begin(tmp_path: Path) -> None:
    plain = create_async_engine(f"sqlite+aiosqlite:///{tmp_path}/plain.db")  # aiosqlite, not inline
    try:
        async with plain.begin() as conn:
            await conn.run_sync(_db.metadata.create_all)
        async with transaction(plain) as conn:
            assert not isinstance(conn, RawTransaction)
            await _RUN.execute(conn, _run("r1"))
        with pytest.raises(RuntimeError):
            await _write_then_fail(plain, "r2")
        assert await _ids(plain) == ["r1"]
        assert plain.sync_engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    finally:
        await plain.dispose()
