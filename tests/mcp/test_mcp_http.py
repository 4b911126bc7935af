"""Streamable HTTP on 127.0.0.1: the standalone app and the endpoint mounted in a Starlette app, with
bearer-token principals."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from mcp_helpers import answer, http_transport, serving, text
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from mcp import Client
from toolrun import ToolContext
from toolrun.mcp import create_http_app, mount_mcp
from toolrun.runtime import InMemoryAuditSink

pytestmark = pytest.mark.slow

PRINCIPALS = {
    "tok-member": ToolContext(user_id="member-1", roles=("member",)),
    "tok-admin": ToolContext(user_id="admin-1", roles=("admin",)),
}


async def resolve(token: str) -> ToolContext | None:
    return PRINCIPALS.get(token)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_http_round_trip_with_token_principals(
    server: Any, audit: InMemoryAuditSink, state: dict[str, asyncio.Event], mode: str
) -> None:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async with serving(create_http_app(server, resolve_principal=resolve)) as base:
        url = f"{base}/mcp"
        async with Client(
            http_transport(url, "tok-member"), mode=mode, elicitation_callback=answer("accept")
        ) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            ok = await client.call_tool("add", {"a": 1, "b": 2})
            bad = await client.call_tool("add", {"b": "x"})
            slow = await client.call_tool("slow", {})
            denied = await client.call_tool("purge_cache", {})
            confirmed = await client.call_tool("delete_task", {"task_id": "t1"})
            progress = await client.call_tool("long_job", {"steps": 3}, progress_callback=on_progress)
            with pytest.raises(MCPError) as unknown:
                await client.call_tool("nope", {})
            call = asyncio.create_task(client.call_tool("wait_forever", {}))
            await asyncio.wait_for(state["started"].wait(), 5)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            await asyncio.wait_for(state["cancelled"].wait(), 5)
        async with Client(http_transport(url, "tok-admin"), mode=mode) as admin:
            admin_names = [t.name for t in (await admin.list_tools()).tools]
            allowed = await admin.call_tool("purge_cache", {})
    assert "purge_cache" not in names and "purge_cache" in admin_names
    assert ok.structured_content == {"result": 3}
    assert bad.is_error and "- a:" in text(bad) and "- b:" in text(bad)
    assert slow.is_error and "TIMEOUT" in text(slow)
    assert denied.is_error and "PERMISSION_DENIED" in text(denied)
    assert confirmed.structured_content == {"deleted": "t1"}
    assert text(progress) == "done" and seen[0] == 1 and seen[-1] == 3  # throttled: 2 may be dropped
    assert unknown.value.code == types.INVALID_PARAMS
    assert text(allowed) == "purged"
    principals = {(r.tool, r.principal) for r in audit.records}
    assert ("add", "member-1") in principals and ("purge_cache", "admin-1") in principals
    assert ("delete_task", "member-1") in principals


async def test_http_refuses_missing_or_unknown_tokens(server: Any) -> None:
    def broken(token: str) -> ToolContext | None:
        raise RuntimeError("resolver bug")

    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    bearer = {"Authorization": "Bearer tok-member"}
    app = create_http_app(server, resolve_principal=resolve)
    async with serving(app) as base, httpx2.AsyncClient() as http:
        none = await http.post(f"{base}/mcp", json=body)
        wrong = await http.post(f"{base}/mcp", json=body, headers={"Authorization": "Bearer nope"})
        basic = await http.post(f"{base}/mcp", json=body, headers={"Authorization": "Basic tok-member"})
    app = create_http_app(server, resolve_principal=broken)
    async with serving(app) as base, httpx2.AsyncClient() as http:
        crashed = await http.post(f"{base}/mcp", json=body, headers=bearer)
    for response in (none, wrong, basic, crashed):
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert "resolver bug" not in response.text


async def test_a_session_belongs_to_the_principal_that_opened_it(server: Any) -> None:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    app = create_http_app(server, resolve_principal=resolve, json_response=True)
    async with serving(app) as base, httpx2.AsyncClient() as http:
        opened = await http.post(
            f"{base}/mcp", json=init, headers={**accept, "Authorization": "Bearer tok-member"}
        )
        session = opened.headers["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
        stolen = await http.post(
            f"{base}/mcp",
            json=listing,
            headers={**accept, "Authorization": "Bearer tok-admin", "Mcp-Session-Id": session},
        )
    assert opened.status_code == 200
    assert stolen.status_code == 404


async def test_mount_in_a_starlette_app(server: Any) -> None:
    async def health(request: Any) -> PlainTextResponse:
        return PlainTextResponse("ok")

    app = Starlette(routes=[Route("/health", health)])
    mount_mcp(app, server, resolve_principal=resolve)
    async with serving(app) as base:
        async with httpx2.AsyncClient() as http:
            assert (await http.get(f"{base}/health")).text == "ok"
        async with Client(http_transport(f"{base}/mcp", "tok-member")) as client:
            result = await client.call_tool("add", {"a": 2, "b": 2})
    assert result.structured_content == {"result": 4}


async def test_the_service_serves_its_tools_at_mcp_with_its_own_tokens(tmp_path: Any) -> None:
    """`toolrun serve`'s app: the task tools at /mcp, each request acting for its bearer token's user,
    through the service's own executor (its confirmation store and audit trail)."""
    from toolrun.cli import create_service_app
    from toolrun.server import Settings
    from toolrun.server.migrate import upgrade

    url = f"sqlite+aiosqlite:///{tmp_path}/toolrun.db"
    await upgrade(url)
    settings = Settings(_env_file=None, database_url=url, data_dir=tmp_path / "data")  # type: ignore[call-arg]
    app = create_service_app(settings)
    users = app.state.toolrun.users
    _, ada = await users.add("ada")
    _, bob = await users.add("bob")
    async with serving(app) as base:
        async with httpx2.AsyncClient() as http:
            assert (await http.get(f"{base}/healthz")).status_code == 200
            assert (await http.post(f"{base}/mcp", json={})).status_code == 401
        async with Client(
            http_transport(f"{base}/mcp", ada), elicitation_callback=answer("accept")
        ) as client:
            created = await client.call_tool("create_task", {"title": "Renew passport"})
            task_id = created.structured_content["id"] if created.structured_content else None
            mine = await client.call_tool("query_tasks", {})
        async with Client(
            http_transport(f"{base}/mcp", bob), elicitation_callback=answer("accept")
        ) as client:
            theirs = await client.call_tool("query_tasks", {})
            stolen = await client.call_tool("delete_task", {"task_id": task_id})
        async with Client(
            http_transport(f"{base}/mcp", ada), elicitation_callback=answer("decline")
        ) as client:
            kept = await client.call_tool("delete_task", {"task_id": task_id})
            still = await client.call_tool("query_tasks", {})
    assert not created.is_error and task_id
    assert "Renew passport" in text(mine) and "Renew passport" not in text(theirs)
    assert stolen.is_error  # another user's task id is as unknown as a missing one
    assert kept.is_error and "Renew passport" in text(still)


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


