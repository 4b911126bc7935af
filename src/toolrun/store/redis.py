"""Redis stores on `redis.asyncio`: confirmations, rate limits and the result cache shared by processes.

```python
from toolrun.store.redis import create_redis_stores

stores = create_redis_stores("redis://127.0.0.1:6379/0", key_prefix="myapp:toolrun:")
executor = ToolExecutor(registry, confirmations=stores.confirmations, rate_limits=stores.rate_limits,
                        cache=stores.cache, hash_key=SHARED_KEY)
...
await stores.aclose()
```

Keys (all under `key_prefix`, default `toolrun:`):

```
<prefix>conf:<id>             hash {user_id, data (JSON)}   TTL: until expires_at + keep_expired
<prefix>conf-user:<user_id>   sorted set id → created_at    (list_pending, oldest first)
<prefix>conf-expiry           sorted set id → expires_at    (purge_expired)
<prefix>rl:<key>              hash {tokens, ts}             TTL: until the bucket is full again
<prefix>cache:<key>           string                        TTL: the entry's ttl (SET ... PX)
<prefix>run:<run_id>          hash {user_id, record (JSON), cids (JSON), claim_token, claimed_until}
<prefix>run-conf:<id>         string: the run id waiting for confirmation <id>
<prefix>run-expiry            sorted set run_id → expires_at (purge_expired)
```

## Why every operation is atomic

Redis runs a Lua script as one command: nothing else runs between its first and last line.

- `consume` is one script: read the confirmation's `user_id`, and only if it is the caller's, delete the
  hash and its index entries and return the data. Of any number of concurrent consumers, on any number
  of clients and processes, exactly one sees the hash; a wrong user changes nothing.
- `RedisRunStore.claim` is one script: find the run by the confirmation id, and only if it is the
  caller's and nobody holds it (or the claim lapsed), write the caller's claim token; exactly one of any
  number of concurrent claims gets the run.
- `acquire` is one script: read the bucket, refill it for the time since its last update, take the
  cost if there is enough, write it back. The time is Redis's own (`TIME`), so processes on several
  hosts agree on the clock (script effects are replicated, so `TIME` before a write is allowed).
- A confirmation's TTL is its expiry plus `keep_expired` seconds: for that while, consuming an expired
  confirmation returns it, so the caller can say "expired" rather than "unknown" (the protocol's
  contract); then Redis drops it by itself. Index entries of dropped keys are skipped when read and
  removed lazily. Full buckets expire: a full bucket and no bucket are the same thing.

The scripts of the confirmation store touch several keys, all built from `key_prefix` (the purge script
builds some itself): on Redis Cluster, a prefix with a hash tag (`"{toolrun}:"`) would keep them in one
slot, but only a single server (or a primary with replicas) is tested. Needs Redis 5 or later (scripts
replicated by effects, for `TIME`). The module is never imported by `import toolrun`; import it as
`from toolrun.store.redis import ...`.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Self, cast

from redis.asyncio import BlockingConnectionPool, Redis

from toolrun.store._protocols import PausedRun, PendingConfirmation, RateLimitDecision

__all__ = [
    "DEFAULT_KEY_PREFIX",
    "RedisCache",
    "RedisConfirmationStore",
    "RedisRateLimitStore",
    "RedisRunStore",
    "RedisStores",
    "create_redis_stores",
]

DEFAULT_KEY_PREFIX = "toolrun:"
"""Keys are `toolrun:conf:...`, `toolrun:rl:...`, `toolrun:cache:...` by default."""

_SCAN_BATCH = 500
"""Keys per SCAN step and per purge script run: short steps keep Redis responsive for everyone else."""

# KEYS: conf hash, user index, expiry index. ARGV: id, user_id, data, created_at, expires_at, ttl ms,
# cutoff. The expiry index also sheds entries whose hashes Redis has dropped by now (expires_at older
# than `cutoff`), so it stays bounded even if nobody calls purge_expired.
_ADD = """
redis.call('HSET', KEYS[1], 'user_id', ARGV[2], 'data', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[6]) then
  redis.call('PEXPIRE', KEYS[2], ARGV[6])
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[7])
redis.call('ZADD', KEYS[3], ARGV[5], ARGV[1])
"""

# KEYS: conf hash, the caller's user index, expiry index. ARGV: user_id, id.
_CONSUME = """
local found = redis.call('HMGET', KEYS[1], 'user_id', 'data')
if not found[1] or found[1] ~= ARGV[1] then
  return false
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[2])
redis.call('ZREM', KEYS[3], ARGV[2])
return found[2]
"""

# KEYS: expiry index. ARGV: now, key prefix, batch size. Returns {entries looked at, hashes deleted}.
_PURGE = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local deleted = 0
for _, id in ipairs(ids) do
  local key = ARGV[2] .. 'conf:' .. id
  local user = redis.call('HGET', key, 'user_id')
  if user then
    redis.call('ZREM', ARGV[2] .. 'conf-user:' .. user, id)
    deleted = deleted + redis.call('DEL', key)
  end
  redis.call('ZREM', KEYS[1], id)
end
return {#ids, deleted}
"""

