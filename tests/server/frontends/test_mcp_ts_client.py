"""toolrun's MCP server and the official MCP TypeScript SDK client (@modelcontextprotocol/sdk), over stdio
and Streamable HTTP (`toolrun mcp serve`, a real subprocess each): an image tool's result arrives as
ImageContent (base64 PNG, its media type) beside structuredContent the client checks against the tool's
outputSchema; progress notifications reach the client when it sent a progressToken, and only then; an
async generator tool's partial results arrive as progress too."""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from processes import free_port, stop

from ._rich import STEPS, chart_png
from .conftest import run_node

pytestmark = pytest.mark.timeout(120)

HERE = Path(__file__).parent
SERVE = [sys.executable, "-m", "toolrun.mcp", "serve", "_rich:registry", "--user", "alice"]
CALLS = [
    {"name": "chart", "arguments": {"metric": "sales"}, "progress": True},
    {"name": "chart", "arguments": {"metric": "quiet"}, "progress": False},
    {"name": "scan", "arguments": {"hosts": 3}, "progress": True},
]


def environment() -> dict[str, str]:
    paths = [str(HERE), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`toolrun mcp serve --http` on a free port of 127.0.0.1; its endpoint's URL once it answers."""
    port = free_port()
    log = tmp_path_factory.mktemp("mcp-http") / "server.log"
    with log.open("w") as errors:
        process = subprocess.Popen(
            [*SERVE, "--http", "--port", str(port)], env=environment(), stdout=errors, stderr=errors
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the MCP HTTP server did not start:\n{log.read_text()[-3000:]}")
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(process)


def drive(js: Path, transport: str, http_url: str | None = None) -> dict[str, Any]:
    if transport == "stdio":
        payload: dict[str, Any] = {
            "transport": "stdio",
            "command": SERVE[0],
            "args": SERVE[1:],
            "env": environment(),
        }
    else:
        payload = {"transport": "http", "url": http_url}
    return run_node(js, "mcp_client.mjs", {**payload, "calls": CALLS})


def check(report: dict[str, Any]) -> None:
    assert report["server"]["name"] == "toolrun"
    chart_tool = next(t for t in report["tools"] if t["name"] == "chart")
    assert chart_tool["outputSchema"]["type"] == "object"
    scan_tool = next(t for t in report["tools"] if t["name"] == "scan")
    assert scan_tool["outputSchema"]["type"] == "object"  # the yield type, `dict[str, int]`
    with_token, without_token, generator = report["results"]
    for outcome in report["results"]:
        assert outcome["error"] is None, outcome["error"]
        assert outcome["result"].get("isError") is not True, outcome["result"]

    result = with_token["result"]
    assert result["structuredContent"] == {"metric": "sales", "points": 8}
    kinds = [block["type"] for block in result["content"]]
    assert "image" in kinds and "text" in kinds
    (image,) = [block for block in result["content"] if block["type"] == "image"]
    assert image["mimeType"] == "image/png" and base64.b64decode(image["data"]) == chart_png()
    texts = [block["text"] for block in result["content"] if block["type"] == "text"]
    assert "sales: 8 points, rising" in texts

    progress = with_token["progress"]
    assert 2 <= len(progress) <= STEPS and progress[-1] == {
        "progress": STEPS,
        "total": STEPS,
        "message": "drawing sales",
    }
    assert [p["progress"] for p in progress] == sorted(p["progress"] for p in progress)
    assert without_token["progress"] == []  # no progressToken, no notifications
    assert any(block["type"] == "image" for block in without_token["result"]["content"])

    assert generator["result"]["structuredContent"] == {"scanned": 3, "of": 3}
    assert [p["progress"] for p in generator["progress"]] == [1, 2, 3]
    assert generator["progress"][0]["message"] == '{"scanned":1,"of":3}'


def test_stdio(node_clients: Path) -> None:
    check(drive(node_clients, "stdio"))


def test_streamable_http(node_clients: Path, http_server: str) -> None:
    check(drive(node_clients, "http", http_server))
