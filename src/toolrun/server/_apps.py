"""`App` and `Panel`: an assistant of your own, as the service serves it (`create_app(settings, app=app)`).

```python
from toolrun.server import App, Panel

app = App(
    name="notes",
    title="Notes",
    instructions="You keep the user's notes. Today is {today}.",
    tools=[add_note, list_notes, delete_note],
    starters=["Add a note: buy milk", "What are my notes?"],
    panel=Panel(title="Your notes", tool="list_notes"),
)
```

The service knows apps only through this module: the task assistant (`toolrun.apps.tasks:app`) is one App
among any number, loaded by its name (`DEFAULT_APP`) when none is given, never imported by `toolrun.server`.
`load_app("module:attribute")` is what `toolrun serve notes_app:app` and every `--app` option call.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from fastapi import APIRouter

from toolrun.exceptions import ToolrunError
from toolrun.models import Model
from toolrun.prompts import RenderedPrompt
from toolrun.registry import ToolRegistry, ToolSet
from toolrun.tools import Tool, ToolContext

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from toolrun.server._settings import Settings

__all__ = ["DEFAULT_APP", "App", "AppError", "AppResources", "Panel", "load_app"]

DEFAULT_APP = "toolrun.apps.tasks:app"
"""The app served when none is named (`--app`, `TOOLRUN_APP`, `create_app(app=...)`): the task assistant."""

_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?")


class AppError(ToolrunError):
    """An App that cannot be served: a bad name, a panel tool that is missing or not read-only, tools that
    are not tools, or a `module:attribute` that names no App. The message says what to write instead."""


@runtime_checkable
class AsyncToolset(Protocol):
    """Tools that must be fetched before they can be served (an `MCPToolset`): the service registers them
    into the app's registry when it starts and closes them when it stops."""

    async def register(self, registry: ToolRegistry) -> Any: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, kw_only=True)
class Panel:
    """A read-only tool whose result the page shows beside the chat (`GET /api/v1/app/panel`)."""

    title: str
    """The panel's heading."""
    tool: str
    """The tool run (with no arguments, for the signed-in user) to fill the panel; must be read-only."""


@dataclass(frozen=True, kw_only=True)
class AppResources:
    """What a tools factory is given once, at start: the service's database and settings (so that an
    app's tools can keep their own rows in the service's database) and a place to register clean-ups."""

    engine: AsyncEngine
    """The service's SQLAlchemy engine (the app's tables come from its own migrations)."""
    settings: Settings
    """The service's settings."""
    closers: list[Callable[[], Awaitable[Any]]] = field(default_factory=list)
    """Awaited when the service stops (`resources.closers.append(client.aclose)`)."""


Instructions = str | Callable[[ToolContext[Any] | None], str] | Any
"""A string (`{today}` is replaced by today's date at each request), a callable of the request's context,
or prompt sections (a `toolrun.prompts.Prompt`, whose tools join the app's)."""

ToolsSpec = Sequence[Any] | ToolSet | AsyncToolset | Callable[[AppResources], Any]
"""Tools, a `ToolRegistry` (or view), toolsets (`MCPToolset`), a list mixing them, or a factory of those."""


