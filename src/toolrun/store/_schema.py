"""One lock around every change of toolrun's schema, so that processes starting together make it once.

Several processes started at once on a fresh database (replicas running `toolrun db upgrade`, workers
creating their tables) would each find a table missing and each create it; on PostgreSQL the losers fail
(`duplicate key value violates unique constraint "pg_type_typname_nsp_index"`). Every schema change
(Alembic's upgrades and downgrades, the `create_tables` of the stores used without the service, the
tables of durable runs) runs inside a transaction that first takes this lock, and checks what exists only
once it holds it:

- PostgreSQL: a transaction-level advisory lock (`pg_advisory_xact_lock`), released at commit or
  rollback; its DDL is transactional, so the next holder sees the tables made by the last.
- SQLite: `BEGIN IMMEDIATE`, the database's write lock taken up front (SQLite's DDL is transactional too).

```python
with engine.begin() as connection:        # or `await conn.run_sync(...)` on an async engine
    hold_schema_lock(connection)
    metadata.create_all(connection)
```
"""

from __future__ import annotations

import sqlalchemy as sa

__all__ = ["SCHEMA_LOCK_KEY", "create_all_locked", "hold_schema_lock"]

SCHEMA_LOCK_KEY = int.from_bytes(b"toolrun", "big")
"""The advisory lock's key on PostgreSQL (one per database: advisory locks are per database)."""


def hold_schema_lock(connection: sa.Connection) -> None:
    """Take the schema lock for the rest of the connection's transaction (call it before anything else)."""
    dialect = connection.dialect.name
    if dialect == "postgresql":
        connection.execute(sa.select(sa.func.pg_advisory_xact_lock(SCHEMA_LOCK_KEY)))
    elif dialect == "sqlite":
        # The driver has not begun a transaction yet (it does so before the first INSERT/UPDATE/DELETE,
        # never before DDL); this one takes the write lock now and holds it to the commit.
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def create_all_locked(connection: sa.Connection, metadata: sa.MetaData) -> None:
    """`metadata.create_all`, under the schema lock (in the connection's transaction)."""
    hold_schema_lock(connection)
    metadata.create_all(connection, checkfirst=True)
