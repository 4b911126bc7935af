"""MCP Tasks on the client side: a remote tool answered with a task is waited for (SEP-2663).

The official SDK lets a client extension claim an extra result shape of `tools/call` and finish it; this
is that extension for `io.modelcontextprotocol/tasks` (the ext-tasks specification, `tasks.md`, commit
e434597; protocol 2026-07-28). With it in `mcp.Client(extensions=[...])`, every request declares the
extension, and a `CreateTaskResult` is polled with `tasks/get` (at the server's `pollIntervalMs`, within
`min_poll_interval` and `max_poll_interval`) until it ends: `completed` gives its `CallToolResult`, `failed`
raises its JSON-RPC error as `MCPError`, `cancelled` and `input_required` (a toolrun client has no one to
ask mid-task) become `isError` results. A cancelled wait (the caller's timeout) sends `tasks/cancel` first,
bounded by `cancel_timeout`. `tasks/*` requests name the task in `Mcp-Name` on Streamable HTTP.

On a 2025-11-25 connection a tool that says `execution.taskSupport: "required"` is called as that
revision's task (`call_legacy_task`: `tools/call` with `params.task`, `tasks/get`, then `tasks/result`;
`tasks/cancel` when cancelled). The SDK has that revision's task types but no client for them, and checks
every 2025 `tools/call` answer as a `CallToolResult`, so the creating request alone goes through the
session's dispatcher (`_send_task_call`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import anyio
import mcp_types as types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict

from toolrun.mcp._tasks import TASKS_EXTENSION, TaskIdParams

__all__ = ["CancelTaskRequest", "CreateTaskResult", "GetTaskRequest", "TasksExtension"]

LEGACY_TASKS_VERSION = "2025-11-25"
"""The one protocol revision whose core has tasks (`execution.taskSupport` on tools)."""

_LEGACY_WAIT_FOR_RESULT = frozenset({"input_required", "completed", "failed", "cancelled"})


class _Answer(BaseModel):
    """A `tasks/*` answer as sent (every wire field kept)."""

    model_config = ConfigDict(extra="allow")

    def fields(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class CreateTaskResult(types.Result):
    """A `tools/call` answered with a task (*Task Creation*: `Result & Task`, flat)."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str | None = None
    last_updated_at: str | None = None
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class GetTaskRequest(types.Request[TaskIdParams, Literal["tasks/get"]]):
    """`tasks/get` (*Task Polling*)."""

    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    name_param: ClassVar[str | None] = "taskId"


class CancelTaskRequest(types.Request[TaskIdParams, Literal["tasks/cancel"]]):
    """`tasks/cancel` (*Task Cancellation*)."""

    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams
    name_param: ClassVar[str | None] = "taskId"


