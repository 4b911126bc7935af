"""toolrun's MCP server with the official `mcp.Client`, in memory, on both protocol eras.

`auto` negotiates 2026-07-28 (per-request envelope, input-required rounds); `legacy` the 2025 handshake
(elicitation requests while the call waits).
"""

from __future__ import annotations

import asyncio
from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from mcp_helpers import text
from sample_tools import build_registry

from mcp import Client
from toolrun import ToolContext, ToolExecutor, ToolRegistry
from toolrun.mcp import create_server
from toolrun.runtime import InMemoryAuditSink, ToolFinished

pytestmark = pytest.mark.parametrize("mode", ["auto", "legacy"])

VERSIONS = {"auto": "2026-07-28", "legacy": "2025-11-25"}


async def test_negotiates_each_era(server: Any, mode: str) -> None:
    async with Client(server, mode=mode) as client:
        assert client.protocol_version == VERSIONS[mode]


async def test_list_in_registration_order_with_annotations_and_schemas(server: Any, mode: str) -> None:
    async with Client(server, mode=mode) as client:
        listed = (await client.list_tools()).tools
        again = (await client.list_tools()).tools
    names = [t.name for t in listed]
    assert names == [t.name for t in again]
    # purge_cache needs role admin: the member principal does not see it
    assert names == [
        "add", "get_task", "broken", "slow", "delete_task", "send_note", "long_job", "wait_forever",
    ]  # fmt: skip
    by_name = {t.name: t for t in listed}
    add = by_name["add"]
    assert add.annotations is not None
    assert add.annotations.title == "Add two numbers"
    assert add.annotations.read_only_hint is True
    assert add.annotations.destructive_hint is False
    assert add.annotations.idempotent_hint is True
    assert add.input_schema["properties"]["a"]["type"] == "integer"
    assert add.input_schema["required"] == ["a", "b"]
    assert add.output_schema == {
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
    }
    delete = by_name["delete_task"].annotations
    assert delete is not None and delete.destructive_hint is True and delete.read_only_hint is False
    get_task = by_name["get_task"].annotations
    assert get_task is not None and get_task.open_world_hint is False
    assert by_name["broken"].output_schema is not None  # dict[str, str] is declared


async def test_call_ok_has_structured_content_and_text_copy(server: Any, mode: str) -> None:
    async with Client(server, mode=mode) as client:
        result = await client.call_tool("add", {"a": 2, "b": 3})
        task = await client.call_tool("get_task", {"task_id": "t1"})
    assert not result.is_error
    assert result.structured_content == {"result": 5}
    assert text(result) == "5"
    assert task.structured_content == {"id": "t1", "title": "Write the report"}
    assert '"title":"Write the report"' in text(task)


async def test_bad_arguments_list_every_problem(server: Any, mode: str) -> None:
    async with Client(server, mode=mode) as client:
        result = await client.call_tool("add", {"a": "x", "c": 1})
    assert result.is_error
    assert result.structured_content is None
    body = text(result)
    assert "INVALID_ARGUMENTS" in body
    assert "- a:" in body and "- b:" in body and "- c:" in body  # wrong type, missing, unexpected


async def test_tool_error_hides_internal_text(server: Any, mode: str) -> None:
    async with Client(server, mode=mode) as client:
        result = await client.call_tool("broken", {"task_id": "t1"})
    assert result.is_error and result.structured_content is None
    body = text(result)
    assert "EXECUTION_FAILED" in body and "error id" in body
    assert "hunter2" not in body and "RuntimeError" not in body and "database" not in body


async def test_timeout_is_an_error_result(server: Any, mode: str) -> None:
    async with Client(server, mode=mode) as client:
        result = await client.call_tool("slow", {})
    assert result.is_error
    assert "TIMEOUT" in text(result)


async def test_unknown_tool_is_the_protocol_error(server: Any, mode: str) -> None:
    async with Client(server, mode=mode) as client:
        with pytest.raises(MCPError) as info:
            await client.call_tool("no_such_tool", {})
    assert info.value.code == types.INVALID_PARAMS
    assert "no_such_tool" in info.value.message


async def test_roles_of_the_configured_principal(executor: ToolExecutor, mode: str) -> None:
    member = create_server(executor.registry, executor=executor, principal=ToolContext(user_id="m"))
    admin = create_server(
        executor.registry, executor=executor, principal=ToolContext(user_id="a", roles=("admin",))
    )
    async with Client(member, mode=mode) as client:
        denied = await client.call_tool("purge_cache", {})
    async with Client(admin, mode=mode) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        allowed = await client.call_tool("purge_cache", {})
    assert denied.is_error and "PERMISSION_DENIED" in text(denied)
    assert "purge_cache" in names
    assert not allowed.is_error and text(allowed) == "purged"


async def test_rate_limit_per_principal(server: Any, mode: str) -> None:
    async with Client(server, mode=mode) as client:
        first = await client.call_tool("send_note", {"text": "hi"})
        second = await client.call_tool("send_note", {"text": "hi"})
    assert not first.is_error
    assert second.is_error and "RATE_LIMITED" in text(second)


