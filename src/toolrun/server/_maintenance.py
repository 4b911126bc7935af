"""Housekeeping: what has expired leaves the database, now and then, without anyone calling for it.

The SQL stores keep what they no longer need until they are told to delete it: result-cache entries past
their expiry, rate-limit buckets that have refilled (they limit nothing), stored results past theirs
(the artifact store also purges on every 100th write), and confirmations — decided or not — once they
expired. A service that runs for months would grow those tables without end. `Maintenance` deletes them
every `TOOLRUN_PURGE_INTERVAL` seconds (0: never), in every process of a deployment (the deletes are
idempotent: two processes purging at once delete each row once).

Confirmations are kept `TOOLRUN_CONFIRMATION_RETENTION` seconds past their expiry, not dropped at once: a
consumed one is the record that its approved call started (`consumed_at`), which closing a run a killed
process left behind reads (`_recovery.confirmation_state`). Past the retention, such a run's held call is
reported "may or may not have run" (`RESULT_UNKNOWN`), never "did not run".

A pass that fails (the database is down) is logged and retried at the next interval; it never stops the
service. What each pass deleted goes to `toolrun_purged_rows_total{store}` and, when it is anything, one
log line. `toolrun db purge` runs one pass from the command line (`purge`), for a deployment that purges
from a scheduler of its own (`TOOLRUN_PURGE_INTERVAL=0`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

from toolrun.server._db import create_engine
from toolrun.server._settings import Settings
from toolrun.store.sql import SQLArtifactStore, SQLCache, SQLConfirmationStore, SQLRateLimitStore

__all__ = ["STORES", "Maintenance", "purge"]

_PURGES = (
    ("confirmations", "purge_expired"),
    ("cache", "purge_expired"),
    ("rate_limits", "purge_full"),
    ("artifacts", "purge_expired"),
)
STORES = tuple(name for name, _ in _PURGES)
"""The stores a pass purges, in order (the keys of `Maintenance.run_once`'s answer)."""

logger = logging.getLogger("toolrun.server")

_FIRST_PASS_MAX = 60.0
"""The first pass comes within this many seconds of start-up (or one interval, if shorter)."""


class Maintenance:
    """The periodic purge of one app's stores (see the module docstring).

    Args:
        confirmations, cache, rate_limits, artifacts: The executor's stores; each one is purged only if it
            has the method (`purge_expired` / `purge_full`): Redis keeps its own expiry.
        interval: Seconds between two passes; 0 or less: no passes (`start` does nothing).
        retention: Seconds a confirmation is kept past its expiry.
        on_purged: Called with (store, rows) for each store a pass deleted rows from (metrics).
        clock: The clock that confirmations' `expires_at` is compared with.
    """

    def __init__(
        self,
        *,
        confirmations: Any,
        cache: Any,
        rate_limits: Any,
        artifacts: Any,
        interval: float,
        retention: float,
        on_purged: Callable[[str, int], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.interval = interval
        self.retention = retention
        self._on_purged = on_purged
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self._jobs: list[tuple[str, Callable[[], Awaitable[int]]]] = []
        stores = {
            "confirmations": confirmations,
            "cache": cache,
            "rate_limits": rate_limits,
            "artifacts": artifacts,
        }
        for name, method in _PURGES:
            found = getattr(stores[name], method, None)
            if found is None:
                continue
            if name == "confirmations":  # kept `retention` seconds past their expiry
                self._jobs.append((name, functools.partial(self._confirmations, found)))
            else:
                self._jobs.append((name, found))

    @property
    def stores(self) -> tuple[str, ...]:
        """The stores this purges (those that have a purge method: not Redis's), in `STORES` order."""
        return tuple(name for name, _ in self._jobs)

    async def _confirmations(self, purge: Callable[[float], Awaitable[int]]) -> int:
        return await purge(self._clock() - self.retention)

    async def run_once(self) -> dict[str, int]:
        """One pass over every store: {store: rows deleted}. A store that fails is logged and skipped (the
        others still run); its entry is missing."""
        deleted: dict[str, int] = {}
        for name, job in self._jobs:
            try:
                deleted[name] = int(await job())
            except Exception as exc:  # the next pass tries again
                logger.warning("Purging expired %s failed: %s", name, type(exc).__name__)
        purged = {name: rows for name, rows in deleted.items() if rows > 0}
        if purged:
            logger.info(
                "Purged expired rows: %s", ", ".join(f"{rows} {name}" for name, rows in purged.items())
            )
            if self._on_purged is not None:
                for name, rows in purged.items():
                    self._on_purged(name, rows)
        return deleted

    def start(self) -> None:
        """Run passes in the background until `stop` (nothing when the interval is 0 or less)."""
        if self.interval > 0 and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop(), name="toolrun-maintenance")

    async def stop(self) -> None:
        """Stop the passes (a pass under way is cancelled: its deletes are each atomic)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self) -> None:
        # Spread over the first minute, so that processes started together do not purge together.
        delay = min(self.interval, _FIRST_PASS_MAX) * random.uniform(0.5, 1.0)
        while True:
            await asyncio.sleep(delay)
            await self.run_once()
            delay = self.interval


async def purge(settings: Settings) -> tuple[tuple[str, ...], dict[str, int]]:
    """One pass over the SQL stores of the service whose database `settings` names, as `toolrun db purge`
    runs it: the stores it purged, and {store: rows deleted} (a store that failed missing). The cache and
    rate limits are purged only where they live in the database (no `TOOLRUN_REDIS_URL`): Redis expires its
    own."""
    engine = create_engine(settings.database_url)
    in_sql = settings.redis_url is None
    try:
        maintenance = Maintenance(
            confirmations=SQLConfirmationStore(engine),
            cache=SQLCache(engine) if in_sql else None,
            rate_limits=SQLRateLimitStore(engine) if in_sql else None,
            artifacts=SQLArtifactStore(engine, purge_every=0),
            interval=0,
            retention=settings.confirmation_retention,
        )
        return maintenance.stores, await maintenance.run_once()
    finally:
        await engine.dispose()
