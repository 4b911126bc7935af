"""`toolrun approvals ...`: a user's standing approvals (see docs/approvals.md), on the service's database.

The same store the service uses (`SQLApprovalRuleStore`); for an operator at the server, like `toolrun
users`. A person manages their own rules on the page or with `/api/v1/approval-rules`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.console import Console

from toolrun._cli_shared import AppOption, load_app_option
from toolrun._cli_shared import fail as _fail

__all__ = ["app"]

app = typer.Typer(help="Standing approvals: always allow (or deny) a tool for a user.", no_args_is_help=True)
out = Console()

DatabaseUrl = Annotated[str | None, typer.Option(help="Overrides TOOLRUN_DATABASE_URL.")]


def _registry() -> Any:
    """The tools of the App served (`--app` / `TOOLRUN_APP`, default the task assistant), for checking a new
    rule (definitions only: nothing connects to the engine)."""
    from toolrun._cli_tools import TargetError, app_registry

    try:
        return app_registry(connect=False)
    except TargetError as exc:
        raise _fail(str(exc)) from None


async def _with_rules(database_url: str | None, user: str, fn: Callable[[Any, Any], Awaitable[Any]]) -> Any:
    from sqlalchemy.exc import OperationalError, ProgrammingError

    from toolrun._cli_shared import check_database_url
    from toolrun.server import Settings
    from toolrun.server._db import create_engine
    from toolrun.server._users import UserStore
    from toolrun.store.sql import SQLApprovalRuleStore

    overrides: dict[str, Any] = {"database_url": database_url} if database_url else {}
    settings = Settings(**overrides)
    check_database_url(settings.database_url)
    engine = create_engine(settings.database_url)
    try:
        principal = await UserStore(engine, cache_seconds=0).get_by_name(user)
        if principal is None:
            raise _fail(f"No user named {user!r} (see `toolrun users list`).")
        return await fn(SQLApprovalRuleStore(engine), principal)
    except (OperationalError, ProgrammingError) as exc:
        raise _fail(
            f"The database is not ready ({type(exc.orig).__name__}): run `toolrun db upgrade` first."
        ) from None
    finally:
        await engine.dispose()


def _when(seconds: float | None) -> str:
    return "never" if seconds is None else datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M UTC")


@app.command("list")
def list_rules(
    user: Annotated[str, typer.Argument(help="The user's name.")], database_url: DatabaseUrl = None
) -> None:
    """A user's standing approvals (expired ones marked)."""
    rules = asyncio.run(_with_rules(database_url, user, lambda store, user: store.list_rules(user.user_id)))
    now = time.time()
    if not rules:
        out.print(f"{user} has no standing approvals: every call that needs confirmation is asked.")
    for r in rules:  # one line per rule: ids stay whole at any terminal width
        expires = _when(r.expires_at) + (" (expired)" if r.expired(now) else "")
        arguments = json.dumps(dict(r.arguments)) if r.arguments else "any arguments"
        note = f"  ({r.note})" if r.note else ""
        out.print(f"{r.id}  {r.decision} {r.tool}  {arguments}  until {expires}{note}", soft_wrap=True)


@app.command("add")
def add_rule(
    user: Annotated[str, typer.Argument(help="The user's name.")],
    tool: Annotated[str, typer.Argument(help="The tool's registered name, e.g. delete_task.")],
    days: Annotated[float, typer.Option(help="Days until the rule expires (at most 366).")] = 30.0,
    deny: Annotated[bool, typer.Option("--deny", help="Always refuse instead of always allow.")] = False,
    arguments: Annotated[
        str | None,
        typer.Option(help='Only calls with these argument values, as JSON: \'{"task_id": "t1"}\'.'),
    ] = None,
    note: Annotated[str | None, typer.Option(help="What the rule is for.")] = None,
    database_url: DatabaseUrl = None,
    app: AppOption = None,
) -> None:
    """Always allow (or, with --deny, always refuse) a tool's calls for a user until the rule expires."""
    from toolrun.store import ApprovalRule

    load_app_option(app)

    if not 0 < days <= 366:
        raise _fail("--days must be more than 0 and at most 366.")
    constraints = None
    if arguments is not None:
        try:
            constraints = json.loads(arguments)
        except ValueError:
            constraints = None
        if not isinstance(constraints, dict):
            raise _fail("--arguments must be a JSON object of argument names and values.")

    async def add(store: Any, principal: Any) -> Any:
        from toolrun.server._rules import RuleRefused, check_rule

        try:  # the rule the HTTP API applies: a tool the user can call, that asks, with its own arguments
            found = check_rule(_registry(), tool, principal.roles, constraints)
        except RuleRefused as refused:
            raise _fail(refused.message, 2) from None
        return await store.add(
            ApprovalRule(
                user_id=principal.user_id,
                tool=found.name,
                decision="deny" if deny else "allow",
                arguments=constraints,
                expires_at=time.time() + days * 86400,
                note=note,
            )
        )

    try:
        rule = asyncio.run(_with_rules(database_url, user, add))
    except ValueError as exc:
        raise _fail(str(exc)) from None
    out.print(f"{rule.id}: {rule.decision} {rule.tool} for {user} until {_when(rule.expires_at)}")


@app.command("revoke")
def revoke_rule(
    user: Annotated[str, typer.Argument(help="The user's name.")],
    rule_id: Annotated[str, typer.Argument(help="The rule's id (from `toolrun approvals list`).")],
    database_url: DatabaseUrl = None,
) -> None:
    """Revoke one of a user's standing approvals."""
    removed = asyncio.run(
        _with_rules(database_url, user, lambda store, user: store.remove(rule_id, user_id=user.user_id))
    )
    if not removed:
        raise _fail(f"{user} has no rule {rule_id!r}.")
    out.print(f"revoked {rule_id}")
