"""MCP `tools/call` round trips: toolrun's server beside FastMCP's and the bare SDK, same client, one run.

Every candidate serves the same tool, ``add(a: int, b: int) -> int`` ("Add two integers."), and every op is
one ``await client.call_tool("add", {"a": 1, "b": 2})`` with the official ``mcp.Client`` (SDK 2.3),
checked to come back with ``structuredContent == {"result": 3}`` and the text ``"3"``. Client and server
run in this one process and event loop, so each row pays for both sides; the client's share is the same
for every row.

Transports (one table each; rows interleaved round by round):

* ``inmem 2026``: ``mcp.Client(server)`` in memory, protocol 2026-07-28 (the SDK's direct dispatcher).
* ``inmem 2025``: ``mcp.Client(server, mode="legacy")``: the 2025-11-25 handshake over in-memory streams
  (JSON-RPC framing, the dispatcher's tasks).
* ``http``: Streamable HTTP over loopback TCP to uvicorn in this loop (``mcp.Client(url)``, negotiated
  with ``server/discover``; JSON-RPC over HTTP POST, SSE responses).

Rows:

* ``toolrun``: ``toolrun.mcp.create_server(registry)``; each call through ``ToolExecutor.execute``
  (validation, the default 30 s timeout, audit and events off as nobody listens, as in ``toolrun_quiet``
  of ``bench/executor.py``).
* ``fastmcp``: ``FastMCP("bench")`` with ``@mcp.tool`` on the same function (``fastmcp.http_app()`` for
  HTTP).
* ``toolrun_json`` (HTTP only): the same, served with ``create_http_app(server, json_response=True)``:
  plain JSON response bodies instead of an SSE stream per POST (no progress notifications over HTTP then).
* ``sdk_lowlevel``: the SDK's low-level ``Server`` with a hand-written ``tools/call`` handler that reads
  ``a`` and ``b`` from the dict and answers: no validation, no timeout (the bare SDK).
* ``client_floor`` (``inmem 2025`` and ``http``; the floor): no MCP server at all, only canned answers, so
  the row is what the official client (plus, over HTTP, uvicorn) costs by itself. In memory, a ``Server``
  whose ``run`` answers each request from the stream with a fixed ``JSONRPCResponse``; over HTTP, a bare
  ASGI callable that reads the body, ``json.loads`` it and sends back a fixed JSON-RPC result with the
  request's id (``application/json``). No server can beat it with this client, so a server reaches 2x
  FastMCP's calls/s only where this row is under half of FastMCP's.

A fourth table, ``http, server process``, answers the question the round trips cannot: how many calls
one server core serves. Each candidate's HTTP app runs under uvicorn in a process of its own
(``python bench/mcp.py --serve NAME --port P``); the same official client in this process makes the calls,
and the row is the **server process's CPU time per call** (``time.process_time_ns`` read in the server
through a ``GET /__cpu`` probe before and after each batch), so the client's own cost is out of it.
``calls/s per server core`` is its inverse. Batches are interleaved round-robin, median of the rounds.

Run: ``PYTHONPATH=src python bench/mcp.py [--quick]`` (needs the ``mcp`` and ``bench`` extras).
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import subprocess
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

# This file is called mcp.py: take its folder off the front of the path so `import mcp` is the SDK, and put
# it at the end for `_harness`.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
import mcp  # noqa: F401  (the SDK, imported before our folder is on the path)

sys.path.append(str(_HERE))

import _harness
from _harness import Kind, Maker, Op

EXPECTED = {"result": 3}


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def toolrun_server() -> Any:
    from toolrun import Tool, ToolRegistry
    from toolrun.mcp import create_server

    return create_server(ToolRegistry([Tool.from_function(add)]), name="bench")


def fastmcp_server() -> Any:
    from fastmcp import FastMCP

    server = FastMCP("bench")
    server.tool(add)
    return server


def lowlevel_server() -> Any:
    import mcp_types as types
    from mcp.server.lowlevel import Server

    tool = types.Tool(
        name="add",
        description="Add two integers.",
        input_schema={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
        output_schema={
            "type": "object",
            "properties": {"result": {"type": "integer"}},
            "required": ["result"],
        },
    )

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = params.arguments or {}
        value = await add(args["a"], args["b"])
        return types.CallToolResult(
            content=[types.TextContent(text=str(value))], structured_content={"result": value}
        )

    return Server("bench", on_list_tools=list_tools, on_call_tool=call_tool)


_TOOLS_RESULT: dict[str, Any] = {
    "tools": [
        {
            "name": "add",
            "description": "Add two integers.",
            "inputSchema": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
            "outputSchema": {
                "type": "object",
                "properties": {"result": {"type": "integer"}},
                "required": ["result"],
            },
        }
    ]
}
_CALL_RESULT: dict[str, Any] = {
    "content": [{"type": "text", "text": "3"}],
    "isError": False,
    "structuredContent": {"result": 3},
}


class CannedStreamServer:
    """The in-memory client floor: answers every request on the stream with a fixed result."""

    @staticmethod
    def make() -> Any:
        from mcp.server.lowlevel import Server
        from mcp.shared.message import SessionMessage
        from mcp_types import JSONRPCRequest, JSONRPCResponse

        class Canned(Server[Any]):
            async def run(self, read_stream: Any, write_stream: Any, *args: Any, **kwargs: Any) -> None:
                async with write_stream:
                    async for item in read_stream:
                        message = getattr(item, "message", None)
                        if not isinstance(message, JSONRPCRequest):
                            continue
                        if message.method == "initialize":
                            result = {
                                "protocolVersion": (message.params or {})["protocolVersion"],
                                "capabilities": {"tools": {"listChanged": False}},
                                "serverInfo": {"name": "floor", "version": "0"},
                            }
                        else:
                            result = _TOOLS_RESULT if message.method == "tools/list" else _CALL_RESULT
                        response = JSONRPCResponse(jsonrpc="2.0", id=message.id, result=result)
                        await write_stream.send(SessionMessage(response))

        return Canned("floor")


async def canned_http_app(scope: Any, receive: Any, send: Any) -> None:
    """The HTTP client floor: a fixed JSON-RPC result for each POST (2026-07-28: discover, list, call)."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    request = json.loads(body)
    if "id" not in request:
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    cached = {"cacheScope": "private", "ttlMs": 0, "resultType": "complete"}
    method = request["method"]
    if method == "server/discover":
        capabilities = {"tools": {"listChanged": False}}
        result = {**cached, "capabilities": capabilities, "supportedVersions": ["2026-07-28"]}
    elif method == "tools/list":
        result = {**cached, **_TOOLS_RESULT}
    else:
        result = {**_CALL_RESULT, "resultType": "complete"}
    out = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(out)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": out})


