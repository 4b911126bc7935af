"""The SQL store of paused agent runs, decided from any process with `Agent.decide`.

`SQLRunStore.claim` is one `UPDATE ... RETURNING`, so exactly one of any number of racing decisions gets a
run (the argument is in `toolrun.store.sql`'s docstring); `save` and `delete` change its two tables in
one transaction.
"""

from __future__ import annotations

import json

import sqlalchemy as sa

from toolrun.store._protocols import PausedRun
from toolrun.store._sql_base import _SQLStore


class SQLRunStore(_SQLStore):
    """Paused agent runs in `<table_prefix>paused_runs`, and the confirmations each waits for in
    `<table_prefix>paused_run_confirmations`: every process on the database can decide any of them.

    `claim` is one `UPDATE ... RETURNING` (see `toolrun.store.sql`): of any number of concurrent
    decisions on one run, across processes and hosts, exactly one gets it. Times are the caller's
    `time.time()`, as for confirmations. Expired runs stay until `purge_expired` (call it now and then).

    Args:
        engine: A database URL or an `AsyncEngine` you own and close.
        table_prefix: Prefix of the table names (lowercase letters, digits, `_`).
        engine_options: Keyword arguments for `create_async_engine` when `engine` is a URL.
    """

    def _define_tables(self) -> None:
        name = f"{self.table_prefix}paused_runs"
        self.table = sa.Table(
            name,
            self.metadata,
            sa.Column("run_id", sa.String(), primary_key=True),
            sa.Column("user_id", sa.String(), nullable=False),
            sa.Column("conversation_id", sa.String(), nullable=True),
            sa.Column("data", sa.Text(), nullable=False),  # the run's signed JSON
            sa.Column("confirmation_ids", sa.Text(), nullable=False),  # JSON array
            sa.Column("expires_at", sa.Double(), nullable=False),
            sa.Column("claim_token", sa.String(), nullable=True),  # NULL: waiting for a decision
            sa.Column("claimed_until", sa.Double(), nullable=True),
            # Set by a claim that took the run from a lapsed claim (the old row's claimed_until was set).
            sa.Column("taken_over", sa.Boolean(), nullable=False, server_default=sa.false()),
            sa.Index(f"{name}_expiry", "expires_at"),
        )
        self.confirmations = sa.Table(
            f"{self.table_prefix}paused_run_confirmations",
            self.metadata,
            sa.Column("confirmation_id", sa.String(), primary_key=True),
            sa.Column("run_id", sa.String(), nullable=False, index=True),
            sa.Column("user_id", sa.String(), nullable=False),
        )

    async def save(self, run: PausedRun) -> None:
        """Keep `run`, unclaimed, replacing any run of the same id (one transaction)."""
        t, c = self.table, self.confirmations
        row = {
            "run_id": run.run_id,
            "user_id": run.user_id,
            "conversation_id": run.conversation_id,
            "data": run.data,
            "confirmation_ids": json.dumps(list(run.confirmation_ids)),
            "expires_at": float(run.expires_at),
            "claim_token": None,
            "claimed_until": None,
            "taken_over": False,
        }
        insert = self._insert(t).values(row)
        upsert = insert.on_conflict_do_update(
            index_elements=[t.c.run_id], set_={k: insert.excluded[k] for k in row if k != "run_id"}
        )
        ids = list(run.confirmation_ids)
        async with self.engine.begin() as conn:
            await conn.execute(upsert)
            await conn.execute(
                sa.delete(c).where(sa.or_(c.c.run_id == run.run_id, c.c.confirmation_id.in_(ids)))
            )
            if ids:
                await conn.execute(
                    c.insert(),
                    [{"confirmation_id": i, "run_id": run.run_id, "user_id": run.user_id} for i in ids],
                )

    async def claim(
        self, confirmation_id: str, *, user_id: str, token: str, until: float, now: float
    ) -> PausedRun | None:
        """Atomically take the run waiting for `confirmation_id` if it is `user_id`'s and nobody holds it
        (one statement); None otherwise, and nothing changes."""
        t, c = self.table, self.confirmations
        owner = (
            sa.select(c.c.run_id)
            .where(c.c.confirmation_id == confirmation_id, c.c.user_id == user_id)
            .scalar_subquery()
        )
        stmt = (
            sa.update(t)
            .where(
                t.c.run_id == owner,
                t.c.user_id == user_id,
                sa.or_(t.c.claimed_until.is_(None), t.c.claimed_until < now),
            )
            # SET reads the row as it was: a claim still recorded there had lapsed (see the WHERE).
            .values(claim_token=token, claimed_until=until, taken_over=t.c.claimed_until.is_not(None))
            .returning(*t.c)
        )
        async with self._auto.connect() as conn:
            row = (await conn.execute(stmt)).mappings().first()
        return None if row is None else _paused(row)

    async def find(self, confirmation_id: str, *, user_id: str) -> PausedRun | None:
        """The run waiting for `confirmation_id`, without claiming it; None when unknown or another user's."""
        t, c = self.table, self.confirmations
        stmt = (
            sa.select(t)
            .join(c, c.c.run_id == t.c.run_id)
            .where(c.c.confirmation_id == confirmation_id, c.c.user_id == user_id, t.c.user_id == user_id)
        )
        async with self._auto.connect() as conn:
            row = (await conn.execute(stmt)).mappings().first()
        return None if row is None else _paused(row)

    async def release(self, run_id: str, *, token: str) -> bool:
        """Put a claimed run back if `token` still holds it."""
        t = self.table
        stmt = (
            sa.update(t)
            .where(t.c.run_id == run_id, t.c.claim_token == token)
            .values(claim_token=None, claimed_until=None)
        )
        async with self._auto.connect() as conn:
            result = await conn.execute(stmt)
        return result.rowcount > 0

    async def delete(self, run_id: str) -> bool:
        """Forget a run and its confirmation ids (one transaction)."""
        t, c = self.table, self.confirmations
        async with self.engine.begin() as conn:
            await conn.execute(sa.delete(c).where(c.c.run_id == run_id))
            result = await conn.execute(sa.delete(t).where(t.c.run_id == run_id))
        return result.rowcount > 0

    async def purge_expired(self, now: float) -> int:
        """Delete the runs expired at `now` that nobody holds (and their confirmation ids); how many."""
        t, c = self.table, self.confirmations
        gone = sa.and_(t.c.expires_at <= now, sa.or_(t.c.claimed_until.is_(None), t.c.claimed_until < now))
        async with self.engine.begin() as conn:
            ids = (await conn.execute(sa.delete(t).where(gone).returning(t.c.run_id))).scalars().all()
            if ids:
                await conn.execute(sa.delete(c).where(c.c.run_id.in_(list(ids))))
        return len(ids)


def _paused(row: sa.RowMapping) -> PausedRun:
    return PausedRun(
        run_id=row["run_id"],
        user_id=row["user_id"],
        conversation_id=row["conversation_id"],
        data=row["data"],
        confirmation_ids=tuple(json.loads(row["confirmation_ids"])),
        expires_at=float(row["expires_at"]),
        claim_token=row["claim_token"],
        claimed_until=None if row["claimed_until"] is None else float(row["claimed_until"]),
        taken_over=bool(row["taken_over"]),
    )
