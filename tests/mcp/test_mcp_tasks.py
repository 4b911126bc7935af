"""MCP Tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663, on 2026-07-28) on toolrun's server,
driven by the official `mcp` client (raw `tasks/*` requests: the SDK has no helper for them), in memory,
over Streamable HTTP (two users) and over stdio; and toolrun's `MCPToolset` waiting for tasks."""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import task_tools
from mcp.shared.exceptions import MCPError
from mcp_helpers import http_transport, serving
from tasks_helpers import TASKS, call, cancel, declaring, get, list_tasks, result, until_final, update

from mcp import Client, StdioServerParameters
from toolrun import ToolCall, ToolContext, ToolExecutor, ToolRegistry
from toolrun.mcp import MCPToolset, MemoryTaskStore, ToolrunMCPServer, create_http_app, create_server

HERE = Path(__file__).parent
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


@pytest.fixture(autouse=True)
def _counters() -> None:
    task_tools.STATE.update(cancelled=0, finished=0)


@pytest.fixture
async def tasks_server() -> AsyncIterator[ToolrunMCPServer]:
    store = MemoryTaskStore(poll_interval=0.02, max_running_per_user=3)
    executor = ToolExecutor(task_tools.registry)
    yield create_server(task_tools.registry, executor=executor, principal="alice", tasks=store)
    await store.aclose()
    executor.close()


def _task_fields(answer: dict[str, Any]) -> None:
    """The `Task` shape of the specification (*Tasks*)."""
    assert re.fullmatch(r"task_[0-9a-f]{32}", answer["taskId"])  # 128 random bits
    assert answer["status"] in ("working", "input_required", "completed", "failed", "cancelled")
    assert ISO.match(answer["createdAt"]) and ISO.match(answer["lastUpdatedAt"])
    assert answer["ttlMs"] is None or (isinstance(answer["ttlMs"], int) and answer["ttlMs"] > 0)
    assert isinstance(answer["pollIntervalMs"], int) and answer["pollIntervalMs"] > 0


async def test_a_background_tool_is_a_task_for_a_client_that_declares_the_extension(
    tasks_server: ToolrunMCPServer,
) -> None:
    async with Client(tasks_server, extensions=declaring()) as client:
        assert client.session.protocol_version == "2026-07-28"
        assert TASKS in (client.server_capabilities.extensions or {})
        created = await call(client, "build_report", {"month": "2026-11", "seconds": 0.3})
        await asyncio.sleep(0.05)
        working = await get(client, created["taskId"])
        done = await until_final(client, created["taskId"])
        plain = await client.call_tool("add", {"a": 1, "b": 2})  # other tools: answered as before
    assert created["resultType"] == "task" and created["status"] == "working"
    _task_fields(created)
    assert "result" not in created and "content" not in created
    assert working["resultType"] == "complete" and working["status"] == "working"
    assert working["statusMessage"] == "reading (1/2)"  # the tool's progress
    _task_fields(working)
    assert done["resultType"] == "complete" and done["status"] == "completed"
    assert done["taskId"] == created["taskId"] and done["createdAt"] == created["createdAt"]
    result = types.CallToolResult.model_validate(done["result"], by_name=False)  # the CallToolResult, inlined
    assert not result.is_error and result.structured_content == {"month": "2026-11", "rows": 1234}
    assert plain.structured_content == {"result": 3}
    assert task_tools.STATE["finished"] == 1


async def test_a_client_that_does_not_declare_it_gets_the_result_inline_and_no_task_methods(
    tasks_server: ToolrunMCPServer,
) -> None:
    async with Client(tasks_server, extensions=declaring()) as declared:
        task_id = (await call(declared, "build_report", {"month": "2026-10", "seconds": 0}))["taskId"]
        await until_final(declared, task_id)
    async with Client(tasks_server) as client:
        inline = await call(client, "build_report", {"month": "2026-11", "seconds": 0})
        with pytest.raises(MCPError) as refused:
            await get(client, task_id)
    assert inline["resultType"] == "complete" and inline["structuredContent"]["rows"] == 1234
    assert refused.value.code == -32021  # Missing Required Client Capability
    assert refused.value.error.data == {"requiredCapabilities": {"extensions": {TASKS: {}}}}


