"""Alembic migrations of the service's database, run programmatically (`toolrun db upgrade`).

```python
await upgrade("sqlite+aiosqlite:///./toolrun.db")          # to the newest revision
await downgrade(url, "base")                                 # everything dropped
```

Every migration runs in one transaction that first takes toolrun's schema lock (`toolrun.store._schema`):
several `toolrun db upgrade` started at once on a fresh database all succeed, and the schema is made once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection
from sqlalchemy.pool import NullPool

from toolrun.server._db import create_engine
from toolrun.store._schema import hold_schema_lock

__all__ = ["current_revision", "downgrade", "head_revision", "upgrade"]

_HERE = Path(__file__).parent / "migrations"


def _config(connection: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(_HERE))
    cfg.attributes["connection"] = connection
    return cfg


async def _run(url: str, fn: Any, *args: Any) -> Any:
    engine = create_engine(url, poolclass=NullPool)
    try:
        async with engine.begin() as conn:
            return await conn.run_sync(lambda sync: fn(sync, *args))
    finally:
        await engine.dispose()


def _locked(fn: Any) -> Any:
    """`fn` run under the schema lock, in the transaction of the whole migration: of processes migrating
    at once (one per replica), the first does the work and the others then find the database at head."""

    def run(conn: Connection, *args: Any) -> Any:
        hold_schema_lock(conn)
        return fn(conn, *args)

    return run


async def upgrade(url: str, revision: str = "head") -> None:
    """Bring the database at `url` up to `revision` (creates every table on a new database)."""
    await _run(url, _locked(lambda conn, rev: command.upgrade(_config(conn), rev)), revision)


async def downgrade(url: str, revision: str = "base") -> None:
    """Take the database at `url` down to `revision` (`base`: no toolrun table left)."""
    await _run(url, _locked(lambda conn, rev: command.downgrade(_config(conn), rev)), revision)


async def current_revision(url: str) -> str | None:
    """The revision the database is at (None for a database never migrated)."""
    return await _run(url, lambda conn: MigrationContext.configure(conn).get_current_revision())  # type: ignore[no-any-return]


def head_revision() -> str:
    """The newest revision shipped with this version of toolrun."""
    head = ScriptDirectory.from_config(_config()).get_current_head()
    if head is None:  # pragma: no cover - the package ships at least one revision
        raise RuntimeError("No migration found.")
    return head