def client_floor_server() -> Any:
    return CannedStreamServer


def lowlevel_of(server: Any) -> Any:
    """The SDK `Server` behind a candidate (what `mcp.Client` connects to in memory)."""
    return getattr(server, "_mcp_server", server)


def toolrun_json_server() -> Any:
    server = toolrun_server()
    server.bench_json_response = True
    return server


def http_app(server: Any) -> Any:
    if server is CannedStreamServer:
        return canned_http_app
    if hasattr(server, "http_app"):  # FastMCP
        return server.http_app(path="/mcp")
    from toolrun.mcp import ToolrunMCPServer, create_http_app

    if isinstance(server, ToolrunMCPServer):
        return create_http_app(server, json_response=getattr(server, "bench_json_response", False))
    return server.streamable_http_app(streamable_http_path="/mcp", host="0.0.0.0")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def serve_http(stack: AsyncExitStack, app: Any) -> str:
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)

    async def stop() -> None:
        server.should_exit = True
        await task

    stack.push_async_callback(stop)
    return f"http://127.0.0.1:{port}/mcp"


def op_for(client: Any) -> Op:
    call_tool = client.call_tool

    async def call() -> Any:
        result = await call_tool("add", {"a": 1, "b": 2})
        if result.is_error or result.content[0].text != "3":
            raise AssertionError(result)
        return result.structured_content

    return call


def maker(stack: AsyncExitStack, factory: Any, transport: str) -> Maker:
    async def make() -> Op:
        from mcp import Client

        server = factory()
        if transport == "http":
            client = Client(await serve_http(stack, http_app(server)))
        else:
            if server is CannedStreamServer:
                server = CannedStreamServer.make()
            client = Client(lowlevel_of(server), mode="legacy" if transport == "inmem 2025" else "auto")
        await stack.enter_async_context(client)
        await client.list_tools()  # what a host does first; also fills the client's output-schema cache
        return op_for(client)

    return make


FACTORIES: dict[str, tuple[Kind, Any]] = {
    "sdk_lowlevel": ("floor", lowlevel_server),
    "fastmcp": ("peer", fastmcp_server),
    "toolrun": ("toolrun", toolrun_server),
}


async def main(settings: _harness.Settings) -> dict[str, list[_harness.Result]]:
    logging.getLogger("toolrun.audit").disabled = True
    out: dict[str, list[_harness.Result]] = {}
    for transport in ("inmem 2026", "inmem 2025", "http"):
        async with AsyncExitStack() as stack:
            factories = dict(FACTORIES)
            if transport != "inmem 2026":  # in memory on 2026 the SDK's dispatch is the only way in
                factories = {"client_floor": ("floor", client_floor_server), **factories}
            if transport == "http":
                factories["toolrun_json"] = ("toolrun", toolrun_json_server)
            makers = {
                f"{name} ({transport})": (kind, maker(stack, factory, transport))
                for name, (kind, factory) in factories.items()
            }
            candidates = await _harness.build(makers, expected=EXPECTED, settings=settings)
            rows = await _harness.measure(candidates, settings)
            floor = "client_floor" if transport != "inmem 2026" else "sdk_lowlevel"
            _harness.compare(
                rows,
                f"{floor} ({transport})",
                title=f"MCP tools/call round trip, {transport} (official mcp.Client, same process)",
                per="call",
                name=f"mcp_{transport.replace(' ', '_')}",
                settings=settings,
            )
            out[transport] = rows
    for transport, rows in out.items():
        by = {r.name.split(" (")[0]: r for r in rows}
        if "fastmcp" not in by:
            continue
        fastmcp_us = by["fastmcp"].median_us
        for name in ("toolrun", "toolrun_json", "sdk_lowlevel", "client_floor"):
            if name in by:
                us = by[name].median_us
                print(
                    f"{transport}: {name} {1e6 / us:,.0f} calls/s = {fastmcp_us / us:.2f}x fastmcp "
                    f"({1e6 / fastmcp_us:,.0f} calls/s)"
                )
    return out


