"""The `toolrun` command: a thin shell over the library (the commands call what the server calls).

```
toolrun serve [MODULE:APP] [--host] [--port] [--database-url] [--model] [--workers] [--demo-user NAME]
toolrun users add NAME [--role ROLE]... | list | revoke NAME
toolrun db upgrade | downgrade [REVISION] | current | purge
toolrun tools list | export --format F [--strict] | check
toolrun chat [--url URL --token TOKEN]       # against a running server, or in-process without --url
```

Every command takes `--app MODULE:ATTR` (or reads `TOOLRUN_APP`): the App served, as uvicorn names apps
(`notes_app:app`); without it, the task assistant.

Exit codes: 0 success, 1 failure, 2 usage error.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import sys
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Column, Table

from toolrun._approvals_cli import app as approvals_app
from toolrun._cli_shared import (
    AppOption,
    check_database_url,
    ensure_demo_user,
    err,
    load_app_option,
    safe_url,
    use_words,
)
from toolrun._cli_shared import fail as _fail
from toolrun._cli_shared import with_users as _with_users
from toolrun._cli_tools import TargetError, app_registry
from toolrun.mcp._cli import app as mcp_app

__all__ = ["app", "main"]

app = typer.Typer(help="toolrun: the task assistant service and its tools.", no_args_is_help=True)
users_app = typer.Typer(help="Users and their API tokens.", no_args_is_help=True)
db_app = typer.Typer(help="The service's database.", no_args_is_help=True)
tools_app = typer.Typer(help="The tools the service serves.", no_args_is_help=True)
app.add_typer(users_app, name="users")
app.add_typer(db_app, name="db")
app.add_typer(tools_app, name="tools")
app.add_typer(mcp_app, name="mcp")
app.add_typer(approvals_app, name="approvals")

out = Console()

FORMATS = ("openai", "openai-responses", "anthropic", "gemini", "mcp")


def _settings(**overrides: Any) -> Any:
    from toolrun.server import Settings

    values = {k: v for k, v in overrides.items() if v is not None}
    settings = Settings(**values)
    check_database_url(settings.database_url)  # a URL toolrun cannot use: one line, exit 2
    return settings


# -- db --------------------------------------------------------------------------------------------------

DatabaseURL = Annotated[
    str | None,
    typer.Option(metavar="URL", help="The database (SQLAlchemy URL); overrides TOOLRUN_DATABASE_URL."),
]
"""The `--database-url` option of the `db` commands."""


@db_app.command("upgrade")
def db_upgrade(
    revision: Annotated[str, typer.Argument(help="Target revision of the service's history.")] = "head",
    database_url: DatabaseURL = None,
    app_spec: AppOption = None,
) -> None:
    """Apply the migrations: the service's, then (to `head`) the app's own (creates every table on a new
    database)."""
    from toolrun.server.migrate import app_revision, current_revision, upgrade

    served = load_app_option(app_spec)
    settings = _settings(database_url=database_url)
    asyncio.run(upgrade(settings.database_url, revision, app=served))
    line = f"database at revision {asyncio.run(current_revision(settings.database_url))}"
    if served.migrations is not None:
        line += (
            f" (app {served.name} at {asyncio.run(app_revision(settings.database_url, served)) or 'none'})"
        )
    out.print(line)


@db_app.command("downgrade")
def db_downgrade(
    revision: Annotated[str, typer.Argument(help="Target revision (`base`: drop every toolrun table).")],
    database_url: DatabaseURL = None,
    app_spec: AppOption = None,
) -> None:
    """Undo migrations down to REVISION (`base`: the app's tables too)."""
    from toolrun.server.migrate import downgrade

    served = load_app_option(app_spec)
    settings = _settings(database_url=database_url)
    asyncio.run(downgrade(settings.database_url, revision, app=served))
    out.print(f"database downgraded to {revision}")


@db_app.command("current")
def db_current(
    database_url: DatabaseURL = None,
    app_spec: AppOption = None,
) -> None:
    """Print the database's revision (and the app's own, when it has migrations)."""
    from toolrun.server.migrate import app_revision, current_revision

    served = load_app_option(app_spec)
    settings = _settings(database_url=database_url)
    out.print(asyncio.run(current_revision(settings.database_url)) or "none")
    if served.migrations is not None:
        out.print(f"app {served.name}: {asyncio.run(app_revision(settings.database_url, served)) or 'none'}")


@db_app.command("purge")
def db_purge(
    database_url: DatabaseURL = None,
    app_spec: AppOption = None,
) -> None:
    """Delete what has expired, once (the server does it every TOOLRUN_PURGE_INTERVAL seconds): expired
    cache entries, refilled rate-limit buckets, expired stored results, and confirmations
    TOOLRUN_CONFIRMATION_RETENTION seconds past their expiry."""
    from toolrun.server._maintenance import STORES, purge

    load_app_option(
        app_spec
    )  # the service's stores: the same for every app, but a bad name is still a mistake
    purged, deleted = asyncio.run(purge(_settings(database_url=database_url)))
    for name in STORES:
        if name not in purged:
            out.print(f"{name}: in Redis, which expires its own")
        elif name == "confirmations" and name in deleted:  # the store counts those never decided
            out.print(f"confirmations: {deleted[name]} never decided purged (and the decided ones as old)")
        elif name in deleted:
            out.print(f"{name}: {deleted[name]} purged")
    failed = [name for name in purged if name not in deleted]
    if failed:
        raise _fail(f"purging {', '.join(failed)} failed; run `toolrun db upgrade` if the tables are missing")


# -- users -----------------------------------------------------------------------------------------------


@users_app.command("add")
def users_add(
    name: Annotated[str, typer.Argument(help="The user's name (letters, digits, . _ -).")],
    role: Annotated[
        list[str] | None, typer.Option("--role", metavar="ROLE", help="A role (repeatable; default: member).")
    ] = None,
    database_url: DatabaseURL = None,
    app_spec: AppOption = None,
) -> None:
    """Create a user and print a new API token (shown once; only its hash is stored)."""
    from toolrun.server._users import UserExistsError

    load_app_option(app_spec)  # users are the service's, shared by every app

    settings = _settings(database_url=database_url)
    try:
        principal, token = asyncio.run(
            _with_users(settings, lambda users: users.add(name, role or ("member",)))
        )
    except (UserExistsError, ValueError) as exc:
        raise _fail(str(exc)) from None
    err.print(f"user [bold]{principal.name}[/bold] ({principal.user_id}), roles {', '.join(principal.roles)}")
    err.print("API token (shown once; send it as `Authorization: Bearer TOKEN`):")
    print(token)


@users_app.command("list")
def users_list(
    database_url: DatabaseURL = None,
    app_spec: AppOption = None,
) -> None:
    """List users (never tokens)."""
    load_app_option(app_spec)
    settings = _settings(database_url=database_url)
    rows = asyncio.run(_with_users(settings, lambda users: users.list()))
    table = Table("name", "id", "roles", "active tokens", "disabled")
    for u in rows:
        table.add_row(u.name, u.id, ", ".join(u.roles), str(u.active_tokens), "yes" if u.disabled else "")
    out.print(table)


@users_app.command("revoke")
def users_revoke(
    name: Annotated[str, typer.Argument(help="The user's name.")],
    database_url: DatabaseURL = None,
    app_spec: AppOption = None,
) -> None:
    """Revoke every token of a user and disable the user."""
    load_app_option(app_spec)
    settings = _settings(database_url=database_url)
    try:
        count = asyncio.run(_with_users(settings, lambda users: users.revoke(name)))
    except LookupError as exc:
        raise _fail(str(exc)) from None
    out.print(f"revoked {count} token(s) of {name}")


# -- serve -----------------------------------------------------------------------------------------------


def create_app_from_env() -> Any:
    """The uvicorn factory of `toolrun serve` (settings from the environment the command prepared)."""
    from toolrun.server import Settings

    return create_service_app(Settings())


def create_service_app(settings: Any, **app_options: Any) -> Any:
    """The chat service with its tools also served over MCP (Streamable HTTP) at `/mcp`.

    The MCP endpoint runs on the service's own executor — the same gates, stores, audit and confirmation
    records — and takes the service's bearer tokens: each request acts as the token's user with its roles.
    The server is composed here, at the edge, because `toolrun.server` does not import `toolrun.mcp`.
    """
    from toolrun import ToolContext
    from toolrun.mcp import create_server, mount_mcp
    from toolrun.server import create_app

    app = create_app(settings, **app_options)
    state = app.state.toolrun

    async def resolve(token: str) -> ToolContext[Any] | None:
        principal = await state.users.authenticate(token)
        if principal is None:
            return None
        return ToolContext(user_id=principal.user_id, roles=principal.roles)

    tasks: Any = True  # background tools called as MCP tasks: in this process...
    if getattr(app.state, "toolrun_jobs", None) is not None:  # ...or, TOOLRUN_DURABLE=dbos, as durable jobs
        from toolrun.integrations.dbos import DurableTasks

        tasks = DurableTasks(state.agent)
    mount_mcp(
        app,
        create_server(state.registry, executor=state.executor, tasks=tasks, name=state.app.title),
        resolve_principal=resolve,
        max_sessions_per_user=settings.mcp_max_sessions_per_user,
        session_idle_timeout=settings.mcp_session_idle_timeout,
    )
    return app


@app.command()
def serve(
    target: Annotated[
        str | None,
        typer.Argument(
            metavar="[MODULE:APP]",
            help="The App to serve, e.g. notes_app:app (as --app).",
            show_default=False,
        ),
    ] = None,
    host: Annotated[str, typer.Option(metavar="HOST", help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(metavar="PORT", help="Port (0: any free port).")] = 8000,
    database_url: DatabaseURL = None,
    model: Annotated[
        str | None, typer.Option(metavar="MODEL", help="Overrides TOOLRUN_MODEL (`demo`, `openai:...`).")
    ] = None,
    workers: Annotated[int, typer.Option(min=1, help="Worker processes.")] = 1,
    demo_user: Annotated[
        str | None,
        typer.Option(metavar="NAME", help="Create this local user on first run and print a sign-in link."),
    ] = None,
    upgrade: Annotated[bool, typer.Option(help="Apply migrations before serving.")] = False,
    app_spec: AppOption = None,
) -> None:
    """Serve an App (default: the task assistant) with uvicorn: the page, the chat API and every door."""
    import uvicorn

    from toolrun.server import SettingsError
    from toolrun.server._observe import configure_logging

    if target is not None and app_spec is not None and target.strip() != app_spec.strip():
        raise _fail(f"two apps named: {target} and --app/TOOLRUN_APP {app_spec}; name one", 2)
    served = load_app_option(target or app_spec)

    if database_url is not None:
        os.environ["TOOLRUN_DATABASE_URL"] = database_url
    if model is not None:
        os.environ["TOOLRUN_MODEL"] = model
    settings = _settings()
    try:
        secret = settings.resolved_secret()  # generated once here, before workers race for it
    except SettingsError as exc:
        raise _fail(str(exc)) from None
    if workers > 1 and settings.secret_key is None:
        os.environ["TOOLRUN_SECRET_KEY"] = secret.decode()
    if upgrade:
        from toolrun.server.migrate import upgrade as do_upgrade

        asyncio.run(do_upgrade(settings.database_url, app=served))
    else:
        from toolrun.server.migrate import current_revision

        if asyncio.run(current_revision(settings.database_url)) is None:  # else every token would be a 401
            raise _fail(
                f"the database at {safe_url(settings.database_url)} has no tables yet: run `toolrun db "
                "upgrade` first (same --database-url / TOOLRUN_DATABASE_URL and --app), or `toolrun serve "
                "--upgrade`."
            )
    taken = _port_taken(host, port)
    if taken is not None:
        raise _fail(
            f"cannot listen on {host}:{port}: {taken}. Stop what uses it (another `toolrun serve`?), or pick "
            f"another port: toolrun serve --port 8123 (make serve PORT=8123)."
        )
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    base = f"http://{f'[{shown}]' if ':' in shown else shown}:{port}/" if port else None
    # Plain prints: a link must never be wrapped or styled.
    from toolrun.server._settings import public_model_name

    # The model by provider and name only: a URL's credentials never reach a terminal or a log.
    print(f"\n  {served.title} is starting with model {public_model_name(settings.model)}", file=sys.stderr)
    if demo_user:
        token = asyncio.run(ensure_demo_user(settings, demo_user))
        if base:
            print(f"  open  {base}#token={token}", file=sys.stderr)
        print(f"  API token of user {demo_user}: {token}\n", file=sys.stderr)
    elif base:
        print(f"  open  {base}  (sign in with an API token from `toolrun users add NAME`)\n", file=sys.stderr)
    else:
        print("  port 0: the address is in the log line below\n", file=sys.stderr)
    configure_logging(settings.log_level)
    uvicorn.run(
        "toolrun.cli:create_app_from_env",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_config=None,
        access_log=False,
        timeout_keep_alive=75,  # longer than common proxies' idle timeouts: no race on a reused connection
        timeout_graceful_shutdown=int(settings.run_timeout) + 5,
    )


def _port_taken(host: str, port: int) -> str | None:
    """Why `host:port` cannot be listened on (in use, not an address here), or None. Checked before the
    server starts so a person gets one line instead of uvicorn's log and exit code 3; uvicorn binds with
    SO_REUSEADDR, and so does this check, so a port in TIME_WAIT is not reported as taken."""
    import socket

    if port == 0:
        return None
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return "the port is already in use"
            return exc.strerror or str(exc)
    return None


# -- tools -----------------------------------------------------------------------------------------------


def _registry(app_spec: str | None) -> Any:
    load_app_option(app_spec)
    try:
        return app_registry(_settings(), connect=False)
    except TargetError as exc:
        raise _fail(str(exc)) from None


@tools_app.command("list")
def tools_list(app_spec: AppOption = None) -> None:
    """The tools the service serves, with their policies."""
    table = Table("confirmation", "read-only", "idempotent", "description")
    table.columns.insert(0, Column("tool", no_wrap=True))
    for tool in _registry(app_spec).tools():
        o = tool.options
        table.add_row(
            tool.name,
            "yes" if o.requires_confirmation else "",
            "yes" if o.read_only else "",
            "yes" if o.effective_idempotent else "",
            (tool.description or "").split("\n")[0],
        )
    out.print(table)


@tools_app.command("export")
def tools_export(
    format: Annotated[str, typer.Option("--format", "-f", help=f"One of {', '.join(FORMATS)}.")] = "openai",
    strict: Annotated[bool, typer.Option(help="Strict variants (OpenAI structured outputs).")] = False,
    app_spec: AppOption = None,
) -> None:
    """Print the tool definitions in a provider's format (JSON)."""
    if format not in FORMATS:
        raise _fail(f"unknown format {format!r}; use one of {', '.join(FORMATS)}", 2)
    print(json.dumps(_registry(app_spec).definitions(format, strict=strict), indent=2, ensure_ascii=False))


@tools_app.command("check")
def tools_check(app_spec: AppOption = None) -> None:
    """Check every definition against every provider's published rules; exit 1 on any problem."""
    from toolrun.formats import check_request

    registry = _registry(app_spec)
    problems = 0
    checks = [("openai", False), ("openai", True), ("openai-responses", False), ("anthropic", False)]
    checks += [("gemini", False), ("mcp", False)]
    for fmt, strict in checks:
        for v in check_request(registry.definitions(fmt, strict=strict), fmt, strict=strict):
            label = f"{fmt}{' strict' if strict else ''}"
            if v.severity == "error":
                problems += 1
                out.print(f"[red]error[/red] {label} {v.rule} {v.path}: {v.message}")
            else:
                out.print(f"[yellow]warning[/yellow] {label} {v.rule} {v.path}: {v.message}")
    if problems:
        raise _fail(f"{problems} problem(s)")
    count = len(registry.tools())
    out.print(f"[green]ok[/green]: {count} tools conform to {', '.join(FORMATS)} (and strict OpenAI)")


# -- chat ------------------------------------------------------------------------------------------------


@app.command()
def chat(
    url: Annotated[
        str | None,
        typer.Option(
            metavar="URL", help="A running server, e.g. http://127.0.0.1:8000 (default: in-process)."
        ),
    ] = None,
    token: Annotated[
        str | None, typer.Option(metavar="TOKEN", envvar="TOOLRUN_TOKEN", help="API token for --url.")
    ] = None,
    conversation: Annotated[
        str | None, typer.Option(metavar="ID", help="Continue this conversation.")
    ] = None,
    app_spec: AppOption = None,
) -> None:
    """Chat in the terminal: streaming text, y/n prompts for confirmations, a spinner while tools run."""
    from toolrun._chat_cli import run_chat

    if url is None:  # in-process: this App (a server at --url serves its own)
        load_app_option(app_spec)

    code = asyncio.run(run_chat(url=url, token=token, conversation_id=conversation, console=out))
    raise typer.Exit(code)


use_words(app)  # help names values in words (TEXT, URL, NAME), not Python types


def main() -> None:
    """Entry point of the `toolrun` console script."""
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":  # pragma: no cover
    main()
