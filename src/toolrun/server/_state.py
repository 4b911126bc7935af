"""`ServerState`: what one app holds, as `app.state.toolrun` (reach it through `toolrun.server.deps`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from toolrun.agent import Agent
from toolrun.registry import ToolRegistry
from toolrun.runtime import ToolExecutor
from toolrun.server._apps import App, AppResources
from toolrun.server._audit_sink import SQLAuditSink
from toolrun.server._observe import Observer
from toolrun.server._service import ChatService
from toolrun.server._settings import Settings
from toolrun.server._users import UserStore

__all__ = ["ServerState"]


@dataclass(kw_only=True)
class ServerState:
    """What one app holds (as `app.state.toolrun`): the parts routes and adapters reach through `deps`."""

    settings: Settings
    engine: AsyncEngine
    users: UserStore
    app: App
    """The App served: its tools are `registry`, its face is `GET /api/v1/app`."""
    resources: AppResources
    """What the App's tools factory was given (the engine, the settings, clean-ups)."""
    registry: ToolRegistry
    executor: ToolExecutor
    agent: Agent
    chat: ChatService
    observer: Observer
    audit: SQLAuditSink
    model_name: str
    demo: bool
    closers: list[Any]
