"""`toolrun mcp serve TARGET [--http --host --port]`: a typer sub-app, also `python -m toolrun.mcp`.

Attach it to the main CLI with `app.add_typer(toolrun.mcp._cli.app, name="mcp")`.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import AsyncIterator
from typing import Annotated, Any

import typer

from toolrun.registry import ToolRegistry, ToolSet
from toolrun.tools import Tool, ToolContext

__all__ = ["DEFAULT_TARGET", "TargetError", "app", "check_database", "load_target", "main"]

DEFAULT_TARGET = "toolrun.cli:app_registry"
"""The App's tools (`--app` / `TOOLRUN_APP`, default the task assistant) on the service's database
(`TOOLRUN_DATABASE_URL`), served when no TARGET is given."""

_FACTORIES = ("registry", "create_registry", "build_registry", "tools")

app = typer.Typer(
    name="mcp", help="Serve toolrun tools over MCP.", no_args_is_help=True, add_completion=False
)


class TargetError(Exception):
    """A TARGET that cannot be loaded; the message says why and what to write instead."""


def load_target(target: str) -> ToolSet:
    """The tools named by `module:attribute` (or `module`, whose `registry` / `create_registry()` /
    `build_registry()` / `tools` is used): a registry or view, a factory returning one, or a list of tools.

    Raises:
        TargetError: the module or attribute is missing or is not tools.
    """
    module_name, _, attribute = target.partition(":")
    if not module_name:
        raise TargetError(f"TARGET {target!r} names no module; write it as 'package.module:registry'.")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            hint = (
                " The task tools are not part of this installation (pip install 'toolrun[server]')."
                if target == DEFAULT_TARGET
                else ""
            )
            raise TargetError(
                f"Cannot import module {module_name!r}: it does not exist.{hint} "
                "Give TARGET as 'package.module:registry' (the module must be importable from here)."
            ) from exc
        raise TargetError(f"Importing {module_name!r} failed: module {exc.name!r} is missing.") from exc
    names = (attribute,) if attribute else _FACTORIES
    for name in names:
        if hasattr(module, name):
            return _as_toolset(getattr(module, name), f"{module_name}:{name}")
    hint = (
        " The task tools on the service's database are the default TARGET: `toolrun mcp serve` without one."
        if module_name == "toolrun.apps.tasks"
        else ""
    )
    if attribute:
        raise TargetError(f"Module {module_name!r} has no attribute {attribute!r}.{hint}")
    raise TargetError(
        f"Module {module_name!r} has none of {', '.join(_FACTORIES)}; name one: 'module:attribute'.{hint}"
    )


def check_database(url: str) -> None:
    """Refuse to serve on a database that is missing or not migrated (`TargetError`, said at start).

    A SQLite file that does not exist is not created (its path is relative to the directory the client
    started the server in, which is rarely the one meant); any database must be at this toolrun's newest
    revision (`toolrun db upgrade`). Otherwise every call would fail with an internal error.
    """
    from pathlib import Path

    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from toolrun._cli_shared import safe_url

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
        revision = _run_sync(current_revision(url))
    except Exception as exc:
        raise TargetError(
            f"Cannot open the database at {shown} ({type(exc).__name__}): check that it is reachable. "
            + upgrade
        ) from None
    head = head_revision()
    if revision != head:
        state = "has no toolrun tables" if revision is None else f"is at revision {revision}, not {head}"
        raise TargetError(f"The task database at {shown} {state}: run `toolrun db upgrade` first.")


def _run_sync(coro: Any) -> Any:
    """Run `coro` to its end from sync code, in a thread of its own when an event loop is running here."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _as_toolset(value: Any, where: str) -> ToolSet:
    if callable(value) and not isinstance(value, ToolSet | Tool):
        value = value()
    if isinstance(value, ToolSet):
        return value
    if isinstance(value, list | tuple) and value:
        return ToolRegistry(value)
    raise TargetError(
        f"{where} is a {type(value).__name__}, not a ToolRegistry, a factory or a list of tools."
    )


