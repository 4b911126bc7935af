"""What every Redis store shares: the client (made from a URL or checked), the key prefix, close.

`_RedisStore` also deletes keys by pattern in short SCAN steps, so clearing a store never blocks the
server. The stores in the other `_redis_*` modules subclass it; `toolrun.store.redis` is where they are
imported from.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Mapping
from typing import Any, Self, cast

from redis.asyncio import BlockingConnectionPool, Redis

DEFAULT_KEY_PREFIX = "toolrun:"
"""Keys are `toolrun:conf:...`, `toolrun:rl:...`, `toolrun:cache:...` by default."""

_SCAN_BATCH = 500
"""Keys per SCAN step and per purge script run: short steps keep Redis responsive for everyone else."""


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
    """What the Redis stores share: the client, the key prefix, deleting by pattern, close."""

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
        self._register_scripts()

    def _register_scripts(self) -> None:
        """Register this store's Lua scripts with the client (the constructor calls it last)."""

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