async def test_audit_and_events_for_each_call(
    server: Any, executor: ToolExecutor, audit: InMemoryAuditSink, mode: str
) -> None:
    finished: list[ToolFinished] = []
    executor.subscribe(finished.append, ToolFinished)
    async with Client(server, mode=mode) as client:
        await client.call_tool("add", {"a": 1, "b": 1})
        await client.call_tool("add", {"a": "no"})
    assert [(r.tool, r.principal, r.outcome) for r in audit.records] == [
        ("add", "u1", "ok"),
        ("add", "u1", "error"),
    ]
    assert [(e.outcome, e.code) for e in finished] == [("ok", None), ("error", "INVALID_ARGUMENTS")]


async def test_cache_serves_repeated_calls(mode: str) -> None:
    calls = []

    registry = ToolRegistry()

    @registry.register(read_only=True, cache_ttl=60)
    def lookup(key: str) -> str:
        """Look a key up."""
        calls.append(key)
        return key.upper()

    server = create_server(registry)
    async with Client(server, mode=mode) as client:
        one = await client.call_tool("lookup", {"key": "k"})
        two = await client.call_tool("lookup", {"key": "k"})
    assert text(one) == text(two) == "K"
    assert calls == ["k"]


async def test_progress_notifications(server: Any, mode: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with Client(server, mode=mode) as client:
        result = await client.call_tool("long_job", {"steps": 3}, progress_callback=on_progress)
    assert text(result) == "done"
    # throttled: the first and the final report always pass, the one between may be dropped
    assert seen[0] == (1, 3, "step 1") and seen[-1] == (3, 3, "step 3") and len(seen) <= 3


async def test_client_cancellation_cancels_the_tool(
    server: Any, state: dict[str, asyncio.Event], audit: InMemoryAuditSink, mode: str
) -> None:
    async with Client(server, mode=mode) as client:
        call = asyncio.create_task(client.call_tool("wait_forever", {}))
        await asyncio.wait_for(state["started"].wait(), 5)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await asyncio.wait_for(state["cancelled"].wait(), 5)
        # the connection still serves calls afterwards
        assert text(await client.call_tool("add", {"a": 1, "b": 2})) == "3"
    assert ("wait_forever", "cancelled") in [(r.tool, r.outcome) for r in audit.records]


def test_server_registry_view_limits_what_is_callable(mode: str) -> None:
    registry = build_registry()
    view = registry.filter(allow={"add"})
    server = create_server(view, executor=ToolExecutor(registry))

    async def run() -> tuple[list[str], Any]:
        async with Client(server, mode=mode) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            with pytest.raises(MCPError) as info:
                await client.call_tool("get_task", {"task_id": "t"})
            return names, info.value

    names, error = asyncio.run(run())
    assert names == ["add"]
    assert error.code == types.INVALID_PARAMS


COMPOSED = {
    "type": "object",
    "$defs": {"Base": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}},
    "properties": {"mode": {"anyOf": [{"const": "fast"}, {"const": "safe"}]}},
    "allOf": [
        {"$ref": "#/$defs/Base"},
        {"if": {"properties": {"mode": {"const": "fast"}}}, "then": {"required": ["budget"]}},
    ],
    "anyOf": [{"properties": {"budget": {"type": "integer", "minimum": 1}}}, {"required": ["mode"]}],
    "oneOf": [
        {"properties": {"tag": {"type": "string"}}, "required": ["tag"]},
        {"properties": {"tags": {"type": "array", "items": {"type": "string"}}}, "required": ["tags"]},
    ],
}


async def test_composition_keywords_survive_tools_list_as_declared(mode: str) -> None:
    """allOf / anyOf / oneOf reach an MCP client as declared (JSON Schema 2020-12), also through a toolrun
    proxy of that server; only provider exports that need it fold them."""
    from toolrun import Tool
    from toolrun.mcp import MCPToolset

    registry = ToolRegistry([Tool.from_schema("plan", "Plan a run.", COMPOSED, lambda **kw: kw)])
    executor = ToolExecutor(registry)
    server = create_server(registry, executor=executor, principal=ToolContext(user_id="u"))
    async with Client(server, mode=mode) as client:
        (listed,) = (await client.list_tools()).tools
        refused = await client.call_tool("plan", {"mode": "fast", "tag": "x"})  # allOf: id and budget needed
        ok = await client.call_tool("plan", {"id": "a", "mode": "safe", "tag": "x"})
    proxy_registry = ToolRegistry()
    async with MCPToolset(server, mode=mode) as remote:
        await remote.register(proxy_registry)
        proxy = create_server(proxy_registry, executor=ToolExecutor(proxy_registry), principal=ToolContext())
        async with Client(proxy, mode=mode) as client:
            (relisted,) = (await client.list_tools()).tools
    for schema in (listed.input_schema, relisted.input_schema):
        for key in ("allOf", "anyOf", "oneOf", "$defs"):
            assert schema[key] == COMPOSED[key], key
        assert set(schema["properties"]) == {"id", "mode", "budget", "tag", "tags"}  # each field sendable
    assert refused.is_error and "INVALID_ARGUMENTS" in text(refused) and not ok.is_error
    for provider in ("openai", "anthropic", "gemini"):
        exported = str(registry.definitions(provider))
        assert "'allOf'" not in exported and "'oneOf'" not in exported, provider