# Paused runs. Keys of other runs' confirmations are built from the prefix (ARGV[1]), as _PURGE does.
_RUN_FORGET = """
local function forget(key, prefix, run_id)
  local cids = redis.call('HGET', key, 'cids')
  if cids then
    for _, cid in ipairs(cjson.decode(cids)) do
      if redis.call('GET', prefix .. 'run-conf:' .. cid) == run_id then
        redis.call('DEL', prefix .. 'run-conf:' .. cid)
      end
    end
  end
  return redis.call('DEL', key)
end
"""

# KEYS: run hash, expiry index. ARGV: prefix, run id, user id, record, expires_at, cids JSON, cid...
_RUN_SAVE = (
    _RUN_FORGET
    + """
forget(KEYS[1], ARGV[1], ARGV[2])
for i = 7, #ARGV do
  redis.call('SET', ARGV[1] .. 'run-conf:' .. ARGV[i], ARGV[2])
end
redis.call('HSET', KEYS[1], 'user_id', ARGV[3], 'record', ARGV[4], 'cids', ARGV[6])
redis.call('ZADD', KEYS[2], ARGV[5], ARGV[2])
"""
)

# ARGV: prefix, confirmation id, user id, token, until, now. Returns the record, or nil.
_RUN_CLAIM = """
local run_id = redis.call('GET', ARGV[1] .. 'run-conf:' .. ARGV[2])
if not run_id then
  return false
end
local key = ARGV[1] .. 'run:' .. run_id
local found = redis.call('HMGET', key, 'user_id', 'claimed_until', 'record')
if not found[1] or found[1] ~= ARGV[3] then
  return false
end
if found[2] and tonumber(found[2]) >= tonumber(ARGV[6]) then
  return false
end
redis.call('HSET', key, 'claim_token', ARGV[4], 'claimed_until', ARGV[5])
return found[3]
"""

# KEYS: run hash. ARGV: token.
_RUN_RELEASE = """
if redis.call('HGET', KEYS[1], 'claim_token') ~= ARGV[1] then
  return 0
end
redis.call('HDEL', KEYS[1], 'claim_token', 'claimed_until')
return 1
"""

# KEYS: run hash, expiry index. ARGV: prefix, run id.
_RUN_DELETE = (
    _RUN_FORGET
    + """
redis.call('ZREM', KEYS[2], ARGV[2])
return forget(KEYS[1], ARGV[1], ARGV[2])
"""
)

# KEYS: expiry index. ARGV: prefix, now. Returns how many runs were dropped (held ones stay).
_RUN_PURGE = (
    _RUN_FORGET
    + """
local dropped = 0
for _, run_id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])) do
  local key = ARGV[1] .. 'run:' .. run_id
  local held = redis.call('HGET', key, 'claimed_until')
  if not held or tonumber(held) < tonumber(ARGV[2]) then
    dropped = dropped + forget(key, ARGV[1], run_id)
    redis.call('ZREM', KEYS[1], run_id)
  end
end
return dropped
"""
)

# KEYS: bucket. ARGV: capacity, rate (tokens per second), cost. Returns {allowed 0/1, tokens left}.
# Floats go back as strings: Redis turns a Lua number reply into an integer.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local tokens = capacity
local bucket = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
if bucket[1] then
  local since = math.max(0, now - tonumber(bucket[2]))
  tokens = math.min(capacity, tonumber(bucket[1]) + since * rate)
end
local allowed = 0
if tokens >= cost then
  tokens = tokens - cost
  allowed = 1
end
local until_full = math.ceil((capacity - tokens) / rate * 1000)
if until_full > 0 then
  redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'ts', string.format('%.17g', now))
  redis.call('PEXPIRE', KEYS[1], string.format('%d', until_full))
