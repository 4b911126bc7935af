"""The user's background jobs as a stream of `JobProgress` / `JobFinished` events, read from the job store.

The store (a table in the database every server process shares) is the source of truth: a job runs in
whichever process DBOS gives it to, and writes its progress and result there. The stream polls the user's
jobs and sends what changed: first every recent job as it stands (`job_progress` for running ones,
`job_finished` for ended ones, so a client that connects late misses nothing), then each change, once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from toolrun.server.events import JobEvent, JobFinished, JobProgress

__all__ = ["FINAL", "job_events"]

FINAL = frozenset({"completed", "failed", "cancelled"})


async def job_events(
    jobs: Any, user_id: str, *, interval: float = 0.5, until_idle: bool = False, limit: int = 50
) -> AsyncIterator[JobEvent]:
    """The user's job events (see the module docstring).

    Args:
        jobs: The job store (`JobStore`), or None (no durable runs: nothing to send).
        user_id: Whose jobs.
        interval: Seconds between two reads of the store.
        until_idle: End once the user has no running job (else: until the client goes away).
        limit: How many of the newest jobs are followed.
    """
    if jobs is None:
        return
    seen: dict[str, tuple[str, float, Any]] = {}
    while True:
        listed = await jobs.list_jobs(user_id, limit=limit)
        for job in reversed(listed):  # oldest first
            mark = (job["status"], job["updated_at"], job["progress"])
            if seen.get(job["id"]) == mark:
                continue
            seen[job["id"]] = mark
            yield JobFinished(job=job) if job["status"] in FINAL else JobProgress(job=job)
        if until_idle and all(job["status"] in FINAL for job in listed):
            return
        await asyncio.sleep(interval)
