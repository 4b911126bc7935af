"""The Redis store of paused agent runs, decided from any process with `Agent.decide`.

Its Lua scripts save, claim, release, delete and purge a run as one command each, so exactly one of any
number of racing decisions gets a run (the argument and the key layout are in `toolrun.store.redis`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from toolrun.store._protocols import PausedRun
from toolrun.store._redis_base import _call, _RedisStore

# Paused runs. Keys of other runs' confirmations are built from the prefix (ARGV[1]), as the confirmation
# store's _PURGE does.
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

# ARGV: prefix, confirmation id, user id, token, until, now. Returns {record, 1 when it took the run from
# a lapsed claim else 0}, or nil.
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
if found[2] then
  return {found[3], 1}
end
return {found[3], 0}
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

    def _register_scripts(self) -> None:
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
        taken = await self._claim(
            args=[self.key_prefix, confirmation_id, user_id, token, repr(float(until)), repr(float(now))]
        )
        if taken is None:
            return None
        record, taken_over = taken
        return _paused_run(json.loads(record), user_id, token, until, taken_over=bool(taken_over))

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


def _paused_run(
    record: Mapping[str, Any],
    user_id: str,
    token: str | None,
    until: float | None,
    *,
    taken_over: bool = False,
) -> PausedRun:
    return PausedRun(
        run_id=record["run_id"],
        user_id=user_id,
        conversation_id=record.get("conversation_id"),
        data=record["data"],
        confirmation_ids=tuple(record["confirmation_ids"]),
        expires_at=float(record["expires_at"]),
        claim_token=token,
        claimed_until=until,
        taken_over=taken_over,
    )