@dataclass(kw_only=True)
class App:
    """An assistant the service serves: its tools and instructions, and the page's face.

    Every door of the service (the page, the chat API, AG-UI, the AI SDK stream, `/api/v1/tools`, `/mcp`,
    jobs, approvals, rules, results) serves this app's tools and only them, through one executor.
    """

    name: str
    """`[a-z0-9-]+`, stable: it names the app's migration history in the database."""
    title: str
    """The page's title and the MCP server's name."""
    instructions: Instructions = None
    """The system prompt: a string (`{today}` is today's date), `callable(ctx) -> str`, or prompt sections."""
    tools: ToolsSpec = ()
    """Tools, a `ToolRegistry`, toolsets (`MCPToolset`), or a factory called once at start with
    `AppResources` (the service's engine and settings) that returns any of these."""
    starters: Sequence[str] = ()
    """The empty state's suggestions."""
    panel: Panel | None = None
    """Optional: a read-only tool shown beside the chat."""
    routers: Sequence[APIRouter] = ()
    """Optional FastAPI routers of the app, mounted under `/api/v1/` (their paths are relative to it)."""
    migrations: str | Path | None = None
    """Optional: the app's own Alembic version folder, applied after the service's (own version table)."""
    demo_model: Model | Callable[[], Model] | None = None
    """Optional: the offline model used when `TOOLRUN_MODEL` is unset (`demo`); or a factory of one."""
    description: str = ""
    """Optional: a short description of what the assistant does (the page's intro)."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise AppError(
                f"App name {self.name!r} is not [a-z0-9-]+ (at most 64 characters, no leading or trailing "
                "'-'); e.g. App(name='notes', ...)."
            )
        if not isinstance(self.title, str) or not self.title.strip():
            raise AppError(f"App {self.name!r} needs a title (the page's heading), e.g. title='Notes'.")
        if isinstance(self.starters, str):
            raise AppError(f"App {self.name!r}: starters is a list of strings, not one string.")
        self.starters = tuple(self.starters)
        if not all(isinstance(s, str) for s in self.starters):
            raise AppError(f"App {self.name!r}: every starter must be a string.")
        self.routers = tuple(self.routers)
        if not all(isinstance(r, APIRouter) for r in self.routers):
            raise AppError(f"App {self.name!r}: routers are FastAPI `APIRouter`s.")
        if self.panel is not None and not isinstance(self.panel, Panel):
            raise AppError(f"App {self.name!r}: panel is a Panel(title=..., tool=...).")
        if self.migrations is not None and not Path(self.migrations).is_dir():
            raise AppError(f"App {self.name!r}: migrations {str(self.migrations)!r} is not a folder.")

    @property
    def intro(self) -> str:
        """What the page says this assistant does."""
        return self.description


# -- building what the service serves ------------------------------------------------------------------------


def resolve_tools(app: App, resources: AppResources) -> tuple[list[Tool], list[AsyncToolset]]:
    """The app's tools now, and the toolsets whose tools are fetched at start."""
    spec: Any = app.tools
    if callable(spec) and not isinstance(spec, Tool | ToolSet | AsyncToolset):
        spec = spec(resources)
        if inspect.isawaitable(spec):
            raise AppError(f"App {app.name!r}: the tools factory must be a plain function, not async.")
    tools: list[Tool] = []
    later: list[AsyncToolset] = []
    items: Iterable[Any] = [spec] if isinstance(spec, Tool | ToolSet | AsyncToolset) else spec
    try:
        items = list(items)
    except TypeError:
        raise AppError(
            f"App {app.name!r}: tools is a {type(spec).__name__}; give tools, a ToolRegistry, toolsets or a "
            "factory of those."
        ) from None
    for item in items:
        if isinstance(item, Tool):
            tools.append(item)
        elif isinstance(item, ToolSet):
            tools.extend(item.tools())
        elif isinstance(item, AsyncToolset):
            later.append(item)
        elif callable(item):
            tools.append(Tool.from_function(item))
        else:
            raise AppError(f"App {app.name!r}: {item!r} is not a tool, a registry or a toolset.")
    return tools, later


def check_panel(app: App, registry: ToolSet) -> None:
    """Refuse a panel whose tool is missing or could change something (the page runs it unasked)."""
    if app.panel is None:
        return
    tool = registry.find(app.panel.tool)
    if tool is None:
        raise AppError(
            f"App {app.name!r}: the panel's tool {app.panel.tool!r} is not one of the app's tools "
            f"({', '.join(registry.names()) or 'none'})."
        )
    if not tool.options.read_only:
        raise AppError(
            f"App {app.name!r}: the panel's tool {tool.name!r} must be read-only "
            "(@tool(read_only=True)): the page runs it without asking."
        )


@dataclass(frozen=True)
class AppPrompt:
    """The app's instructions as the agent's `PromptSource`: rendered for every model request, so that a
    server running past midnight says the right date and a callable sees the request's user."""

    source: Callable[[ToolContext[Any] | None], str]

    @property
    def tools(self) -> list[Tool]:
        return []

    def render(self, context: ToolContext[Any] | None = None) -> RenderedPrompt:
        return RenderedPrompt(instructions=self.source(context) if context is not None else "")


def app_prompt(instructions: Any, override: str | None) -> Any:
    """The agent's `prompt` for the app's instructions (`override`: `TOOLRUN_INSTRUCTIONS`), or None."""
    chosen = override if override else instructions
    if chosen is None:
        return None
    if isinstance(chosen, str):
        text = chosen
        return AppPrompt(lambda _ctx: text.replace("{today}", datetime.now(UTC).date().isoformat()))
    if hasattr(chosen, "render") and hasattr(chosen, "tools"):
        return chosen  # prompt sections
    if callable(chosen):
        return AppPrompt(chosen)
    raise AppError(f"instructions is a {type(chosen).__name__}: give a str, a callable(ctx) or a Prompt.")


# -- module:attribute -------------------------------------------------------------------------------------


def load_app(spec: str | App | None) -> App:
    """The App named by `module:attribute` (as uvicorn names apps), or `DEFAULT_APP` for None.

    Raises:
        AppError: one line saying what is wrong (no module, no attribute, not an App).
    """
    if isinstance(spec, App):
        return spec
    target = (spec or "").strip() or DEFAULT_APP
    module_name, colon, attribute = target.partition(":")
    if not colon or not module_name or not attribute:
        raise AppError(f"--app {target!r} is not 'module:attribute' (e.g. notes_app:app).")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise AppError(
                f"cannot import {module_name!r} for --app {target!r}: no such module here "
                "(run from the folder that holds it, or set PYTHONPATH)."
            ) from None
        raise AppError(f"importing {module_name!r} for --app {target!r} failed: {exc}.") from None
    except Exception as exc:
        raise AppError(
            f"importing {module_name!r} for --app {target!r} failed: {type(exc).__name__}: {exc}"
        ) from None
    value: Any = module
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise AppError(f"module {module_name!r} has no attribute {attribute!r} (for --app {target!r}).")
        value = getattr(value, part)
    if not isinstance(value, App):
        raise AppError(f"{target} is a {type(value).__name__}, not a toolrun.server.App.")
    return value
