"""What the `toolrun` commands share (`cli.py`, `_chat_cli.py`): error lines, the user store, the demo user,
and help that names values in words.

Kept apart so that `cli.py` (the commands) and `_chat_cli.py` (the chat client the `chat` command runs)
import it, not each other.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup

__all__ = [
    "AppOption",
    "WordsCommand",
    "WordsGroup",
    "check_database_url",
    "database_failure",
    "ensure_demo_user",
    "err",
    "fail",
    "load_app_option",
    "safe_url",
    "use_words",
    "with_users",
]

err = Console(stderr=True)


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print one error line on stderr; the `typer.Exit` to raise (1: failure, 2: usage)."""
    err.print(f"[red]error:[/red] {message}", soft_wrap=True)  # one line, however narrow the terminal
    return typer.Exit(code)


AppOption = Annotated[
    str | None,
    typer.Option(
        "--app",
        metavar="MODULE:ATTR",
        envvar="TOOLRUN_APP",
        help="The App served, e.g. notes_app:app (default: the task assistant, toolrun.apps.tasks:app).",
        show_envvar=True,
    ),
]
"""The `--app` option of every command (or `TOOLRUN_APP`)."""


def load_app_option(spec: str | None) -> Any:
    """The App that `--app` (or `TOOLRUN_APP`) names, imported as uvicorn imports apps: from the current
    folder too. A bad name is one line and exit 2, never a traceback. The choice is also put in
    `TOOLRUN_APP`, so that what runs next (uvicorn's workers, `Settings()`) serves the same App."""
    from toolrun.server import AppError, load_app

    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        app = load_app(spec)
    except AppError as exc:
        # One line however narrow the terminal, and the message as written (it may hold `[a-z0-9-]`).
        err.print(f"[red]error:[/red] {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(2) from None
    if spec:
        os.environ["TOOLRUN_APP"] = spec.strip()
    return app


_URL_HELP = (
    "toolrun keeps its data in SQLite (sqlite+aiosqlite:///path) or PostgreSQL (postgresql+asyncpg://...)"
)


def check_database_url(url: str) -> None:
    """Refuse, as a usage error (exit 2), a database URL that cannot be parsed or names another database;
    refuse (exit 1) a SQLite file whose folder does not exist."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        raise fail(f"cannot read the database URL {url!r}: {_URL_HELP}.", 2) from None
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise fail(f"unsupported database {backend!r} in {safe_url(url)}: {_URL_HELP}.", 2)
    if backend == "sqlite" and parsed.database and parsed.database != ":memory:":
        folder = Path(parsed.database).parent
        if not folder.is_dir():
            raise fail(
                f"the folder {str(folder)!r} of the SQLite database does not exist: create it, or give "
                "another --database-url / TOOLRUN_DATABASE_URL."
            )


def database_failure(exc: BaseException) -> str | None:
    """One line for an error of a database that cannot be used (down, unreachable, refusing, missing); None
    for any other error."""
    from sqlalchemy.exc import ArgumentError, DBAPIError

    if isinstance(exc, ArgumentError):
        return f"cannot read the database URL: {_URL_HELP}."
    if isinstance(exc, DBAPIError):
        reason = (
            str(exc.orig or exc).strip().splitlines()[0]
            if str(exc.orig or exc).strip()
            else type(exc).__name__
        )
    elif isinstance(exc, OSError):  # asyncpg's connect: refused, no such host, timed out
        reason = exc.strerror or str(exc) or type(exc).__name__
    else:
        return None
    return (
        f"the database cannot be used ({reason}). Check that it runs and is reachable at the URL given "
        "(--database-url / TOOLRUN_DATABASE_URL)."
    )


async def with_users(settings: Any, fn: Any) -> Any:
    from sqlalchemy.exc import OperationalError, ProgrammingError

    from toolrun.server._db import create_engine
    from toolrun.server._users import UserStore

    engine = create_engine(settings.database_url)
    try:
        return await fn(UserStore(engine, cache_seconds=0))
    except (OperationalError, ProgrammingError) as exc:  # no such table / relation does not exist, no server
        raise fail(
            f"The database at {safe_url(settings.database_url)} is not ready ({type(exc.orig).__name__}). "
            "Create or update its tables with `toolrun db upgrade` (same --database-url / "
            "TOOLRUN_DATABASE_URL), and check that the server is reachable."
        ) from None
    finally:
        await engine.dispose()


def safe_url(url: str) -> str:
    """The database URL without its password, for messages."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "the configured URL"


def _read_private(path: Path) -> str | None:
    return path.read_text().strip() if path.exists() else None


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, text.encode() + b"\n")
    finally:
        os.close(fd)


