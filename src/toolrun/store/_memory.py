"""In-memory stores: the defaults for one process.

Each method does its work under a `threading.Lock` and never awaits while holding it, so every operation
is atomic both between tasks of one event loop and between threads (an executor shared by several loops).
State is lost when the process ends; several server processes need a shared backend (SQL, Redis).
"""

from __future__ import annotations

import dataclasses
import math
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from toolrun.store._protocols import (
    ApprovalRule,
    Artifact,
    PausedRun,
    PendingConfirmation,
    RateLimitDecision,
    check_rule_text,
)

__all__ = [
    "InMemoryApprovalRuleStore",
    "InMemoryCache",
    "InMemoryConfirmationStore",
    "InMemoryRateLimitStore",
    "InMemoryRunStore",
]


def new_rule_id() -> str:
    """A fresh, unguessable approval rule id."""
    return "rule_" + secrets.token_urlsafe(12)


class InMemoryApprovalRuleStore:
    """Standing approvals in a dict (one process).

    Args:
        max_rules: How many rules may exist at once (a user adding rules without end cannot grow memory
            without bound); past it, `add` raises `ValueError`.
        clock: Wall-clock time source (`time.time`) for `created_at`.
    """

    def __init__(self, *, max_rules: int = 100_000, clock: Callable[[], float] = time.time) -> None:
        self._rules: dict[str, ApprovalRule] = {}
        self._lock = threading.Lock()
        self._max = max_rules
        self._clock = clock

    async def add(self, rule: ApprovalRule) -> ApprovalRule:
        check_rule_text(rule)
        stored = dataclasses.replace(
            rule, id=rule.id or new_rule_id(), created_at=rule.created_at or self._clock()
        )
        with self._lock:
            if stored.id not in self._rules and len(self._rules) >= self._max:
                now = self._clock()
                for key in [k for k, r in self._rules.items() if r.expired(now)]:
                    del self._rules[key]
                if len(self._rules) >= self._max:
                    raise ValueError(f"Too many approval rules (at most {self._max}).")
            self._rules[stored.id] = stored
        return stored

    async def list_rules(self, user_id: str, *, tool: str | None = None) -> list[ApprovalRule]:
        with self._lock:
            found = [
                r for r in self._rules.values() if r.user_id == user_id and (tool is None or r.tool == tool)
            ]
        return sorted(found, key=lambda r: (r.created_at, r.id))

    async def remove(self, rule_id: str, *, user_id: str) -> bool:
        with self._lock:
            rule = self._rules.get(rule_id)
            if rule is None or rule.user_id != user_id:
                return False
            del self._rules[rule_id]
            return True

    def empty(self) -> bool | None:
        return not self._rules

    def __len__(self) -> int:
        return len(self._rules)


class InMemoryConfirmationStore:
    """Pending confirmations in a dict, bounded by `max_pending` (expired ones go first, then the oldest).

    Args:
        max_pending: How many confirmations may wait at once. A model that keeps calling destructive
            tools cannot grow memory without bound; past the limit the oldest confirmation is dropped
            (it can then no longer be approved: fail closed).
        clock: Wall-clock time source (`time.time`), replaceable in tests.
    """

    def __init__(self, *, max_pending: int = 10_000, clock: Callable[[], float] = time.time) -> None:
        if max_pending < 1:
            raise ValueError("max_pending must be at least 1.")
        self._items: dict[str, PendingConfirmation] = {}
        self._lock = threading.Lock()
        self._max = max_pending
        self._clock = clock

    async def add(self, pending: PendingConfirmation) -> None:
        with self._lock:
            if pending.id not in self._items and len(self._items) >= self._max:
                self._purge(self._clock())
                while len(self._items) >= self._max:
                    del self._items[next(iter(self._items))]
            self._items[pending.id] = pending

    async def get(self, confirmation_id: str) -> PendingConfirmation | None:
        with self._lock:
            return self._items.get(confirmation_id)

    async def consume(self, confirmation_id: str, *, user_id: str) -> PendingConfirmation | None:
        with self._lock:
            pending = self._items.get(confirmation_id)
            if pending is None or pending.user_id != user_id:
                return None
            del self._items[confirmation_id]
            return pending

    async def list_pending(self, user_id: str, *, now: float) -> list[PendingConfirmation]:
        with self._lock:
            found = [p for p in self._items.values() if p.user_id == user_id and not p.expired(now)]
        return sorted(found, key=lambda p: p.created_at)

    async def purge_expired(self, now: float) -> int:
        with self._lock:
            return self._purge(now)

    def _purge(self, now: float) -> int:
        expired = [key for key, p in self._items.items() if p.expired(now)]
        for key in expired:
            del self._items[key]
        return len(expired)

    def __len__(self) -> int:
        return len(self._items)


