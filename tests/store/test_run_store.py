"""`RunStore`: paused runs kept for a decision, on every backend (memory, SQLite, PostgreSQL, Redis).

A claim takes the run for exactly one caller: never for another user, never twice while held, again only
once the claim is released or has lapsed. On SQLite, PostgreSQL and Redis the racing claimants are
separate engines (clients) on one database, as separate processes are.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from toolrun.store import NO_USER, InMemoryRunStore, PausedRun, RunStore
from toolrun.store.redis import RedisRunStore
from toolrun.store.sql import SQLRunStore, create_sql_stores

from .conftest import POSTGRES_URL, REDIS_URL, delete_redis_prefix, open_postgres, open_redis, unique

NOW = 1_000_000.0


def paused(
    run_id: str = "run_1", *, user: str = "u1", ids: tuple[str, ...] = ("c1",), **kw: Any
) -> PausedRun:
    values: dict[str, Any] = {
        "run_id": run_id,
        "user_id": user,
        "data": '{"run": "' + run_id + '"}',
        "confirmation_ids": ids,
        "expires_at": NOW + 600,
        "conversation_id": "conv_1",
    }
    values.update(kw)
    return PausedRun(**values)


class Stores:
    """A backend: `main`, and `peer()` for one more store on the same state (another process)."""

    def __init__(self, main: RunStore, peer: Any) -> None:
        self.main = main
        self.peer = peer


@pytest.fixture(params=["memory", "sqlite", "postgresql", "redis"])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    if request.param == "memory":
        store = InMemoryRunStore()

        async def same() -> RunStore:
            return store

        yield Stores(store, same)
        return
    if request.param == "redis":
        key_prefix = unique("toolrun-test:") + ":"
        probe = await open_redis(key_prefix)  # fails (never skips) when Redis is down
        await probe.aclose()
        clients: list[RedisRunStore] = []

        async def redis_peer() -> RunStore:
            clients.append(RedisRunStore(REDIS_URL, key_prefix=key_prefix))
            return clients[-1]

        try:
            yield Stores(await redis_peer(), redis_peer)
        finally:
            for client in clients:
                await client.aclose()
            await delete_redis_prefix(key_prefix)
        return
    prefix = unique("r") + "_"
    opened: list[SQLRunStore] = []
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}"
    else:
        probe = await open_postgres(prefix)  # fails (never skips) when PostgreSQL is down
        await probe.aclose()
        url = POSTGRES_URL

    async def peer() -> RunStore:
        store = SQLRunStore(url, table_prefix=prefix)
        opened.append(store)
        return store

    main = await peer()
    assert isinstance(main, SQLRunStore)
    await main.create_tables()
    try:
        yield Stores(main, peer)
    finally:
        await main.drop_tables()
        for store in opened:
            await store.aclose()


async def test_a_saved_run_is_claimed_by_its_user_once(stores: Stores) -> None:
    store = stores.main
    assert isinstance(store, RunStore)
    await store.save(paused(ids=("c1", "c2")))
    found = await store.find("c2", user_id="u1")
    assert found is not None and found.run_id == "run_1" and found.claim_token is None
    assert found.confirmation_ids == ("c1", "c2") and found.conversation_id == "conv_1"
    assert await store.claim("c1", user_id="u2", token="t2", until=NOW + 60, now=NOW) is None
    assert await store.find("c1", user_id="u2") is None  # another user's: unknown to them
    taken = await store.claim("c1", user_id="u1", token="t1", until=NOW + 60, now=NOW)
    assert taken is not None and taken.data == '{"run": "run_1"}'
    assert taken.claim_token == "t1" and taken.claimed_until == NOW + 60
    # Held: a second claim, by either of its confirmations, gets nothing.
    assert await store.claim("c1", user_id="u1", token="t3", until=NOW + 60, now=NOW + 1) is None
    assert await store.claim("c2", user_id="u1", token="t3", until=NOW + 60, now=NOW + 1) is None
    held = await store.find("c1", user_id="u1")
    assert held is not None and held.claim_token == "t1"


async def test_release_needs_the_claim_token_and_puts_the_run_back(stores: Stores) -> None:
    store = stores.main
    await store.save(paused())
    assert await store.claim("c1", user_id="u1", token="t1", until=NOW + 60, now=NOW) is not None
    assert await store.release("run_1", token="other") is False
    assert await store.claim("c1", user_id="u1", token="t2", until=NOW + 60, now=NOW) is None
    assert await store.release("run_1", token="t1") is True
    again = await store.claim("c1", user_id="u1", token="t2", until=NOW + 60, now=NOW)
    assert again is not None and again.claim_token == "t2"


async def test_a_lapsed_claim_can_be_taken_over(stores: Stores) -> None:
    store = stores.main
    await store.save(paused())
    assert await store.claim("c1", user_id="u1", token="t1", until=NOW + 60, now=NOW) is not None
    assert await store.claim("c1", user_id="u1", token="t2", until=NOW + 120, now=NOW + 59) is None
    taken = await store.claim("c1", user_id="u1", token="t2", until=NOW + 200, now=NOW + 61)
    assert taken is not None and taken.claim_token == "t2"
    assert taken.taken_over is True  # from a holder that stopped: what it started is not known
    assert await store.release("run_1", token="t1") is False  # the first holder lost it


async def test_a_claim_says_whether_it_took_the_run_from_a_lapsed_claim(stores: Stores) -> None:
    store = stores.main
    await store.save(paused())
    first = await store.claim("c1", user_id="u1", token="t1", until=NOW + 60, now=NOW)
    assert first is not None and first.taken_over is False  # nobody held it
    assert await store.release("run_1", token="t1") is True
    again = await store.claim("c1", user_id="u1", token="t2", until=NOW + 60, now=NOW + 1)
    assert again is not None and again.taken_over is False  # put back by its holder: not a takeover
    lapsed = await store.claim("c1", user_id="u1", token="t3", until=NOW + 200, now=NOW + 61)
    assert lapsed is not None and lapsed.taken_over is True
    await store.save(paused())  # paused again: a fresh record
    fresh = await store.claim("c1", user_id="u1", token="t4", until=NOW + 300, now=NOW + 62)
    assert fresh is not None and fresh.taken_over is False


async def test_saving_again_replaces_the_run_its_confirmations_and_its_claim(stores: Stores) -> None:
    store = stores.main
    await store.save(paused(ids=("c1",)))
    assert await store.claim("c1", user_id="u1", token="t1", until=NOW + 60, now=NOW) is not None
    await store.save(paused(ids=("c2",), data="second"))  # paused again, on a new confirmation
    assert await store.find("c1", user_id="u1") is None
    taken = await store.claim("c2", user_id="u1", token="t2", until=NOW + 60, now=NOW)
    assert taken is not None and taken.data == "second"


async def test_delete_forgets_the_run_and_its_confirmations(stores: Stores) -> None:
    store = stores.main
    await store.save(paused(ids=("c1", "c2")))
    await store.save(paused("run_2", ids=("c3",)))
    assert await store.delete("run_1") is True
    assert await store.delete("run_1") is False
    assert await store.find("c1", user_id="u1") is None
    assert await store.claim("c2", user_id="u1", token="t", until=NOW + 60, now=NOW) is None
    assert await store.find("c3", user_id="u1") is not None


async def test_runs_without_a_user_are_their_own_principal(stores: Stores) -> None:
    store = stores.main
    await store.save(paused(user=NO_USER))
    assert await store.claim("c1", user_id="u1", token="t", until=NOW + 60, now=NOW) is None
    assert await store.claim("c1", user_id=NO_USER, token="t", until=NOW + 60, now=NOW) is not None


async def test_purge_drops_expired_runs_nobody_holds(stores: Stores) -> None:
    store = stores.main
    await store.save(paused("old", ids=("c1",), expires_at=NOW - 1))
    await store.save(paused("held", ids=("c2",), expires_at=NOW - 1))
    await store.save(paused("fresh", ids=("c3",), expires_at=NOW + 600))
    assert await store.claim("c2", user_id="u1", token="t", until=NOW + 60, now=NOW - 2) is not None
    assert await store.purge_expired(NOW) == 1
    assert await store.find("c1", user_id="u1") is None
    assert await store.find("c2", user_id="u1") is not None
    assert await store.find("c3", user_id="u1") is not None


async def test_of_many_concurrent_claims_exactly_one_wins(stores: Stores) -> None:
    await stores.main.save(paused(ids=("c1", "c2")))
    peers = [await stores.peer() for _ in range(8)]
    results = await asyncio.gather(
        *(
            peer.claim(("c1", "c2")[i % 2], user_id="u1", token=f"t{i}", until=NOW + 60, now=NOW)
            for i, peer in enumerate(peers)
        )
    )
    won = [r for r in results if r is not None]
    assert len(won) == 1
    held = await stores.main.find("c1", user_id="u1")
    assert held is not None and held.claim_token == won[0].claim_token


async def test_the_sql_stores_carry_the_run_store(tmp_path: Path) -> None:
    stores = create_sql_stores(f"sqlite+aiosqlite:///{tmp_path / 'all.db'}", table_prefix="x_")
    await stores.create_tables()
    try:
        await stores.runs.save(paused())
        assert await stores.runs.find("c1", user_id="u1") is not None
    finally:
        await stores.drop_tables()
        await stores.aclose()


def test_a_paused_runs_repr_keeps_the_conversation_out() -> None:
    shown = repr(paused(data="the secret conversation"))
    assert "secret" not in shown and "run_1" in shown