async def test_a_2025_call_without_params_task_is_answered_inline(tasks_server: ToolrunMCPServer) -> None:
    async with Client(tasks_server, mode="legacy", extensions=declaring()) as client:
        result = await client.call_tool("build_report", {"month": "2026-11", "seconds": 0})
    assert not result.is_error and result.structured_content == {"month": "2026-11", "rows": 1234}


async def test_cancel_stops_a_running_task_and_leaves_a_finished_one_as_it_is(
    tasks_server: ToolrunMCPServer,
) -> None:
    async with Client(tasks_server, extensions=declaring()) as client:
        running = (await call(client, "build_report", {"month": "m", "seconds": 30}))["taskId"]
        quick = (await call(client, "build_report", {"month": "q", "seconds": 0}))["taskId"]
        finished = await until_final(client, quick)
        ack = await cancel(client, running)
        cancelled = await until_final(client, running)
        late = await cancel(client, quick)
        after = await get(client, quick)
    assert ack == {"resultType": "complete", "_meta": ack["_meta"]}  # an empty acknowledgement
    assert cancelled["status"] == "cancelled" and "result" not in cancelled
    assert task_tools.STATE["cancelled"] == 1
    assert late["resultType"] == "complete"  # cancelling after completion: acknowledged, nothing changes
    assert after["status"] == "completed" and after["result"] == finished["result"]


async def test_a_tool_failure_is_a_completed_task_with_an_error_result(
    tasks_server: ToolrunMCPServer,
) -> None:
    async with Client(tasks_server, extensions=declaring()) as client:
        task_id = (await call(client, "failing_export", {"target": "s3://bucket"}))["taskId"]
        done = await until_final(client, task_id)
    # *Task Execution Errors*: `failed` is for JSON-RPC errors only; a tool's failure is `isError: true`
    assert done["status"] == "completed" and done["result"]["isError"] is True
    assert "EXECUTION_FAILED" in done["result"]["content"][0]["text"]
    assert "disk full" not in done["result"]["content"][0]["text"]  # internal exception text stays inside


async def test_calls_that_cannot_run_are_answered_at_once_and_the_task_limit_holds(
    tasks_server: ToolrunMCPServer,
) -> None:
    async with Client(tasks_server, extensions=declaring()) as client:
        bad = await call(client, "build_report", {"month": 11})
        held = [await call(client, "build_report", {"month": "m", "seconds": 30}) for _ in range(3)]
        over = await call(client, "build_report", {"month": "m", "seconds": 30})
        for task in held:
            await cancel(client, task["taskId"])
        again = await call(client, "build_report", {"month": "m", "seconds": 0})
    assert (
        bad["resultType"] == "complete"
        and bad["isError"]
        and "INVALID_ARGUMENTS" in bad["content"][0]["text"]
    )
    assert all(task["resultType"] == "task" for task in held)
    assert (
        over["resultType"] == "complete" and over["isError"] and "RATE_LIMITED" in over["content"][0]["text"]
    )
    assert again["resultType"] == "task"


async def test_unknown_tampered_and_oversized_ids_are_invalid_params(tasks_server: ToolrunMCPServer) -> None:
    async with Client(tasks_server, extensions=declaring()) as client:
        real = (await call(client, "build_report", {"month": "m", "seconds": 0}))["taskId"]
        tampered = real[:-1] + ("0" if real[-1] != "0" else "1")
        for bad_id in ("task_unknown", tampered, real.upper(), "", "x" * 5000, real + " "):
            for method in (get, cancel):
                with pytest.raises(MCPError) as refused:
                    await method(client, bad_id)
                assert refused.value.code == types.INVALID_PARAMS, (method, bad_id[:20])
            with pytest.raises(MCPError) as refused:
                await update(client, bad_id, {"x": {"action": "accept"}})
            assert refused.value.code == types.INVALID_PARAMS
        ack = await update(client, real, {"never-asked": {"action": "accept", "content": {}}})
        final = await until_final(client, real)
    assert ack["resultType"] == "complete"  # a response for a key that is not outstanding: ignored
    assert final["status"] == "completed"


PRINCIPALS = {
    "tok-alice": ToolContext(user_id="alice", roles=("member",)),
    "tok-bob": ToolContext(user_id="bob", roles=("member",)),
}


async def _resolve(token: str) -> ToolContext | None:
    return PRINCIPALS.get(token)


