"""`MCPToolset`: a remote MCP server's tools run by toolrun's executor (against toolrun's own server and a
FastMCP server)."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Context, FastMCP
from fastmcp.tools import ToolResult as FastMCPToolResult
from mcp_helpers import serving

from mcp import StdioServerParameters
from toolrun import ToolCall, ToolContext, ToolExecutor, ToolRegistry
from toolrun.exceptions import ToolAlreadyExistsError
from toolrun.mcp import MCPToolset, create_http_app
from toolrun.runtime import InMemoryAuditSink

USER = ToolContext(user_id="u1")


async def run(executor: ToolExecutor, name: str, arguments: dict[str, Any], *, approve: bool = False) -> Any:
    result = await executor.execute(ToolCall(name=name, arguments=arguments), USER)
    if approve:
        assert result.status == "confirmation_required", result
        assert result.confirmation_id is not None
        result = await executor.approve(result.confirmation_id, USER)
    return result


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_toolrun_server_tools_under_local_gates(
    server: Any, audit: InMemoryAuditSink, state: dict[str, asyncio.Event], mode: str
) -> None:
    registry = ToolRegistry()
    async with MCPToolset(server, prefix="remote", timeout=0.5, mode=mode) as remote:
        tools = {t.name: t for t in await remote.register(registry)}
        local = ToolExecutor(registry)
        ok = await run(local, "remote_add", {"a": 1, "b": 2})
        invalid = await run(local, "remote_add", {"a": "x"})
        held = await run(local, "remote_delete_task", {"task_id": "t1"})
        approved = await run(local, "remote_delete_task", {"task_id": "t2"}, approve=True)
        failed = await run(local, "remote_broken", {"task_id": "t"}, approve=True)
        timed_out = await run(local, "remote_wait_forever", {}, approve=True)
        await asyncio.wait_for(state["cancelled"].wait(), 5)  # the remote tool was cancelled too
    assert set(tools) == {f"remote_{n}" for n in ("add", "get_task", "broken", "slow", "delete_task")} | {
        "remote_send_note",
        "remote_long_job",
        "remote_wait_forever",
    }
    # untrusted: read-only stays read-only, everything else needs confirmation; retries where idempotent
    assert tools["remote_add"].options.read_only and not tools["remote_add"].options.requires_confirmation
    assert tools["remote_add"].options.retries == 2 and tools["remote_add"].options.title == "Add two numbers"
    assert tools["remote_send_note"].options.requires_confirmation
    assert tools["remote_send_note"].options.retries == 0
    assert ok.status == "ok" and ok.value == 3
    assert invalid.error.code == "INVALID_ARGUMENTS" and {
        p["path"] for p in invalid.error.details["problems"]
    } == {
        "a",
        "b",
    }
    assert held.status == "confirmation_required"
    # approved locally, then the remote server's own confirmation is answered yes for it
    assert approved.status == "ok" and approved.value == {"deleted": "t2"}
    assert failed.error.code == "REMOTE_TOOL_ERROR" and "hunter2" not in failed.error.message
    assert timed_out.error.code == "TIMEOUT"
    # nothing invalid or unconfirmed reached the server
    remote_calls = [(r.tool, r.outcome) for r in audit.records]
    assert ("add", "error") not in remote_calls
    assert ("delete_task", "ok") in remote_calls
    assert remote_calls.count(("delete_task", "ok")) == 1


async def test_trusted_server_hints_are_believed(server: Any) -> None:
    registry = ToolRegistry()
    async with MCPToolset(server, trusted=True) as remote:
        tools = {t.name: t for t in await remote.register(registry)}
        sent = await run(ToolExecutor(registry), "send_note", {"text": "hi"})
    assert tools["delete_task"].options.requires_confirmation
    assert not tools["send_note"].options.requires_confirmation
    assert sent.status == "ok" and sent.value == "sent"


async def test_prefix_avoids_clashes(server: Any) -> None:
    registry = ToolRegistry()
    async with MCPToolset(server) as remote:
        await remote.register(registry)
        with pytest.raises(ToolAlreadyExistsError):
            await remote.register(registry)


def fastmcp_server() -> FastMCP:
    fm = FastMCP("peer")

    @fm.tool(annotations={"readOnlyHint": True, "idempotentHint": True, "title": "Add"})
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @fm.tool
    async def ask_name(ctx: Context) -> str:
        """Asks for the user's name."""
        answer = await ctx.elicit("What is your name?", response_type=str)
        return f"hello {getattr(answer, 'data', answer.action)}"

    @fm.tool
    def fail() -> str:
        """Always fails."""
        raise ValueError("remote says no")

    return fm


async def test_fastmcp_server_tools() -> None:
    fm = fastmcp_server()
    registry = ToolRegistry()
    async with MCPToolset(fm._mcp_server, prefix="peer", mode="legacy") as remote:
        tools = {t.name: t for t in await remote.register(registry)}
        executor = ToolExecutor(registry)
        ok = await run(executor, "peer_add", {"a": 20, "b": 22})
        invalid = await run(executor, "peer_add", {"a": 1, "extra": True})
        asked = await run(executor, "peer_ask_name", {}, approve=True)
        failed = await run(executor, "peer_fail", {}, approve=True)
    assert tools["peer_add"].options.read_only and tools["peer_ask_name"].options.requires_confirmation
    assert ok.value == 42
    assert invalid.error.code == "INVALID_ARGUMENTS"
    # a remote question that is not a yes/no confirmation becomes a pause for the user
    assert asked.error.code == "NEEDS_USER_INPUT"
    assert asked.error.details["input_request"]["message"] == "What is your name?"
    assert failed.error.code == "REMOTE_TOOL_ERROR" and "remote says no" in failed.error.message