else
  redis.call('DEL', KEYS[1])
end
return {allowed, string.format('%.17g', tokens)}
"""


def _client(client: Redis | str, options: Mapping[str, Any] | None) -> tuple[Redis, bool]:
    if isinstance(client, str):
        # A blocking pool: when every connection is busy (a burst of tool calls), a command waits for
        # one instead of failing with "Too many connections", which would fail the call closed.
        pool = BlockingConnectionPool.from_url(client, **dict(options or {}))
        return Redis.from_pool(pool), True
    if options:
        raise ValueError("client_options apply to a client made from a URL, not to a given client.")
    if not isinstance(client, Redis):
        raise TypeError(f"Expected a redis.asyncio.Redis client or a URL, not {type(client)!r}.")
    if client.connection_pool.connection_kwargs.get("decode_responses"):
        # The cache stores bytes and the scripts return raw replies: a decoding client would hand back
        # str (and fail on non-UTF-8 values). Refuse it instead of corrupting values later.
        raise ValueError("The Redis stores need a client with decode_responses=False.")
    return client, False


def _check_keep(keep_expired: float) -> None:
    if not keep_expired >= 0 or not math.isfinite(keep_expired):
        raise ValueError("keep_expired must be a non-negative number of seconds.")


def _glob_escape(text: str) -> str:
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)


async def _call(awaitable: Awaitable[Any] | Any) -> Any:
    # redis-py types its commands for the sync and async clients at once (`Awaitable[T] | T`).
    return await cast(Awaitable[Any], awaitable)


class _RedisStore:
    """What the three stores share: the client, the key prefix, deleting by pattern, close."""

    def __init__(
        self,
        client: Redis | str,
        *,
        key_prefix: str = DEFAULT_KEY_PREFIX,
        client_options: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(key_prefix, str):
            raise TypeError("key_prefix must be a str.")
        self.client, self._owns_client = _client(client, client_options)
        self.key_prefix = key_prefix
        """The prefix of every key this store writes."""

    async def _delete_matching(self, pattern: str) -> None:
        # SCAN in small steps (never KEYS, which blocks the server), UNLINK frees memory off the main thread.
        batch: list[bytes] = []
        async for key in self.client.scan_iter(match=pattern, count=_SCAN_BATCH):
            batch.append(key)
            if len(batch) >= _SCAN_BATCH:
                await _call(self.client.unlink(*batch))
                batch = []
        if batch:
            await _call(self.client.unlink(*batch))

    async def aclose(self) -> None:
        """Close the client if this store made it from a URL (a given client stays yours to close)."""
        if self._owns_client:
            await self.client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class RedisConfirmationStore(_RedisStore):
    """Pending confirmations as Redis hashes that expire by themselves, indexed per user and by expiry.

    `consume` is one Lua script that checks the user and deletes: exactly one of any number of
    concurrent consumers gets a confirmation (see the module docstring).

    Args:
        client: A `redis.asyncio.Redis` client (yours to close; `decode_responses` must be off) or a URL
            (`"redis://127.0.0.1:6379/0"`; the store makes the client and `aclose` closes it).
        key_prefix: Prefix of every key (give one per application sharing a Redis database).
        keep_expired: Seconds an expired confirmation stays (consuming it then returns it, and the
            caller reports it as expired) before Redis drops it. 0 drops it right at its expiry.
        clock: Wall-clock time (`time.time`), only to turn `expires_at` into a Redis TTL.
        client_options: Keyword arguments for `redis.asyncio.BlockingConnectionPool.from_url` when
            `client` is a URL (`max_connections`, default 50; `timeout`, default 20 s).
    """

    def __init__(
        self,
        client: Redis | str,
        *,
        key_prefix: str = DEFAULT_KEY_PREFIX,
        keep_expired: float = 60.0,
        clock: Callable[[], float] = time.time,
        client_options: Mapping[str, Any] | None = None,
    ) -> None:
        _check_keep(keep_expired)
        super().__init__(client, key_prefix=key_prefix, client_options=client_options)
        self.keep_expired = keep_expired
        self._clock = clock
        self._add = self.client.register_script(_ADD)
        self._consume = self.client.register_script(_CONSUME)
        self._purge = self.client.register_script(_PURGE)

    def _key(self, confirmation_id: str) -> str:
        return f"{self.key_prefix}conf:{confirmation_id}"

    def _user_key(self, user_id: str) -> str:
        return f"{self.key_prefix}conf-user:{user_id}"

    @property
    def _expiry_key(self) -> str:
        return f"{self.key_prefix}conf-expiry"

    async def add(self, pending: PendingConfirmation) -> None:
        """Keep `pending` until consumed, or until `keep_expired` seconds after it expires."""
        now = self._clock()
        ttl_ms = max(1, math.ceil((pending.expires_at + self.keep_expired - now) * 1000))
        data = json.dumps(pending.to_dict(), separators=(",", ":"))
        await self._add(
            keys=[self._key(pending.id), self._user_key(pending.user_id), self._expiry_key],
            args=[
                pending.id,
                pending.user_id,
                data,
                repr(pending.created_at),
                repr(pending.expires_at),
                ttl_ms,
                repr(now - self.keep_expired),
            ],
        )

    async def get(self, confirmation_id: str) -> PendingConfirmation | None:
        """The pending confirmation, without using it; None when unknown, used or dropped by Redis."""
        data = await _call(self.client.hget(self._key(confirmation_id), "data"))
        return None if data is None else PendingConfirmation.from_dict(json.loads(data))

    async def consume(self, confirmation_id: str, *, user_id: str) -> PendingConfirmation | None:
        """Atomically delete and return the confirmation if it belongs to `user_id` (else None, untouched).

        An expired confirmation (within `keep_expired`) is returned like any other: the caller checks
        `expired()`.
        """
        data = await self._consume(
            keys=[self._key(confirmation_id), self._user_key(user_id), self._expiry_key],
            args=[user_id, confirmation_id],
        )
        return None if data is None else PendingConfirmation.from_dict(json.loads(data))

    async def list_pending(self, user_id: str, *, now: float) -> list[PendingConfirmation]:
        """The confirmations of `user_id` not expired at `now`, oldest first."""
        user_key = self._user_key(user_id)
        ids: list[bytes] = await _call(self.client.zrange(user_key, 0, -1))
        if not ids:
            return []
        async with self.client.pipeline(transaction=False) as pipe:
            for member in ids:
                pipe.hget(self._key(member.decode()), "data")
            found: list[bytes | None] = await pipe.execute()
        pending: list[PendingConfirmation] = []
        gone: list[bytes] = []
        for member, data in zip(ids, found, strict=True):
            item = None if data is None else PendingConfirmation.from_dict(json.loads(data))
            if item is None or item.user_id != user_id:  # dropped by its TTL, or replaced for another user
                gone.append(member)
            elif not item.expired(now):
                pending.append(item)
        if gone:
            await _call(self.client.zrem(user_key, *gone))
        return sorted(pending, key=lambda p: (p.created_at, p.id))

    async def purge_expired(self, now: float) -> int:
        """Delete the confirmations expired at `now`; return how many (those Redis already dropped by
        their TTL are not counted)."""
        deleted = 0
        while True:
            looked, dropped = await self._purge(
                keys=[self._expiry_key], args=[repr(now), self.key_prefix, _SCAN_BATCH]
            )
            deleted += int(dropped)
            if int(looked) < _SCAN_BATCH:
                return deleted


class RedisRateLimitStore(_RedisStore):
    """Token buckets as Redis hashes, each refilled and taken from by one Lua script on Redis's clock.

    Args:
        client: A `redis.asyncio.Redis` client (yours to close; `decode_responses` must be off) or a URL
            (the store makes the client and `aclose` closes it).
        key_prefix: Prefix of every key.
        client_options: Keyword arguments for `redis.asyncio.BlockingConnectionPool.from_url` when
            `client` is a URL (`max_connections`, default 50; `timeout`, default 20 s).
    """

    def __init__(
        self,
        client: Redis | str,
        *,
        key_prefix: str = DEFAULT_KEY_PREFIX,
        client_options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(client, key_prefix=key_prefix, client_options=client_options)
        self._acquire = self.client.register_script(_ACQUIRE)

    async def acquire(self, key: str, *, limit: int, period: float, cost: float = 1.0) -> RateLimitDecision:
        """Refill the bucket `key` (capacity `limit`, `limit` tokens per `period` seconds) and take `cost`.

        Raises:
            ValueError: `limit` below 1 or `period` not a positive number of seconds.
        """
        if limit < 1 or not period > 0 or not math.isfinite(period):
            raise ValueError("limit must be >= 1 and period a positive number of seconds.")
        rate = limit / period
        allowed, tokens = await self._acquire(
            keys=[f"{self.key_prefix}rl:{key}"], args=[repr(float(limit)), repr(rate), repr(float(cost))]
        )
        remaining = float(tokens)
        if int(allowed):
            return RateLimitDecision(allowed=True, remaining=remaining, retry_after=0.0)
        return RateLimitDecision(allowed=False, remaining=remaining, retry_after=(cost - remaining) / rate)

    async def reset(self, key: str | None = None) -> None:
        """Refill one bucket (or all of this prefix's buckets) by forgetting it."""
        if key is not None:
            await _call(self.client.delete(f"{self.key_prefix}rl:{key}"))
        else:
            await self._delete_matching(_glob_escape(f"{self.key_prefix}rl:") + "*")


class RedisCache(_RedisStore):
    """The result cache as Redis strings with a TTL (`SET ... PX`): Redis drops expired entries itself.

    Args:
        client: A `redis.asyncio.Redis` client (yours to close; `decode_responses` must be off) or a URL
            (the store makes the client and `aclose` closes it).
        key_prefix: Prefix of every key; `clear` deletes only this prefix's entries.
        client_options: Keyword arguments for `redis.asyncio.BlockingConnectionPool.from_url` when
            `client` is a URL (`max_connections`, default 50; `timeout`, default 20 s).
    """

    def _key(self, key: str) -> str:
        return f"{self.key_prefix}cache:{key}"

    async def get(self, key: str) -> bytes | None:
        """The value under `key`, or None when absent or expired."""
        value = await _call(self.client.get(self._key(key)))
        return None if value is None else bytes(value)

    async def set(self, key: str, value: bytes, *, ttl: float) -> None:
        """Store `value` for `ttl` seconds (nothing is stored when `ttl` is not positive)."""
        if not ttl > 0:
            return
        await _call(self.client.set(self._key(key), bytes(value), px=max(1, math.ceil(ttl * 1000))))

    async def delete(self, key: str) -> None:
        """Forget `key` (no error when absent)."""
        await _call(self.client.delete(self._key(key)))

    async def clear(self) -> None:
        """Forget every entry under this cache's prefix."""
        await self._delete_matching(_glob_escape(f"{self.key_prefix}cache:") + "*")


class RedisRunStore(_RedisStore):
    """Paused agent runs as Redis hashes, found by confirmation id, claimed by one Lua script.

    Runs stay until `delete` or `purge_expired` (call it now and then); times are the caller's
    `time.time()`, as for confirmations.

    Args:
        client: A `redis.asyncio.Redis` client (yours to close; `decode_responses` must be off) or a URL.
        key_prefix: Prefix of every key.
        client_options: Keyword arguments for `redis.asyncio.BlockingConnectionPool.from_url` when
            `client` is a URL.
    """

    def __init__(
        self,
        client: Redis | str,
        *,
        key_prefix: str = DEFAULT_KEY_PREFIX,
        client_options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(client, key_prefix=key_prefix, client_options=client_options)
        self._save = self.client.register_script(_RUN_SAVE)
        self._claim = self.client.register_script(_RUN_CLAIM)
        self._release = self.client.register_script(_RUN_RELEASE)
        self._delete = self.client.register_script(_RUN_DELETE)
        self._purge = self.client.register_script(_RUN_PURGE)

    def _key(self, run_id: str) -> str:
        return f"{self.key_prefix}run:{run_id}"

    @property
    def _expiry_key(self) -> str:
        return f"{self.key_prefix}run-expiry"

    async def save(self, run: PausedRun) -> None:
        """Keep `run`, unclaimed, replacing any run of the same id (one script)."""
        record = {
            "run_id": run.run_id,
            "conversation_id": run.conversation_id,
            "data": run.data,
            "confirmation_ids": list(run.confirmation_ids),
            "expires_at": float(run.expires_at),
        }
        await self._save(
            keys=[self._key(run.run_id), self._expiry_key],
            args=[
                self.key_prefix,
                run.run_id,
                run.user_id,
                json.dumps(record, separators=(",", ":")),
                repr(float(run.expires_at)),
                json.dumps(list(run.confirmation_ids)),
                *run.confirmation_ids,
            ],
        )

    async def claim(
        self, confirmation_id: str, *, user_id: str, token: str, until: float, now: float
    ) -> PausedRun | None:
        """Atomically take the run waiting for `confirmation_id` if it is `user_id`'s and nobody holds it."""
        record = await self._claim(
            args=[self.key_prefix, confirmation_id, user_id, token, repr(float(until)), repr(float(now))]
        )
        if record is None:
            return None
        return _paused_run(json.loads(record), user_id, token, until)

    async def find(self, confirmation_id: str, *, user_id: str) -> PausedRun | None:
        """The run waiting for `confirmation_id`, without claiming it; None when unknown or another user's."""
        run_id = await _call(self.client.get(f"{self.key_prefix}run-conf:{confirmation_id}"))
        if run_id is None:
            return None
        found = await _call(
            self.client.hmget(self._key(run_id.decode()), "user_id", "record", "claim_token", "claimed_until")
        )
        if found[0] is None or found[0].decode() != user_id or found[1] is None:
            return None
        token = None if found[2] is None else found[2].decode()
        until = None if found[3] is None else float(found[3])
        return _paused_run(json.loads(found[1]), user_id, token, until)

    async def release(self, run_id: str, *, token: str) -> bool:
        """Put a claimed run back if `token` still holds it."""
        return bool(await self._release(keys=[self._key(run_id)], args=[token]))

    async def delete(self, run_id: str) -> bool:
        """Forget a run and its confirmation ids (one script)."""
        return bool(
            await self._delete(keys=[self._key(run_id), self._expiry_key], args=[self.key_prefix, run_id])
        )

    async def purge_expired(self, now: float) -> int:
        """Delete the runs expired at `now` that nobody holds; how many (one script)."""
        return int(await self._purge(keys=[self._expiry_key], args=[self.key_prefix, repr(float(now))]))


def _paused_run(record: Mapping[str, Any], user_id: str, token: str | None, until: float | None) -> PausedRun:
    return PausedRun(
        run_id=record["run_id"],
        user_id=user_id,
        conversation_id=record.get("conversation_id"),
        data=record["data"],
        confirmation_ids=tuple(record["confirmation_ids"]),
        expires_at=float(record["expires_at"]),
        claim_token=token,
        claimed_until=until,
    )


@dataclass(frozen=True, kw_only=True)
class RedisStores:
    """The three Redis stores on one client (one connection pool), from `create_redis_stores`."""

    client: Redis
    """The shared client."""
    confirmations: RedisConfirmationStore
    """For `ToolExecutor(confirmations=...)`."""
    rate_limits: RedisRateLimitStore
    """For `ToolExecutor(rate_limits=...)`."""
    cache: RedisCache
    """For `ToolExecutor(cache=...)`."""
    runs: RedisRunStore
    """For `Agent(runs=...)`: paused runs, decided from any process with `Agent.decide`."""
    owns_client: bool
    """Whether `aclose` closes the client (it was made from a URL)."""

    async def aclose(self) -> None:
        """Close the client if it was made from a URL."""
        if self.owns_client:
            await self.client.aclose()

    async def __aenter__(self) -> RedisStores:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def create_redis_stores(
    client: Redis | str,
    *,
    key_prefix: str = DEFAULT_KEY_PREFIX,
    keep_expired: float = 60.0,
    client_options: Mapping[str, Any] | None = None,
) -> RedisStores:
    """The confirmation store, rate-limit store and cache on ONE client.

    Args:
        client: A `redis.asyncio.Redis` client (yours to close) or a URL (`"redis://127.0.0.1:6379/0"`).
        key_prefix: Prefix of every key.
        keep_expired: See `RedisConfirmationStore`.
        client_options: Keyword arguments for `redis.asyncio.BlockingConnectionPool.from_url` when
            `client` is a URL (`max_connections`, default 50; `timeout`, default 20 s).
    """
    _check_keep(keep_expired)  # before a client exists: nothing to close if the arguments are wrong
    if not isinstance(key_prefix, str):
        raise TypeError("key_prefix must be a str.")
    shared, owns = _client(client, client_options)
    return RedisStores(
        client=shared,
        confirmations=RedisConfirmationStore(shared, key_prefix=key_prefix, keep_expired=keep_expired),
        rate_limits=RedisRateLimitStore(shared, key_prefix=key_prefix),
        cache=RedisCache(shared, key_prefix=key_prefix),
        runs=RedisRunStore(shared, key_prefix=key_prefix),
        owns_client=owns,
    )
