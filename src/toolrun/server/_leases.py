"""Conversation leases, short and kept alive by a heartbeat while a run works.

A run holds its conversation through `toolrun_conversations.lease_until` / `lease_owner` (its run id). The
lease is short (`TOOLRUN_LEASE_SECONDS`, 15 s by default) and every `seconds / 3` one heartbeat of the
process renews the leases of all the runs it works on, in one statement, and saves each run's answer so
far (`toolrun_runs.partial`) when it changed. So:

- a process killed mid-run leaves its conversations free at most `seconds` after its last heartbeat (the
  next message takes them over, and keeps the partial answer as an interrupted message: `_recovery`);
- a run whose lease was taken over meanwhile (its heartbeat could not reach the database for a whole
  lease) or whose conversation was deleted learns it at the next heartbeat and is cancelled (`on_lost`),
  and its end writes nothing: `ChatService._finish` checks the lease in the transaction that writes;
- a run asked to stop by another process (`POST .../stop` records it on the run's row: `_stops`) learns it
  at the next heartbeat (`on_stop`).

One asyncio task per process beats while at least one run is held, and none while the process is idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from toolrun.server import _db
from toolrun.server._stops import STOP_REQUESTED

__all__ = ["Leases"]

logger = logging.getLogger("toolrun.server")

_c, _r = _db.conversations, _db.runs
_RENEW = (
    _c.update()
    .where(_c.c.lease_owner.in_(sa.bindparam("b_owners", expanding=True)))
    .values(lease_until=sa.bindparam("b_until"))
    .returning(_c.c.lease_owner)
)
_SAVE_PARTIAL = (
    _r.update()
    .where(_r.c.id == sa.bindparam("b_rid"), _r.c.status.in_(("running", "awaiting_confirmation")))
    .values(partial=sa.bindparam("b_partial"))
)


@dataclass(kw_only=True)
class _Held:
    partial: Callable[[], str]
    """The run's answer so far."""
    on_lost: Callable[[], object]
    """Called once when the run no longer holds its conversation."""
    on_stop: Callable[[], object] | None = None
    """Called when the run was asked to stop (`_stops`)."""
    saved: str = ""
    """The partial answer last saved."""


class Leases:
    """The leases of the runs this process works on (see the module docstring).

    Args:
        engine: The service's database.
        seconds: How long a lease lasts without a heartbeat; the heartbeat comes every third of it.
    """

    def __init__(self, engine: AsyncEngine, *, seconds: float) -> None:
        if not seconds > 0:
            raise ValueError(f"The lease must be a positive number of seconds, not {seconds!r}.")
        self.engine = engine
        self.seconds = float(seconds)
        self.interval = self.seconds / 3
        self._held: dict[str, _Held] = {}
        self._lost: set[str] = set()
        self._task: asyncio.Task[None] | None = None

    def until(self, now: float) -> float:
        """When a lease taken or renewed at `now` ends."""
        return now + self.seconds

    def hold(
        self,
        run_id: str,
        *,
        partial: Callable[[], str],
        on_lost: Callable[[], object],
        on_stop: Callable[[], object] | None = None,
    ) -> None:
        """Keep renewing the lease of `run_id` (its conversation's `lease_owner`) until `release`."""
        self._held[run_id] = _Held(partial=partial, on_lost=on_lost, on_stop=on_stop)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._beat())

    def release(self, run_id: str) -> None:
        """Stop renewing (the run ended and released, or lost, its lease)."""
        self._held.pop(run_id, None)
        self._lost.discard(run_id)

    def lost(self, run_id: str) -> bool:
        """Whether a heartbeat found that `run_id` no longer holds its conversation (until `release`)."""
        return run_id in self._lost

    async def _beat(self) -> None:
        try:
            while self._held:
                await asyncio.sleep(self.interval)
                try:
                    await self.renew()
                except Exception as exc:  # the database is away: the leases may lapse, runs go on
                    logger.warning(json.dumps({"event": "lease_renewal_failed", "error": type(exc).__name__}))
        finally:
            self._task = None

    async def renew(self) -> None:
        """One heartbeat: renew every held lease, save changed partial answers, report lost leases."""
        held = dict(self._held)
        if not held:
            return
        now = time.time()
        async with self.engine.begin() as conn:
            kept = {
                row[0]
                for row in await conn.execute(_RENEW, {"b_owners": list(held), "b_until": self.until(now)})
            }
            changed = {}
            for run_id in kept:
                text = held[run_id].partial()
                if text != held[run_id].saved:
                    changed[run_id] = text
            if changed:
                await conn.execute(_SAVE_PARTIAL, [{"b_rid": k, "b_partial": v} for k, v in changed.items()])
            stops = (
                {row[0] for row in await conn.execute(STOP_REQUESTED, {"b_ids": list(kept)})}
                if kept
                else set()
            )
        for run_id, text in changed.items():
            held[run_id].saved = text
        for run_id in stops:
            stop = held[run_id].on_stop
            if stop is not None:
                with contextlib.suppress(Exception):
                    stop()
        for run_id, run in held.items():
            if run_id not in kept and self._held.get(run_id) is run:
                del self._held[run_id]
                self._lost.add(run_id)
                with contextlib.suppress(Exception):
                    run.on_lost()

    async def aclose(self) -> None:
        """Stop the heartbeat (the leases then lapse on their own)."""
        self._held.clear()
        self._lost.clear()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
