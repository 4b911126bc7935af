"""The task tools: names, parameters and result shapes are a contract (the demo model and pages rely on them).

Each tool reads the user from its `ToolContext` and touches only that user's rows: another user's task or
attachment id answers `NOT_FOUND`, word for word like an id that does not exist.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolrun.apps.tasks._github import GitHubClient, parse_github_url
from toolrun.apps.tasks._store import PRIORITIES, STATUSES, TaskQuery, TaskStore, iso, utcnow
from toolrun.results import ToolError
from toolrun.tools import Tool, ToolContext, tool

__all__ = ["TaskFilters", "parse_eta", "task_tools"]

MAX_TITLE = 255
MAX_DESCRIPTION = 10_000
MAX_TAGS = 20
MAX_TAG = 64


class TaskFilters(BaseModel):
    """Filters of `query_tasks`; every one is optional and they combine with AND."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["pending", "in_progress", "done"] | None = Field(
        default=None, description="Only tasks with this status."
    )
    priority: Literal["low", "medium", "high", "critical"] | None = Field(
        default=None, description="Only tasks with this priority."
    )
    due_before: str | None = Field(default=None, description="Only tasks due before this ISO 8601 date/time.")
    due_after: str | None = Field(default=None, description="Only tasks due after this ISO 8601 date/time.")
    tags: list[Annotated[str, Field(max_length=MAX_TAG)]] = Field(
        default_factory=list, max_length=MAX_TAGS, description="Only tasks carrying every one of these tags."
    )
    text: str | None = Field(
        default=None, max_length=500, description="Words to find in the title or description (full-text)."
    )


def parse_eta(value: str, *, field: str = "eta") -> str:
    """An ISO 8601 date or date-time as fixed-width UTC text; `ToolError(INVALID_ETA)` otherwise."""
    text = value.strip()
    try:
        if len(text) == 10:
            parsed = datetime.combine(date.fromisoformat(text), datetime.min.time(), tzinfo=UTC)
        else:
            parsed = datetime.fromisoformat(text.replace("z", "Z"))
        return iso(parsed)
    except (ValueError, OverflowError):  # not a date; or one whose UTC time is outside years 1-9999
        raise ToolError(
            "INVALID_ETA",
            f"{field} {value[:40]!r} is not an ISO 8601 date or date-time.",
            recover_action="Use a date like 2026-12-01 or a date-time like 2026-12-01T17:00:00Z.",
            details={"field": field},
        ) from None


def _user(ctx: ToolContext[Any]) -> str:
    if not ctx.user_id:
        raise ToolError(
            "PERMISSION_DENIED",
            "Tasks belong to a signed-in user, and this call has none.",
            recover_action="Tell the user to sign in.",
        )
    return ctx.user_id


def _task_not_found(task_id: str) -> ToolError:
    return ToolError(
        "NOT_FOUND",
        f"There is no task {task_id[:60]!r}.",
        recover_action="Use query_tasks to find the task's id.",
    )


def _attachment_not_found(attachment_id: str) -> ToolError:
    return ToolError(
        "NOT_FOUND",
        f"There is no attachment {attachment_id[:60]!r}.",
        recover_action="Use list_attachments with the task's id to find the attachment's id.",
    )


def _title(title: str) -> str:
    clean = title.strip()
    if not clean or len(clean) > MAX_TITLE:
        raise ToolError(
            "INVALID_TITLE",
            "The title must be 1 to 255 characters (after trimming spaces).",
            recover_action="Ask the user for a short title, or shorten it and put the rest in description.",
        )
    return clean


def _priority(priority: str) -> str:
    value = priority.strip().lower()
    if value not in PRIORITIES:
        raise ToolError(
            "INVALID_PRIORITY",
            f"Priority {priority[:40]!r} is not one of low, medium, high, critical.",
            recover_action="Use low, medium, high or critical.",
        )
    return value


def _status(status: str) -> str:
    value = status.strip().lower()
    if value not in STATUSES:
        raise ToolError(
            "INVALID_STATUS",
            f"Status {status[:40]!r} is not one of pending, in_progress, done.",
            recover_action="Use pending, in_progress or done.",
        )
    return value


def _tags(tags: list[str]) -> list[str]:
    clean = [t.strip().lstrip("#").lower() for t in tags if t.strip().lstrip("#")]
    if len(clean) > MAX_TAGS or any(len(t) > MAX_TAG for t in clean):
        raise ToolError(
            "INVALID_TAGS",
            f"At most {MAX_TAGS} tags of at most {MAX_TAG} characters each.",
            recover_action="Use fewer, shorter tags.",
        )
    return list(dict.fromkeys(clean))


def _description(description: str | None) -> str | None:
    if description is None:
        return None
    if len(description) > MAX_DESCRIPTION:
        raise ToolError(
            "INVALID_DESCRIPTION",
            f"The description is longer than {MAX_DESCRIPTION} characters.",
            recover_action="Shorten the description.",
        )
    return description