@app.callback()
def _group() -> None:
    """Serve toolrun tools over MCP."""


@app.command()
def serve(
    target: Annotated[str, typer.Argument(help="The tools: 'module:registry'.")] = DEFAULT_TARGET,
    http: Annotated[bool, typer.Option("--http", help="Streamable HTTP instead of stdio.")] = False,
    host: Annotated[str, typer.Option(help="HTTP host.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port.")] = 8000,
    path: Annotated[str, typer.Option(help="HTTP path.")] = "/mcp",
    user: Annotated[str, typer.Option(help="The principal's user id.")] = "local",
    role: Annotated[
        list[str] | None, typer.Option("--role", help="A role of the principal (repeat).")
    ] = None,
    name: Annotated[
        str | None, typer.Option(help="The server name announced to clients (default: the App's title).")
    ] = None,
    app_spec: Annotated[
        str | None,
        typer.Option(
            "--app",
            metavar="MODULE:ATTR",
            envvar="TOOLRUN_APP",
            help="Serve this App's tools (instead of TARGET), e.g. notes_app:app.",
        ),
    ] = None,
) -> None:
    """Serve TARGET's tools over MCP (stdio by default), every call through toolrun's executor."""
    if app_spec is not None:
        from toolrun._cli_shared import load_app_option

        if target != DEFAULT_TARGET:
            typer.echo("Error: name the tools once: a TARGET or --app, not both.", err=True)
            raise typer.Exit(2)
        name = name or load_app_option(app_spec).title
    toolsets: list[Any] = []  # the App's remote tools (an `MCPToolset`): fetched in the serving loop
    try:
        if target == DEFAULT_TARGET:
            from toolrun.cli import app_tools

            registry, toolsets = app_tools()
        else:
            registry = load_target(target)
    except TargetError as exc:
        typer.echo(f"Error: {exc}", err=True)
        raise typer.Exit(1) from None
    from toolrun.mcp._server import create_server, serve_stdio

    principal = ToolContext(user_id=user, roles=tuple(role or ()))
    server = create_server(registry, principal=principal, name=name or "toolrun")
    if not http:
        import anyio

        async def stdio() -> None:
            async with _toolsets_open(registry, toolsets):
                await serve_stdio(server)

        try:
            anyio.run(stdio)
        except TargetError as exc:
            typer.echo(f"Error: {exc}", err=True)
            raise typer.Exit(1) from None
        return
    import uvicorn

    from toolrun.mcp._http import create_http_app

    local = host in ("127.0.0.1", "localhost", "::1")
    if not local:
        typer.echo(
            f"Warning: serving on {host} without authentication; every caller acts as {user!r}. "
            "Mount the endpoint in an app with a principal resolver (toolrun.mcp.mount_mcp) instead.",
            err=True,
        )
    allowed = ["127.0.0.1:*", "localhost:*", "[::1]:*"] if local else None
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"] if local else None
    app_ = create_http_app(server, path=path, allowed_hosts=allowed, allowed_origins=origins)
    if toolsets:
        serving = app_.router.lifespan_context

        @contextlib.asynccontextmanager
        async def lifespan(app: Any) -> AsyncIterator[None]:
            async with _toolsets_open(registry, toolsets), serving(app):
                yield

        app_.router.lifespan_context = lifespan
    uvicorn.run(app_, host=host, port=port, log_level="warning")


@contextlib.asynccontextmanager
async def _toolsets_open(registry: ToolRegistry, toolsets: list[Any]) -> AsyncIterator[None]:
    """The toolsets' tools registered for as long as the server serves them, then their connections
    closed (`TargetError` when one cannot be fetched)."""
    from toolrun.cli import close_toolsets, fetch_toolsets

    await fetch_toolsets(registry, toolsets)
    try:
        yield
    finally:
        await close_toolsets(toolsets)


def main(argv: list[str] | None = None) -> None:
    """`python -m toolrun.mcp ...`."""
    app(args=argv if argv is not None else sys.argv[1:], prog_name="toolrun mcp")
