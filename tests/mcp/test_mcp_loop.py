"""The stream loop (`ToolrunMCPServer.run`: stdio, in-memory legacy), the quiet OpenTelemetry middleware and
the `Mcp-Param-*` schema lookup, at the JSON-RPC level."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.shared.memory import create_client_server_memory_streams
from mcp.shared.message import SessionMessage
from mcp_helpers import serving, text

from mcp import Client
from toolrun import Tool, ToolContext, ToolRegistry
from toolrun.mcp import ToolrunMCPServer, create_http_app, create_server
from toolrun.mcp import _server as server_module

INIT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "raw", "version": "0"},
}
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def request(id: int, method: str, params: dict[str, Any] | None = None) -> SessionMessage:
    return SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=id, method=method, params=params))


def notification(method: str, params: dict[str, Any] | None = None) -> SessionMessage:
    return SessionMessage(types.JSONRPCNotification(jsonrpc="2.0", method=method, params=params))


@asynccontextmanager
async def raw_connection(server: ToolrunMCPServer) -> AsyncIterator[tuple[Any, Any, anyio.Event]]:
    """The server running on memory streams; yields (send to server, receive from server, server done)."""
    async with create_client_server_memory_streams() as (client_streams, server_streams):
        client_read, client_write = client_streams
        server_read, server_write = server_streams
        done = anyio.Event()

        async def run() -> None:
            try:
                await server.run(server_read, server_write, server.create_initialization_options())
            finally:
                done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            yield client_write, client_read, done
            await client_write.aclose()
            with anyio.fail_after(5):
                await done.wait()


async def reply(receive: Any) -> Any:
    with anyio.fail_after(5):
        item = await receive.receive()
    assert isinstance(item, SessionMessage)
    return item.message


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def add_server() -> ToolrunMCPServer:
    return create_server(ToolRegistry([Tool.from_function(add)]), principal=ToolContext(user_id="u1"))


async def test_frames_before_the_first_request_are_replayed_in_order() -> None:
    # A notification sent ahead of initialize reaches the handshake loop (the SDK drops it there: not
    # initialized yet), and the requests after initialize are served on the same connection.
    async with raw_connection(add_server()) as (send, receive, _):
        await send.send(notification("notifications/roots/list_changed"))
        await send.send(request(1, "initialize", INIT))
        init = await reply(receive)
        assert isinstance(init, types.JSONRPCResponse) and init.result["protocolVersion"] == "2025-11-25"
        await send.send(notification("notifications/initialized"))
        await send.send(request(2, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}))
        call = await reply(receive)
        assert isinstance(call, types.JSONRPCResponse) and call.id == 2
        assert call.result["structuredContent"] == {"result": 5}
        assert "resultType" not in call.result  # sieved on 2025 versions


async def test_requests_before_initialize_are_refused_and_unknown_methods_are_not_found() -> None:
    async with raw_connection(add_server()) as (send, receive, _):
        await send.send(request(1, "tools/list"))
        early = await reply(receive)
        assert isinstance(early, types.JSONRPCError) and early.error.code == types.INVALID_PARAMS
        await send.send(request(2, "initialize", INIT))
        assert isinstance(await reply(receive), types.JSONRPCResponse)
        await send.send(notification("notifications/initialized"))
        await send.send(request(3, "no/such/method"))
        unknown = await reply(receive)
        assert isinstance(unknown, types.JSONRPCError) and unknown.error.code == types.METHOD_NOT_FOUND


async def test_an_enveloped_request_on_a_handshake_connection_is_refused() -> None:
    async with raw_connection(add_server()) as (send, receive, _):
        await send.send(request(1, "initialize", INIT))
        assert isinstance(await reply(receive), types.JSONRPCResponse)
        await send.send(notification("notifications/initialized"))
        await send.send(request(2, "tools/list", {"_meta": ENVELOPE}))
        refused = await reply(receive)
        assert isinstance(refused, types.JSONRPCError) and refused.error.code == types.INVALID_REQUEST


async def test_a_connection_opened_with_the_envelope_is_served_in_the_2026_era() -> None:
    async with raw_connection(add_server()) as (send, receive, _):
        params = {"name": "add", "arguments": {"a": 1, "b": 2}, "_meta": ENVELOPE}
        await send.send(request(1, "tools/call", params))
        call = await reply(receive)
        assert isinstance(call, types.JSONRPCResponse)
        assert call.result["structuredContent"] == {"result": 3} and call.result["resultType"] == "complete"
        await send.send(request(2, "initialize", INIT))
        late = await reply(receive)
        assert isinstance(late, types.JSONRPCError) and late.error.code == types.UNSUPPORTED_PROTOCOL_VERSION


async def test_the_loop_ends_when_the_client_leaves_before_any_request() -> None:
    async with raw_connection(add_server()) as (send, _, done):
        await send.send(notification("notifications/initialized"))
    assert done.is_set()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_otel_span_recorded_when_a_tracer_provider_is_configured(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp.shared import _otel
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(_otel, "_tracer", provider.get_tracer("test"))
    monkeypatch.setattr(server_module, "get_tracer_provider", lambda: provider)
    async with Client(add_server(), mode=mode) as client:
        result = await client.call_tool("add", {"a": 1, "b": 2})
    assert text(result) == "3"
    assert "tools/call add" in [span.name for span in exporter.get_finished_spans()]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_otel_middleware_is_skipped_only_when_nobody_could_see_its_span(mode: str) -> None:
    server = add_server()
    [quiet] = server.middleware
    assert isinstance(quiet, server_module._QuietOpenTelemetry)
    seen: list[str] = []
    inner = quiet.inner

    async def spy(ctx: Any, call_next: Any) -> Any:
        seen.append(ctx.method)
        return await inner(ctx, call_next)

    quiet.inner = spy  # type: ignore[assignment]
    async with Client(server, mode=mode) as client:
        await client.call_tool("add", {"a": 1, "b": 2})  # no trace context, no tracer provider: straight on
        assert "tools/call" not in seen
        await client.call_tool("add", {"a": 1, "b": 2}, meta={"progressToken": "p1"})  # other _meta: the same
        assert "tools/call" not in seen
        traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        await client.call_tool("add", {"a": 1, "b": 2}, meta={"traceparent": traceparent})
        assert seen.count("tools/call") == 1  # a trace context to carry on: through the SDK's middleware


def header_tool_server() -> ToolrunMCPServer:
    lookup = Tool.from_schema(
        "lookup",
        "Look a region up.",
        {
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
            "required": ["region"],
        },
        handler=lambda region: f"in {region}",
    )
    return create_server(ToolRegistry([lookup, Tool.from_function(add)]))


def test_input_schema_lookup_only_for_schemas_with_mcp_headers() -> None:
    server = header_tool_server()
    assert server.get_tool_input_schema is not None
    schema = server.get_tool_input_schema("lookup")
    assert schema is not None and schema["properties"]["region"]["x-mcp-header"] == "Region"
    assert server.get_tool_input_schema("add") is None  # nothing to check
    assert server.get_tool_input_schema("missing") is None


@pytest.mark.slow
async def test_mcp_param_headers_are_checked_against_the_tool_schema_over_http() -> None:
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
    }

    def body(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        params = {"name": name, "arguments": arguments, "_meta": ENVELOPE}
        return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}

    async with serving(create_http_app(header_tool_server())) as base:
        url = f"{base}/mcp"
        async with Client(url) as client:  # the official client mirrors the argument into Mcp-Param-Region
            assert text(await client.call_tool("lookup", {"region": "eu"})) == "in eu"
        async with httpx2.AsyncClient() as http:
            wrong = await http.post(
                url,
                json=body("lookup", {"region": "eu"}),
                headers={**headers, "Mcp-Name": "lookup", "Mcp-Param-Region": "us"},
            )
            assert wrong.status_code == 400
            assert wrong.json()["error"]["code"] == types.HEADER_MISMATCH
            plain = await http.post(
                url,
                json=body("add", {"a": 1, "b": 2}),
                headers={**headers, "Mcp-Name": "add"},
            )
            assert plain.status_code == 200 and plain.json()["result"]["structuredContent"] == {"result": 3}


@pytest.mark.slow
@pytest.mark.parametrize("parser", ["h11", "httptools"])
async def test_routing_headers_are_read_without_the_whitespace_around_them(parser: str) -> None:
    # RFC 9110 §5.5: a field value excludes the OWS around it. h11 strips it, httptools does not, and the
    # SDK compares Mcp-Name with params.name as given (MCP conformance: whitespace-header-value). The
    # request is written on a raw socket: HTTP clients refuse to send such a value.
    body = (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add",'
        b'"arguments":{"a":1,"b":2},"_meta":' + json.dumps(ENVELOPE).encode() + b"}}"
    )

    async def call(name: bytes) -> tuple[int, dict[str, Any]]:
        reader, writer = await asyncio.open_connection(host, port)
        head = (
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n"
            b"Mcp-Method:  tools/call\t\r\nMcp-Name: " + name + b"\r\nConnection: close\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
        )
        writer.write(head + body)
        answer = await reader.read()
        writer.close()
        status_line, _, rest = answer.partition(b"\r\n")
        return int(status_line.split()[1]), json.loads(rest.partition(b"\r\n\r\n")[2])

    async with serving(create_http_app(header_tool_server(), json_response=True), http=parser) as base:
        host, port = base.removeprefix("http://").split(":")
        status, answer = await call(b"  add \t")
        assert status == 200, answer
        assert answer["result"]["structuredContent"] == {"result": 3}
        status, answer = await call(b" lookup ")  # a different name is still refused
        assert status == 400 and answer["error"]["code"] == types.HEADER_MISMATCH


async def _results() -> list[tuple[Any, Any]]:
    import copy
    import datetime

    from toolrun import ToolCall, ToolExecutor

    async def number() -> int:
        """A number."""
        return 3

    async def mapping() -> dict[str, Any]:
        """A mapping with values JSON has no type for."""
        return {"when": datetime.date(2026, 1, 2), "pair": (1, 2), "nested": {"x": None, "y": [1.5, "z"]}}

    async def stamp() -> datetime.datetime:
        """A timestamp."""
        return datetime.datetime(2026, 1, 2, 3, 4, 5)

    async def untyped():  # type: ignore[no-untyped-def]
        """No declared return type."""
        return [1, 2]

    async def broken() -> int:
        """Fails."""
        raise RuntimeError("secret")

    registry = ToolRegistry([Tool.from_function(f) for f in (number, mapping, stamp, untyped, broken)])
    executor = ToolExecutor(registry)
    out = []
    for name, arguments in [
        ("number", {}),
        ("mapping", {}),
        ("stamp", {}),
        ("untyped", {}),
        ("broken", {}),
        ("number", {"extra": 1}),
    ]:
        tool = registry.find(name)
        out.append((await executor.execute(ToolCall(id="c", name=name, arguments=arguments)), tool))
    executor.close()
    hidden = copy.copy(out[1][0])
    hidden.exclude_value_from_context = True  # a value kept from the model: no structuredContent
    out.append((hidden, out[1][1]))
    return out


async def test_fast_wire_form_is_what_the_sdk_serializer_makes_of_each_result() -> None:
    from mcp_types import methods
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

    results = await _results()
    assert {r.status for r, _ in results} == {"ok", "error"}
    for version in (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS):
        for result, tool in results:
            rendered = server_module._render(result, tool)
            expected = methods.serialize_server_result("tools/call", version, dict(rendered))
            assert server_module._wire_result(rendered, version) == expected, (version, result.status)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_calls_the_fast_path_leaves_to_the_sdk(mode: str) -> None:
    server = add_server()
    async with Client(server, mode=mode) as client:
        with pytest.raises(Exception, match="Unknown tool"):
            await client.call_tool("missing", {})
        bad = await client.call_tool("add", {"a": "x", "b": 2})
        assert bad.is_error and "INVALID_ARGUMENTS" in text(bad)
        assert (await client.call_tool("add", {"a": 1, "b": 2})).structured_content == {"result": 3}
    server.middleware.append(lambda ctx, call_next: call_next(ctx))  # another middleware: all through the SDK
    async with Client(server, mode=mode) as client:
        assert (await client.call_tool("add", {"a": 1, "b": 2})).structured_content == {"result": 3}


async def test_a_replaced_tools_call_handler_is_not_bypassed() -> None:
    server = add_server()

    async def mine(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        content: list[types.ContentBlock] = [types.TextContent(text="mine")]
        return types.CallToolResult(content=content, structured_content={"result": 0})

    server.add_request_handler("tools/call", types.CallToolRequestParams, mine)
    for mode in ("legacy", "auto"):
        async with Client(server, mode=mode) as client:
            assert text(await client.call_tool("add", {"a": 1, "b": 2})) == "mine"


@pytest.mark.slow
async def test_mcp_param_headers_of_a_tool_the_caller_may_not_call_are_not_checked() -> None:
    # As the SDK's own tools/list walk: a tool not listed to this caller has no schema to check against,
    # so a stranger learns nothing from a mismatched header (the executor refuses the call as always).
    secret = Tool.from_schema(
        "secret",
        "Admins only.",
        {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}},
        handler=lambda region="": "done",
        roles={"admin"},
    )
    server = create_server(ToolRegistry([secret]))
    principals = {
        "tok-admin": ToolContext(user_id="a", roles=("admin",)),
        "tok-member": ToolContext(user_id="m"),
    }
    params = {"name": "secret", "arguments": {"region": "eu"}, "_meta": ENVELOPE}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "secret",
        "Mcp-Param-Region": "us",
    }
    app = create_http_app(server, resolve_principal=principals.get)
    async with serving(app) as base, httpx2.AsyncClient() as http:
        admin = await http.post(
            f"{base}/mcp", json=body, headers={**headers, "Authorization": "Bearer tok-admin"}
        )
        assert admin.status_code == 400 and admin.json()["error"]["code"] == types.HEADER_MISMATCH
        member = await http.post(
            f"{base}/mcp", json=body, headers={**headers, "Authorization": "Bearer tok-member"}
        )
        assert member.status_code == 200
        result = member.json()["result"]
        assert result["isError"] and "secret" in result["content"][0]["text"]
