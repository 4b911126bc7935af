"""The artifact stores' contract, on memory, SQLite and PostgreSQL: an artifact is its owner's only, gone
when it expires (the same None as an unknown id), bytes come back byte for byte, and on SQL another
engine on the same database (another process) reads what this one kept."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from toolrun.store import Artifact, ArtifactStore, InMemoryArtifactStore
from toolrun.store.sql import SQLArtifactStore

from .conftest import POSTGRES_URL, open_postgres, unique


@dataclass
class Clock:
    now: float = 1_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Stores:
    main: ArtifactStore
    peer: ArtifactStore  # the same state through its own engine (another process's view)
    clock: Clock


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    clock = Clock()
    if request.param == "memory":
        store = InMemoryArtifactStore(clock=clock)
        yield Stores(store, store, clock)
        return
    prefix = unique("a") + "_"
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'artifacts.db'}"
    else:
        await (await open_postgres(prefix)).aclose()  # fails the test when PostgreSQL is down
        url = POSTGRES_URL
    main = SQLArtifactStore(url, table_prefix=prefix, clock=clock, purge_every=3)
    peer = SQLArtifactStore(url, table_prefix=prefix, clock=clock)
    await main.create_tables()
    try:
        yield Stores(main, peer, clock)
    finally:
        await main.drop_tables()
        await main.aclose()
        await peer.aclose()


def artifact(id: str = "art_1", owner: str | None = "alice", **changes: Any) -> Artifact:
    fields: dict[str, Any] = {"tool_name": "chart", "text": "whole text", "expires_at": 1_060.0}
    return Artifact(id=id, owner=owner, **{**fields, **changes})


async def test_an_artifact_is_its_owners_only(stores: Stores) -> None:
    kept = artifact(data=bytes(range(256)) * 4096, media_type="image/png", name="chart.png")  # 1 MiB
    await stores.main.put(kept)
    assert await stores.peer.get("art_1", "alice") == kept
    for owner in ("bob", None, "", "ALICE"):
        assert await stores.peer.get("art_1", owner) is None
    assert await stores.peer.get("art_2", "alice") is None


async def test_calls_without_a_user_share_the_no_user_owner_and_only_they_read(stores: Stores) -> None:
    await stores.main.put(artifact(owner=None))
    assert await stores.peer.get("art_1", None) == artifact(owner=None)
    assert await stores.peer.get("art_1", "") is None and await stores.peer.get("art_1", "alice") is None


async def test_an_expired_artifact_answers_like_an_unknown_one(stores: Stores) -> None:
    await stores.main.put(artifact())
    stores.clock.now = 1_059.9
    assert await stores.peer.get("art_1", "alice") is not None
    stores.clock.now = 1_060.0
    assert await stores.peer.get("art_1", "alice") is None


async def test_a_put_of_the_same_id_replaces_it(stores: Stores) -> None:
    await stores.main.put(artifact(text="first"))
    await stores.main.put(artifact(text="second", data=b"x", media_type="text/plain"))
    found = await stores.peer.get("art_1", "alice")
    assert found is not None and (found.text, found.data, found.media_type) == ("second", b"x", "text/plain")


@pytest.mark.parametrize("stores", ["sqlite", "postgresql"], indirect=True)
async def test_expired_rows_are_purged_as_puts_go_on(stores: Stores) -> None:
    """(The in-memory store drops its oldest past `max_entries` instead.)"""
    main = stores.main
    assert isinstance(main, SQLArtifactStore)
    await main.put(artifact("art_old", expires_at=1_010.0))
    stores.clock.now = 1_020.0
    await main.put(artifact("art_a"))
    assert await _count(main) == 2
    await main.put(artifact("art_b"))  # the third put purges
    assert await _count(main) == 2 and await main.get("art_a", "alice") is not None
    stores.clock.now = 2_000.0
    assert await main.purge_expired() == 2


async def _count(store: SQLArtifactStore) -> int:
    import sqlalchemy as sa

    async with store.engine.connect() as conn:
        return int((await conn.execute(sa.select(sa.func.count()).select_from(store.table))).scalar_one())


async def test_the_protocol_is_met() -> None:
    sql = SQLArtifactStore("sqlite+aiosqlite://")
    assert isinstance(InMemoryArtifactStore(), ArtifactStore) and isinstance(sql, ArtifactStore)
    await sql.aclose()
