"""Alembic migrations of the service's database, run programmatically (`toolrun db upgrade`).

```python
await upgrade("sqlite+aiosqlite:///./toolrun.db")               # the service's tables, then the app's
await upgrade(url, app=notes_app)                                 # an App of your own (its `migrations`)
await downgrade(url, "base")                                      # everything dropped, the app's first
```

The service's history lives in `alembic_version`; an App's own history (`App.migrations`, a folder of
revision files) in its own version table, `alembic_version_<name>`, applied after the service's. Two
histories, not one: an app's revision ids can never collide with the service's, and a database serving
one app never sees another's tables. `revision` always names a revision of the service's history; the
app's history goes to its head with the service's (`head`) and back to nothing with it (`base`).

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

from toolrun.server._apps import App, load_app
from toolrun.server._db import create_engine
from toolrun.store._schema import hold_schema_lock

__all__ = ["app_revision", "current_revision", "downgrade", "head_revision", "upgrade"]

_HERE = Path(__file__).parent / "migrations"
_SERVICE_TABLE = "alembic_version"
_MIGRATION_BUSY_SECONDS = 300.0
"""How long a migration on SQLite waits for another process's (replicas migrating at once queue here)."""


def version_table(app: App) -> str:
    """Where the app's own history is kept."""
    return f"alembic_version_{app.name.replace('-', '_')}"


def _config(connection: Connection | None = None, app: App | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(_HERE))
    cfg.set_main_option("path_separator", "os")  # a folder path with spaces stays one path
    if app is not None and app.migrations is not None:
        cfg.set_main_option("version_locations", str(Path(app.migrations)))
    cfg.attributes["connection"] = connection
    cfg.attributes["version_table"] = version_table(app) if app is not None else _SERVICE_TABLE
    return cfg


def _own(app: App | str | None) -> App | None:
    """The app whose own history is migrated too (None: it has none)."""
    served = load_app(app)
    return served if served.migrations is not None else None


async def _run(url: str, fn: Any, *args: Any) -> Any:
    engine = create_engine(url, poolclass=NullPool, busy_seconds=_MIGRATION_BUSY_SECONDS)
    try:
        async with engine.begin() as conn:
            return await conn.run_sync(lambda sync: fn(sync, *args))
    finally:
        await engine.dispose()


async def upgrade(url: str, revision: str = "head", *, app: App | str | None = None) -> None:
    """Bring the service's tables at `url` up to `revision`, then (at `head`) the app's to theirs.

    Args:
        url: The database.
        revision: A revision of the service's history (`head`: the newest).
        app: The App (or its `module:attribute`) whose own migrations follow; default the task assistant.
    """
    own = _own(app)

    def run(conn: Connection) -> None:
        hold_schema_lock(conn)  # replicas migrating at once: the first does the work
        command.upgrade(_config(conn), revision)
        if own is not None and revision in ("head", "heads"):
            command.upgrade(_config(conn, own), "heads")

    await _run(url, run)


async def downgrade(url: str, revision: str = "base", *, app: App | str | None = None) -> None:
    """Take the service's tables down to `revision` (`base`: no toolrun table left, the app's first)."""
    own = _own(app)

    def run(conn: Connection) -> None:
        hold_schema_lock(conn)  # replicas migrating at once: the first does the work
        if own is not None and revision == "base":
            command.downgrade(_config(conn, own), "base")
        command.downgrade(_config(conn), revision)

    await _run(url, run)


async def current_revision(url: str) -> str | None:
    """The revision of the service's history the database is at (None for a database never migrated)."""
    return await _run(url, lambda conn: _current(conn, _SERVICE_TABLE))  # type: ignore[no-any-return]


async def app_revision(url: str, app: App | str | None = None) -> str | None:
    """The revision of the app's own history the database is at (None: never migrated, or none)."""
    own = _own(app)
    if own is None:
        return None
    return await _run(url, lambda conn: _current(conn, version_table(own)))  # type: ignore[no-any-return]


def _current(conn: Connection, table: str) -> str | None:
    return MigrationContext.configure(conn, opts={"version_table": table}).get_current_revision()


def head_revision(app: App | str | None = None) -> str:
    """The newest revision of the service's history (or, given an app with migrations, of the app's)."""
    own = _own(app) if app is not None else None
    head = ScriptDirectory.from_config(_config(app=own)).get_current_head()
    if head is None:  # pragma: no cover - the package ships at least one revision
        raise RuntimeError("No migration found.")
    return head
