"""Persistence behind small protocols: pending confirmations, paused runs, rate-limit buckets, the cache.

In-memory implementations are the defaults (one process). SQL and Redis backends implement the same
async protocols; see `toolrun.store._protocols` for what each operation must guarantee (notably the
atomic `ConfirmationStore.consume`, `RunStore.claim` and `RateLimitStore.acquire`).

Shared backends: `toolrun.store.sql` (`SQLConfirmationStore`, `SQLRunStore`, `SQLRateLimitStore`,
`SQLCache`, `create_sql_stores`; SQLite or PostgreSQL; the `sql` extra) and `toolrun.store.redis`
(`RedisConfirmationStore`, `RedisRunStore`, `RedisRateLimitStore`, `RedisCache`,
`create_redis_stores`; the `redis` extra).
They are not imported here, so `import toolrun` stays light.
"""

from toolrun.store._memory import (
    InMemoryApprovalRuleStore,
    InMemoryArtifactStore,
    InMemoryCache,
    InMemoryConfirmationStore,
    InMemoryRateLimitStore,
    InMemoryRunStore,
)
from toolrun.store._protocols import (
    NO_USER,
    ApprovalRule,
    ApprovalRuleStore,
    Artifact,
    ArtifactStore,
    CacheStore,
    ConfirmationStore,
    PausedRun,
    PendingConfirmation,
    RateLimitDecision,
    RateLimitStore,
    RunStore,
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
    "InMemoryRunStore",
    "PausedRun",
    "PendingConfirmation",
    "RateLimitDecision",
    "RateLimitStore",
    "RunStore",
]
