"""One contract for every store backend: memory, SQLite (a file), PostgreSQL and Redis (the real servers).

Every protocol method and guarantee of `toolrun.store._protocols`, run against each backend by the
`backend` fixture (see conftest.py). The concurrency tests go through `backend.peers(...)`: stores with
their own engines / clients and connections already open, as separate processes would have, so the
racing calls meet in the database server, not in a Python lock.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import pytest

from toolrun.store import NO_USER, CacheStore, ConfirmationStore, PendingConfirmation, RateLimitStore

from .conftest import Backend, eventually, spread

CONSUMERS = 50
"""Concurrent consumes of one confirmation id (10 connections on each of 5 peers)."""
ACQUIRERS = 40
"""Concurrent acquires on one bucket of capacity `CAPACITY` (8 connections on each of 5 peers)."""
CAPACITY = 7


def pending(
    id: str = "conf_1",
    user: str = "u1",
    *,
    created_at: float | None = None,
    expires_at: float | None = None,
    summary: str = 'delete_task(task_id="t1")',
    **extra: Any,
) -> PendingConfirmation:
    now = time.time()
    created = now if created_at is None else created_at
    return PendingConfirmation(
        id=id,
        user_id=user,
        tool_name="delete_task",
        arguments_hash="h" * 32,
        call={"id": "c1", "name": "delete_task", "arguments": '{"task_id": "t1"}'},
        summary=summary,
        created_at=created,
        expires_at=created + 600.0 if expires_at is None else expires_at,
        **extra,
    )


async def test_stores_satisfy_the_protocols(backend: Backend) -> None:
    assert isinstance(backend.confirmations, ConfirmationStore)
    assert isinstance(backend.rate_limits, RateLimitStore)
    assert isinstance(backend.cache, CacheStore)


# ---------------------------------------------------------------------------------------------------------
# Confirmations


async def test_add_get_round_trips_every_field(backend: Backend) -> None:
    item = pending(
        summary='supprimer «t1» — ✓ "quoted" \\ back',
        conversation_id="conv-9",
        run_id="run_7",
        metadata={"nested": {"list": [1, 2.5, None, True]}, "unicode": "日本"},
    )
    item = PendingConfirmation.from_dict(
        {**item.to_dict(), "call": {"id": "c1", "name": "delete_task", "arguments": {"task_id": "t1"}}}
    )
    await backend.confirmations.add(item)
    got = await backend.confirmations.get(item.id)
    assert got == item
    assert got is not None and got.to_dict() == item.to_dict()
    assert await backend.confirmations.get("conf_unknown") is None


async def test_run_id_is_optional_and_round_trips(backend: Backend) -> None:
    await backend.confirmations.add(pending("conf_a", run_id="run_a"))
    await backend.confirmations.add(pending("conf_b"))
    a = await backend.confirmations.get("conf_a")
    b = await backend.confirmations.get("conf_b")
    assert a is not None and a.run_id == "run_a" and a.to_dict()["run_id"] == "run_a"
    assert b is not None and b.run_id is None
    taken = await backend.confirmations.consume("conf_a", user_id="u1")
    assert taken is not None and taken.run_id == "run_a"
    [listed] = await backend.confirmations.list_pending("u1", now=time.time())
    assert listed.id == "conf_b" and listed.run_id is None


async def test_no_user_is_a_principal_of_its_own(backend: Backend) -> None:
    store = backend.confirmations
    await store.add(pending("conf_anon", user=NO_USER, run_id="run_1"))
    await store.add(pending("conf_u1"))
    assert await store.consume("conf_anon", user_id="u1") is None
    assert await store.consume("conf_u1", user_id=NO_USER) is None
    assert [p.id for p in await store.list_pending("u1", now=time.time())] == ["conf_u1"]
    taken = await store.consume("conf_anon", user_id=NO_USER)
    assert taken is not None and taken.user_id == NO_USER and taken.run_id == "run_1"
    assert await store.consume("conf_anon", user_id=NO_USER) is None
    assert await store.consume("conf_u1", user_id="u1") is not None


async def test_get_does_not_consume(backend: Backend) -> None:
    await backend.confirmations.add(pending())
    assert await backend.confirmations.get("conf_1") is not None
    assert await backend.confirmations.get("conf_1") is not None
    assert await backend.confirmations.consume("conf_1", user_id="u1") is not None


async def test_consume_is_single_use(backend: Backend) -> None:
    item = pending()
    await backend.confirmations.add(item)
    assert await backend.confirmations.consume("conf_1", user_id="u1") == item
    assert await backend.confirmations.consume("conf_1", user_id="u1") is None
    assert await backend.confirmations.get("conf_1") is None
    assert await backend.confirmations.list_pending("u1", now=time.time()) == []
    assert await backend.confirmations.consume("conf_never_added", user_id="u1") is None


async def test_consume_by_another_user_leaves_it_in_place(backend: Backend) -> None:
    item = pending()
    await backend.confirmations.add(item)
    assert await backend.confirmations.consume("conf_1", user_id="intruder") is None
    assert await backend.confirmations.get("conf_1") == item
    assert await backend.confirmations.list_pending("u1", now=time.time()) == [item]
    assert await backend.confirmations.consume("conf_1", user_id="u1") == item


async def test_consume_returns_an_expired_confirmation_for_the_caller_to_check(backend: Backend) -> None:
    now = time.time()
    item = pending(created_at=now - 20, expires_at=now - 10)
    await backend.confirmations.add(item)
    taken = await backend.confirmations.consume("conf_1", user_id="u1")
    assert taken == item
    assert taken is not None and taken.expired(time.time())
    assert await backend.confirmations.get("conf_1") is None


async def test_add_with_a_known_id_replaces_it(backend: Backend) -> None:
    await backend.confirmations.add(pending(summary="first"))
    await backend.confirmations.add(pending(summary="second"))
    got = await backend.confirmations.get("conf_1")
    assert got is not None and got.summary == "second"
    listed = await backend.confirmations.list_pending("u1", now=time.time())
    assert [p.summary for p in listed] == ["second"]


async def test_list_pending_is_the_users_unexpired_oldest_first(backend: Backend) -> None:
    now = time.time()
    store = backend.confirmations
    # Added out of order, with another user's and an expired one in between.
    await store.add(pending("conf_b", created_at=now - 1))
    await store.add(pending("conf_other", user="u2", created_at=now - 5))
    await store.add(pending("conf_a", created_at=now - 3))
    await store.add(pending("conf_old", created_at=now - 30, expires_at=now - 1))
    await store.add(pending("conf_c", created_at=now - 2))

    listed = await store.list_pending("u1", now=now)
    assert [p.id for p in listed] == ["conf_a", "conf_c", "conf_b"]
    assert [p.id for p in await store.list_pending("u2", now=now)] == ["conf_other"]
    assert await store.list_pending("nobody", now=now) == []
    # `now` is the caller's: at a later moment all of them have expired.
    assert await store.list_pending("u1", now=now + 10_000) == []


async def test_expiry_boundary_matches_expired(backend: Backend) -> None:
    now = time.time()
    item = pending(created_at=now - 1, expires_at=now + 5)
    await backend.confirmations.add(item)
    # expired(now) is `now >= expires_at`: at the exact moment it is no longer pending, and purgeable.
    assert item.expired(item.expires_at)
    assert await backend.confirmations.list_pending("u1", now=item.expires_at) == []
    assert await backend.confirmations.list_pending("u1", now=math.nextafter(item.expires_at, 0)) == [item]
    assert await backend.confirmations.purge_expired(item.expires_at) == 1
    assert await backend.confirmations.get("conf_1") is None


async def test_purge_expired_drops_only_expired_ones(backend: Backend) -> None:
    now = time.time()
    store = backend.confirmations
    await store.add(pending("conf_gone_1", created_at=now - 20, expires_at=now - 10))
    await store.add(pending("conf_gone_2", user="u2", created_at=now - 20, expires_at=now - 5))
    await store.add(pending("conf_live", expires_at=now + 60))

    assert await store.purge_expired(now) == 2
    assert await store.get("conf_gone_1") is None
    assert await store.get("conf_gone_2") is None
    assert await store.get("conf_live") is not None
    assert await store.consume("conf_gone_1", user_id="u1") is None
    assert await store.purge_expired(now) == 0
    assert await store.purge_expired(now + 61) == 1
    assert await store.list_pending("u1", now=now) == []


async def test_concurrent_consumes_of_one_id_have_exactly_one_winner(backend: Backend) -> None:
    peers = await backend.peers(5, connections=CONSUMERS // 5)
    item = pending()
    await backend.confirmations.add(item)
    start = asyncio.Event()

    async def consume(peer: Any) -> PendingConfirmation | None:
        await start.wait()
        return await peer.confirmations.consume("conf_1", user_id="u1")

    tasks = [asyncio.create_task(consume(peer)) for _, peer in spread(range(CONSUMERS), peers)]
    await asyncio.sleep(0)  # every task is parked on the event: release them together
    start.set()
    results = await asyncio.gather(*tasks)

    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    assert winners[0] == item
    assert await backend.confirmations.get("conf_1") is None


async def test_concurrent_consumes_of_many_ids_each_have_one_winner(backend: Backend) -> None:
    peers = await backend.peers(2, connections=10)
    ids = [f"conf_{i}" for i in range(20)]
    for confirmation_id in ids:
        await backend.confirmations.add(pending(confirmation_id))
    # Every id raced by both peers, and by an intruder who must never get it.
    calls = [peers[0].confirmations.consume(cid, user_id="u1") for cid in ids] + [
        peers[1].confirmations.consume(cid, user_id="u1") for cid in ids
    ]
    calls += [peers[1].confirmations.consume(cid, user_id="intruder") for cid in ids]
    results = await asyncio.gather(*calls)
    won = sorted(r.id for r in results if r is not None)
    assert won == sorted(ids)


# ---------------------------------------------------------------------------------------------------------
# Rate limits


async def test_a_new_bucket_starts_full_and_grants_exactly_its_capacity(backend: Backend) -> None:
    decisions = [await backend.rate_limits.acquire("k", limit=3, period=3600) for _ in range(4)]
    assert [d.allowed for d in decisions] == [True, True, True, False]
    assert [round(d.remaining) for d in decisions[:3]] == [2, 1, 0]
    assert all(d.retry_after == 0 for d in decisions[:3])
    denied = decisions[3]
    assert denied.remaining < 1
    # One token comes back every period/limit = 1200 s.
    assert 1100 < denied.retry_after <= 1200


async def test_retry_after_and_remaining_with_a_cost(backend: Backend) -> None:
    first = await backend.rate_limits.acquire("k", limit=5, period=60, cost=3)
    assert first.allowed
    assert first.remaining == pytest.approx(2, abs=0.01)
    second = await backend.rate_limits.acquire("k", limit=5, period=60, cost=3)
    assert not second.allowed
    assert second.remaining == pytest.approx(2, abs=0.01)  # a refusal takes nothing
    assert 11.5 < second.retry_after <= 12.0  # one more token at 5 per 60 s
    too_big = await backend.rate_limits.acquire("big", limit=2, period=60, cost=3)
    assert not too_big.allowed  # more than the capacity can never pass
    assert too_big.retry_after == pytest.approx(30, abs=0.5)


async def test_buckets_are_independent_per_key(backend: Backend) -> None:
    rl = backend.rate_limits
    assert (await rl.acquire("tool\x1fu1", limit=1, period=3600)).allowed
    assert not (await rl.acquire("tool\x1fu1", limit=1, period=3600)).allowed
    assert (await rl.acquire("tool\x1fu2", limit=1, period=3600)).allowed
    assert (await rl.acquire("other:key with spaces/é", limit=1, period=3600)).allowed


async def test_refill_over_time(backend: Backend) -> None:
    rl = backend.rate_limits
    limit, period = 2, 0.4  # a token every 0.2 s
    assert (await rl.acquire("k", limit=limit, period=period)).allowed
    assert (await rl.acquire("k", limit=limit, period=period)).allowed
    denied = await rl.acquire("k", limit=limit, period=period)
    assert not denied.allowed
    assert 0 < denied.retry_after <= period / limit + 1e-6
    loop = asyncio.get_running_loop()
    denied_at = loop.time()

    async def allowed() -> bool:
        return (await rl.acquire("k", limit=limit, period=period)).allowed

    await eventually(allowed, within=5.0, every=0.01)
    waited = loop.time() - denied_at
    # The token came back around retry_after (the store's clock and ours are this machine's).
    assert waited >= denied.retry_after * 0.5


async def test_refill_is_capped_at_the_capacity(backend: Backend) -> None:
    rl = backend.rate_limits
    assert (await rl.acquire("k", limit=3, period=0.2, cost=3)).allowed
    await asyncio.sleep(0.5)  # idle for 2.5 periods: uncapped, the bucket would hold 7.5 tokens
    refilled = await rl.acquire("k", limit=3, period=0.2, cost=3)
    assert refilled.allowed
    assert refilled.remaining < 1


async def test_reset_one_bucket_or_all(backend: Backend) -> None:
    rl = backend.rate_limits
    for key in ("a", "b"):
        assert (await rl.acquire(key, limit=1, period=3600)).allowed
        assert not (await rl.acquire(key, limit=1, period=3600)).allowed
    await rl.reset("a")
    assert (await rl.acquire("a", limit=1, period=3600)).allowed
    assert not (await rl.acquire("b", limit=1, period=3600)).allowed
    await rl.reset()
    assert (await rl.acquire("a", limit=1, period=3600)).allowed
    assert (await rl.acquire("b", limit=1, period=3600)).allowed
    await rl.reset("never-used")  # no error


@pytest.mark.parametrize(("limit", "period"), [(0, 60), (1, 0), (1, -1), (1, float("nan")), (1, math.inf)])
async def test_acquire_refuses_impossible_limits(backend: Backend, limit: int, period: float) -> None:
    with pytest.raises(ValueError):
        await backend.rate_limits.acquire("k", limit=limit, period=period)


async def test_concurrent_acquires_never_over_grant(backend: Backend) -> None:
    peers = await backend.peers(5, connections=ACQUIRERS // 5)
    start = asyncio.Event()

    async def acquire(peer: Any) -> bool:
        await start.wait()
        return bool((await peer.rate_limits.acquire("shared", limit=CAPACITY, period=3600)).allowed)

    tasks = [asyncio.create_task(acquire(peer)) for _, peer in spread(range(ACQUIRERS), peers)]
    await asyncio.sleep(0)
    start.set()
    granted = sum(await asyncio.gather(*tasks))
    assert granted == CAPACITY
    assert not (await backend.rate_limits.acquire("shared", limit=CAPACITY, period=3600)).allowed


# ---------------------------------------------------------------------------------------------------------
# Cache


async def test_cache_round_trips_bytes(backend: Backend) -> None:
    value = bytes(range(256)) + b'{"json": true}'
    await backend.cache.set("toolrun:search:abc", value, ttl=60)
    assert await backend.cache.get("toolrun:search:abc") == value
    assert await backend.cache.get("toolrun:search:missing") is None
    await backend.cache.set("toolrun:search:abc", b"", ttl=60)
    assert await backend.cache.get("toolrun:search:abc") == b""


async def test_cache_entries_expire(backend: Backend) -> None:
    cache = backend.cache
    await cache.set("short", b"1", ttl=0.3)
    assert await cache.get("short") == b"1"
    await cache.set("long", b"2", ttl=60)
    await cache.set("renewed", b"old", ttl=0.3)
    await cache.set("renewed", b"new", ttl=60)  # a new set replaces value and ttl

    async def short_gone() -> bool:
        return await cache.get("short") is None

    await eventually(short_gone, within=5.0)
    assert await cache.get("long") == b"2"
    assert await cache.get("renewed") == b"new"


async def test_cache_set_without_a_positive_ttl_stores_nothing(backend: Backend) -> None:
    await backend.cache.set("k", b"v", ttl=0)
    await backend.cache.set("k2", b"v", ttl=-5)
    assert await backend.cache.get("k") is None
    assert await backend.cache.get("k2") is None


async def test_cache_delete_and_clear(backend: Backend) -> None:
    cache = backend.cache
    for key in ("a", "b", "c*[?]"):
        await cache.set(key, key.encode(), ttl=60)
    await cache.delete("a")
    await cache.delete("a")  # absent: no error
    assert await cache.get("a") is None
    assert await cache.get("b") == b"b"
    await cache.clear()
    assert [await cache.get(k) for k in ("a", "b", "c*[?]")] == [None, None, None]
    await cache.set("a", b"again", ttl=60)  # still usable after clear
    assert await cache.get("a") == b"again"
