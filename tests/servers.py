"""The real servers the suite runs against, on 127.0.0.1: PostgreSQL (trust auth, database `test`) and
Redis. `.ci/run` starts them; the environment variables point the suite at others."""

from __future__ import annotations

import os

POSTGRES_URL = os.environ.get(
    "TOOLRUN_TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("TOOLRUN_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
