"""The SQL stores of decisions on held calls: pending confirmations and standing approval rules.

`SQLConfirmationStore.consume` is one `UPDATE ... RETURNING`, so exactly one of any number of racing
consumers gets a confirmation (the argument is in `toolrun.store.sql`'s docstring).
`SQLApprovalRuleStore` keeps one row per rule and counts a user's rules in the transaction that adds one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from toolrun.store._memory import new_rule_id
from toolrun.store._protocols import (
    ApprovalRule,
    PendingConfirmation,
    check_rule_text,
)
from toolrun.store._sql_base import DEFAULT_TABLE_PREFIX, _SQLStore


class SQLConfirmationStore(_SQLStore):
    """Pending confirmations in the table `<table_prefix>confirmations`, one row each.

    `consume` is a single `UPDATE ... RETURNING` filtered by id, user and "not consumed yet": of any number
    of concurrent consumers, across processes and hosts, exactly one gets the row (see `toolrun.store.sql`),
    and the row stays as a record of it (`consumed_at`). Expired and consumed rows stay until
    `purge_expired` (call it now and then, e.g. from a periodic task).

    Args:
        engine: A database URL (`"sqlite+aiosqlite:///toolrun.db"`,
            `"postgresql+asyncpg://user@host/db"`) or an `AsyncEngine` you own and close.
        table_prefix: Prefix of the table name (lowercase letters, digits, `_`).
        engine_options: Keyword arguments for `create_async_engine` when `engine` is a URL.
    """

    def _define_tables(self) -> None:
        name = f"{self.table_prefix}confirmations"
        self.table = sa.Table(
            name,
            self.metadata,
            sa.Column("id", sa.String(), primary_key=True),
            sa.Column("user_id", sa.String(), nullable=False),
            sa.Column("tool_name", sa.String(), nullable=False),
            sa.Column("arguments_hash", sa.String(), nullable=False),
            sa.Column("call", sa.Text(), nullable=False),  # JSON
            sa.Column("summary", sa.Text(), nullable=False),
            sa.Column("created_at", sa.Double(), nullable=False),
            sa.Column("expires_at", sa.Double(), nullable=False),
            sa.Column("conversation_id", sa.String(), nullable=True),
            sa.Column("run_id", sa.String(), nullable=True),
            sa.Column("metadata", sa.Text(), nullable=False),  # JSON
            sa.Column("preview", sa.Text(), nullable=True),
            sa.Column("consumed_at", sa.Double(), nullable=True),  # when it was taken; NULL: pending
            sa.Index(f"{name}_user", "user_id", "created_at"),
            sa.Index(f"{name}_expiry", "expires_at"),
        )

    async def create_tables(self) -> None:
        """Create the table if it does not exist; add the `run_id`, `preview` and `consumed_at` columns to
        a table made before it had them (with Alembic's operations, under the same schema lock).

        The columns are nullable, so rows written by older versions stay readable (not bound to a run, no
        preview, not consumed). Safe to call on every start, from several processes at once.
        """
        await super().create_tables()

    def _create_tables(self, connection: sa.Connection) -> None:
        super()._create_tables(connection)
        present = {c["name"] for c in sa.inspect(connection).get_columns(self.table.name)}
        missing = [name for name in ("run_id", "preview", "consumed_at") if name not in present]
        if missing:
            from alembic.operations import Operations
            from alembic.runtime.migration import MigrationContext

            operations = Operations(MigrationContext.configure(connection))
            for name in missing:
                column = self.table.c[name]
                operations.add_column(self.table.name, sa.Column(name, column.type, nullable=True))

    async def add(self, pending: PendingConfirmation) -> None:
        """Keep `pending` (a confirmation with the same id is replaced)."""
        row = {
            "id": pending.id,
            "user_id": pending.user_id,
            "tool_name": pending.tool_name,
            "arguments_hash": pending.arguments_hash,
            "call": json.dumps(dict(pending.call), separators=(",", ":")),
            "summary": pending.summary,
            "created_at": pending.created_at,
            "expires_at": pending.expires_at,
            "conversation_id": pending.conversation_id,
            "run_id": pending.run_id,
            "metadata": json.dumps(dict(pending.metadata), separators=(",", ":")),
            "preview": pending.preview,
            "consumed_at": None,
        }
        insert = self._insert(self.table).values(row)
        stmt = insert.on_conflict_do_update(
            index_elements=[self.table.c.id],
            set_={k: insert.excluded[k] for k in row if k != "id"},
        )
        async with self._auto.connect() as conn:
            await conn.execute(stmt)

    async def get(self, confirmation_id: str) -> PendingConfirmation | None:
        """The pending confirmation, without using it; None when unknown or already used."""
        t = self.table
        stmt = sa.select(t).where(t.c.id == confirmation_id, t.c.consumed_at.is_(None))
        async with self._auto.connect() as conn:
            row = (await conn.execute(stmt)).mappings().first()
        return None if row is None else _pending(row)

    async def consume(self, confirmation_id: str, *, user_id: str) -> PendingConfirmation | None:
        """Atomically delete and return the confirmation if it belongs to `user_id` (else None, untouched).

        An expired confirmation is returned like any other: the caller checks `expired()`.
        """
        t = self.table
        stmt = (
            sa.update(t)
            .where(t.c.id == confirmation_id, t.c.user_id == user_id, t.c.consumed_at.is_(None))
            .values(consumed_at=time.time())
            .returning(*t.c)  # the row itself: no window between reading and taking
        )
        async with self._auto.connect() as conn:
            row = (await conn.execute(stmt)).mappings().first()
        return None if row is None else _pending(row)

    async def consumed_at(self, confirmation_id: str) -> float | None:
        """When the confirmation was consumed (approved or denied and taken by its run); None when it is
        pending, unknown or purged. Written before an approved call runs: a crash cannot lose it."""
        t = self.table
        stmt = sa.select(t.c.consumed_at).where(t.c.id == confirmation_id)
        async with self._auto.connect() as conn:
            value = (await conn.execute(stmt)).scalar_one_or_none()
        return None if value is None else float(value)

    async def list_pending(self, user_id: str, *, now: float) -> list[PendingConfirmation]:
        """The confirmations of `user_id` not expired at `now`, oldest first."""
        t = self.table
        stmt = (
            sa.select(t)
            .where(t.c.user_id == user_id, t.c.expires_at > now, t.c.consumed_at.is_(None))
            .order_by(t.c.created_at, t.c.id)
        )
        async with self._auto.connect() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return [_pending(row) for row in rows]

    async def purge_expired(self, now: float) -> int:
        """Delete the confirmations expired at `now` (consumed ones too); return how many still pending."""
        t = self.table
        stmt = sa.delete(t).where(t.c.expires_at <= now).returning(t.c.consumed_at)
        async with self._auto.connect() as conn:
            consumed = (await conn.execute(stmt)).scalars().all()
        return sum(1 for value in consumed if value is None)


def _pending(row: sa.RowMapping) -> PendingConfirmation:
    return PendingConfirmation(
        id=row["id"],
        user_id=row["user_id"],
        tool_name=row["tool_name"],
        arguments_hash=row["arguments_hash"],
        call=json.loads(row["call"]),
        summary=row["summary"],
        created_at=float(row["created_at"]),
        expires_at=float(row["expires_at"]),
        conversation_id=row["conversation_id"],
        run_id=row["run_id"],
        metadata=json.loads(row["metadata"]),
        preview=row["preview"],
    )


class SQLApprovalRuleStore(_SQLStore):
    """Standing approvals (`ApprovalRule`) in the table `<table_prefix>approval_rules`, one row each.

    Args:
        engine: A database URL or an `AsyncEngine` you own and close.
        table_prefix: Prefix of the table name (lowercase letters, digits, `_`).
        engine_options: Keyword arguments for `create_async_engine` when `engine` is a URL.
        max_rules_per_user: How many rules one user may keep (`add` raises `ValueError` past it).
    """

    def __init__(
        self,
        engine: AsyncEngine | str,
        *,
        table_prefix: str = DEFAULT_TABLE_PREFIX,
        engine_options: Mapping[str, Any] | None = None,
        max_rules_per_user: int = 200,
    ) -> None:
        super().__init__(engine, table_prefix=table_prefix, engine_options=engine_options)
        self.max_rules_per_user = max_rules_per_user

    def _define_tables(self) -> None:
        name = f"{self.table_prefix}approval_rules"
        self.table = sa.Table(
            name,
            self.metadata,
            sa.Column("id", sa.String(64), primary_key=True),
            sa.Column("user_id", sa.String(), nullable=False),
            sa.Column("tool", sa.String(), nullable=False),
            sa.Column("decision", sa.String(8), nullable=False),
            sa.Column("arguments", sa.Text(), nullable=True),  # JSON
            sa.Column("expires_at", sa.Double(), nullable=True),
            sa.Column("created_at", sa.Double(), nullable=False),
            sa.Column("note", sa.Text(), nullable=True),
            sa.Index(f"{name}_user_tool", "user_id", "tool"),
        )

    async def add(self, rule: ApprovalRule) -> ApprovalRule:
        """Keep `rule` (its id and creation time filled in when empty); returns what was stored.

        Raises:
            ValueError: a lone surrogate or NUL in the rule's text (`check_rule_text`; nothing is
                stored), or the user already has `max_rules_per_user` rules.
        """
        check_rule_text(rule)
        stored = ApprovalRule.from_dict(
            {**rule.to_dict(), "id": rule.id or new_rule_id(), "created_at": rule.created_at or time.time()}
        )
        t = self.table
        async with self.engine.begin() as conn:
            count = (
                await conn.execute(
                    sa.select(sa.func.count()).select_from(t).where(t.c.user_id == rule.user_id)
                )
            ).scalar_one()
            if count >= self.max_rules_per_user:
                raise ValueError(f"Too many approval rules for one user (at most {self.max_rules_per_user}).")
            await conn.execute(
                t.insert().values(
                    id=stored.id,
                    user_id=stored.user_id,
                    tool=stored.tool,
                    decision=stored.decision,
                    arguments=None
                    if stored.arguments is None
                    else json.dumps(dict(stored.arguments), separators=(",", ":")),
                    expires_at=stored.expires_at,
                    created_at=stored.created_at,
                    note=stored.note,
                )
            )
        return stored

    async def list_rules(self, user_id: str, *, tool: str | None = None) -> list[ApprovalRule]:
        """The rules of `user_id` (for `tool` only, if given), oldest first."""
        t = self.table
        stmt = sa.select(t).where(t.c.user_id == user_id)
        if tool is not None:
            stmt = stmt.where(t.c.tool == tool)
        async with self._auto.connect() as conn:
            rows = (await conn.execute(stmt.order_by(t.c.created_at, t.c.id))).mappings().all()
        return [
            ApprovalRule.from_dict(
                {**row, "arguments": None if row["arguments"] is None else json.loads(row["arguments"])}
            )
            for row in rows
        ]

    async def remove(self, rule_id: str, *, user_id: str) -> bool:
        """Delete one of `user_id`'s rules; False when there is no such rule of theirs."""
        t = self.table
        stmt = sa.delete(t).where(t.c.id == rule_id, t.c.user_id == user_id)
        async with self._auto.connect() as conn:
            result = await conn.execute(stmt)
        return result.rowcount > 0

    def empty(self) -> bool | None:
        return None  # other processes may add rules: always ask the database
