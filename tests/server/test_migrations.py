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
