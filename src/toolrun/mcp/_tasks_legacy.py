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
- `tasks/list` gives the caller's own tasks (newest first); `tasks/cancel` cancels a running task and
  gives it, a task already terminal is `-32602`;
- unknown or someone else's ids are `-32602`, as on 2026 connections.

The same task stores serve both revisions. The SDK checks every 2025 `tools/call` answer as a
`CallToolResult`, so a task-augmented call is answered by toolrun's middleware (which owns its result),
not by the `tools/call` handler.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from toolrun.mcp._tasks import TaskStore, task_fields, task_not_found
from toolrun.results import ToolResult

__all__ = [
    "LEGACY_VERSION",
    "RELATED_TASK",
    "capability",
    "legacy_result",
    "legacy_task",
    "wants_legacy_task",
]

LEGACY_VERSION = "2025-11-25"
"""The one revision whose core protocol has tasks."""

RELATED_TASK = "io.modelcontextprotocol/related-task"

_TERMINAL = frozenset({"completed", "failed", "cancelled"})


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


def legacy_task(record: Mapping[str, Any], store: TaskStore) -> dict[str, Any]:
    """The 2025-11-25 `Task`."""
    return task_fields(record, store, status(record), ttl_key="ttl", poll_key="pollInterval")


async def legacy_result(
    store: TaskStore,
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
