"""In-memory stores: the contracts every backend must keep (atomic consume, token buckets, TTL + LRU)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from toolrun.store import (
    CacheStore,
    ConfirmationStore,
    InMemoryCache,
    InMemoryConfirmationStore,
    InMemoryRateLimitStore,
    PendingConfirmation,
    RateLimitStore,
)


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def pending(id: str = "conf_1", user: str = "u1", expires_at: float = 2000.0, created_at: float = 1000.0):
    return PendingConfirmation(
        id=id,
        user_id=user,
        tool_name="delete_task",
        arguments_hash="h" * 32,
        call={"id": "c1", "name": "delete_task", "arguments": '{"task_id": "t1"}'},
        summary='delete_task(task_id="t1")',
        created_at=created_at,
        expires_at=expires_at,
    )


def test_in_memory_stores_satisfy_the_protocols() -> None:
    assert isinstance(InMemoryConfirmationStore(), ConfirmationStore)
    assert isinstance(InMemoryRateLimitStore(), RateLimitStore)
    assert isinstance(InMemoryCache(), CacheStore)


# ---------------------------------------------------------------------------------------------------------
# Confirmations


async def test_consume_is_single_use_and_bound_to_the_user() -> None:
    store = InMemoryConfirmationStore()
    await store.add(pending())
    assert await store.consume("conf_1", user_id="someone-else") is None
    assert await store.get("conf_1") is not None  # another user cannot destroy it
    taken = await store.consume("conf_1", user_id="u1")
    assert taken is not None and taken.id == "conf_1"
    assert await store.consume("conf_1", user_id="u1") is None
    assert await store.get("conf_1") is None
    assert await store.consume("unknown", user_id="u1") is None


async def test_concurrent_consumes_hand_out_one_confirmation_once() -> None:
    store = InMemoryConfirmationStore()
    await store.add(pending())
    got = await asyncio.gather(*[store.consume("conf_1", user_id="u1") for _ in range(20)])
    assert sum(1 for g in got if g is not None) == 1


def test_consume_is_atomic_across_threads() -> None:
    store = InMemoryConfirmationStore()
    asyncio.run(store.add(pending()))
    wins: list[object] = []
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait()
        got = asyncio.run(store.consume("conf_1", user_id="u1"))
        if got is not None:
            wins.append(got)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1


async def test_expired_confirmations_are_returned_by_consume_and_dropped_by_purge() -> None:
    clock = Clock(1000.0)
    store = InMemoryConfirmationStore(clock=clock)
    await store.add(pending("a", expires_at=1500.0))
    await store.add(pending("b", expires_at=3000.0))
    assert [p.id for p in await store.list_pending("u1", now=1000.0)] == ["a", "b"]
    assert [p.id for p in await store.list_pending("u1", now=2000.0)] == ["b"]
    assert await store.list_pending("u2", now=1000.0) == []
    assert await store.purge_expired(2000.0) == 1
    assert await store.get("a") is None
    taken = await store.consume("b", user_id="u1")
    assert taken is not None and taken.expired(3000.0) and not taken.expired(2999.0)


async def test_confirmation_store_is_bounded_dropping_expired_then_oldest() -> None:
    clock = Clock(1000.0)
    store = InMemoryConfirmationStore(max_pending=3, clock=clock)
    await store.add(pending("old", expires_at=1001.0))
    await store.add(pending("x", expires_at=5000.0))
    await store.add(pending("y", expires_at=5000.0))
    clock.now = 1002.0
    await store.add(pending("z", expires_at=5000.0))  # "old" expired: it goes first
    assert len(store) == 3 and await store.get("old") is None
    await store.add(pending("w", expires_at=5000.0))  # none expired: the oldest goes
    assert await store.get("x") is None and await store.get("w") is not None
    with pytest.raises(ValueError):
        InMemoryConfirmationStore(max_pending=0)


def test_pending_confirmation_round_trips_and_keeps_values_out_of_repr() -> None:
    p = pending()
    assert PendingConfirmation.from_dict(p.to_dict()) == p
    assert "t1" not in repr(p)


# ---------------------------------------------------------------------------------------------------------
# Rate limits


async def test_token_bucket_allows_a_burst_then_refills_over_time() -> None:
    clock = Clock(0.0)
    store = InMemoryRateLimitStore(clock=clock)
    decisions = [await store.acquire("k", limit=3, period=60.0) for _ in range(4)]
    assert [d.allowed for d in decisions] == [True, True, True, False]
    assert decisions[-1].retry_after == pytest.approx(20.0)
    clock.now = 19.0
    assert not (await store.acquire("k", limit=3, period=60.0)).allowed
    clock.now = 20.0
    d = await store.acquire("k", limit=3, period=60.0)
    assert d.allowed and d.retry_after == 0.0
    assert (await store.acquire("other", limit=3, period=60.0)).allowed  # keys are independent
    await store.reset("k")
    assert (await store.acquire("k", limit=3, period=60.0)).remaining == pytest.approx(2.0)
    await store.reset()
    assert len(store) == 0


async def test_token_bucket_never_exceeds_its_capacity() -> None:
    clock = Clock(0.0)
    store = InMemoryRateLimitStore(clock=clock)
    await store.acquire("k", limit=2, period=1.0)
    clock.now = 1000.0
    allowed = [(await store.acquire("k", limit=2, period=1.0)).allowed for _ in range(3)]
    assert allowed == [True, True, False]


async def test_concurrent_acquires_never_share_the_last_token() -> None:
    store = InMemoryRateLimitStore(clock=Clock(0.0))
    decisions = await asyncio.gather(*[store.acquire("k", limit=5, period=60.0) for _ in range(50)])
    assert sum(d.allowed for d in decisions) == 5


async def test_rate_limit_store_forgets_only_full_buckets() -> None:
    clock = Clock(0.0)
    store = InMemoryRateLimitStore(clock=clock, max_keys=2)
    await store.acquire("a", limit=1, period=1.0)
    await store.acquire("slow", limit=1, period=86400.0)
    clock.now = 10.0
    await store.acquire("b", limit=1, period=1.0)  # 3 keys > 2: "a" is full again and is forgotten
    assert len(store) == 2
    assert not (await store.acquire("slow", limit=1, period=86400.0)).allowed  # kept: not refilled yet


async def test_rate_limit_store_refuses_nonsense_limits() -> None:
    store = InMemoryRateLimitStore()
    with pytest.raises(ValueError):
        await store.acquire("k", limit=0, period=1.0)
    with pytest.raises(ValueError):
        await store.acquire("k", limit=1, period=float("inf"))


# ---------------------------------------------------------------------------------------------------------
# Cache


async def test_cache_expires_entries_and_evicts_the_least_recently_used() -> None:
    clock = Clock(0.0)
    cache = InMemoryCache(max_entries=2, clock=clock)
    await cache.set("a", b"1", ttl=10.0)
    await cache.set("b", b"2", ttl=10.0)
    assert await cache.get("a") == b"1"  # a is now the most recently used
    await cache.set("c", b"3", ttl=10.0)
    assert await cache.get("b") is None and await cache.get("a") == b"1"
    clock.now = 10.0
    assert await cache.get("a") is None
    await cache.set("zero", b"x", ttl=0)
    assert await cache.get("zero") is None
    await cache.delete("c")
    await cache.delete("missing")
    assert await cache.get("c") is None
    await cache.set("d", b"4", ttl=5.0)
    await cache.clear()
    assert len(cache) == 0
    with pytest.raises(ValueError):
        InMemoryCache(max_entries=0)


# ---------------------------------------------------------------------------------------------------------
# Boundaries (pinned by mutation testing: docs/mutation.md)


async def test_a_confirmation_store_of_one_keeps_the_newest_and_readding_an_id_does_not_evict() -> None:
    store = InMemoryConfirmationStore(max_pending=1, clock=Clock(1000.0))
    await store.add(pending("a"))
    await store.add(pending("a", expires_at=3000.0))  # same id: replaced in place, nothing dropped
    assert len(store) == 1 and (await store.get("a")).expires_at == 3000.0  # type: ignore[union-attr]
    await store.add(pending("b"))
    assert await store.get("a") is None and await store.get("b") is not None and len(store) == 1


async def test_list_pending_is_the_users_live_confirmations_oldest_first_and_purge_counts() -> None:
    store = InMemoryConfirmationStore(clock=Clock(1000.0))
    await store.add(pending("late", created_at=1002.0))
    await store.add(pending("early", created_at=1001.0))
    await store.add(pending("other", user="u2"))
    await store.add(pending("gone", expires_at=1500.0))
    listed = await store.list_pending("u1", now=1500.0)
    assert [p.id for p in listed] == ["early", "late"]  # "gone" expires at 1500: expired at 1500
    assert [p.id for p in await store.list_pending("u1", now=1499.0)] == ["gone", "early", "late"]
    assert await store.purge_expired(1500.0) == 1
    assert await store.purge_expired(1500.0) == 0
    assert len(store) == 3


async def test_a_limit_of_one_per_period_is_valid_and_nan_periods_are_refused() -> None:
    clock = Clock(0.0)
    store = InMemoryRateLimitStore(clock=clock)
    first = await store.acquire("k", limit=1, period=10.0)
    assert first.allowed and first.remaining == 0.0 and first.retry_after == 0.0
    second = await store.acquire("k", limit=1, period=10.0)
    assert not second.allowed and second.retry_after == pytest.approx(10.0)
    for period in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError):
            await store.acquire("k", limit=1, period=period)


async def test_a_clock_going_backwards_never_adds_tokens() -> None:
    clock = Clock(100.0)
    store = InMemoryRateLimitStore(clock=clock)
    await store.acquire("k", limit=2, period=10.0)
    await store.acquire("k", limit=2, period=10.0)
    clock.now = 50.0  # a monotonic clock never does this; a replaced one might
    decision = await store.acquire("k", limit=2, period=10.0)
    assert not decision.allowed and decision.remaining == 0.0


async def test_a_bucket_exactly_refilled_is_forgotten_and_the_key_count_may_reach_max_keys() -> None:
    clock = Clock(0.0)
    store = InMemoryRateLimitStore(clock=clock, max_keys=2)
    await store.acquire("a", limit=1, period=1.0)
    await store.acquire("b", limit=1, period=1.0)
    assert len(store) == 2  # at max_keys, nothing forgotten yet
    clock.now = 1.0  # "a" and "b" are full again at exactly t=1
    await store.acquire("c", limit=1, period=1.0)
    assert len(store) == 1


async def test_a_cost_above_one_takes_that_many_tokens() -> None:
    store = InMemoryRateLimitStore(clock=Clock(0.0))
    d = await store.acquire("k", limit=5, period=5.0, cost=3.0)
    assert d.allowed and d.remaining == pytest.approx(2.0)
    d = await store.acquire("k", limit=5, period=5.0, cost=3.0)
    assert not d.allowed and d.remaining == pytest.approx(2.0) and d.retry_after == pytest.approx(1.0)


@pytest.mark.parametrize("ttl", [0, -1.0, float("nan")])
async def test_a_cache_ttl_that_is_not_positive_stores_nothing(ttl: float) -> None:
    cache = InMemoryCache(clock=Clock(0.0))
    await cache.set("k", b"v", ttl=ttl)
    assert len(cache) == 0 and await cache.get("k") is None


async def test_cache_entries_live_until_exactly_their_ttl_and_a_reset_key_is_most_recent() -> None:
    clock = Clock(0.0)
    cache = InMemoryCache(max_entries=2, clock=clock)
    await cache.set("a", b"1", ttl=10.0)
    await cache.set("b", b"2", ttl=10.0)
    await cache.set("a", b"3", ttl=10.0)  # overwriting makes "a" the most recently used
    await cache.set("c", b"4", ttl=10.0)
    assert await cache.get("b") is None and await cache.get("a") == b"3" and len(cache) == 2
    clock.now = 9.999
    assert await cache.get("c") == b"4"
    clock.now = 10.0
    assert await cache.get("c") is None and len(cache) == 1  # expired entries are dropped on read
    one = InMemoryCache(max_entries=1, clock=clock)
    await one.set("x", b"1", ttl=1.0)
    assert await one.get("x") == b"1"


async def test_invalid_bounds_are_refused_with_a_message_saying_what_is_allowed() -> None:
    with pytest.raises(ValueError, match=r"^max_pending must be at least 1\.$"):
        InMemoryConfirmationStore(max_pending=0)
    with pytest.raises(ValueError, match=r"^max_entries must be at least 1\.$"):
        InMemoryCache(max_entries=0)
    with pytest.raises(ValueError, match=r"^limit must be >= 1 and period a positive number of seconds\.$"):
        await InMemoryRateLimitStore().acquire("k", limit=0, period=1.0)


async def test_a_partly_used_bucket_is_forgotten_once_refilled_not_later() -> None:
    clock = Clock(0.0)
    store = InMemoryRateLimitStore(clock=clock, max_keys=1)
    await store.acquire("a", limit=2, period=2.0)  # 1 token left of 2, refills at 1 token/s: full at t=1
    clock.now = 1.5
    await store.acquire("b", limit=2, period=2.0)  # 2 keys > 1: "a" is full again and is forgotten
    assert len(store) == 1


async def test_at_exactly_max_keys_no_bucket_is_forgotten() -> None:
    clock = Clock(0.0)
    store = InMemoryRateLimitStore(clock=clock, max_keys=2)
    await store.acquire("a", limit=1, period=1.0)
    clock.now = 10.0  # "a" is full again, but 2 keys are not over max_keys=2
    await store.acquire("b", limit=1, period=1.0)
    assert len(store) == 2


async def test_reset_and_delete_of_unknown_keys_are_no_ops_and_delete_removes_a_live_entry() -> None:
    store = InMemoryRateLimitStore(clock=Clock(0.0))
    await store.acquire("k", limit=1, period=60.0)
    await store.reset("unknown")
    assert len(store) == 1 and not (await store.acquire("k", limit=1, period=60.0)).allowed
    cache = InMemoryCache(clock=Clock(0.0))
    await cache.set("live", b"1", ttl=100.0)
    await cache.set("other", b"2", ttl=100.0)
    await cache.delete("unknown")
    await cache.delete("live")
    assert await cache.get("live") is None and await cache.get("other") == b"2" and len(cache) == 1


async def test_the_default_bounds_are_the_documented_ones() -> None:
    cache = InMemoryCache(clock=Clock(0.0))
    for i in range(1025):
        await cache.set(f"k{i}", b"v", ttl=60.0)
    assert len(cache) == 1024 and await cache.get("k0") is None and await cache.get("k1") == b"v"
    store = InMemoryConfirmationStore(clock=Clock(1000.0))
    for i in range(10_001):
        await store.add(pending(f"c{i}"))
    assert len(store) == 10_000 and await store.get("c0") is None
    limits = InMemoryRateLimitStore(clock=Clock(0.0))
    limits._buckets = {f"k{i}": (1.0, 0.0, 0.0) for i in range(100_000)}  # full buckets, at the bound
    await limits.acquire("one-more", limit=1, period=1.0)
    assert len(limits) == 1  # 100,001 > max_keys: the full ones are forgotten
