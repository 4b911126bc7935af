"""`toolrun db upgrade` run by eight processes at the same instant on a fresh database (one per replica, as
deployments run them): every one exits 0 and the schema is made once (toolrun's schema lock)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from processes import outcomes, scratch_postgres, start_together
from toolrun.server.migrate import current_revision, head_revision

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

REPLICAS = 8


async def _upgrade_at_once(url: str, folder: Path) -> None:
    processes = start_together([["toolrun", "db", "upgrade", "--database-url", url]] * REPLICAS, folder)
    results = outcomes(processes)
    failed = [(code, err[-2000:]) for code, _, err in results if code != 0]
    assert failed == [], failed
    head = head_revision()
    assert all(f"database at revision {head}" in out for _, out, _ in results), results
    assert await current_revision(url) == head


async def test_replicas_upgrading_a_fresh_postgres_database_at_once_all_succeed(tmp_path: Path) -> None:
    with scratch_postgres("hpg_migrate") as url:
        service_url = (
            sa.make_url(url).set(drivername="postgresql+asyncpg").render_as_string(hide_password=False)
        )
        await _upgrade_at_once(service_url, tmp_path)


async def test_replicas_upgrading_a_fresh_sqlite_database_at_once_all_succeed(tmp_path: Path) -> None:
    await _upgrade_at_once(f"sqlite+aiosqlite:///{tmp_path / 'toolrun.db'}", tmp_path)
