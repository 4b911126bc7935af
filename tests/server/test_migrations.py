"""The Alembic migrations: upgrade and downgrade on SQLite and on the real PostgreSQL, and the tables they
make match the `Table` objects the code queries (migrations are the source of truth)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from toolrun.apps.tasks._store import metadata as task_metadata
from toolrun.server._db import create_engine
from toolrun.server._db import metadata as server_metadata
from toolrun.server.migrate import current_revision, downgrade, head_revision, upgrade
from toolrun.store.sql import create_sql_stores


async def _columns(url: str) -> dict[str, dict[str, Any]]:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:

            def read(sync: Any) -> dict[str, dict[str, Any]]:
                insp = sa.inspect(sync)
                return {
                    t: {c["name"]: c["nullable"] for c in insp.get_columns(t)}
                    for t in insp.get_table_names()
                    if t.startswith("toolrun_") and not t.startswith("toolrun_tasks_fts")
                }

            return await conn.run_sync(read)
    finally:
        await engine.dispose()


def _expected() -> dict[str, dict[str, Any]]:
    stores = create_sql_stores("sqlite+aiosqlite:///:memory:")
    tables = [*server_metadata.tables.values(), *task_metadata.tables.values()]
    tables += [stores.confirmations.table, stores.rate_limits.table, stores.cache.table]
    tables += [stores.approval_rules.table, stores.artifacts.table]
    out = {t.name: {c.name: c.nullable for c in t.columns} for t in tables}
    out["toolrun_confirmations"]["run_id"] = True  # bound to the run that asked (nullable)
    return out


async def _roundtrip(url: str) -> None:
    assert await current_revision(url) is None
    await upgrade(url)
    assert await current_revision(url) == head_revision()
    found = await _columns(url)
    expected = _expected()
    extra = {"toolrun_tasks": {"search": True}} if url.startswith("postgresql") else {}
    for name, cols in expected.items():
        assert found[name] == {**cols, **extra.get(name, {})}, name
    assert set(found) == set(expected)
    await upgrade(url)  # idempotent
    await downgrade(url, "base")
    assert await current_revision(url) is None
    assert await _columns(url) == {}
    await upgrade(url)  # and up again on the emptied database
    assert await current_revision(url) == head_revision()


async def test_upgrade_and_downgrade_on_sqlite(tmp_path: Path) -> None:
    await _roundtrip(f"sqlite+aiosqlite:///{tmp_path}/m.db")


@pytest.mark.slow
async def test_upgrade_and_downgrade_on_postgres(postgres_url: str) -> None:
    await _roundtrip(postgres_url)


async def _approvals_step(url: str) -> None:
    """0003 on a database holding 0001 data: the confirmation row survives both ways, its preview is
    readable (None) after the upgrade, and the downgrade drops exactly what 0003 added."""
    await upgrade(url, "0001")
    engine = create_engine(url)
    row = {
        "id": "conf_old",
        "user_id": "u1",
        "tool_name": "delete_task",
        "arguments_hash": "h",
        "call": "{}",
        "summary": 'delete_task(task_id="t1")',
        "created_at": 1.0,
        "expires_at": 2.0,
        "conversation_id": None,
        "metadata": "{}",
        "run_id": None,
    }
    try:
        async with engine.begin() as conn:
            await conn.execute(sa.table("toolrun_confirmations", *map(sa.column, row)).insert().values(row))
        await upgrade(url)
        stores = create_sql_stores(engine)
        record = await stores.confirmations.get("conf_old")
        assert record is not None and record.preview is None and record.summary == row["summary"]
        found = await _columns(url)
        assert "preview" in found["toolrun_confirmations"] and "rule_id" in found["toolrun_audit"]
        assert "toolrun_approval_rules" in found
        await downgrade(url, "0001")
        found = await _columns(url)
        assert "preview" not in found["toolrun_confirmations"] and "rule_id" not in found["toolrun_audit"]
        assert "toolrun_approval_rules" not in found
        async with engine.connect() as conn:
            ids = (await conn.execute(sa.text("SELECT id FROM toolrun_confirmations"))).scalars().all()
        assert ids == ["conf_old"]
    finally:
        await engine.dispose()


async def test_the_approvals_migration_keeps_rows_on_sqlite(tmp_path: Path) -> None:
    await _approvals_step(f"sqlite+aiosqlite:///{tmp_path}/a.db")


@pytest.mark.slow
async def test_the_approvals_migration_keeps_rows_on_postgres(postgres_url: str) -> None:
    await _approvals_step(postgres_url)


async def _upgrade_0004_keeps_rows(url: str) -> None:
    """0003 → 0004 on a database with rows: they stay; the new columns start empty; and back down."""
    if await current_revision(url) is not None:
        await downgrade(url, "base")
    await upgrade(url, "0003")
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                sa.text(
                    "INSERT INTO toolrun_runs (id, user_id, conversation_id, status, model, created_at, "
                    "updated_at) VALUES ('run_1', 'u1', 'conv_1', 'completed', 'demo', 1, 1)"
                )
            )
            await conn.execute(
                sa.text(
                    "INSERT INTO toolrun_confirmations (id, user_id, tool_name, arguments_hash, call, "
                    "summary, created_at, expires_at, metadata) "
                    "VALUES ('conf_1', 'u1', 't', 'h', '{}', 's', 1, 2, '{}')"
                )
            )
        await upgrade(url, "0004")
        assert await current_revision(url) == "0004"
        async with engine.begin() as conn:
            assert (await conn.execute(sa.text("SELECT partial FROM toolrun_runs"))).all() == [(None,)]
            assert (await conn.execute(sa.text("SELECT consumed_at FROM toolrun_confirmations"))).all() == [
                (None,)
            ]
            await conn.execute(
                sa.text(
                    "INSERT INTO toolrun_confirmations (id, user_id, tool_name, arguments_hash, call, "
                    "summary, created_at, expires_at, metadata, consumed_at) "
                    "VALUES ('conf_2', 'u1', 't', 'h', '{}', 's', 1, 2, '{}', 1.5)"
                )
            )
        await downgrade(url, "0003")
        cols = await _columns(url)
        assert "partial" not in cols["toolrun_runs"] and "consumed_at" not in cols["toolrun_confirmations"]
        async with engine.connect() as conn:
            # a consumed confirmation meant a deleted row before 0004: it does not come back as pending
            ids = (await conn.execute(sa.text("SELECT id FROM toolrun_confirmations"))).all()
            assert ids == [("conf_1",)]
            assert (await conn.execute(sa.text("SELECT id FROM toolrun_runs"))).all() == [("run_1",)]
    finally:
        await engine.dispose()
    await downgrade(url, "base")


async def test_0004_upgrade_and_downgrade_with_rows_on_sqlite(tmp_path: Path) -> None:
    await _upgrade_0004_keeps_rows(f"sqlite+aiosqlite:///{tmp_path}/m2.db")


@pytest.mark.slow
async def test_0004_upgrade_and_downgrade_with_rows_on_postgres(postgres_url: str) -> None:
    await _upgrade_0004_keeps_rows(postgres_url)


async def _a_database_from_before_the_split(url: str) -> None:
    """A database migrated before the task assistant became an App: the service's 0001 had made the task
    tables, and there is no history of the tasks app. `upgrade` adopts them (no error, no row lost, search
    still works); `downgrade base` then drops them with the rest."""
    from toolrun.apps.tasks import TaskQuery, TaskStore
    from toolrun.server.migrate import app_revision

    if await current_revision(url) is not None:
        await downgrade(url, "base")
    await upgrade(url)
    engine = create_engine(url)
    store = TaskStore(engine)
    try:
        task = await store.create(
            "u1", title="water the plants", description=None, priority="low", eta=None, tags=[]
        )
        async with engine.begin() as conn:  # the state such a database is in: tables, but no app history
            await conn.execute(sa.text("DROP TABLE alembic_version_tasks"))
        assert await app_revision(url) is None and await current_revision(url) == head_revision()
        await upgrade(url)
        assert await app_revision(url) == head_revision("toolrun.apps.tasks:app")
        found, total = await store.query("u1", TaskQuery(text="plants"))
        assert total == 1 and found[0].id == task.id
        await downgrade(url, "base")
        assert await _columns(url) == {}
    finally:
        await engine.dispose()


async def test_a_database_from_before_the_split_upgrades_on_sqlite(tmp_path: Path) -> None:
    await _a_database_from_before_the_split(f"sqlite+aiosqlite:///{tmp_path}/old.db")


@pytest.mark.slow
async def test_a_database_from_before_the_split_upgrades_on_postgres(postgres_url: str) -> None:
    await _a_database_from_before_the_split(postgres_url)


async def test_the_service_history_makes_no_task_table(tmp_path: Path) -> None:
    """The service's own revisions make only its tables: an App without migrations gets no task table."""
    from toolrun.server import App

    url = f"sqlite+aiosqlite:///{tmp_path}/bare.db"
    await upgrade(url, app=App(name="bare", title="Bare"))
    found = await _columns(url)
    assert "toolrun_users" in found and not any(
        t.startswith(("toolrun_task", "toolrun_attach")) for t in found
    )
