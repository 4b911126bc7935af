"""The Redis store of pending confirmations, with the Lua scripts that add, consume and purge them.

Each script runs as one command, so exactly one of any number of racing consumers gets a confirmation
(the argument and the key layout are in `toolrun.store.redis`).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping
from typing import Any

from redis.asyncio import Redis

from toolrun.store._protocols import PendingConfirmation
from toolrun.store._redis_base import _SCAN_BATCH, DEFAULT_KEY_PREFIX, _call, _check_keep, _RedisStore

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


class RedisConfirmationStore(_RedisStore):
    """Pending confirmations as Redis hashes that expire by themselves, indexed per user and by expiry.

    `consume` is one Lua script that checks the user and deletes: exactly one of any number of
    concurrent consumers gets a confirmation (see `toolrun.store.redis`).

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

    def _register_scripts(self) -> None:
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