class InMemoryRunStore:
    """Paused agent runs in a dict (one process), bounded by `max_runs` (the oldest goes first).

    Args:
        max_runs: How many paused runs may wait at once; past it the oldest is dropped (it can then no
            longer be decided: fail closed).
    """

    def __init__(self, *, max_runs: int = 10_000) -> None:
        if max_runs < 1:
            raise ValueError("max_runs must be at least 1.")
        self._runs: dict[str, PausedRun] = {}
        self._by_confirmation: dict[str, str] = {}
        self._lock = threading.Lock()
        self._max = max_runs

    async def save(self, run: PausedRun) -> None:
        with self._lock:
            self._forget(run.run_id)
            while len(self._runs) >= self._max:
                self._forget(next(iter(self._runs)))
            self._runs[run.run_id] = dataclasses.replace(run, claim_token=None, claimed_until=None)
            for confirmation_id in run.confirmation_ids:
                self._by_confirmation[confirmation_id] = run.run_id

    async def claim(
        self, confirmation_id: str, *, user_id: str, token: str, until: float, now: float
    ) -> PausedRun | None:
        with self._lock:
            run = self._lookup(confirmation_id, user_id)
            if run is None or (run.claimed_until is not None and run.claimed_until >= now):
                return None
            taken = dataclasses.replace(
                run, claim_token=token, claimed_until=until, taken_over=run.claimed_until is not None
            )
            self._runs[run.run_id] = taken
            return taken

    async def find(self, confirmation_id: str, *, user_id: str) -> PausedRun | None:
        with self._lock:
            return self._lookup(confirmation_id, user_id)

    async def release(self, run_id: str, *, token: str) -> bool:
        with self._lock:
            run = self._runs.get(run_id)
            if run is None or run.claim_token != token:
                return False
            self._runs[run_id] = dataclasses.replace(run, claim_token=None, claimed_until=None)
            return True

    async def delete(self, run_id: str) -> bool:
        with self._lock:
            return self._forget(run_id)

    async def purge_expired(self, now: float) -> int:
        with self._lock:
            gone = [
                r.run_id
                for r in self._runs.values()
                if r.expires_at <= now and (r.claimed_until is None or r.claimed_until < now)
            ]
            for run_id in gone:
                self._forget(run_id)
            return len(gone)

    def _lookup(self, confirmation_id: str, user_id: str) -> PausedRun | None:
        run = self._runs.get(self._by_confirmation.get(confirmation_id, ""))
        return run if run is not None and run.user_id == user_id else None

    def _forget(self, run_id: str) -> bool:
        run = self._runs.pop(run_id, None)
        if run is None:
            return False
        for confirmation_id in run.confirmation_ids:
            if self._by_confirmation.get(confirmation_id) == run_id:
                del self._by_confirmation[confirmation_id]
        return True

    def __len__(self) -> int:
        return len(self._runs)


class InMemoryRateLimitStore:
    """Token buckets in a dict. Buckets that have refilled completely are dropped when the dict grows.

    Args:
        clock: Monotonic time source (`time.monotonic`), replaceable in tests.
        max_keys: Past this many buckets, full (idle) ones are forgotten; a full bucket and no bucket
            mean the same thing, so this never lets a caller through early.
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, max_keys: int = 100_000) -> None:
        self._buckets: dict[str, tuple[float, float, float]] = {}  # key -> (tokens, updated, full_at)
        self._lock = threading.Lock()
        self._clock = clock
        self._max_keys = max_keys

    async def acquire(self, key: str, *, limit: int, period: float, cost: float = 1.0) -> RateLimitDecision:
        if limit < 1 or not period > 0 or not math.isfinite(period):
            raise ValueError("limit must be >= 1 and period a positive number of seconds.")
        rate = limit / period
        capacity = float(limit)
        with self._lock:
            now = self._clock()
            bucket = self._buckets.get(key)
            if bucket is None:
                tokens = capacity
            else:
                tokens = min(capacity, bucket[0] + max(0.0, now - bucket[1]) * rate)
            if tokens >= cost:
                tokens -= cost
                decision = RateLimitDecision(allowed=True, remaining=tokens, retry_after=0.0)
            else:
                decision = RateLimitDecision(
                    allowed=False, remaining=tokens, retry_after=(cost - tokens) / rate
                )
            self._buckets[key] = (tokens, now, now + (capacity - tokens) / rate)
            if len(self._buckets) > self._max_keys:
                self._forget_full(now)
        return decision

    async def reset(self, key: str | None = None) -> None:
        with self._lock:
            if key is None:
                self._buckets.clear()
            else:
                self._buckets.pop(key, None)

    def _forget_full(self, now: float) -> None:
        full = [k for k, (_, _, full_at) in self._buckets.items() if now >= full_at]
        for k in full:
            del self._buckets[k]

    def __len__(self) -> int:
        return len(self._buckets)


class InMemoryCache:
    """An LRU byte cache with per-entry expiry.

    Args:
        max_entries: Least recently used entries are dropped past this many.
        clock: Monotonic time source (`time.monotonic`), replaceable in tests.
    """

    def __init__(self, *, max_entries: int = 1024, clock: Callable[[], float] = time.monotonic) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1.")
        self._items: OrderedDict[str, tuple[float, bytes]] = OrderedDict()
        self._lock = threading.Lock()
        self._max = max_entries
        self._clock = clock

    async def get(self, key: str) -> bytes | None:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            if self._clock() >= item[0]:
                del self._items[key]
                return None
            self._items.move_to_end(key)
            return item[1]

    async def set(self, key: str, value: bytes, *, ttl: float) -> None:
        if not ttl > 0:
            return
        with self._lock:
            self._items[key] = (self._clock() + ttl, value)
            self._items.move_to_end(key)
            while len(self._items) > self._max:
                self._items.popitem(last=False)

    async def delete(self, key: str) -> None:
        with self._lock:
            self._items.pop(key, None)

    async def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


class InMemoryArtifactStore:
    """Artifacts in a dict, oldest dropped past `max_entries`; expired ones are never served."""

    def __init__(self, *, max_entries: int = 1024, clock: Callable[[], float] = time.time) -> None:
        self._items: OrderedDict[str, Artifact] = OrderedDict()
        self._max = max_entries
        self._clock = clock

    async def put(self, artifact: Artifact) -> None:
        self._items[artifact.id] = artifact
        while len(self._items) > self._max:
            self._items.popitem(last=False)

    async def get(self, artifact_id: str, owner: str | None) -> Artifact | None:
        found = self._items.get(artifact_id)
        if found is None or found.owner != owner:
            return None
        if found.expires_at <= self._clock():
            self._items.pop(artifact_id, None)
            return None
        return found
