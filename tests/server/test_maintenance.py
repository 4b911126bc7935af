"""The periodic purge (`server/_maintenance.py`), on the real SQL stores of SQLite and PostgreSQL: what
has expired goes (cache entries, refilled rate-limit buckets, stored results, confirmations past their
retention, decided or not), everything else stays; a store that fails does not stop the others; the app
runs passes on its own, counts them in `/metrics`, and runs none with `purge_interval=0`."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from toolrun.server._maintenance import Maintenance
from toolrun.server._recovery import confirmation_state
from toolrun.server.migrate import upgrade
from toolrun.store import Artifact, PendingConfirmation
from toolrun.store.sql import SQLArtifactStore, SQLCache, SQLConfirmationStore, SQLRateLimitStore

from .conftest import make_service, sqlite_settings

RETENTION = 3600.0


def pending(confirmation_id: str, expires_at: float) -> PendingConfirmation:
    return PendingConfirmation(
        id=confirmation_id,
        user_id="alice",
        tool_name="delete_task",
        arguments_hash="h",
        call={"id": f"call_{confirmation_id}", "name": "delete_task", "arguments": "{}"},
        summary="delete_task(task_id='t1')",
        created_at=expires_at - 600,
        expires_at=expires_at,
    )


def artifact(artifact_id: str, expires_at: float) -> Artifact:
    return Artifact(id=artifact_id, owner="alice", tool_name="chart", text="a chart", expires_at=expires_at)


async def rows(store: Any) -> int:
    """How many rows the store's table holds (expired ones too)."""
    async with store.engine.connect() as conn:
        return int((await conn.execute(sa.select(sa.func.count()).select_from(store.table))).scalar_one())


class Stores:
    def __init__(self, url: str) -> None:
        self.confirmations = SQLConfirmationStore(url)
        self.cache = SQLCache(url)
        self.rate_limits = SQLRateLimitStore(url)
        self.artifacts = SQLArtifactStore(url, purge_every=0)

    def maintenance(self, **options: Any) -> Maintenance:
        return Maintenance(
            confirmations=self.confirmations,
            cache=self.cache,
            rate_limits=self.rate_limits,
            artifacts=self.artifacts,
            interval=options.pop("interval", 0),
            retention=RETENTION,
            **options,
        )

    async def aclose(self) -> None:
        for store in (self.confirmations, self.cache, self.rate_limits, self.artifacts):
            await store.aclose()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path}/toolrun.db"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
async def stores(database_url: str) -> AsyncIterator[Stores]:
    await upgrade(database_url)
    made = Stores(database_url)
    try:
        yield made
    finally:
        for store in (made.confirmations, made.cache, made.artifacts):
            async with store.engine.begin() as conn:
                await conn.execute(sa.delete(store.table))
        await made.rate_limits.reset()
        await made.aclose()


async def test_a_pass_deletes_what_has_expired_and_keeps_the_rest(stores: Stores) -> None:
    now = time.time()
    # Confirmations: one long expired and never decided, one long expired and decided (consumed), one
    # expired a minute ago (within the retention), one still pending.
    await stores.confirmations.add(pending("c_old", now - RETENTION - 60))
    await stores.confirmations.add(pending("c_old_decided", now - RETENTION - 60))
    assert await stores.confirmations.consume("c_old_decided", user_id="alice") is not None
    await stores.confirmations.add(pending("c_recent", now - 60))
    await stores.confirmations.add(pending("c_live", now + 600))
    await stores.cache.set("gone", b"x", ttl=0.05)
    await stores.cache.set("kept", b"y", ttl=600)
    await stores.rate_limits.acquire("refills", limit=1, period=0.05)
    await stores.rate_limits.acquire("limits", limit=1, period=600)
    await stores.artifacts.put(artifact("art_gone", now - 1))
    await stores.artifacts.put(artifact("art_kept", now + 600))
    assert await confirmation_state(stores.confirmations, "c_old_decided", now) == "consumed"
    await asyncio.sleep(0.1)

    purged: list[tuple[str, int]] = []
    deleted = await stores.maintenance(on_purged=lambda store, rows: purged.append((store, rows))).run_once()

    # The confirmations count is of the never-decided ones (the store's own count); both old rows went.
    assert deleted == {"confirmations": 1, "cache": 1, "rate_limits": 1, "artifacts": 1}
    assert sorted(purged) == [("artifacts", 1), ("cache", 1), ("confirmations", 1), ("rate_limits", 1)]
    assert await rows(stores.confirmations) == 2
    assert await stores.confirmations.get("c_recent") is not None
    assert await stores.confirmations.get("c_live") is not None
    # Past the retention, a decided confirmation is no longer known: a run closed now says "may or may not
    # have run" (RESULT_UNKNOWN), never "did not run".
    assert await confirmation_state(stores.confirmations, "c_old_decided", now) == "unknown"
    assert await stores.cache.get("gone") is None and await stores.cache.get("kept") == b"y"
    assert await rows(stores.cache) == 1
    assert await rows(stores.rate_limits) == 1
    assert not (await stores.rate_limits.acquire("limits", limit=1, period=600)).allowed  # still limiting
    assert await rows(stores.artifacts) == 1
    assert await stores.artifacts.get("art_kept", "alice") is not None

    again = await stores.maintenance().run_once()
    assert again == {"confirmations": 0, "cache": 0, "rate_limits": 0, "artifacts": 0}


async def test_a_failing_store_is_logged_and_the_others_still_purge(
    stores: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    class Down:
        async def purge_expired(self) -> int:
            raise ConnectionRefusedError("the database is down")

    await stores.cache.set("gone", b"x", ttl=0.05)
    await asyncio.sleep(0.1)
    maintenance = Maintenance(
        confirmations=stores.confirmations,
        cache=stores.cache,
        rate_limits=object(),  # no purge of its own (like Redis's): skipped
        artifacts=Down(),
        interval=0,
        retention=RETENTION,
    )
    with caplog.at_level(logging.WARNING, logger="toolrun.server"):
        deleted = await maintenance.run_once()
    assert deleted == {"confirmations": 0, "cache": 1}
    assert "Purging expired artifacts failed: ConnectionRefusedError" in caplog.text
    assert "the database is down" not in caplog.text  # the type only: messages may hold data


async def test_the_app_purges_on_its_own_and_counts_it(tmp_path: Path) -> None:
    settings = sqlite_settings(tmp_path, purge_interval=0.05, metrics_public=True)
    await upgrade(settings.database_url)
    cache = SQLCache(settings.database_url)
    try:
        await cache.set("gone", b"x", ttl=0.01)
        await cache.set("kept", b"y", ttl=600)
        async for service in make_service(settings):
            deadline = time.monotonic() + 10
            while await rows(cache) > 1:
                assert time.monotonic() < deadline, "no purge within 10 s"
                await asyncio.sleep(0.05)
            metrics = (await service.alice.http.get("/metrics")).text
            assert 'toolrun_purged_rows_total{store="cache"} 1.0' in metrics
        assert await cache.get("kept") == b"y"
    finally:
        await cache.aclose()


async def test_no_passes_with_a_purge_interval_of_zero(tmp_path: Path) -> None:
    settings = sqlite_settings(tmp_path, purge_interval=0)
    await upgrade(settings.database_url)
    cache = SQLCache(settings.database_url)
    try:
        await cache.set("expired", b"x", ttl=0.01)
        async for _ in make_service(settings):
            await asyncio.sleep(0.3)
        assert await rows(cache) == 1  # left for another purge
    finally:
        await cache.aclose()
