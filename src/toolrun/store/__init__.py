"""Persistence behind small protocols: pending confirmations, rate-limit buckets, the result cache.

In-memory implementations are the defaults (one process). SQL and Redis backends implement the same
async protocols; see `toolrun.store._protocols` for what each operation must guarantee (notably the
atomic `ConfirmationStore.consume` and `RateLimitStore.acquire`).
"""

from toolrun.store._memory import InMemoryCache, InMemoryConfirmationStore, InMemoryRateLimitStore
from toolrun.store._protocols import (
    CacheStore,
    ConfirmationStore,
    PendingConfirmation,
    RateLimitDecision,
    RateLimitStore,
)

__all__ = [
    "CacheStore",
    "ConfirmationStore",
    "InMemoryCache",
    "InMemoryConfirmationStore",
    "InMemoryRateLimitStore",
    "PendingConfirmation",
    "RateLimitDecision",
    "RateLimitStore",
]
