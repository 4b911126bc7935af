"""The SQL store of whole results and stored content (images, files), shared by every process.

Rows are read by id and owner and compared with the caller's clock, as the executor stamps `expires_at`;
every so many `put`s also delete the expired rows, so the table does not grow without bound.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from toolrun.store._protocols import Artifact
from toolrun.store._sql_base import DEFAULT_TABLE_PREFIX, _SQLStore


class SQLArtifactStore(_SQLStore):
    """Whole results and stored content (images, files) in `<table_prefix>artifacts`, shared by every
    process on the database and kept across restarts (the in-memory store is one process's only).

    `get` answers None for an unknown id, another owner's artifact and an expired one alike (one
    statement: `WHERE id = :id AND owner IS NOT DISTINCT FROM :owner AND expires_at > :now`). Times are the
    caller's `time.time()`, as the executor stamps `expires_at`. Every `purge_every`-th `put` also deletes
    the expired rows (an indexed range delete), so the table does not grow without bound.

    Args:
        engine: A database URL or an `AsyncEngine` you own and close.
        table_prefix: Prefix of the table name (lowercase letters, digits, `_`).
        engine_options: Keyword arguments for `create_async_engine` when `engine` is a URL.
        purge_every: Delete expired rows on every this many `put`s (0: never; call `purge_expired`).
        clock: The clock that `expires_at` is compared with.
    """

    def __init__(
        self,
        engine: AsyncEngine | str,
        *,
        table_prefix: str = DEFAULT_TABLE_PREFIX,
        engine_options: Mapping[str, Any] | None = None,
        purge_every: int = 100,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(engine, table_prefix=table_prefix, engine_options=engine_options)
        self._purge_every = purge_every
        self._puts = 0
        self._clock = clock

    def _define_tables(self) -> None:
        name = f"{self.table_prefix}artifacts"
        self.table = sa.Table(
            name,
            self.metadata,
            sa.Column("id", sa.String(), primary_key=True),
            sa.Column("owner", sa.String(), nullable=True),
            sa.Column("tool_name", sa.String(), nullable=False),
            sa.Column("text", sa.Text(), nullable=False),
            sa.Column("data", sa.LargeBinary(), nullable=True),
            sa.Column("media_type", sa.String(), nullable=True),
            sa.Column("name", sa.String(), nullable=True),
            sa.Column("expires_at", sa.Double(), nullable=False),
            sa.Index(f"{name}_expiry", "expires_at"),
        )

    async def put(self, artifact: Artifact) -> None:
        """Keep `artifact` (an id already present is replaced)."""
        values = {
            "id": artifact.id,
            "owner": artifact.owner,
            "tool_name": artifact.tool_name,
            "text": artifact.text,
            "data": artifact.data,
            "media_type": artifact.media_type,
            "name": artifact.name,
            "expires_at": float(artifact.expires_at),
        }
        insert = self._insert(self.table).values(**values)
        stmt = insert.on_conflict_do_update(
            index_elements=[self.table.c.id], set_={k: insert.excluded[k] for k in values if k != "id"}
        )
        async with self._auto.connect() as conn:
            await conn.execute(stmt)
        self._puts += 1
        if self._purge_every and self._puts % self._purge_every == 0:
            await self.purge_expired()

    async def get(self, artifact_id: str, owner: str | None) -> Artifact | None:
        """The artifact, or None when it is unknown, another owner's or expired."""
        t = self.table
        stmt = sa.select(t).where(
            t.c.id == artifact_id, t.c.owner.is_not_distinct_from(owner), t.c.expires_at > self._clock()
        )
        async with self._auto.connect() as conn:
            row = (await conn.execute(stmt)).mappings().one_or_none()
        if row is None:
            return None
        return Artifact(
            id=row["id"],
            owner=row["owner"],
            tool_name=row["tool_name"],
            text=row["text"],
            expires_at=row["expires_at"],
            data=None if row["data"] is None else bytes(row["data"]),
            media_type=row["media_type"],
            name=row["name"],
        )

    async def purge_expired(self) -> int:
        """Delete the expired artifacts; return how many."""
        stmt = sa.delete(self.table).where(self.table.c.expires_at <= self._clock())
        async with self._auto.connect() as conn:
            result = await conn.execute(stmt)
        return max(0, result.rowcount)
