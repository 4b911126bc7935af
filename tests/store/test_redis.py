"""What only the Redis stores have: key prefixes, TTLs, Redis's clock, lazy index cleanup, clients.

The behaviour every backend shares is in test_contract.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import BlockingConnectionPool, Redis

from toolrun.store import PendingConfirmation
from toolrun.store.redis import (
    RedisCache,
    RedisConfirmationStore,
    RedisRateLimitStore,
    RedisStores,
    create_redis_stores,
)

from .conftest import REDIS_URL, delete_redis_prefix, eventually, open_redis, unique


@pytest.fixture
async def namespace() -> AsyncIterator[str]:
    """A key prefix of this test's own; everything under it is deleted afterwards."""
    prefix = unique("toolrun-test:") + ":"
    await (await open_redis(prefix)).aclose()  # fails the test, saying how to start Redis, if it is down
    try:
        yield prefix
    finally:
        await delete_redis_prefix(prefix)


@pytest.fixture
async def stores(namespace: str) -> AsyncIterator[RedisStores]:
    made = await open_redis(namespace)
    try:
        yield made
    finally:
        await made.aclose()


def _pending(id: str = "conf_1", user: str = "u1", *, expires_in: float = 60.0) -> PendingConfirmation:
    now = time.time()
    return PendingConfirmation(
        id=id,
        user_id=user,
        tool_name="delete_task",
        arguments_hash="h" * 32,
        call={"id": "c1", "name": "delete_task", "arguments": '{"task_id": "t1"}'},
        summary="delete t1",
        created_at=now,
        expires_at=now + expires_in,
    )


async def test_keys_and_ttls(stores: RedisStores, namespace: str) -> None:
    await stores.confirmations.add(_pending(expires_in=30))
    await stores.rate_limits.acquire("k", limit=4, period=8)  # one token short: full again in 2 s
    await stores.cache.set("c", b"v", ttl=20)
    client = stores.client
    conf_ttl = await client.pttl(f"{namespace}conf:conf_1")
    assert 89_000 < conf_ttl <= 90_000  # expiry (30 s) + keep_expired (60 s)
    assert await client.pttl(f"{namespace}conf-user:u1") == pytest.approx(conf_ttl, abs=1000)
    assert await client.zscore(f"{namespace}conf-expiry", "conf_1") is not None
    assert 1_000 < await client.pttl(f"{namespace}rl:k") <= 2_000
    assert 19_000 < await client.pttl(f"{namespace}cache:c") <= 20_000


async def test_prefixes_keep_stores_apart(namespace: str) -> None:
    # `a*` would match `ab:...` if the prefix were used as a glob unescaped.
    first = await open_redis(namespace + "a*")
    second = await open_redis(namespace + "ab:")
    try:
        for stores in (first, second):
            await stores.cache.set("k", b"v", ttl=60)
            await stores.rate_limits.acquire("k", limit=1, period=3600)
            await stores.confirmations.add(_pending())
        await first.cache.clear()
        await first.rate_limits.reset()
        assert await first.cache.get("k") is None
        assert await second.cache.get("k") == b"v"
        assert (await first.rate_limits.acquire("k", limit=1, period=3600)).allowed
        assert not (await second.rate_limits.acquire("k", limit=1, period=3600)).allowed
        assert await first.confirmations.consume("conf_1", user_id="u1") is not None
        assert await second.confirmations.get("conf_1") is not None
    finally:
        await first.aclose()
        await second.aclose()


async def test_redis_drops_a_confirmation_after_keep_expired(namespace: str) -> None:
    async with RedisConfirmationStore(REDIS_URL, key_prefix=namespace, keep_expired=0) as store:
        await store.add(_pending(expires_in=0.2))
        await store.add(_pending("conf_live", expires_in=60))

        async def dropped() -> bool:
            return await store.get("conf_1") is None

        await eventually(dropped, within=5.0)
        assert await store.consume("conf_1", user_id="u1") is None
        # The user index still names the dropped id until a read notices and removes it.
        index = f"{namespace}conf-user:u1"
        assert await store.client.zscore(index, "conf_1") is not None
        listed = await store.list_pending("u1", now=time.time())
        assert [p.id for p in listed] == ["conf_live"]
        assert await store.client.zscore(index, "conf_1") is None


