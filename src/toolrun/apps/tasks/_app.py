"""The task assistant as an `App`: its tools on the service's database, its instructions, its panel, its
`/api/v1/tasks` router and its own migrations. Built only on the public contract (`toolrun.server.App`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolrun.apps.tasks._demo import create_demo_model
from toolrun.apps.tasks._github import GitHubClient
from toolrun.apps.tasks._routes import router
from toolrun.apps.tasks._store import TaskStore
from toolrun.apps.tasks._tools import task_tools
from toolrun.server import App, AppResources, Panel

__all__ = ["INSTRUCTIONS", "app", "tools"]

INSTRUCTIONS = (
    "You are a task assistant. You manage the user's tasks with the tools you have: create, update, "
    "query and delete tasks, and manage their attachments. Find a task's id with query_tasks before "
    "changing it. Deleting needs the user's confirmation: the tool asks for it, so do not ask twice. "
    "Answer briefly. Today is {today}."
)
"""The system prompt of real models (`{today}`: today's date, at each request)."""


def tools(resources: AppResources) -> list[Any]:
    """The task tools on the service's database, with a GitHub client from its settings (closed at stop)."""
    settings = resources.settings
    token = settings.github_token.get_secret_value() if settings.github_token else None
    github = GitHubClient(settings.github_api, token=token)
    resources.closers.append(github.aclose)
    return task_tools(TaskStore(resources.engine), github)


app = App(
    name="tasks",
    title="Tasks",
    description="A task assistant: it creates, finds, updates and deletes your tasks and their links.",
    instructions=INSTRUCTIONS,
    tools=tools,
    starters=("add buy milk !high due tomorrow #home", "list tasks", "help"),
    panel=Panel(title="Your tasks", tool="query_tasks"),
    routers=(router,),
    migrations=Path(__file__).parent / "migrations",
    demo_model=create_demo_model,
)
"""The task assistant: `toolrun serve` serves it when no app is named."""