# --------------------------------------------------------------------------------------------------------
# The server in a process of its own: server CPU per call


SERVED: dict[str, Any] = {
    "client_floor": client_floor_server,
    "sdk_lowlevel": lowlevel_server,
    "fastmcp": fastmcp_server,
    "toolrun": toolrun_server,
    "toolrun_json": toolrun_json_server,
}


def with_cpu_probe(app: Any) -> Any:
    """`app`, plus ``GET /__cpu``: this process's CPU time in ns (the same wrapper for every candidate)."""
    import time

    async def probed(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/__cpu":
            body = str(time.process_time_ns()).encode()
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return probed


def serve_forever(name: str, port: int) -> None:
    """``--serve``: one candidate's HTTP app under uvicorn on 127.0.0.1 (stopped by the parent)."""
    import uvicorn

    logging.getLogger("toolrun.audit").disabled = True
    app = with_cpu_probe(http_app(SERVED[name]()))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def start_servers() -> tuple[dict[str, int], list[subprocess.Popen[bytes]]]:
    """One server process per candidate, each on a free port of its own."""
    ports: dict[str, int] = {}
    procs: list[subprocess.Popen[bytes]] = []
    for name in SERVED:
        ports[name] = free_port()
        cmd = [sys.executable, __file__, "--serve", name, "--port", str(ports[name])]
        procs.append(subprocess.Popen(cmd, stdin=subprocess.DEVNULL))
    return ports, procs


async def server_process_table(settings: _harness.Settings, ports: dict[str, int]) -> list[_harness.Result]:
    import httpx

    from mcp import Client

    async with AsyncExitStack() as stack:
        probe = await stack.enter_async_context(httpx.AsyncClient())
        ops: dict[str, tuple[Op, str]] = {}
        for name, port in ports.items():
            base = f"http://127.0.0.1:{port}"
            for _ in range(600):
                try:
                    (await probe.get(f"{base}/__cpu")).raise_for_status()
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.05)
            else:
                raise RuntimeError(f"{name}: the server process did not start")
            client = await stack.enter_async_context(Client(f"{base}/mcp"))
            await client.list_tools()
            op = op_for(client)
            if await op() != EXPECTED:
                raise AssertionError(name)
            ops[name] = (op, f"{base}/__cpu")

        async def server_cpu(url: str) -> int:
            return int((await probe.get(url)).text)

        batch = 40 if settings.quick else 200
        samples: dict[str, list[float]] = {name: [] for name in ops}
        names = list(ops)
        for r in range(settings.warmup_rounds + settings.rounds):
            start = r % len(names)
            for name in names[start:] + names[:start]:
                op, url = ops[name]
                before = await server_cpu(url)
                for _ in range(batch):
                    await op()
                used = await server_cpu(url) - before
                if r >= settings.warmup_rounds:
                    samples[name].append(used / batch / 1e3)
    rows = []
    for name, values in samples.items():
        q1, med, q3 = _harness.quartiles(values)
        kind: Kind = "floor" if name == "client_floor" else "peer" if name == "fastmcp" else "toolrun"
        if name == "sdk_lowlevel":
            kind = "floor"
        rows.append(
            _harness.Result(
                f"{name} (server process)",
                kind,
                med,
                q1,
                q3,
                rounds=len(values),
                batch=batch,
                samples_us=values,
            )
        )
    _harness.compare(
        rows,
        "client_floor (server process)",
        title="MCP tools/call over HTTP, server CPU per call (server in its own process; client excluded)",
        per="call",
        name="mcp_http_server_process",
        settings=settings,
    )
    by = {r.name.split(" (")[0]: r.median_us for r in rows}
    for name in ("toolrun", "toolrun_json", "sdk_lowlevel", "client_floor"):
        print(
            f"server process: {name} {1e6 / by[name]:,.0f} calls/s per core = "
            f"{by['fastmcp'] / by[name]:.2f}x fastmcp ({1e6 / by['fastmcp']:,.0f} calls/s per core)"
        )
    return rows


if __name__ == "__main__":
    if "--serve" in sys.argv:
        serve_forever(sys.argv[sys.argv.index("--serve") + 1], int(sys.argv[sys.argv.index("--port") + 1]))
        raise SystemExit(0)
    settings = _harness.parse_args(
        sys.argv[1:], description=__doc__.splitlines()[0], rounds=21, quick_rounds=3
    )
    asyncio.run(main(settings))
    if settings.wants("server process") or settings.wants("http"):
        ports, procs = start_servers()
        try:
            asyncio.run(server_process_table(settings, ports))
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(timeout=10)
