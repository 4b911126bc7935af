"""`GET /api/v1/tasks`: the user's tasks, filtered like the `query_tasks` tool (for the page's task list)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any, Literal

from fastapi import APIRouter, Query

from toolrun.apps.tasks import TaskQuery
from toolrun.apps.tasks._store import iso
from toolrun.server._errors import PROBLEM_RESPONSES
from toolrun.server.deps import CurrentUser, State
from toolrun.server.schemas import TaskList

router = APIRouter(prefix="/api/v1", tags=["tasks"], responses=PROBLEM_RESPONSES)


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
    due_before: datetime | date | None = Query(default=None, description="ISO 8601 date or date-time."),
    due_after: datetime | date | None = Query(default=None, description="ISO 8601 date or date-time."),
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
    found, total = await state.tasks.query(user.user_id, query, attachments=format == "detailed")
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
