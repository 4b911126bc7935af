"""The Redis stores that expire by themselves: token-bucket rate limits and the result cache.

`acquire` is one Lua script on Redis's own clock (`TIME`), so processes on several hosts agree on when a
token comes back; a full bucket and a cache entry both carry a TTL (see `toolrun.store.redis`).
"""

from __future__ import annotations

import math

from toolrun.store._protocols import RateLimitDecision
from toolrun.store._redis_base import _call, _glob_escape, _RedisStore

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


class RedisRateLimitStore(_RedisStore):
    """Token buckets as Redis hashes, each refilled and taken from by one Lua script on Redis's clock.

    Args:
        client: A `redis.asyncio.Redis` client (yours to close; `decode_responses` must be off) or a URL
            (the store makes the client and `aclose` closes it).
        key_prefix: Prefix of every key.
        client_options: Keyword arguments for `redis.asyncio.BlockingConnectionPool.from_url` when
            `client` is a URL (`max_connections`, default 50; `timeout`, default 20 s).
    """

    def _register_scripts(self) -> None:
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
