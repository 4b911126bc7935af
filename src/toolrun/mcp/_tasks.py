"""MCP Tasks on toolrun's server: the `io.modelcontextprotocol/tasks` extension (SEP-2663).

Implemented revision: the extension's specification in `modelcontextprotocol/ext-tasks`
(`specification/draft/tasks.md`, commit e434597), on the 2026-07-28 protocol. The official Python SDK
carries the extension's vocabulary but no task runtime, so the runtime is here: a `tools/call` of a
`@tool(background=True)` tool from a client that declares the extension is answered with a task, which
`tasks/get`, `tasks/update` and `tasks/cancel` then serve; a client that does not declare it is answered
inline. Every task request is checked against its caller (an unknown, expired or someone else's id is the
same `-32602`), ids carry 128 random bits, and there is no `tasks/list`. Left out: `notifications/tasks`
(optional) and the `input_required` status. 2025-11-25 connections get that revision's experimental tasks
instead (`_tasks_legacy`), over the same stores. Each method's answers: docs/mcp.md, "Long-running tools
as MCP tasks".
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import secrets
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
from pydantic import Field

from toolrun.results import ErrorCode, ToolResult
from toolrun.runtime import ToolExecutor
from toolrun.tools import ToolCall, ToolContext

__all__ = [
    "TASKS_EXTENSION",
    "MCPTaskStore",
    "MemoryTaskStore",
    "TaskIdParams",
    "TaskUpdateParams",
    "check_routing_header",
    "create_task_result",
    "detailed_task",
    "missing_capability",
    "task_not_found",
    "too_many_tasks",
    "wants_tasks",
]

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The extension's identifier (*Extension Identifier*)."""

MAX_TASK_ID = 128
"""Longer ids are not ours: refused before any store is asked."""

_FINAL = frozenset({"completed", "failed", "cancelled"})


class MCPTaskStore(Protocol):
    """Where MCP tasks run and are kept: `MemoryTaskStore` (this process), or a durable one such as
    `toolrun.integrations.dbos.DurableTasks` (jobs that survive restarts).

    A task is a mapping with `id`, `tool`, `status` (`running`, `completed`, `failed`, `cancelled`: a
    `failed` task with a `result` is a tool that failed, which MCP reports as `completed` with
    `isError`), `progress` (`{progress, total, message}` or None), `result` (a `ToolResult.to_dict()` or
    None), `error` (a JSON-RPC error object for a call that broke, rarely), `created_at` and `updated_at`
    (Unix seconds).
    """

    poll_interval: float
    """Seconds a client is asked to wait between two `tasks/get` (`pollIntervalMs`)."""
    ttl: float | None
    """Seconds a task is kept from its creation (`ttlMs`); None: as long as the store keeps it."""

    async def start(
        self, call: ToolCall, context: ToolContext[Any], executor: ToolExecutor
    ) -> Mapping[str, Any] | None:
        """Record the task and start the call; the task, or None when the caller has too many running."""
        ...

    async def get(self, task_id: str, user_id: str) -> Mapping[str, Any] | None:
        """The caller's task; None when unknown, expired or someone else's."""
        ...

    async def cancel(self, task_id: str, user_id: str) -> Mapping[str, Any] | None:
        """Ask the caller's running task to stop; the task (as it now stands), or None as for `get`."""
        ...

    async def list_tasks(self, user_id: str) -> list[Mapping[str, Any]]:
        """The caller's tasks, newest first (2025-11-25 `tasks/list`)."""
        ...