async def _open(http: Any, url: str, token: str) -> httpx2.Response:
    return await http.post(url, json=INIT, headers={**ACCEPT, "Authorization": f"Bearer {token}"})


async def test_one_user_at_its_session_limit_is_refused_and_no_one_else(server: Any) -> None:
    """A user holding its sessions cannot open one more (429, a JSON-RPC error); another user still can,
    although the endpoint's total capacity would be gone without a per-user limit."""
    app = create_http_app(
        server, resolve_principal=resolve, json_response=True, max_sessions_per_user=3, max_sessions=4
    )
    async with serving(app) as base, httpx2.AsyncClient() as http:
        url = f"{base}/mcp"
        opened = [await _open(http, url, "tok-member") for _ in range(3)]
        refused = await _open(http, url, "tok-member")
        other = await _open(http, url, "tok-admin")
        ended = await http.delete(
            url,
            headers={
                **ACCEPT,
                "Authorization": "Bearer tok-member",
                "Mcp-Session-Id": opened[0].headers["mcp-session-id"],
            },
        )
        again = await _open(http, url, "tok-member")
    assert [r.status_code for r in opened] == [200, 200, 200]
    assert refused.status_code == 429
    error = refused.json()
    assert error["jsonrpc"] == "2.0" and error["error"]["code"] == types.INVALID_REQUEST
    assert (
        "Too many open MCP sessions" in error["error"]["message"] and "limit 3" in error["error"]["message"]
    )
    assert other.status_code == 200
    assert ended.status_code == 200 and again.status_code == 200