@pytest.mark.slow
async def test_over_http_each_user_sees_only_their_own_tasks(tasks_server: ToolrunMCPServer) -> None:
    inner = create_http_app(tasks_server, resolve_principal=_resolve)
    routing: list[tuple[str, str]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:  # records the routing headers sent
        if scope["type"] == "http":
            headers = {k.decode(): v.decode() for k, v in scope["headers"]}
            if headers.get("mcp-method", "").startswith("tasks/"):
                routing.append((headers["mcp-method"], headers.get("mcp-name", "")))
        await inner(scope, receive, send)

    async with (
        serving(app) as base,
        Client(http_transport(f"{base}/mcp", "tok-alice"), extensions=declaring()) as alice,
    ):
        created = await call(alice, "build_report", {"month": "2026-11", "seconds": 0.5})
        task_id = created["taskId"]
        async with Client(http_transport(f"{base}/mcp", "tok-bob"), extensions=declaring()) as bob:
            refused = []
            for method in (get, cancel):
                with pytest.raises(MCPError) as error:
                    await method(bob, task_id)
                refused.append(error.value)
            with pytest.raises(MCPError) as error:
                await update(bob, task_id, {})
            refused.append(error.value)
        done = await until_final(alice, task_id)
    assert created["resultType"] == "task"
    # another user's id answers exactly as an unknown one: nothing to learn, nothing cancelled
    assert {(e.code, e.message) for e in refused} == {
        (types.INVALID_PARAMS, "Failed to retrieve task: Task not found")
    }
    assert done["status"] == "completed" and done["result"]["structuredContent"]["rows"] == 1234
    assert task_tools.STATE == {"cancelled": 0, "finished": 1}
    # *Streamable HTTP: Routing Headers*: every tasks/* request names its task in Mcp-Name
    assert {method for method, _ in routing} == {"tasks/get", "tasks/cancel", "tasks/update"}
    assert {name for _, name in routing} == {task_id}


@pytest.mark.slow
async def test_over_http_a_tasks_request_names_its_task_in_mcp_name(tasks_server: ToolrunMCPServer) -> None:
    """*Streamable HTTP: Routing Headers* with SEP-2243's rules: a `tasks/*` request whose `Mcp-Name` is
    missing or names another task is refused with -32020 (HeaderMismatch) and HTTP 400."""
    import httpx2

    app = create_http_app(tasks_server, resolve_principal=_resolve, stateless=True, json_response=True)
    meta = {
        types.PROTOCOL_VERSION_META_KEY: "2026-07-28",
        types.CLIENT_CAPABILITIES_META_KEY: {"extensions": {TASKS: {}}},
    }
    async with serving(app) as base, httpx2.AsyncClient(base_url=base) as http:

        async def rpc(method: str, params: dict[str, Any], name: str | None) -> httpx2.Response:
            headers = {
                "Authorization": "Bearer tok-alice",
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2026-07-28",
                "Mcp-Method": method,
            }
            if name is not None:
                headers["Mcp-Name"] = name
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
            return await http.post("/mcp", json=body, headers=headers)

        report = {"name": "build_report", "arguments": {"month": "2026-11"}}
        created = (await rpc("tools/call", report, "build_report")).json()["result"]
        task_id = created["taskId"]
        matched = await rpc("tasks/get", {"taskId": task_id}, task_id)
        other = await rpc("tasks/get", {"taskId": task_id}, "task_" + "0" * 32)
        missing = await rpc("tasks/cancel", {"taskId": task_id}, None)
        await rpc("tasks/cancel", {"taskId": task_id}, task_id)
    assert matched.status_code == 200 and matched.json()["result"]["taskId"] == task_id
    for refused in (other, missing):
        assert refused.status_code == 400
        assert refused.json()["error"]["code"] == types.HEADER_MISMATCH


@pytest.mark.slow
async def test_on_2025_connections_tasks_are_listed_and_read_for_their_owner_only(
    tasks_server: ToolrunMCPServer,
) -> None:
    """The 2025-11-25 methods (`tasks/list`, `tasks/result`, `tasks/get`, `tasks/cancel`) over one store:
    the owner lists and reads their task; another user finds nothing of it."""
    app = create_http_app(tasks_server, resolve_principal=_resolve)
    async with serving(app) as base:
        async with Client(http_transport(f"{base}/mcp", "tok-alice"), extensions=declaring()) as modern:
            task_id = (await call(modern, "build_report", {"month": "2026-11", "seconds": 0.2}))["taskId"]
        async with Client(http_transport(f"{base}/mcp", "tok-alice"), mode="legacy") as alice:
            assert alice.session.protocol_version == "2025-11-25"
            listed = await list_tasks(alice)
            final = await result(alice, task_id)  # waits for the end
            task = await get(alice, task_id)
            with pytest.raises(MCPError) as terminal:
                await cancel(alice, task_id)
        async with Client(http_transport(f"{base}/mcp", "tok-bob"), mode="legacy") as bob:
            theirs = await list_tasks(bob)
            refused = []
            for method in (get, cancel, result):
                with pytest.raises(MCPError) as error:
                    await method(bob, task_id)
                refused.append(error.value.code)
    assert [t["taskId"] for t in listed["tasks"]] == [task_id] and "ttl" in listed["tasks"][0]
    assert final["structuredContent"] == {"month": "2026-11", "rows": 1234}
    assert final["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
    assert task["status"] == "completed" and task["pollInterval"] == 20 and "resultType" not in task
    assert terminal.value.code == types.INVALID_PARAMS  # 2025: a terminal task cannot be cancelled
    assert theirs == {"tasks": []}
    assert refused == [types.INVALID_PARAMS] * 3


@pytest.mark.slow
async def test_over_stdio_with_the_official_client() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolrun.mcp", "serve", "task_tools:registry", "--user", "u1"],
        env=env,
    )
    async with Client(params, extensions=declaring()) as client:
        created = await call(client, "build_report", {"month": "2026-11", "seconds": 0})
        done = await until_final(client, created["taskId"])
        slow = await call(client, "build_report", {"month": "2026-12", "seconds": 60})
        await cancel(client, slow["taskId"])
        stopped = await until_final(client, slow["taskId"])
        with pytest.raises(MCPError) as unknown:
            await get(client, "task_" + "0" * 32)
    assert created["resultType"] == "task"
    assert done["status"] == "completed" and done["result"]["structuredContent"]["rows"] == 1234
    assert stopped["status"] == "cancelled"
    assert unknown.value.code == types.INVALID_PARAMS


async def test_mcp_toolset_waits_for_a_remote_task(tasks_server: ToolrunMCPServer) -> None:
    local = ToolRegistry()
    async with MCPToolset(tasks_server, prefix="r", trusted=True, timeout=10) as remote:
        await remote.register(local)
        result = await ToolExecutor(local).execute(
            ToolCall(name="r_build_report", arguments={"month": "2026-11", "seconds": 0.1}),
            ToolContext(user_id="me"),
        )
        failed = await ToolExecutor(local).execute(
            ToolCall(name="r_failing_export", arguments={"target": "x"}), ToolContext(user_id="me")
        )
    assert result.status == "ok", result.error
    assert result.value == {"month": "2026-11", "rows": 1234}
    assert failed.status == "error" and failed.error is not None and failed.error.code == "REMOTE_TOOL_ERROR"


async def test_mcp_toolset_cancels_the_remote_task_when_its_time_runs_out(
    tasks_server: ToolrunMCPServer,
) -> None:
    store = tasks_server.tasks
    assert isinstance(store, MemoryTaskStore)
    local = ToolRegistry()
    async with MCPToolset(tasks_server, prefix="r", trusted=True, timeout=0.5) as remote:
        await remote.register(local)
        result = await ToolExecutor(local).execute(
            ToolCall(name="r_build_report", arguments={"month": "m", "seconds": 30}),
            ToolContext(user_id="me"),
        )
        for _ in range(200):
            if task_tools.STATE["cancelled"]:
                break
            await asyncio.sleep(0.01)
    assert result.status == "error" and result.error is not None and result.error.code == "TIMEOUT"
    assert task_tools.STATE["cancelled"] == 1  # tasks/cancel reached the server, and its tool stopped
    statuses = [record["status"] for record in store._tasks.values()]
    assert statuses == ["cancelled"]


async def test_mcp_toolset_follows_the_suggested_poll_interval() -> None:
    store = MemoryTaskStore(poll_interval=0.3)
    server = create_server(task_tools.registry, principal="alice", tasks=store)
    polls: list[float] = []
    original = server.get_request_handler("tasks/get")
    assert original is not None

    async def counting(ctx: Any, params: Any) -> Any:
        polls.append(asyncio.get_running_loop().time())
        return await original.handler(ctx, params)

    server.add_request_handler("tasks/get", original.params_type, counting)
    local = ToolRegistry()
    async with MCPToolset(server, prefix="r", trusted=True, timeout=10) as remote:
        await remote.register(local)
        result = await ToolExecutor(local).execute(
            ToolCall(name="r_build_report", arguments={"month": "m", "seconds": 0.7}),
            ToolContext(user_id="me"),
        )
    await store.aclose()
    assert result.status == "ok"
    gaps = [b - a for a, b in itertools.pairwise(polls)]
    assert len(polls) >= 2 and all(gap >= 0.28 for gap in gaps), (len(polls), gaps)  # never faster than asked
    assert min(gaps) < 0.8, gaps  # and at the suggestion, not the client's own default (1 s)


async def test_tasks_can_be_turned_off() -> None:
    server = create_server(task_tools.registry, principal="alice", tasks=False)
    async with Client(server, extensions=declaring()) as client:
        inline = await call(client, "build_report", {"month": "m", "seconds": 0})
        assert TASKS not in (client.server_capabilities.extensions or {})
        with pytest.raises(MCPError) as missing:
            await get(client, "task_x")
    assert inline["resultType"] == "complete" and not inline["isError"]
    assert missing.value.code == types.METHOD_NOT_FOUND


@pytest.mark.slow
@pytest.mark.timeout(90)
async def test_the_durable_service_keeps_mcp_tasks_as_its_jobs(tmp_path: Path) -> None:
    """`toolrun serve` with `TOOLRUN_DURABLE=dbos`: a background tool called as an MCP task at /mcp is a
    job of the service's job store — the same job `GET /api/v1/jobs` shows its user, and only them."""
    import httpx2

    from toolrun.cli import create_service_app
    from toolrun.server import Settings
    from toolrun.server.migrate import upgrade

    url = f"sqlite+aiosqlite:///{tmp_path}/toolrun.db"
    await upgrade(url)
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, database_url=url, data_dir=tmp_path / "data", durable="dbos"
    )
    app = create_service_app(settings, extra_tools=[task_tools.build_report])
    users = app.state.toolrun.users
    _, ada = await users.add("ada")
    _, bob = await users.add("bob")
    async with serving(app) as base:
        async with Client(http_transport(f"{base}/mcp", ada), extensions=declaring()) as client:
            created = await call(client, "build_report", {"month": "2026-11", "seconds": 0.2})
            done = await until_final(client, created["taskId"])
        async with Client(http_transport(f"{base}/mcp", bob), extensions=declaring()) as client:
            with pytest.raises(MCPError) as theirs:
                await get(client, created["taskId"])
        async with httpx2.AsyncClient(base_url=base) as http:
            as_job = (
                await http.get(
                    f"/api/v1/jobs/{created['taskId']}", headers={"Authorization": f"Bearer {ada}"}
                )
            ).json()
            hidden = await http.get(
                f"/api/v1/jobs/{created['taskId']}", headers={"Authorization": f"Bearer {bob}"}
            )
    assert (
        created["resultType"] == "task" and created["taskId"].startswith("job_") and created["ttlMs"] is None
    )
    assert done["status"] == "completed" and done["result"]["structuredContent"]["rows"] == 1234
    assert theirs.value.code == types.INVALID_PARAMS
    assert as_job["status"] == "completed" and as_job["result"]["value"] == {"month": "2026-11", "rows": 1234}
    assert hidden.status_code == 404


async def test_a_finished_task_is_forgotten_after_its_ttl_and_a_running_one_is_kept() -> None:
    now = [1_000_000.0]
    store = MemoryTaskStore(poll_interval=0.01, ttl=60, clock=lambda: now[0])
    server = create_server(task_tools.registry, principal="alice", tasks=store)
    async with Client(server, extensions=declaring()) as client:
        quick = await call(client, "build_report", {"month": "q", "seconds": 0})
        slow = await call(client, "build_report", {"month": "s", "seconds": 30})
        await until_final(client, quick["taskId"])
        assert quick["ttlMs"] == 60_000
        now[0] += 61  # past both tasks' time to live
        with pytest.raises(MCPError) as expired:
            await get(client, quick["taskId"])
        still = await get(client, slow["taskId"])  # running: kept until it ends
        await cancel(client, slow["taskId"])
    await store.aclose()
    assert expired.value.code == types.INVALID_PARAMS
    assert still["status"] == "working"