async def ensure_demo_user(settings: Any, name: str) -> str:
    """The sign-in token of the local demo user, creating the user on first run (kept in data_dir, 0600)."""
    path = Path(settings.data_dir) / f"{name}-token"
    kept = _read_private(path)

    async def run(users: Any) -> str:
        principal = await users.get_by_name(name)
        if principal is not None and kept and await users.authenticate(kept) is not None:
            return kept
        if principal is None:
            principal, token = await users.add(name, ("member",))
        else:
            token = await users.issue_token(principal.user_id, label="sign-in link")
        _write_private(path, token)
        return str(token)

    return str(await with_users(settings, run))


# -- help in words ----------------------------------------------------------------------------------------

_WORDS = {"text": "TEXT", "integer": "INTEGER", "integer range": "INTEGER", "float": "NUMBER", "path": "PATH"}
_PY_WORDS: dict[Any, str] = {str: "TEXT", int: "INTEGER", float: "NUMBER", bool: ""}

# Parameters are read by duck typing: typer bundles its own click (`typer._click`) and describes types with
# a `type_descriptor` in recent versions; older ones use click's `param.type`.


def _word(param: Any) -> str:
    """What a value of `param` is, in a word (`TEXT`, `INTEGER`...), instead of a Python type."""
    if getattr(param, "is_flag", False):
        return ""  # a flag takes no value
    desc = getattr(param, "type_descriptor", None)
    if desc is not None:
        if getattr(desc, "is_path", False):
            return "PATH"
        choices = getattr(desc, "choices", None)
        if getattr(desc, "is_choice", False) and choices:
            return "[" + "|".join(str(getattr(c, "value", c)) for c in choices) + "]"
        annotation = desc.annotation
        if getattr(desc, "is_list", False):
            annotation = next(iter(getattr(annotation, "__args__", ())), str)
        return _PY_WORDS.get(annotation, "VALUE")
    kind = getattr(param, "type", None)
    choices = getattr(kind, "choices", None)
    if choices:
        return "[" + "|".join(str(c) for c in choices) + "]"
    name = str(getattr(kind, "name", "value"))
    return _WORDS.get(name, name.upper())


def _in_words(params: list[Any]) -> list[Any]:
    for param in params:
        word = _word(param)
        if param.metavar is None:
            param.metavar = (param.name or "").upper() if param.param_type_name == "argument" else word
        shown = param.metavar if param.param_type_name == "option" else word
        # Recent typer prints each parameter's type as a Python type (`<str>`, `<list[str]>`): a word instead.
        param.display_type_rich = lambda ctx, shown=shown: shown or None
    return params


def _usage(command: Any, ctx: Any) -> list[str]:
    pieces = [command.options_metavar] if command.options_metavar else []
    for param in command.get_params(ctx):
        if param.param_type_name == "argument":
            name = param.metavar or (param.name or "").upper()
            pieces.append(name if param.required else f"[{name}]")
    return pieces


class WordsCommand(TyperCommand):
    """A command whose help names values in words (`TEXT`, `NAME`), never Python types (`<str>`)."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _in_words(super().get_params(ctx))

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return _usage(self, ctx)


class WordsGroup(TyperGroup):
    """A group whose help names values in words, like `WordsCommand`; and the one place where a database
    that cannot be used becomes one error line and exit code 1 (never a traceback), for every command."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _in_words(super().get_params(ctx))

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as exc:
            line = database_failure(exc)
            if line is None:
                raise
            raise fail(line) from None


def use_words(app: typer.Typer) -> None:
    """Give every command and group of `app` (and of its sub-apps) help in words."""
    # Only where the app kept typer's default (None, a default placeholder, or the plain class).
    if not isinstance(app.info.cls, type) or app.info.cls is TyperGroup:
        app.info.cls = WordsGroup
    for command in app.registered_commands:
        if not isinstance(command.cls, type) or command.cls is TyperCommand:
            command.cls = WordsCommand
    for group in app.registered_groups:
        if group.typer_instance is not None:
            use_words(group.typer_instance)
