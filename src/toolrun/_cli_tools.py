"""The App's tools as the commands see them: `toolrun tools`, `approvals add`, `serve` and `mcp serve`.

`app_tools` loads the App's tools and the toolsets whose tools are fetched at start (an `MCPToolset`);
`app_registry` is all of them as definitions. A database that is missing or not migrated, and a toolset
that cannot be fetched, are a `TargetError`: one line at start, said by the command.

Kept apart so that `cli.py`, `_approvals_cli.py` and `mcp/_cli.py` import it, not each other.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from toolrun._cli_shared import safe_url
from toolrun._sync import run_sync

__all__ = [
    "TargetError",
    "app_registry",
    "app_tools",
    "check_database",
    "close_toolsets",
    "fetch_toolsets",
]


class TargetError(Exception):
    """A TARGET that cannot be loaded; the message says why and what to write instead."""


def check_database(url: str) -> None:
    """Refuse to serve on a database that is missing or not migrated (`TargetError`, said at start).

    A SQLite file that does not exist is not created (its path is relative to the directory the client
    started the server in, which is rarely the one meant); any database must be at this toolrun's newest
    revision (`toolrun db upgrade`). Otherwise every call would fail with an internal error.
    """
    from pathlib import Path

    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    shown = safe_url(url)
    upgrade = (
        f"Create it with `TOOLRUN_DATABASE_URL={shown} toolrun db upgrade`, or set TOOLRUN_DATABASE_URL "
        "to the service's database (for SQLite an absolute path: sqlite+aiosqlite:////abs/path/toolrun.db)."
    )
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise TargetError(f"TOOLRUN_DATABASE_URL is not a database URL ({shown}).") from None
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database in ("", ":memory:") or database.startswith("file::memory:"):
            raise TargetError(f"The tools need a database kept on disk, not {shown}. {upgrade}")
        path = Path(database).expanduser().resolve()
        if not path.is_file():
            raise TargetError(f"No database at {path} (TOOLRUN_DATABASE_URL={shown}). {upgrade}")
    from toolrun.server.migrate import current_revision, head_revision

    try:
        revision = run_sync(current_revision(url))
    except Exception as exc:
        raise TargetError(
            f"Cannot open the database at {shown} ({type(exc).__name__}): check that it is reachable. "
            + upgrade
        ) from None
    head = head_revision()
    if revision != head:
        state = "has no toolrun tables" if revision is None else f"is at revision {revision}, not {head}"
        raise TargetError(f"The task database at {shown} {state}: run `toolrun db upgrade` first.")


def app_tools(settings: Any = None, *, connect: bool = True) -> tuple[Any, list[Any]]:
    """The App's own tools as a registry, and its toolsets whose tools are fetched at start (an
    `MCPToolset`): `(registry, toolsets)`. Whoever serves them registers the toolsets in the event loop
    that holds their connections, and closes them (as `toolrun serve` and `toolrun mcp serve` do).

    Settings come from the environment (`TOOLRUN_DATABASE_URL`, `TOOLRUN_APP`, ...). With `connect`, a
    database that is missing or not at this toolrun's revision is a `TargetError` here, at start (nothing
    is created: a client such as Claude Desktop starts the server in a directory of its own).
    """
    from sqlalchemy.ext.asyncio import create_async_engine

    from toolrun.registry import ToolRegistry
    from toolrun.server import AppResources, Settings, load_app
    from toolrun.server._apps import resolve_tools
    from toolrun.server._db import create_engine

    settings = settings if settings is not None else Settings()
    served = load_app(settings.app)
    if connect:
        check_database(settings.database_url)
    # Definitions only (`connect=False`): an engine that nothing connects to.
    engine = create_engine(settings.database_url) if connect else create_async_engine("sqlite+aiosqlite://")
    tools, toolsets = resolve_tools(served, AppResources(engine=engine, settings=settings))
    return ToolRegistry(tools), toolsets


def app_registry(settings: Any = None, *, connect: bool = True) -> Any:
    """Every tool of the App (`TOOLRUN_APP`, default the task assistant), its toolsets' tools included:
    what `toolrun tools list`, `tools export` and `approvals add` show and check.

    A toolset's tools are fetched once and its connection closed, so they are definitions here: serve
    them with `app_tools`, whose caller keeps the connection open. Each call acts for the MCP principal
    (`--user`) on the service's database: its own rows only.

    Raises:
        TargetError: the database is missing or not migrated (with `connect`), or a toolset's tools cannot
            be fetched.
    """
    registry, toolsets = app_tools(settings, connect=connect)
    if toolsets:
        run_sync(fetch_toolsets(registry, toolsets, close=True))
    return registry


async def fetch_toolsets(registry: Any, toolsets: Sequence[Any], *, close: bool = False) -> None:
    """Register each toolset's tools into `registry` (closing every toolset again when one fails, or
    when `close` is set: the tools' definitions are all that is wanted).

    Raises:
        TargetError: a toolset's tools could not be fetched (its server is down, refuses, ...).
    """
    try:
        for toolset in toolsets:
            try:
                await toolset.register(registry)
            except Exception as exc:  # a name clash is said as itself; a connection asks about the server
                hint = ": is its server running?" if isinstance(exc, OSError) else ""
                raise TargetError(
                    f"Could not fetch the tools of {_toolset_name(toolset)} ({type(exc).__name__}: "
                    f"{str(exc).splitlines()[0] if str(exc) else 'no message'}){hint}"
                ) from None
    except BaseException:
        await close_toolsets(toolsets)
        raise
    if close:
        await close_toolsets(toolsets)


async def close_toolsets(toolsets: Sequence[Any]) -> None:
    """Close each toolset; a failure to close one does not keep the others open."""
    for toolset in toolsets:
        with contextlib.suppress(Exception):
            await toolset.aclose()


def _toolset_name(toolset: Any) -> str:
    prefix = getattr(toolset, "prefix", None)
    return f"the toolset {prefix!r}" if prefix else f"a {type(toolset).__name__}"
