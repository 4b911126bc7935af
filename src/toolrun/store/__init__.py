"""Persistence behind small protocols: pending confirmations, rate-limit buckets, the result cache.

In-memory implementations are the defaults (one process). SQL and Redis backends implement the same
async protocols; see `toolrun.store._protocols` for what each operation must guarantee (notably the
atomic `ConfirmationStore.consume` and `RateLimitStore.acquire`).

Shared backends: `toolrun.store.sql` (`SQLConfirmationStore`, `SQLRateLimitStore`, `SQLCache`,
`create_sql_stores`; SQLite or PostgreSQL; the `sql` extra) and `toolrun.store.redis`
(`RedisConfirmationStore`, `RedisRateLimitStore`, `RedisCache`, `create_redis_stores`; the `redis` extra).
They are not imported here, so `import toolrun` stays light.
"""

from toolrun.store._memory import (
    InMemoryApprovalRuleStore,
    InMemoryArtifactStore,
    InMemoryCache,
    InMemoryConfirmationStore,
    InMemoryRateLimitStore,
)
from toolrun.store._protocols import (
    NO_USER,
    ApprovalRule,
    ApprovalRuleStore,
    Artifact,
    ArtifactStore,
    CacheStore,
    ConfirmationStore,
    PendingConfirmation,
    RateLimitDecision,
    RateLimitStore,
)

__all__ = [
    "NO_USER",
    "ApprovalRule",
    "ApprovalRuleStore",
    "Artifact",
    "ArtifactStore",
    "CacheStore",
    "ConfirmationStore",
    "InMemoryApprovalRuleStore",
    "InMemoryArtifactStore",
    "InMemoryCache",
    "InMemoryConfirmationStore",
    "InMemoryRateLimitStore",
    "PendingConfirmation",
    "RateLimitDecision",
    "RateLimitStore",
]
