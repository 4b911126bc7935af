"""MCP tasks on 2025-11-25 connections: the protocol's experimental tasks (SEP-1686, as the 2025-11-25
revision has them: `basic/utilities/tasks`), which the 2026 extension (`_tasks`) replaced.

Clients of that revision (the TypeScript SDK 1.x among them) find `capabilities.tasks` (`list`, `cancel`,
`requests.tools.call`) and `execution.taskSupport: "optional"` on background tools, and ask for a task
with `params.task` on `tools/call`:

- the answer is a `CreateTaskResult` (`{"task": Task}`; `Task` with `ttl` and `pollInterval`);
- `tasks/get` gives the `Task`; a tool that failed is `failed` here (this revision counts a result with
  `isError` as a failure), a protocol fault too;
- `tasks/result` waits until the task is terminal and gives the `CallToolResult` (an `isError` one for a
  failed tool), with `_meta["io.modelcontextprotocol/related-task"]`; a cancelled task is `-32602`;
- `tasks/list` gives the caller's own tasks, newest first, `PAGE_SIZE` a page: `nextCursor` (opaque:
  the last task listed, MAC'd with the executor's key and bound to the caller) asks for the next page; a
  cursor this server did not issue to this caller is `-32602`; `tasks/cancel` cancels a running task and
  gives it, a task already terminal is `-32602`;
- unknown or someone else's ids are `-32602`, as on 2026 connections.

The same task stores serve both revisions. The SDK checks every 2025 `tools/call` answer as a
`CallToolResult`, so a task-augmented call is answered by toolrun's middleware (which owns its result),
not by the `tools/call` handler.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from toolrun.mcp._tasks import MCPTaskStore, task_fields, task_not_found
from toolrun.results import ToolResult

__all__ = [
    "LEGACY_VERSION",
    "PAGE_SIZE",
    "RELATED_TASK",
    "capability",
    "legacy_result",
    "legacy_task",
    "list_page",
    "wants_legacy_task",
]

LEGACY_VERSION = "2025-11-25"
"""The one revision whose core protocol has tasks."""

RELATED_TASK = "io.modelcontextprotocol/related-task"

_TERMINAL = frozenset({"completed", "failed", "cancelled"})

PAGE_SIZE = 50
"""Tasks in one `tasks/list` page."""
_CURSOR_LABEL = b"toolrun/mcp/tasks-cursor/v1\x00"
_MAX_CURSOR = 512


def capability() -> types.ServerTasksCapability:
    """`capabilities.tasks`: list, cancel, and task-augmented `tools/call`."""
    return types.ServerTasksCapability(
        list=types.TasksListCapability(),
        cancel=types.TasksCancelCapability(),
        requests=types.ServerTasksRequestsCapability(
            tools=types.TasksToolsCapability(call=types.TasksCallCapability())
        ),
    )


def wants_legacy_task(version: str, params: Any) -> bool:
    """A 2025-11-25 `tools/call` asking for a task (`params.task` is an object)."""
    return (
        version == LEGACY_VERSION and isinstance(params, Mapping) and isinstance(params.get("task"), Mapping)
    )


def status(record: Mapping[str, Any]) -> str:
    """The 2025-11-25 status: a tool's failure is `failed` in this revision."""
    value = str(record["status"])
    return "working" if value == "running" else value if value in _TERMINAL else "working"


def legacy_task(record: Mapping[str, Any], store: MCPTaskStore) -> dict[str, Any]:
    """The 2025-11-25 `Task`."""
    return task_fields(record, store, status(record), ttl_key="ttl", poll_key="pollInterval")


async def legacy_result(
    store: MCPTaskStore,
    task_id: str,
    user: str,
    render: Callable[[ToolResult], dict[str, Any]],
) -> dict[str, Any]:
    """`tasks/result`: wait for the end, then the call's result (see the module docstring)."""
    while True:
        record = await store.get(task_id, user)
        if record is None:
            raise task_not_found()
        if status(record) in _TERMINAL:
            break
        await asyncio.sleep(store.poll_interval)
    meta = {RELATED_TASK: {"taskId": task_id}}
    data = record.get("result")
    if str(record["status"]) == "cancelled":
        raise MCPError(
            code=types.INVALID_PARAMS, message="The task was cancelled; it has no result.", data=meta
        )
    if isinstance(data, Mapping):
        return {**render(ToolResult.from_dict(dict(data))), "_meta": meta}
    error = record.get("error")
    if isinstance(error, Mapping):
        raise MCPError(
            code=int(error.get("code", types.INTERNAL_ERROR)), message=str(error.get("message")), data=meta
        )
    raise MCPError(code=types.INTERNAL_ERROR, message="The task ended without a result.", data=meta)


def list_page(
    records: Sequence[Mapping[str, Any]],
    store: MCPTaskStore,
    user: str,
    cursor: str | None,
    digest: Callable[[bytes], str],
    page_size: int = PAGE_SIZE,
) -> dict[str, Any]:
    """One `tasks/list` page of the caller's `records`: newest first (creation time, then id), from after
    the task `cursor` names; `nextCursor` when more follow. `digest` is the executor's keyed MAC: a cursor
    is the last task's position, sealed for this caller, so a cursor altered, made up, or issued to
    another caller is `-32602` (`Invalid cursor`)."""
    ordered = sorted(records, key=_position, reverse=True)
    if cursor is not None:
        after = _open_cursor(cursor, user, digest)
        if after is None:
            raise MCPError(code=types.INVALID_PARAMS, message="Invalid cursor")
        ordered = [r for r in ordered if _position(r) < after]
    page = ordered[:page_size]
    out: dict[str, Any] = {"tasks": [legacy_task(r, store) for r in page]}
    if len(ordered) > page_size:
        out["nextCursor"] = _seal_cursor(_position(page[-1]), user, digest)
    return out


def _position(record: Mapping[str, Any]) -> tuple[float, str]:
    return float(record["created_at"]), str(record["id"])


def _seal_cursor(position: tuple[float, str], user: str, digest: Callable[[bytes], str]) -> str:
    body = base64.urlsafe_b64encode(json.dumps(list(position), separators=(",", ":")).encode()).decode()
    return f"{body}.{digest(_cursor_mac_input(body, user))}"


def _open_cursor(cursor: str, user: str, digest: Callable[[bytes], str]) -> tuple[float, str] | None:
    if not isinstance(cursor, str) or len(cursor) > _MAX_CURSOR:
        return None
    body, _, tag = cursor.rpartition(".")
    if not body or not hmac.compare_digest(tag, digest(_cursor_mac_input(body, user))):
        return None
    try:
        created, task_id = json.loads(base64.urlsafe_b64decode(body.encode()))
    except (ValueError, TypeError, binascii.Error):
        return None
    if not isinstance(created, int | float) or not isinstance(task_id, str):
        return None
    return float(created), task_id


def _cursor_mac_input(body: str, user: str) -> bytes:
    return _CURSOR_LABEL + json.dumps([user, body]).encode()
