"""`GET /api/v1/tasks`: the user's tasks, filtered like the `query_tasks` tool (the task app's router, which
the service mounts under `/api/v1`)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, BeforeValidator

from toolrun.apps.tasks._store import TaskQuery, TaskStore, iso
from toolrun.apps.tasks._tools import parse_eta
from toolrun.results import ToolError
from toolrun.server.deps import CurrentUser, State

__all__ = ["TaskList", "router"]

router = APIRouter(tags=["tasks"])


class TaskView(BaseModel):
    id: str
    status: str
    title: str | None = None
    description: str | None = None
    priority: str | None = None
    eta: str | None = None
    tags: list[str] | None = None
    created_at: str | None = None
    updated_at: str | None = None
    attachments: list[dict[str, Any]] | None = None


class TaskList(BaseModel):
    tasks: list[TaskView]
    total: int
    applied_filters: dict[str, Any]


def _iso_8601(value: object) -> object:
    """An ISO 8601 date or date-time only, read as the `query_tasks` tool reads it (`parse_eta`): Pydantic
    alone would also read `0.5` or `1700000000` as a Unix time, in a filter far likelier a mistake."""
    if not isinstance(value, str):
        return value
    try:
        return parse_eta(value, field="date")
    except ToolError:
        raise ValueError("not an ISO 8601 date or date-time (2026-12-01, 2026-12-01T17:00:00Z)") from None


IsoDate = Annotated[datetime | date | None, BeforeValidator(_iso_8601)]
"""A date filter (FastAPI keeps the validator only when `Query` is in the `Annotated` too, not a default)."""


def _date(value: datetime | date | None) -> str | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        value = datetime.combine(value, datetime.min.time(), tzinfo=UTC)
    return iso(value)


@router.get("/tasks", response_model=TaskList)
async def list_tasks(
    user: CurrentUser,
    state: State,
    status: Literal["pending", "in_progress", "done"] | None = None,
    priority: Literal["low", "medium", "high", "critical"] | None = None,
    due_before: Annotated[IsoDate, Query(description="ISO 8601 date or date-time.")] = None,
    due_after: Annotated[IsoDate, Query(description="ISO 8601 date or date-time.")] = None,
    tags: list[str] = Query(default=[], max_length=20),
    text: str | None = Query(default=None, max_length=500),
    limit: int = Query(default=50, ge=1, le=200),
    sort: Literal["eta_asc", "priority_desc", "created_desc"] = "eta_asc",
    format: Literal["concise", "standard", "detailed"] = "standard",
) -> Any:
    """The user's tasks. Same filters, limit, sort and formats as the `query_tasks` tool."""
    query = TaskQuery(
        status=status,
        priority=priority,
        due_before=_date(due_before),
        due_after=_date(due_after),
        tags=[t.strip().lstrip("#").lower() for t in tags if t.strip()],
        text=text or None,
        limit=limit,
        sort=sort,
    )
    found, total = await TaskStore(state.engine).query(user.user_id, query, attachments=format == "detailed")
    applied = {
        k: v
        for k, v in {
            "status": status,
            "priority": priority,
            "due_before": _date(due_before),
            "due_after": _date(due_after),
            "tags": tags,
            "text": text,
        }.items()
        if v not in (None, [])
    }
    return {"tasks": [t.to_dict(format) for t in found], "total": total, "applied_filters": applied}
