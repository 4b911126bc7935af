"""The SQL stores on the database's clock: token-bucket rate limits and the result cache.

Both compare with `_SQLStore._now` (the database's time, not the process's), so processes on several
hosts agree on when a token comes back and when an entry expires. `SQLRateLimitStore.acquire` is one
upsert that refills and takes in SQL (the argument is in `toolrun.store.sql`'s docstring).
"""

from __future__ import annotations

import sqlalchemy as sa

from toolrun.store._protocols import RateLimitDecision
from toolrun.store._sql_base import _SQLStore


class SQLRateLimitStore(_SQLStore):
    """Token buckets in the table `<table_prefix>rate_limits`, one row per key.

    `acquire` is one upsert that refills and takes in SQL, on the database's clock: concurrent callers in
    any number of processes never take more tokens than the bucket holds (see `toolrun.store.sql`).
    Each row also records when its bucket will be full again; `purge_full` deletes such rows (a full
    bucket and no bucket are the same thing), so idle keys do not pile up.

    Args:
        engine: A database URL or an `AsyncEngine` you own and close.
        table_prefix: Prefix of the table name (lowercase letters, digits, `_`).
        engine_options: Keyword arguments for `create_async_engine` when `engine` is a URL.
    """

    def _define_tables(self) -> None:
        name = f"{self.table_prefix}rate_limits"
        self.table = sa.Table(
            name,
            self.metadata,
            sa.Column("key", sa.String(), primary_key=True),
            sa.Column("tokens", sa.Double(), nullable=False),
            sa.Column("updated_at", sa.Double(), nullable=False),
            sa.Column("full_at", sa.Double(), nullable=False),
            sa.Column("granted", sa.Boolean(), nullable=False),
            sa.Index(f"{name}_full", "full_at"),
        )

    async def acquire(self, key: str, *, limit: int, period: float, cost: float = 1.0) -> RateLimitDecision:
        """Refill the bucket `key` (capacity `limit`, `limit` tokens per `period` seconds) and take `cost`.

        Raises:
            ValueError: `limit` below 1 or `period` not a positive number of seconds.
        """
        _check_limit(limit, period)
        t, now = self.table, self._now
        capacity, rate = float(limit), limit / period
        cap, per_second, take = (_double(v) for v in (capacity, rate, float(cost)))

        # A new bucket starts full: the first decision is known without reading anything.
        first_granted = capacity >= cost
        first_tokens = capacity - cost if first_granted else capacity
        insert = self._insert(t).values(
            key=key,
            tokens=first_tokens,
            updated_at=now,
            full_at=now + (capacity - first_tokens) / rate,
            granted=first_granted,
        )
        # An existing one: refill for the time since its last update (never negative: a statement that
        # waited on the row lock may hold an older `now`), capped at capacity, then take if enough.
        since = self._greatest(_double(0.0), now - t.c.updated_at)
        refilled = self._least(cap, t.c.tokens + since * per_second)
        enough = refilled >= take
        tokens = sa.case((enough, refilled - take), else_=refilled)
        updated = self._greatest(t.c.updated_at, now)
        stmt = insert.on_conflict_do_update(
            index_elements=[t.c.key],
            set_={
                "tokens": tokens,
                "updated_at": updated,
                "full_at": updated + (cap - tokens) / per_second,
                "granted": enough,
            },
        ).returning(t.c.tokens, t.c.granted)
        async with self._auto.connect() as conn:
            row = (await conn.execute(stmt)).one()
        remaining, granted = float(row[0]), bool(row[1])
        if granted:
            return RateLimitDecision(allowed=True, remaining=remaining, retry_after=0.0)
        return RateLimitDecision(allowed=False, remaining=remaining, retry_after=(cost - remaining) / rate)

    async def reset(self, key: str | None = None) -> None:
        """Refill one bucket (or all of them) by forgetting it."""
        stmt = sa.delete(self.table)
        if key is not None:
            stmt = stmt.where(self.table.c.key == key)
        async with self._auto.connect() as conn:
            await conn.execute(stmt)

    async def purge_full(self) -> int:
        """Delete the buckets that have refilled completely (they mean no limit is in effect); how many."""
        stmt = sa.delete(self.table).where(self.table.c.full_at <= self._now)
        async with self._auto.connect() as conn:
            result = await conn.execute(stmt)
        return max(0, result.rowcount)


def _double(value: float) -> sa.ColumnElement[float]:
    # Typed binds: asyncpg wants to know a parameter is float8, not guess from an expression around it.
    return sa.literal(value, sa.Double())


def _check_limit(limit: int, period: float) -> None:
    # `not period > 0` also refuses NaN; an infinite period would make the rate 0 and retry_after infinite.
    if limit < 1 or not period > 0 or period == float("inf"):
        raise ValueError("limit must be >= 1 and period a positive number of seconds.")


class SQLCache(_SQLStore):
    """The result cache in the table `<table_prefix>cache`: bytes with an expiry on the database's clock.

    Expired rows are never returned; they are replaced by the next `set` of their key, and
    `purge_expired` deletes the rest (call it now and then).

    Args:
        engine: A database URL or an `AsyncEngine` you own and close.
        table_prefix: Prefix of the table name (lowercase letters, digits, `_`).
        engine_options: Keyword arguments for `create_async_engine` when `engine` is a URL.
    """

    def _define_tables(self) -> None:
        name = f"{self.table_prefix}cache"
        self.table = sa.Table(
            name,
            self.metadata,
            sa.Column("key", sa.String(), primary_key=True),
            sa.Column("value", sa.LargeBinary(), nullable=False),
            sa.Column("expires_at", sa.Double(), nullable=False),
            sa.Index(f"{name}_expiry", "expires_at"),
        )

    async def get(self, key: str) -> bytes | None:
        """The value under `key`, or None when absent or expired."""
        t = self.table
        stmt = sa.select(t.c.value).where(t.c.key == key, t.c.expires_at > self._now)
        async with self._auto.connect() as conn:
            value = (await conn.execute(stmt)).scalar_one_or_none()
        return None if value is None else bytes(value)

    async def set(self, key: str, value: bytes, *, ttl: float) -> None:
        """Store `value` for `ttl` seconds (nothing is stored when `ttl` is not positive)."""
        if not ttl > 0:
            return
        expires = self._now + _double(float(ttl))
        insert = self._insert(self.table).values(key=key, value=bytes(value), expires_at=expires)
        stmt = insert.on_conflict_do_update(
            index_elements=[self.table.c.key],
            set_={"value": insert.excluded.value, "expires_at": insert.excluded.expires_at},
        )
        async with self._auto.connect() as conn:
            await conn.execute(stmt)

    async def delete(self, key: str) -> None:
        """Forget `key` (no error when absent)."""
        stmt = sa.delete(self.table).where(self.table.c.key == key)
        async with self._auto.connect() as conn:
            await conn.execute(stmt)

    async def clear(self) -> None:
        """Forget every entry of this cache's table."""
        async with self._auto.connect() as conn:
            await conn.execute(sa.delete(self.table))

    async def purge_expired(self) -> int:
        """Delete the expired entries; return how many."""
        stmt = sa.delete(self.table).where(self.table.c.expires_at <= self._now)
        async with self._auto.connect() as conn:
            result = await conn.execute(stmt)
        return max(0, result.rowcount)