class MemoryTaskStore:
    """Tasks in this process: each call runs as an asyncio task; records are kept `ttl` seconds.

    What one user may hold is bounded: `max_running_per_user` running (another call as a task is refused,
    `RATE_LIMITED`), and `max_kept_per_user` kept in all, running or finished: a new task beyond that
    makes room by dropping that user's oldest finished task (its id is then unknown, as after its `ttl`),
    so a client that starts tasks without end keeps the newest ones and never grows the store past its
    bound. Expired finished tasks are purged as requests come (`purge`, amortized: a queue in creation
    order, no scan of every task); a running task past its `ttl` is kept until it ends, then purged.

    Args:
        poll_interval: Seconds between polls suggested to clients.
        ttl: Seconds a task is kept after its creation (a running task is kept until it ends).
        max_running_per_user: Running tasks one user may have.
        max_kept_per_user: Tasks one user may have kept (running and finished); at least
            `max_running_per_user`.
        clock: Wall-clock time (tests).
    """

    def __init__(
        self,
        *,
        poll_interval: float = 1.0,
        ttl: float | None = 3600.0,
        max_running_per_user: int = 5,
        max_kept_per_user: int = 100,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if poll_interval <= 0 or (ttl is not None and ttl <= 0) or max_running_per_user < 1:
            raise ValueError("poll_interval and ttl must be positive, max_running_per_user at least 1.")
        if max_kept_per_user < max_running_per_user:
            raise ValueError("max_kept_per_user must be at least max_running_per_user.")
        self.poll_interval = poll_interval
        self.ttl = ttl
        self.max_running_per_user = max_running_per_user
        self.max_kept_per_user = max_kept_per_user
        self._clock = clock
        self._tasks: dict[str, dict[str, Any]] = {}
        self._owners: dict[str, str] = {}
        self._running: dict[str, asyncio.Task[None]] = {}
        self._kept: dict[str, dict[str, None]] = {}  # user -> their task ids, oldest first
        self._queue: collections.deque[tuple[float, str]] = collections.deque()  # creation order, for ttl
        self._overdue: set[str] = set()  # past their ttl while running: purged once they end

    async def start(
        self, call: ToolCall, context: ToolContext[Any], executor: ToolExecutor
    ) -> Mapping[str, Any] | None:
        self.purge()
        user = context.user_id or ""
        kept = self._kept.setdefault(user, {})
        running = sum(1 for task_id in kept if task_id in self._running)
        if running >= self.max_running_per_user:
            return None
        while len(kept) >= self.max_kept_per_user:  # room for one more: the oldest finished goes
            self._drop(next(task_id for task_id in kept if task_id not in self._running))
        task_id = "task_" + secrets.token_hex(16)
        now = self._clock()
        record: dict[str, Any] = {
            "id": task_id,
            "tool": call.name,
            "status": "running",
            "progress": None,
            "result": None,
            "error": None,
            "created_at": now,
            "updated_at": now,
        }
        self._tasks[task_id] = record
        self._owners[task_id] = user
        kept[task_id] = None
        if self.ttl is not None:
            self._queue.append((now, task_id))

        async def report(progress: float, total: float | None, message: str | None) -> None:
            if record["status"] == "running":
                record["progress"] = {"progress": progress, "total": total, "message": message}
                record["updated_at"] = self._clock()

        async def run() -> None:
            try:
                result = await executor.execute(call, context.evolve(progress=report))
            except asyncio.CancelledError:
                self._end(record, "cancelled", None)
                raise
            except Exception:  # the executor never raises; if it did, the call broke: a protocol fault
                record["error"] = {"code": types.INTERNAL_ERROR, "message": "The tool call failed."}
                self._end(record, "failed", None)
            else:
                self._end(record, "completed" if result.status == "ok" else "failed", result)
            finally:
                self._running.pop(task_id, None)

        self._running[task_id] = asyncio.get_running_loop().create_task(run(), name=f"toolrun-mcp {task_id}")
        return dict(record)

    async def get(self, task_id: str, user_id: str) -> Mapping[str, Any] | None:
        self.purge()
        if self._owners.get(task_id) != user_id:
            return None
        return dict(self._tasks[task_id])

    async def cancel(self, task_id: str, user_id: str) -> Mapping[str, Any] | None:
        if self._owners.get(task_id) != user_id:
            return None
        running = self._running.get(task_id)
        if running is not None:
            running.cancel()
            with contextlib.suppress(BaseException):
                await running
        record = self._tasks.get(task_id)  # as it stands now (not purged: the cancel was for a known task)
        return dict(record) if record is not None else None

    async def list_tasks(self, user_id: str) -> list[Mapping[str, Any]]:
        """The caller's tasks, newest first: at most `max_kept_per_user`."""
        self.purge()
        return [dict(self._tasks[task_id]) for task_id in reversed(self._kept.get(user_id, {}))]

    def purge(self) -> int:
        """Forget the finished tasks past their `ttl`; how many were forgotten."""
        if self.ttl is None:
            return 0
        dropped = 0
        for task_id in [t for t in self._overdue if t not in self._running]:
            self._overdue.discard(task_id)
            if task_id in self._tasks:
                self._drop(task_id)
                dropped += 1
        horizon = self._clock() - self.ttl
        queue = self._queue
        while queue and queue[0][0] < horizon:
            task_id = queue.popleft()[1]
            if task_id not in self._tasks:  # dropped already (a user's oldest, to make room)
                continue
            if task_id in self._running:
                self._overdue.add(task_id)
                continue
            self._drop(task_id)
            dropped += 1
        if len(queue) > 2 * len(self._tasks) + 64:  # mostly ids dropped to make room: rebuild
            self._queue = collections.deque(
                (r["created_at"], t) for t, r in self._tasks.items() if t not in self._overdue
            )
        return dropped

    async def aclose(self) -> None:
        """Cancel the tasks still running (the process is going away)."""
        for running in list(self._running.values()):
            running.cancel()
        await asyncio.gather(*self._running.values(), return_exceptions=True)

    def _drop(self, task_id: str) -> None:
        del self._tasks[task_id]
        user = self._owners.pop(task_id)
        kept = self._kept.get(user)
        if kept is not None:
            kept.pop(task_id, None)
            if not kept:
                del self._kept[user]

    def _end(self, record: dict[str, Any], status: str, result: ToolResult | None) -> None:
        if record["status"] != "running":
            return
        record["status"] = status
        record["result"] = result.to_dict() if result is not None else None
        record["updated_at"] = self._clock()


# --------------------------------------------------------------------------------------------------------
# Wire shapes


class TaskIdParams(types.RequestParams):
    """`tasks/get` and `tasks/cancel` params (*Task Polling*, *Task Cancellation*)."""

    task_id: str = Field(alias="taskId")


class TaskUpdateParams(TaskIdParams):
    """`tasks/update` params (*Task Update Requests*)."""

    input_responses: dict[str, Any] = Field(alias="inputResponses")


def wants_tasks(params: Mapping[str, Any] | None) -> bool:
    """Whether this request declares the extension in its own client capabilities (`_meta`): *Capability
    Negotiation* — a `CreateTaskResult` only for requests that declare it, "regardless of prior
    declarations"."""
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    capabilities = meta.get(types.CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, Mapping) else None
    extensions = capabilities.get("extensions") if isinstance(capabilities, Mapping) else None
    return isinstance(extensions, Mapping) and isinstance(extensions.get(TASKS_EXTENSION), Mapping)


def missing_capability() -> MCPError:
    """`-32021` for a `tasks/*` request that does not declare the extension (*Error Handling*)."""
    return MCPError(
        code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
        message="Missing required client capability",
        data={"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
    )


def check_routing_header(headers: Mapping[str, str] | None, task_id: str) -> None:
    """`-32020` (HeaderMismatch, HTTP 400) for a `tasks/*` request over Streamable HTTP whose `Mcp-Name`
    header is missing or names another task than `params.taskId` (*Streamable HTTP: Routing Headers*, with
    SEP-2243's validation rules, as the SDK applies them to `tools/call`'s `params.name`). Requests that
    came over no HTTP transport (`headers` None: stdio, in-memory) have no header to check."""
    if headers is None:
        return
    if decode_header_value(headers.get(MCP_NAME_HEADER)) != task_id:
        raise MCPError(
            code=types.HEADER_MISMATCH,
            message=f"{MCP_NAME_HEADER} header does not match the request body's 'taskId' parameter",
        )


def task_not_found() -> MCPError:
    """`-32602` for an id that is unknown, expired, malformed or another caller's (*Error Handling*)."""
    return MCPError(code=types.INVALID_PARAMS, message="Failed to retrieve task: Task not found")


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _status(record: Mapping[str, Any]) -> str:
    """The MCP status of a stored task: a tool that failed is a `completed` task whose result has
    `isError` (*Task Execution Errors*: `failed` is for JSON-RPC errors only)."""
    status = str(record["status"])
    if status == "running":
        return "working"
    if status == "failed" and record.get("result") is not None:
        return "completed"
    return status if status in _FINAL else "working"


def task_fields(
    record: Mapping[str, Any],
    store: MCPTaskStore,
    status: str,
    *,
    ttl_key: str = "ttlMs",
    poll_key: str = "pollIntervalMs",
) -> dict[str, Any]:
    """The `Task` fields of `record` shown as `status`; the 2025-11-25 revision names the two timings
    `ttl` and `pollInterval` (`_tasks_legacy`), the 2026 extension `ttlMs` and `pollIntervalMs`."""
    out: dict[str, Any] = {
        "taskId": str(record["id"]),
        "status": status,
        "createdAt": _iso(float(record["created_at"])),
        "lastUpdatedAt": _iso(float(record["updated_at"])),
        ttl_key: None if store.ttl is None else round(store.ttl * 1000),
        poll_key: max(1, round(store.poll_interval * 1000)),
    }
    message = _status_message(record, status)
    if message:
        out["statusMessage"] = message
    return out


def _task_fields(record: Mapping[str, Any], store: MCPTaskStore) -> dict[str, Any]:
    """The `Task` fields (*Tasks*)."""
    return task_fields(record, store, _status(record))


def _status_message(record: Mapping[str, Any], status: str) -> str | None:
    if status == "working":
        progress = record.get("progress")
        if not isinstance(progress, Mapping):
            return f"{record['tool']} is running."
        done, total = progress.get("progress"), progress.get("total")
        counted = f"{done:g}/{total:g}" if isinstance(total, int | float) else f"{done}"
        note = progress.get("message")
        return f"{note} ({counted})" if note else f"Progress {counted}."
    if status == "cancelled":
        return "The task was cancelled; its tool may have done part of its work."
    return None


def create_task_result(record: Mapping[str, Any], store: MCPTaskStore) -> dict[str, Any]:
    """The `CreateTaskResult` answering a `tools/call` (*Task Creation*: `resultType: "task"`)."""
    return {"resultType": "task", **_task_fields(record, store)}


async def detailed_task(
    record: Mapping[str, Any], store: MCPTaskStore, render: Callable[[ToolResult], dict[str, Any]]
) -> dict[str, Any]:
    """The `GetTaskResult` (*Task Polling*: `DetailedTask`, `resultType: "complete"`): the final
    `CallToolResult` inlined when completed (`render` writes it), the JSON-RPC error when failed."""
    out: dict[str, Any] = {"resultType": "complete", **_task_fields(record, store)}
    status = out["status"]
    data = record.get("result")
    if status == "completed" and isinstance(data, Mapping):
        out["result"] = render(ToolResult.from_dict(dict(data)))
    elif status == "completed":  # recorded without a result: say so rather than invent one
        out["result"] = {"content": [{"type": "text", "text": "(no result)"}], "isError": True}
    elif status == "failed":
        error = record.get("error")
        out["error"] = (
            dict(error)
            if isinstance(error, Mapping)
            else {"code": types.INTERNAL_ERROR, "message": "The task failed."}
        )
        out["statusMessage"] = str(out["error"].get("message", "The task failed."))
    return out


def too_many_tasks(call: ToolCall, store: MCPTaskStore) -> ToolResult:
    """The tool error for a call refused because the caller has too many tasks running."""
    from toolrun.runtime import _errors

    limit = getattr(store, "max_running_per_user", None)
    return _errors.fail(
        call.id,
        call.name,
        ErrorCode.RATE_LIMITED,
        "Too many background tasks are running for this user" + (f" (at most {limit})." if limit else "."),
        retryable=True,
        recover_action="Wait for a task to finish, then call the tool again.",
    )
