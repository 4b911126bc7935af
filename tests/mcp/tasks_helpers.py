"""Raw MCP Tasks requests sent with the official client's session (the SDK has no helper for them);
`tasks/get` and `tasks/cancel` with toolrun's own request models (`toolrun.mcp._tasks_client`)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import mcp_types as types
from mcp.client.extension import advertise
from pydantic import TypeAdapter

from toolrun.mcp._tasks import TaskIdParams
from toolrun.mcp._tasks_client import CancelTaskRequest, GetTaskRequest

TASKS = "io.modelcontextprotocol/tasks"
ANY = TypeAdapter(dict[str, Any])


class TaskParams(types.RequestParams):
    task_id: str


class UpdateParams(TaskParams):
    input_responses: dict[str, Any]


class Update(types.Request[UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateParams
    name_param: ClassVar[str | None] = "taskId"


def _ids(task_id: str) -> TaskIdParams:
    return TaskIdParams.model_validate({"taskId": task_id})


def declaring() -> list[Any]:
    """Client extensions that declare MCP Tasks and nothing else (the test drives the methods itself)."""
    return [advertise(TASKS)]


async def call(client: Any, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A raw `tools/call`: the answer as sent (a `CreateTaskResult` or a `CallToolResult`)."""
    request = types.CallToolRequest(params=types.CallToolRequestParams(name=name, arguments=arguments))
    return await client.session.send_request(request, ANY)


async def get(client: Any, task_id: str) -> dict[str, Any]:
    return await client.session.send_request(GetTaskRequest(params=_ids(task_id)), ANY)


async def cancel(client: Any, task_id: str) -> dict[str, Any]:
    return await client.session.send_request(CancelTaskRequest(params=_ids(task_id)), ANY)


async def update(client: Any, task_id: str, responses: dict[str, Any]) -> dict[str, Any]:
    params = UpdateParams(task_id=task_id, input_responses=responses)
    return await client.session.send_request(Update(params=params), ANY)


async def until_final(client: Any, task_id: str, *, polls: int = 500) -> dict[str, Any]:
    """Poll `tasks/get` at the server's suggested interval until the task is terminal."""
    import asyncio

    for _ in range(polls):
        got = await get(client, task_id)
        if got["status"] in ("completed", "failed", "cancelled"):
            return got
        await asyncio.sleep(got["pollIntervalMs"] / 1000)
    raise AssertionError(f"task {task_id} did not end")


class Result(types.Request[TaskParams, Literal["tasks/result"]]):
    method: Literal["tasks/result"] = "tasks/result"
    params: TaskParams


class ListTasks(types.Request[types.PaginatedRequestParams, Literal["tasks/list"]]):
    method: Literal["tasks/list"] = "tasks/list"
    params: types.PaginatedRequestParams


async def result(client: Any, task_id: str) -> dict[str, Any]:
    """2025-11-25 `tasks/result`."""
    return await client.session.send_request(Result(params=TaskParams(task_id=task_id)), ANY)


async def list_tasks(client: Any, cursor: str | None = None) -> dict[str, Any]:
    """2025-11-25 `tasks/list` (the page after `cursor`)."""
    params = types.PaginatedRequestParams(cursor=cursor)
    return await client.session.send_request(ListTasks(params=params), ANY)
