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

from toolrun._cli_tools import TargetError, app_tools, close_toolsets, fetch_toolsets
from toolrun.registry import ToolRegistry, ToolSet
from toolrun.tools import Tool, ToolContext

__all__ = ["DEFAULT_TARGET", "app", "load_target", "main"]

DEFAULT_TARGET = "toolrun.cli:app_registry"
"""The App's tools (`--app` / `TOOLRUN_APP`, default the task assistant) on the service's database
(`TOOLRUN_DATABASE_URL`), served when no TARGET is given."""

_FACTORIES = ("registry", "create_registry", "build_registry", "tools")

app = typer.Typer(
    name="mcp", help="Serve toolrun tools over MCP.", no_args_is_help=True, add_completion=False
)


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
    await fetch_toolsets(registry, toolsets)
    try:
        yield
    finally:
        await close_toolsets(toolsets)


def main(argv: list[str] | None = None) -> None:
    """`python -m toolrun.mcp ...`."""
    app(args=argv if argv is not None else sys.argv[1:], prog_name="toolrun mcp")