def task_tools(store: TaskStore, github: GitHubClient | None = None) -> list[Tool]:
    """The task tool set over `store`: create, update, delete and query tasks; manage attachments.

    Args:
        store: Where tasks live (scoped per user by every call).
        github: Client for `refresh_attachment` (default: the public GitHub API, no token).
    """
    gh = github if github is not None else GitHubClient()

    @tool(idempotent=False, timeout=30.0)
    async def create_task(
        title: str,
        ctx: ToolContext,
        description: str | None = None,
        priority: str = "medium",
        eta: str | None = None,
        tags: list[str] | None = None,
    ) -> dict[str, Any]:
        """Create a task for the user.

        Use when the user asks to add, create or remember something to do.

        Returns the new task: id, title, description, status ("pending"), priority, eta, tags, created_at,
        updated_at. Errors: INVALID_TITLE (empty or longer than 255), INVALID_PRIORITY, INVALID_ETA.

        Args:
            title: A short title, 1-255 characters, e.g. "Renew passport".
            description: Longer notes, if the user gave any.
            priority: One of "low", "medium", "high", "critical".
            eta: When it is due, ISO 8601: "2026-12-01" or "2026-12-01T17:00:00Z".
            tags: Labels such as ["home", "urgent"].
        """
        user = _user(ctx)
        task = await store.create(
            user,
            title=_title(title),
            description=_description(description),
            priority=_priority(priority),
            eta=None if eta is None else parse_eta(eta),
            tags=_tags(tags or []),
        )
        return task.to_dict()

    # Overwriting what a person wrote (title, notes, priority, due date, tags) needs their confirmation, a
    # status change does not: two tools, so the gate is decided by the tool and visible in every export
    # (MCP destructiveHint, the tools API) instead of by the arguments of one call.
    @tool(idempotent=True, timeout=30.0)
    async def set_task_status(task_id: str, status: str, ctx: ToolContext) -> dict[str, Any]:
        """Move one of the user's tasks to another status: start it, mark it done, or reopen it.

        Use when the user says they started, finished or reopened a task. Calling it twice is harmless.

        Returns the updated task. Errors: NOT_FOUND, INVALID_STATUS.

        Args:
            task_id: The task's id, e.g. "task_3f9a1c2b7d4e".
            status: One of "pending", "in_progress", "done".
        """
        task = await store.update(_user(ctx), task_id, {"status": _status(status)})
        if task is None:
            raise _task_not_found(task_id)
        return task.to_dict()

    @tool(destructive=True, idempotent=True, timeout=30.0)
    async def update_task(
        task_id: str,
        ctx: ToolContext,
        title: str | None = None,
        description: str | None = None,
        priority: str | None = None,
        eta: str | None = None,
        tags: list[str] | None = None,
    ) -> dict[str, Any]:
        """Overwrite fields of one of the user's tasks; only the fields given change.

        Use to rename, re-describe, re-prioritise, reschedule or re-tag a task. The old values are lost, so
        the user confirms before it runs. To start or finish a task use set_task_status instead.

        Returns the updated task. Errors: NOT_FOUND, INVALID_TITLE, INVALID_PRIORITY, INVALID_ETA.

        Args:
            task_id: The task's id, e.g. "task_3f9a1c2b7d4e".
            title: A new title (1-255 characters).
            description: New notes.
            priority: One of "low", "medium", "high", "critical".
            eta: A new due date, ISO 8601.
            tags: The new full list of tags (replaces the old one).
        """
        user = _user(ctx)
        changes: dict[str, Any] = {}
        if title is not None:
            changes["title"] = _title(title)
        if description is not None:
            changes["description"] = _description(description)
        if priority is not None:
            changes["priority"] = _priority(priority)
        if eta is not None:
            changes["eta"] = parse_eta(eta)
        if tags is not None:
            changes["tags"] = _tags(tags)
        task = await store.update(user, task_id, changes)
        if task is None:
            raise _task_not_found(task_id)
        return task.to_dict()

    @tool(destructive=True, timeout=30.0)
    async def delete_task(task_id: str, ctx: ToolContext) -> dict[str, Any]:
        """Delete one of the user's tasks and its attachments, permanently.

        Use only when the user explicitly asks to delete or remove a task; the user confirms before it runs.

        Returns {"deleted": task_id, "title": ...}. Errors: NOT_FOUND.

        Args:
            task_id: The task's id, e.g. "task_3f9a1c2b7d4e".
        """
        user = _user(ctx)
        task = await store.delete(user, task_id)
        if task is None:
            raise _task_not_found(task_id)
        return {"deleted": task.id, "title": task.title}

    @tool(read_only=True, timeout=30.0)
    async def query_tasks(
        ctx: ToolContext,
        filters: TaskFilters | None = None,
        limit: Annotated[int, Field(ge=1, le=200)] = 50,
        sort: Literal["eta_asc", "priority_desc", "created_desc"] = "eta_asc",
        format: Literal["concise", "standard", "detailed"] = "standard",
    ) -> dict[str, Any]:
        """List or search the user's tasks (the one read tool for tasks).

        Use for any question about existing tasks: what is due, what is open, finding a task by words,
        finding a task's id before changing it.

        Returns {"tasks": [...], "total": how many match in all, "applied_filters": {...}}.

        Args:
            filters: status, priority, due_before, due_after, tags (all must match), text (full-text words).
            limit: How many tasks to return, 1-200.
            sort: "eta_asc" (soonest due first, undated last), "priority_desc" or "created_desc".
            format: "concise" (id and status), "standard", or "detailed" (all fields and attachments).
        """
        user = _user(ctx)
        f = filters if filters is not None else TaskFilters()
        query = TaskQuery(
            status=f.status,
            priority=f.priority,
            due_before=None if f.due_before is None else parse_eta(f.due_before, field="due_before"),
            due_after=None if f.due_after is None else parse_eta(f.due_after, field="due_after"),
            tags=_tags(f.tags),
            text=f.text or None,
            limit=limit,
            sort=sort,
        )
        tasks, total = await store.query(user, query, attachments=format == "detailed")
        applied = {k: v for k, v in f.model_dump().items() if v not in (None, [])}
        return {"tasks": [t.to_dict(format) for t in tasks], "total": total, "applied_filters": applied}

    @tool(read_only=True, timeout=30.0)
    async def list_attachments(task_id: str, ctx: ToolContext) -> dict[str, Any]:
        """List the URLs attached to one of the user's tasks.

        Use to see the links, pull requests or issues of a task.

        Returns {"task_id", "attachments": [...]}. Errors: NOT_FOUND.

        Args:
            task_id: The task's id.
        """
        user = _user(ctx)
        if await store.get(user, task_id) is None:
            raise _task_not_found(task_id)
        found = await store.list_attachments(user, task_id)
        return {"task_id": task_id, "attachments": [a.to_dict() for a in found]}

    @tool(timeout=30.0)
    async def add_attachment(
        task_id: str, url: str, ctx: ToolContext, title: str | None = None
    ) -> dict[str, Any]:
        """Attach a URL to one of the user's tasks.

        GitHub pull request and issue URLs can later be refreshed with refresh_attachment to show their
        title and state.

        Returns the attachment. Errors: NOT_FOUND, INVALID_URL.

        Args:
            task_id: The task's id.
            url: An http(s) URL, e.g. "https://github.com/owner/repo/pull/12".
            title: A label for the link.
        """
        user = _user(ctx)
        clean = url.strip()
        if not clean.lower().startswith(("http://", "https://")) or len(clean) > 2000 or " " in clean:
            raise ToolError(
                "INVALID_URL",
                "The URL must start with http:// or https:// and hold no spaces.",
                recover_action="Ask the user for the full link.",
            )
        ref = parse_github_url(clean)
        kind = "link" if ref is None else f"github_{ref.kind}"
        att = await store.add_attachment(user, task_id, url=clean, title=title, kind=kind)
        if att is None:
            raise _task_not_found(task_id)
        return att.to_dict()

    @tool(destructive=True, timeout=30.0)
    async def delete_attachment(attachment_id: str, ctx: ToolContext) -> dict[str, Any]:
        """Remove an attachment from a task, permanently.

        Use only when the user asks; the user confirms before it runs.

        Returns {"deleted": attachment_id}. Errors: NOT_FOUND.

        Args:
            attachment_id: The attachment's id, e.g. "att_8c1d2e3f4a5b".
        """
        user = _user(ctx)
        att = await store.delete_attachment(user, attachment_id)
        if att is None:
            raise _attachment_not_found(attachment_id)
        return {"deleted": att.id, "task_id": att.task_id}

    @tool(idempotent=True, open_world=True, timeout=15.0)
    async def refresh_attachment(attachment_id: str, ctx: ToolContext) -> dict[str, Any]:
        """Fetch the title, state (open, closed, merged) and last update of a GitHub PR or issue attachment.

        Use when the user asks about the status of a linked pull request or issue.

        Returns the updated attachment. Errors: NOT_FOUND, NOT_GITHUB, RATE_LIMITED (retryable; see
        details.retry_after), FORBIDDEN, UPSTREAM_UNAVAILABLE (retryable).

        Args:
            attachment_id: The attachment's id.
        """
        user = _user(ctx)
        att = await store.get_attachment(user, attachment_id)
        if att is None:
            raise _attachment_not_found(attachment_id)
        ref = parse_github_url(att.url)
        if ref is None:
            raise ToolError(
                "NOT_GITHUB",
                "Only GitHub pull request and issue URLs can be refreshed.",
                recover_action="Tell the user this link has no status to refresh.",
            )
        info = await gh.fetch(ref)
        updated = await store.update_attachment(
            user,
            attachment_id,
            {
                "title": info["title"] or att.title,
                "state": info["state"],
                "remote_updated_at": info["updated_at"],
                "refreshed_at": utcnow(),
            },
        )
        if updated is None:  # deleted meanwhile
            raise _attachment_not_found(attachment_id)
        return updated.to_dict()

    tools = [
        create_task,
        set_task_status,
        update_task,
        delete_task,
        query_tasks,
        list_attachments,
        add_attachment,
        delete_attachment,
        refresh_attachment,
    ]
    from toolrun.apps.tasks._previews import with_previews  # the previews read the store the tools use

    return with_previews(tools, store)