async def test_adding_sheds_expiry_entries_of_dropped_confirmations(namespace: str) -> None:
    async with RedisConfirmationStore(REDIS_URL, key_prefix=namespace, keep_expired=0) as store:
        await store.add(_pending("conf_old", expires_in=-5))  # dropped by Redis at once
        await store.add(_pending("conf_new"))
        members = await store.client.zrange(f"{namespace}conf-expiry", 0, -1)
        assert members == [b"conf_new"]


async def test_purge_expired_works_through_large_backlogs(stores: RedisStores) -> None:
    # 1,100 adds at once on a pool of 50 connections: they queue for connections, none fails.
    await asyncio.gather(*(stores.confirmations.add(_pending(f"c{i}", expires_in=-1)) for i in range(1_100)))
    await stores.confirmations.add(_pending("live"))
    # Read the clock after the adds: each record expired a second before its own creation, and on a loaded
    # machine the adds can take longer than that (a `now` taken before them made the late ones unexpired).
    now = time.time()
    assert await stores.confirmations.purge_expired(now) == 1_100  # three script runs of at most 500
    assert await stores.confirmations.get("live") is not None
    assert await stores.confirmations.list_pending("u1", now=now) == [await stores.confirmations.get("live")]


async def test_buckets_run_on_redis_time(stores: RedisStores, namespace: str) -> None:
    await stores.rate_limits.acquire("k", limit=2, period=10)
    seconds, micros = await stores.client.time()
    stamp = float(await stores.client.hget(f"{namespace}rl:k", "ts"))
    assert 0 <= seconds + micros / 1e6 - stamp < 1.0


async def test_a_full_bucket_expires(stores: RedisStores, namespace: str) -> None:
    await stores.rate_limits.acquire("k", limit=10, period=0.5)  # full again after 0.05 s

    async def gone() -> bool:
        return not await stores.client.exists(f"{namespace}rl:k")

    await eventually(gone, within=5.0)
    # A bucket refused for a cost above its capacity stays full: nothing is stored.
    assert not (await stores.rate_limits.acquire("big", limit=1, period=60, cost=2)).allowed
    assert not await stores.client.exists(f"{namespace}rl:big")


async def test_the_three_stores_share_one_client(stores: RedisStores) -> None:
    assert stores.owns_client
    assert stores.confirmations.client is stores.client
    assert stores.rate_limits.client is stores.client
    assert stores.cache.client is stores.client
    # Made from a URL: a burst of calls waits for a free connection instead of failing.
    assert isinstance(stores.client.connection_pool, BlockingConnectionPool)


async def test_a_given_client_stays_open_after_aclose(namespace: str) -> None:
    client = Redis.from_url(REDIS_URL)
    try:
        for store_type in (RedisConfirmationStore, RedisRateLimitStore, RedisCache):
            async with store_type(client, key_prefix=namespace):
                pass
        async with create_redis_stores(client, key_prefix=namespace) as shared:
            assert not shared.owns_client
            await shared.cache.set("k", b"v", ttl=60)
        assert await client.ping()
        with pytest.raises(ValueError, match="client_options"):
            RedisCache(client, client_options={"max_connections": 5})
    finally:
        await client.aclose()


async def test_clients_that_decode_responses_are_refused() -> None:
    client = Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        with pytest.raises(ValueError, match="decode_responses"):
            RedisCache(client)
        with pytest.raises(ValueError, match="decode_responses"):
            create_redis_stores(client)
        with pytest.raises(TypeError, match="Redis"):
            RedisCache(object())  # type: ignore[arg-type]
    finally:
        await client.aclose()


def test_bad_options_are_refused_before_a_client_is_made() -> None:
    with pytest.raises(ValueError, match="keep_expired"):
        create_redis_stores(REDIS_URL, keep_expired=-1)
    with pytest.raises(ValueError, match="keep_expired"):
        RedisConfirmationStore(REDIS_URL, keep_expired=float("nan"))
    with pytest.raises(TypeError, match="key_prefix"):
        create_redis_stores(REDIS_URL, key_prefix=None)  # type: ignore[arg-type]
