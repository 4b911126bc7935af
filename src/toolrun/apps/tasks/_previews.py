"""What the person approves, written from the task store: previews for the task tools that change or
remove data ("Delete the task 'Renew passport' (due 1 Dec 2026, 2 attachments)").

Each preview reads only the calling user's rows (like the tools), before the confirmation is issued; the
text is stored with it. A task or attachment that does not exist (or is someone else's) is said to be
missing: the person then knows the call would fail, not which ids exist.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from toolrun.apps.tasks._store import Task, TaskStore
from toolrun.tools import Tool, ToolContext

__all__ = ["describe_date", "task_previews", "with_previews"]

_MAX_SHOWN = 80


def describe_date(value: str | None) -> str:
    """`2026-12-01T00:00:00Z` → `1 Dec 2026`; a time other than midnight is kept (`1 Dec 2026 17:30 UTC`)."""
    if not value:
        return "no due date"
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value
    day = f"{moment.day} {moment:%b} {moment.year}"
    if (moment.hour, moment.minute) != (0, 0):
        day += f" {moment:%H:%M} UTC"
    return day


def _quoted(text: str | None) -> str:
    text = (text or "").replace("\n", " ")
    return "'" + (text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 1] + "…") + "'"


def _user(ctx: ToolContext[Any]) -> str:
    if not ctx.user_id:
        raise LookupError("a task preview needs the user's id")
    return ctx.user_id


def _about(task: Task) -> str:
    parts = [f"due {describe_date(task.eta)}" if task.eta else "no due date"]
    count = len(task.attachments or ())
    if count:
        parts.append(f"{count} attachment{'s' if count != 1 else ''}")
    if task.status == "done":
        parts.append("done")
    return ", ".join(parts)


def task_previews(store: TaskStore) -> dict[str, Callable[[Mapping[str, Any], ToolContext[Any]], Any]]:
    """`{tool name: preview}` for `delete_task`, `update_task` and `delete_attachment` over `store`."""

    async def delete_task(args: Mapping[str, Any], ctx: ToolContext[Any]) -> str:
        task = await store.get(_user(ctx), str(args["task_id"]), attachments=True)
        if task is None:
            return f"Delete a task that does not exist ({args['task_id']}): nothing would be deleted."
        return f"Delete the task {_quoted(task.title)} ({_about(task)}), permanently."

    async def update_task(args: Mapping[str, Any], ctx: ToolContext[Any]) -> str:
        task = await store.get(_user(ctx), str(args["task_id"]))
        if task is None:
            return f"Change a task that does not exist ({args['task_id']}): nothing would change."
        changes: list[str] = []
        if args.get("title") is not None:
            changes.append(f"title {_quoted(task.title)} → {_quoted(args['title'])}")
        if args.get("status") is not None:
            changes.append(f"status {task.status} → {args['status']}")
        if args.get("priority") is not None:
            changes.append(f"priority {task.priority} → {args['priority']}")
        if args.get("eta") is not None:
            changes.append(f"due {describe_date(task.eta)} → {describe_date(str(args['eta']))}")
        if args.get("tags") is not None:
            changes.append(f"tags {list(task.tags)} → {list(args['tags'])} (replaced)")
        if args.get("description") is not None:
            old = "none" if not task.description else f"{len(task.description)} characters"
            changes.append(f"description replaced ({old} → {len(str(args['description']))} characters)")
        what = "; ".join(changes) if changes else "nothing would change"
        return f"Change the task {_quoted(task.title)} ({_about(task)}): {what}."

    async def delete_attachment(args: Mapping[str, Any], ctx: ToolContext[Any]) -> str:
        user = _user(ctx)
        att = await store.get_attachment(user, str(args["attachment_id"]))
        if att is None:
            missing = args["attachment_id"]
            return f"Remove an attachment that does not exist ({missing}): nothing would be removed."
        task = await store.get(user, att.task_id)
        title = f" from the task {_quoted(task.title)}" if task is not None else ""
        name = _quoted(att.title) + f" ({att.url})" if att.title else att.url
        return f"Remove the attachment {name}{title}, permanently."

    return {"delete_task": delete_task, "update_task": update_task, "delete_attachment": delete_attachment}


def with_previews(tools: Sequence[Tool], store: TaskStore) -> list[Tool]:
    """`tools`, those named in `task_previews` given their preview (used whenever a call is held)."""
    previews = task_previews(store)
    for one in tools:
        preview = previews.get(one.name)
        if preview is not None and one.options.preview is None:
            one.options = dataclasses.replace(one.options, preview=preview)
    return list(tools)
