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

The stores live in private modules by concern (`_redis_base`, the shared base and client checks;
`_redis_confirmations`, `_redis_runs`, `_redis_limits`, each with its scripts); import them from this
module.

The scripts of the confirmation store touch several keys, all built from `key_prefix` (the purge script
builds some itself): on Redis Cluster, a prefix with a hash tag (`"{toolrun}:"`) would keep them in one
slot, but only a single server (or a primary with replicas) is tested. Needs Redis 5 or later (scripts
replicated by effects, for `TIME`). The module is never imported by `import toolrun`; import it as
`from toolrun.store.redis import ...`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from toolrun.store._redis_base import DEFAULT_KEY_PREFIX, _check_keep, _client
from toolrun.store._redis_confirmations import RedisConfirmationStore
from toolrun.store._redis_limits import RedisCache, RedisRateLimitStore
from toolrun.store._redis_runs import RedisRunStore

__all__ = [
    "DEFAULT_KEY_PREFIX",
    "RedisCache",
    "RedisConfirmationStore",
    "RedisRateLimitStore",
    "RedisRunStore",
    "RedisStores",
    "create_redis_stores",
]


@dataclass(frozen=True, kw_only=True)
class RedisStores:
    """The Redis stores on one client (one connection pool), from `create_redis_stores`."""

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
