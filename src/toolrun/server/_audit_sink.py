"""`SQLAuditSink`: the content-free audit trail in `toolrun_audit`, written in batches off the call path.

One bad record may never cost another: the ids of a record come from outside (a model chooses its call
ids, a client its conversation ids) and a database refuses some strings (PostgreSQL: a NUL, a lone
surrogate, more characters than the column holds). So every id is made safe before it is queued
(`bounded`: too long or unstorable → a readable prefix and a hash of the whole, distinct ids stay
distinct), and a batch the database refuses is written again record by record, each in a transaction of
its own: only a record the database still refuses is dropped. Drops are counted by reason
(`queue_full`, `invalid`, `database`) in `dropped` and through `on_drop` (the Prometheus counter
`toolrun_audit_records_dropped_total`). While the database is unreachable, records wait in the queue
(up to `max_queue`) and are written when it answers again.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import json
import logging
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from toolrun.runtime import AuditRecord
from toolrun.server._db import audit

__all__ = ["SQLAuditSink", "bounded"]

logger = logging.getLogger("toolrun.server")

DropReason = str
"""`queue_full` (more records waited than `max_queue`), `invalid` (the database refused the record itself),
`database` (the database failed while records waited to be written at shutdown)."""

_HASH_CHARS = 16


def bounded(value: str | None, limit: int) -> str | None:
    """`value` if a database column of `limit` characters stores it as it is; else a safe stand-in.

    The stand-in is the value's first characters (NUL and invalid Unicode replaced by U+FFFD), `~`, and
    16 hex digits of a BLAKE2b hash of the whole value: at most `limit` characters, and two different
    values get different stand-ins (up to the hash), so records of one call still correlate.
    """
    if value is None:
        return None
    if len(value) <= limit and value.isascii() and "\x00" not in value:
        return value  # the common case: a few C-speed checks
    raw = value.encode("utf-8", "surrogatepass")
    clean = raw.decode("utf-8", "replace").replace("\x00", "\ufffd")
    if clean == value and len(value) <= limit:
        return value  # valid non-ASCII text that fits
    digest = hashlib.blake2b(raw, digest_size=_HASH_CHARS // 2).hexdigest()
    return clean[: max(0, limit - _HASH_CHARS - 1)] + "~" + digest


def _limit(column: str) -> int:
    length = getattr(audit.c[column].type, "length", None)
    if not isinstance(length, int):  # pragma: no cover - every text column of the table is bounded
        raise TypeError(f"toolrun_audit.{column} has no length")
    return length


# (column, attribute of AuditRecord) for every id a record carries, with the column's length.
_IDS = tuple(
    (column, attribute, _limit(column))
    for column, attribute in (
        ("tool", "tool"),
        ("call_id", "call_id"),
        ("run_id", "trace_id"),
        ("conversation_id", "conversation_id"),
        ("user_id", "principal"),
        ("arguments_hash", "arguments_hash"),
        ("code", "code"),
        ("error_id", "error_id"),
        ("confirmation_id", "confirmation_id"),
        ("rule_id", "rule_id"),
    )
)

# Errors that say the database (or the way to it) failed, not the record: such records are kept to retry.
_UNAVAILABLE = (sa.exc.OperationalError, sa.exc.InterfaceError, OSError, asyncio.TimeoutError)


def _unavailable(exc: BaseException) -> bool:
    if isinstance(exc, sa.exc.DBAPIError) and exc.connection_invalidated:
        return True
    return isinstance(exc, _UNAVAILABLE) or isinstance(getattr(exc, "orig", None), _UNAVAILABLE)


class SQLAuditSink:
    """Queues audit records on the event loop and writes them in batches from one background task (the
    executor calls `write` on its hot path: it must not wait). See the module docstring for what happens
    to a record the database refuses.

    Args:
        engine: The service's database.
        flush_interval: Seconds between writes.
        max_queue: Records that may wait; more are dropped (reason `queue_full`).
        on_drop: Called with `(reason, count)` for every drop (the service's metric).
    """

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        flush_interval: float = 0.25,
        max_queue: int = 100_000,
        on_drop: Callable[[DropReason, int], None] | None = None,
    ) -> None:
        self.engine = engine
        self.flush_interval = flush_interval
        self.max_queue = max_queue
        self.on_drop = on_drop
        self._queue: collections.deque[dict[str, Any]] = collections.deque()
        self._task: asyncio.Task[None] | None = None
        self.dropped: collections.Counter[DropReason] = collections.Counter()
        """Records dropped so far, by reason."""

    def write(self, record: AuditRecord) -> None:
        if len(self._queue) >= self.max_queue:
            self._drop("queue_full", 1)
            return
        row = {
            "timestamp": record.timestamp,
            "action": str(record.action),
            "outcome": record.outcome,
            "duration_ms": record.duration_ms,
            "attempts": record.attempts,
            "cached": record.cached,
        }
        for column, attribute, limit in _IDS:
            row[column] = bounded(getattr(record, attribute), limit)
        self._queue.append(row)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def _drop(self, reason: DropReason, count: int) -> None:
        if count <= 0:
            return
        self.dropped[reason] += count
        if self.on_drop is not None:
            with contextlib.suppress(Exception):
                self.on_drop(reason, count)
        logger.warning(json.dumps({"event": "audit_records_dropped", "reason": reason, "records": count}))

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.flush_interval)
            await self.flush()

    async def flush(self, *, final: bool = False) -> None:
        """Write what waits. Records the database refuses are dropped one by one; while the database is
        unreachable they wait for the next flush (`final`: they are dropped, reason `database`)."""
        batch = list(self._queue)
        self._queue.clear()
        if not batch:
            return
        try:
            async with self.engine.begin() as conn:
                await conn.execute(audit.insert(), batch)
            return
        except Exception as exc:
            if _unavailable(exc):
                self._keep(batch, final)
                return
        # The database refused the batch: find the records it refuses, one transaction each.
        for i, row in enumerate(batch):
            try:
                async with self.engine.begin() as conn:
                    await conn.execute(audit.insert(), [row])
            except Exception as exc:
                if _unavailable(exc):
                    self._keep(batch[i:], final)
                    return
                self._drop("invalid", 1)

    def _keep(self, rows: list[dict[str, Any]], final: bool) -> None:
        if final:
            self._drop("database", len(rows))
            return
        room = max(0, self.max_queue - len(self._queue))
        self._queue.extendleft(reversed(rows[:room]))
        self._drop("queue_full", len(rows) - min(room, len(rows)))

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.flush(final=True)