async def test_a_result_the_sdk_refuses_is_a_remote_error_not_a_dead_server() -> None:
    """The server answered (with structured content that breaks its own output schema): REMOTE_ERROR, not
    REMOTE_UNAVAILABLE, and the connection is kept for the next call."""
    fm = FastMCP("peer")

    @fm.tool(
        annotations={"readOnlyHint": True},
        output_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    )
    def count() -> FastMCPToolResult:
        """Counts."""
        return FastMCPToolResult(content="many", structured_content={"n": "many"})

    @fm.tool(annotations={"readOnlyHint": True})
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    registry = ToolRegistry()
    async with MCPToolset(fm._mcp_server, mode="legacy", trusted=True) as remote:
        await remote.register(registry)
        executor = ToolExecutor(registry)
        connection = remote._client
        refused = await run(executor, "count", {})
        kept = remote._client is connection
        after = await run(executor, "add", {"a": 1, "b": 2})
    assert refused.error.code == "REMOTE_ERROR" and not refused.error.retryable
    assert "Invalid structured content" in refused.error.message
    assert kept and after.value == 3


def stdio_command() -> StdioServerParameters:
    here = Path(__file__).parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(here), os.environ.get("PYTHONPATH", "")])}
    args = ["-m", "toolrun.mcp", "serve", "sample_tools:registry"]
    return StdioServerParameters(command=sys.executable, args=args, env=env)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
async def test_dead_server_is_a_tool_error_and_the_next_call_reconnects() -> None:
    registry = ToolRegistry()
    command = stdio_command()
    async with MCPToolset(command, trusted=True, retries=0) as remote:
        await remote.register(registry)
        executor = ToolExecutor(registry)
        before = await run(executor, "add", {"a": 1, "b": 1})
        died = await asyncio.wait_for(run(executor, "crash", {}), 15)
        after = await run(executor, "add", {"a": 2, "b": 2})
    assert before.value == 2
    assert died.status == "error" and died.error.code == "REMOTE_UNAVAILABLE"
    assert after.status == "ok" and after.value == 4, after.error


async def test_a_closed_toolset_refuses_calls_until_it_is_opened_again(server: Any) -> None:
    """A service started twice in one process (its App, and so its toolset, made once at import): the
    second start registers the tools again on the same toolset; between the two, calls refuse."""
    remote = MCPToolset(server, trusted=True)
    first = ToolRegistry()
    await remote.register(first)
    assert (await run(ToolExecutor(first), "add", {"a": 1, "b": 1})).value == 2
    await remote.aclose()
    closed = await run(ToolExecutor(first), "add", {"a": 1, "b": 1})
    assert closed.status == "error" and closed.error.code == "REMOTE_UNAVAILABLE"
    second = ToolRegistry()
    try:
        await remote.register(second)
        again = await run(ToolExecutor(second), "add", {"a": 2, "b": 2})
    finally:
        await remote.aclose()
    assert again.status == "ok" and again.value == 4, again.error


async def test_unreachable_server_fails_fast() -> None:
    toolset = MCPToolset(f"http://127.0.0.1:{free_port()}/mcp", connect_timeout=3)
    with pytest.raises(ConnectionError, match="Could not connect"):
        await asyncio.wait_for(toolset.connect(), 10)
    await toolset.aclose()


async def test_http_headers_reach_the_server(server: Any) -> None:
    app = create_http_app(server, resolve_principal=lambda token: USER if token == "secret" else None)
    async with serving(app) as base:
        registry = ToolRegistry()
        async with MCPToolset(f"{base}/mcp", headers={"Authorization": "Bearer secret"}) as remote:
            await remote.register(registry)
            result = await run(ToolExecutor(registry), "get_task", {"task_id": "t7"})
        with pytest.raises(ConnectionError):
            async with MCPToolset(f"{base}/mcp", headers={"Authorization": "Bearer wrong"}) as denied:
                await denied.register(ToolRegistry())
    assert result.value == {"id": "t7", "title": "Write the report"}


async def test_rate_limit_and_audit_of_remote_calls(server: Any) -> None:
    registry = ToolRegistry()
    audit = InMemoryAuditSink()
    async with MCPToolset(server, rate_limit="1/minute") as remote:
        await remote.register(registry)
        executor = ToolExecutor(registry, audit=audit)
        first = await run(executor, "get_task", {"task_id": "t1"})
        second = await run(executor, "add", {"a": 1, "b": 1})  # one limit for the whole server
    assert first.status == "ok"
    assert second.error.code == "RATE_LIMITED"
    assert [(r.tool, r.principal, r.outcome) for r in audit.records] == [
        ("get_task", "u1", "ok"),
        ("add", "u1", "error"),
    ]