async def test_concurrent_opens_of_one_user_cannot_pass_the_limit(server: Any) -> None:
    app = create_http_app(server, resolve_principal=resolve, json_response=True, max_sessions_per_user=2)
    async with serving(app) as base, httpx2.AsyncClient() as http:
        answers = await asyncio.gather(*(_open(http, f"{base}/mcp", "tok-member") for _ in range(8)))
    assert sorted(r.status_code for r in answers) == [200, 200] + [429] * 6


async def test_an_idle_session_expires_and_frees_its_place(server: Any) -> None:
    app = create_http_app(
        server,
        resolve_principal=resolve,
        json_response=True,
        max_sessions_per_user=1,
        session_idle_timeout=0.3,
    )
    async with serving(app) as base, httpx2.AsyncClient() as http:
        url = f"{base}/mcp"
        first = await _open(http, url, "tok-member")
        assert (await _open(http, url, "tok-member")).status_code == 429
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while (retry := await _open(http, url, "tok-member")).status_code == 429 and loop.time() < deadline:
            await asyncio.sleep(0.05)  # a refused open does not touch the idle session
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
        stale = await http.post(
            url,
            json=listing,
            headers={
                **ACCEPT,
                "Authorization": "Bearer tok-member",
                "Mcp-Session-Id": first.headers["mcp-session-id"],
            },
        )
    assert first.status_code == 200 and retry.status_code == 200
    assert stale.status_code == 404


async def test_the_sdk_client_reads_the_refusal(server: Any) -> None:
    app = create_http_app(server, resolve_principal=resolve, max_sessions_per_user=1)
    refused = pytest.RaisesGroup(
        pytest.RaisesExc(MCPError, match="Too many open MCP sessions"), flatten_subgroups=True
    )
    async with (
        serving(app) as base,
        Client(http_transport(f"{base}/mcp", "tok-member"), mode="legacy") as first,
    ):
        with refused:
            async with Client(http_transport(f"{base}/mcp", "tok-member"), mode="legacy"):
                pass
        assert (await first.call_tool("add", {"a": 1, "b": 1})).structured_content == {"result": 2}


async def test_the_service_reads_its_session_limit_from_the_environment(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolrun.cli import create_service_app
    from toolrun.server import Settings
    from toolrun.server.migrate import upgrade

    url = f"sqlite+aiosqlite:///{tmp_path}/toolrun.db"
    await upgrade(url)
    monkeypatch.setenv("TOOLRUN_MCP_MAX_SESSIONS_PER_USER", "2")
    settings = Settings(_env_file=None, database_url=url, data_dir=tmp_path / "data")  # type: ignore[call-arg]
    app = create_service_app(settings)
    users = app.state.toolrun.users
    _, ada = await users.add("ada")
    _, bob = await users.add("bob")
    async with serving(app) as base, httpx2.AsyncClient() as http:
        mine = [(await _open(http, f"{base}/mcp", ada)).status_code for _ in range(3)]
        theirs = (await _open(http, f"{base}/mcp", bob)).status_code
    assert mine == [200, 200, 429] and theirs == 200