class TasksExtension(ClientExtension):
    """The client side of MCP Tasks: declare the extension, and wait for the tasks servers answer with.

    Args:
        min_poll_interval: Seconds; the shortest wait between polls, whatever the server suggests.
        max_poll_interval: Seconds; the longest wait between polls.
        default_poll_interval: Seconds, when the server suggests nothing.
        cancel_timeout: Seconds given to `tasks/cancel` when the wait is cancelled.
    """

    identifier = TASKS_EXTENSION

    def __init__(
        self,
        *,
        min_poll_interval: float = 0.01,
        max_poll_interval: float = 30.0,
        default_poll_interval: float = 1.0,
        cancel_timeout: float = 5.0,
    ) -> None:
        self.min_poll_interval = min_poll_interval
        self.max_poll_interval = max_poll_interval
        self.default_poll_interval = default_poll_interval
        self.cancel_timeout = cancel_timeout

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return (ResultClaim(result_type="task", model=CreateTaskResult, resolve=self.wait),)

    async def wait(self, created: CreateTaskResult, ctx: ClaimContext) -> types.CallToolResult:
        """Poll the task until it ends; its `CallToolResult` (see the module docstring)."""
        session, task_id = ctx.session, created.task_id
        interval = created.poll_interval_ms
        settled = False
        try:
            while True:
                await anyio.sleep(self._seconds(interval))
                answer = await session.send_request(
                    GetTaskRequest(params=TaskIdParams(task_id=task_id)),
                    _Answer,
                    request_read_timeout_seconds=ctx.read_timeout_seconds,
                )
                got = answer.fields()
                if got.get("taskId") != task_id:
                    raise MCPError(code=types.INVALID_PARAMS, message="tasks/get answered for another task")
                if isinstance(got.get("pollIntervalMs"), int):
                    interval = got["pollIntervalMs"]
                status = got.get("status")
                if status == "completed":
                    settled = True
                    return types.CallToolResult.model_validate(got.get("result") or {}, by_name=False)
                if status == "failed":
                    settled = True
                    raw_error = got.get("error")
                    error: dict[str, Any] = raw_error if isinstance(raw_error, dict) else {}
                    raise MCPError(
                        code=int(error.get("code", types.INTERNAL_ERROR)),
                        message=str(error.get("message") or got.get("statusMessage") or "The task failed."),
                        data=error.get("data"),
                    )
                if status == "cancelled":
                    settled = True
                    return _error_result(
                        f"The remote task {ctx.tool_name!r} was cancelled before it finished."
                    )
                if status == "input_required":
                    return _error_result(
                        f"The remote task {ctx.tool_name!r} asked for input this client cannot give; it was "
                        "cancelled."
                    )
        finally:
            if not settled:  # cancelled, timed out, gave up or broke: the server may stop the work
                await self._cancel(session, task_id)

    async def call_legacy_task(
        self,
        session: Any,
        name: str,
        arguments: dict[str, Any],
        *,
        progress_callback: Any = None,
        read_timeout_seconds: float | None = None,
    ) -> types.CallToolResult:
        """Call `name` as a 2025-11-25 task and wait for its `CallToolResult` (see the module docstring).

        Raises:
            MCPError: the server refused the call, or the task failed with a protocol error.
        """
        created = types.CreateTaskResult.model_validate(
            await _send_task_call(session, name, arguments, progress_callback), by_name=False
        )
        task_id, interval = created.task.task_id, created.task.poll_interval
        status: str = created.task.status
        settled = False
        try:
            while status not in _LEGACY_WAIT_FOR_RESULT:
                await anyio.sleep(self._seconds(interval))
                task = await session.send_request(
                    types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id)),
                    types.GetTaskResult,
                    request_read_timeout_seconds=read_timeout_seconds,
                )
                if task.task_id != task_id:
                    raise MCPError(code=types.INVALID_PARAMS, message="tasks/get answered for another task")
                status, interval = task.status, task.poll_interval or interval
            if status == "cancelled":
                settled = True
                return _error_result(f"The remote task {name!r} was cancelled before it finished.")
            # `tasks/result` waits for the end (an `input_required` task asks its questions meanwhile)
            result: types.CallToolResult = await session.send_request(
                types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id)),
                types.CallToolResult,
            )
            settled = True
            return result
        finally:
            if not settled:  # cancelled, timed out or broke: the server may stop the work
                await self._cancel_legacy(session, task_id)

    async def _cancel_legacy(self, session: Any, task_id: str) -> None:
        with (
            anyio.CancelScope(shield=True),
            anyio.move_on_after(self.cancel_timeout),
            contextlib.suppress(Exception),
        ):
            await session.send_request(
                types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id)),
                types.CancelTaskResult,
            )

    async def _cancel(self, session: Any, task_id: str) -> None:
        with (
            anyio.CancelScope(shield=True),
            anyio.move_on_after(self.cancel_timeout),
            contextlib.suppress(Exception),
        ):
            await session.send_request(CancelTaskRequest(params=TaskIdParams(task_id=task_id)), _Answer)

    def _seconds(self, interval_ms: int | None) -> float:
        seconds = interval_ms / 1000 if interval_ms is not None else self.default_poll_interval
        return min(max(seconds, self.min_poll_interval), self.max_poll_interval)


async def _send_task_call(
    session: Any, name: str, arguments: dict[str, Any], progress_callback: Any
) -> dict[str, Any]:
    """`tools/call` with `params.task` on a 2025-11-25 session; the raw answer.

    `ClientSession.send_request` checks a 2025 `tools/call` answer as a `CallToolResult` and refuses the
    `CreateTaskResult` the spec gives, so this request goes straight to the session's dispatcher, stamped
    as `send_request` stamps a 2025 request (the protocol version header).
    """
    dispatcher = getattr(session, "_dispatcher", None)
    if dispatcher is None or not hasattr(dispatcher, "send_raw_request"):
        raise MCPError(
            code=types.INTERNAL_ERROR,
            message="This version of the mcp SDK cannot send a task-augmented tools/call.",
        )
    params = types.CallToolRequestParams(name=name, arguments=arguments, task=types.TaskMetadata())
    options: dict[str, Any] = {"headers": {"mcp-protocol-version": LEGACY_TASKS_VERSION}}
    if progress_callback is not None:
        options["on_progress"] = progress_callback
    raw: dict[str, Any] = await dispatcher.send_raw_request(
        "tools/call", params.model_dump(by_alias=True, mode="json", exclude_none=True), options
    )
    return raw


def _error_result(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)
