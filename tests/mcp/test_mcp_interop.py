"""`MCPToolset` against the reference MCP server, `@modelcontextprotocol/server-everything` (the TypeScript
SDK's server, pinned in tests/js/package.json with its lockfile), over stdio and over Streamable HTTP on
127.0.0.1: long text, an image, progress, a tool that must run as a task (2025-11-25 tasks), URL
elicitation (the `elicitation/create` request and the -32042 error), and resource links read back.

The package is installed by `npm ci` in tests/js (`make frontend-clients`, or here when missing); no Node or
no package is a failure, never a skip.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from mcp import StdioServerParameters
from toolrun import ToolCall, ToolContext, ToolExecutor, ToolRegistry
from toolrun.content import Image, ResourceLink, Text
from toolrun.mcp import MCPToolset

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]

JS_DIR = Path(__file__).resolve().parent.parent / "js"
EVERYTHING = JS_DIR / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
USER = ToolContext(user_id="u1")


def _installed() -> Path:
    """server-everything's entry point, installed by `npm ci` from the committed lockfile when missing or
    older than it (a node_modules that is a symbolic link is another checkout's, used as it is)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail(
            "Node.js 20+ and npm are required (apt-get install nodejs npm); `make test` installs them."
        )
    modules = JS_DIR / "node_modules"
    stamp, lock = modules / ".package-lock.json", JS_DIR / "package-lock.json"
    if not modules.is_symlink() and (not stamp.exists() or stamp.stat().st_mtime < lock.stat().st_mtime):
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"], cwd=JS_DIR, capture_output=True, text=True, timeout=300
        )
        if done.returncode != 0:
            pytest.fail(f"npm ci failed in {JS_DIR}:\n{done.stderr[-2000:]}")
    if not EVERYTHING.exists():
        pytest.fail(f"{EVERYTHING} is missing: run `npm ci` in {JS_DIR}.")
    return EVERYTHING


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def everything_http() -> Iterator[str]:
    """server-everything in `streamableHttp` mode; its /mcp URL on 127.0.0.1."""
    entry = _installed()
    port = _free_port()
    process = subprocess.Popen(
        ["node", str(entry), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    try:
        line = process.stderr.readline()  # "MCP Streamable HTTP Server listening on port N", or why not
        if f"listening on port {port}" not in line:
            process.kill()
            pytest.fail(f"server-everything did not start: {line}{process.stderr.read()[-2000:]}")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        process.stderr.close()


@pytest.fixture(params=["stdio", "http"])
def everything(request: pytest.FixtureRequest) -> str | StdioServerParameters:
    if request.param == "http":
        url: str = request.getfixturevalue("everything_http")
        return url
    return StdioServerParameters(command="node", args=[str(_installed()), "stdio"])


async def call(executor: ToolExecutor, name: str, arguments: dict[str, Any], ctx: ToolContext = USER) -> Any:
    return await executor.execute(ToolCall(name=name, arguments=arguments), ctx)


async def test_long_text_is_cut_visibly_kept_and_paged(everything: Any) -> None:
    message = "".join(f"word{i:05d} " for i in range(1200))  # 12,000 characters
    registry = ToolRegistry()
    async with MCPToolset(everything, prefix="ev") as remote:
        await remote.register(registry)
        executor = ToolExecutor(registry)
        result = await call(executor, "ev_echo", {"message": message})
        assert result.status == "ok"
        assert result.metadata["truncated"] is True
        shown = result.render()
        assert len(shown) <= 4000
        assert "Cut to fit the output budget" in shown and result.metadata["artifact_id"] in shown
        assert shown.startswith("Echo: word00000") and "word01199" in shown  # the head and the tail
        whole, offset = "", 0
        while offset is not None:
            page = await call(
                executor,
                "read_result",
                {"artifact_id": result.metadata["artifact_id"], "offset": offset, "length": 5000},
            )
            assert page.status == "ok", page
            whole += page.value["text"]
            offset = page.value["next_offset"]
        executor.close()
    assert whole == f"Echo: {message}"


async def test_a_toolsets_own_budget_and_none(everything: Any) -> None:
    message = "x" * 12_000
    registry = ToolRegistry()
    async with MCPToolset(everything, prefix="ev", output_budget=None) as remote:
        await remote.register(registry)
        executor = ToolExecutor(registry, output_budget=9000)  # the executor's budget applies
        result = await call(executor, "ev_echo", {"message": message})
        executor.close()
    assert result.status == "ok" and result.metadata["truncated"] is True
    assert 4000 < len(result.render()) <= 9000


async def test_an_image_arrives_as_an_image(everything: Any) -> None:
    registry = ToolRegistry()
    async with MCPToolset(everything, prefix="ev") as remote:
        await remote.register(registry)
        executor = ToolExecutor(registry)
        result = await call(executor, "ev_get-tiny-image", {})
        executor.close()
    assert result.status == "ok"
    (image,) = result.content
    assert isinstance(image, Image) and image.media_type == "image/png"
    assert image.data.startswith(b"\x89PNG")
    assert "Here's the image you requested" in result.value and "MCP logo" in result.value


async def test_progress_reaches_the_caller(everything: Any) -> None:
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    registry = ToolRegistry()
    async with MCPToolset(everything, prefix="ev", trusted=True) as remote:
        await remote.register(registry)
        executor = ToolExecutor(registry)
        result = await call(
            executor,
            "ev_trigger-long-running-operation",
            {"duration": 0.3, "steps": 3},
            USER.evolve(progress=on_progress),
        )
        executor.close()
    assert result.status == "ok", result
    assert seen == [(1, 3), (2, 3), (3, 3)]


async def test_a_tool_that_must_run_as_a_task(everything: Any) -> None:
    registry = ToolRegistry()
    async with MCPToolset(everything, prefix="ev", trusted=True, max_poll_interval=0.5) as remote:
        tools = {t.name: t for t in await remote.register(registry)}
        executor = ToolExecutor(registry)
        started = time.monotonic()
        result = await call(executor, "ev_simulate-research-query", {"topic": "tidal energy"})
        executor.close()
    assert "ev_simulate-research-query" in tools
    assert result.status == "ok", result
    assert "# Research Report: tidal energy" in result.render()
    assert time.monotonic() - started >= 3.5  # four stages of a second: it really ran as a task


async def test_a_task_past_its_timeout_is_cancelled_on_the_server(everything: Any) -> None:
    registry = ToolRegistry()
    async with MCPToolset(
        everything, prefix="ev", trusted=True, timeout=1.0, max_poll_interval=0.2
    ) as remote:
        await remote.register(registry)
        executor = ToolExecutor(registry)
        result = await call(executor, "ev_simulate-research-query", {"topic": "slow"})
        executor.close()
        # the server's own account of the task: cancelled (`tasks/list` on the toolset's session)
        assert remote._client is not None
        listed = await remote._client.session.send_request(types.ListTasksRequest(), types.ListTasksResult)
    assert result.status == "error" and result.error.code == "TIMEOUT"
    assert [task.status for task in listed.tasks] == ["cancelled"]


async def test_url_elicitation_by_request_and_by_error_gives_the_url(everything: Any) -> None:
    registry = ToolRegistry()
    async with MCPToolset(everything, prefix="ev", trusted=True) as remote:
        await remote.register(registry)
        executor = ToolExecutor(registry)
        asked = await call(
            executor,
            "ev_trigger-url-elicitation",
            {"url": "https://example.org/consent", "message": "Sign in"},
        )
        refused = await call(
            executor,
            "ev_trigger-url-elicitation",
            {"url": "https://example.org/consent", "errorPath": True, "elicitationId": "e-1"},
        )
        executor.close()
    assert asked.status == "error" and asked.error.code == "NEEDS_USER_INPUT"
    assert asked.error.details["input_request"]["url"] == "https://example.org/consent"
    assert refused.status == "error" and refused.error.code == "NEEDS_USER_INPUT", refused
    request = refused.error.details["input_request"]
    assert request["url"] == "https://modelcontextprotocol.io"
    assert request["message"].startswith("Open this link")
    assert request["url"] in refused.error.message


async def test_resource_links_can_be_read(everything: Any) -> None:
    registry = ToolRegistry()
    async with MCPToolset(everything, prefix="ev") as remote:
        await remote.register(registry)
        executor = ToolExecutor(registry)
        linked = await call(executor, "ev_get-resource-links", {"count": 2})
        links = [item for item in linked.content if isinstance(item, ResourceLink)]
        assert [link.uri for link in links] == [
            "demo://resource/dynamic/blob/1",
            "demo://resource/dynamic/text/2",
        ]
        # the developer's way: the toolset reads a link as content items
        (blob,) = await remote.read_resource(links[0].uri)
        (text,) = await remote.read_resource(links[1])
        # the model's way: the reader tool registered beside the remote's tools
        read = await call(executor, "ev_read_resource", {"uri": links[1].uri})
        other_user = await call(
            executor, "ev_read_resource", {"uri": links[1].uri}, ToolContext(user_id="u2")
        )
        unseen = await call(executor, "ev_read_resource", {"uri": "demo://resource/dynamic/text/9"})
        executor.close()
    assert blob.data.startswith(b"Resource 1: This is a base64 blob")  # type: ignore[union-attr]
    assert isinstance(text, Text) and text.text.startswith("Resource 2: This is a plaintext resource")
    assert read.status == "ok" and "Resource 2: This is a plaintext resource" in read.render()
    # the model opens only links this server gave its own user
    assert other_user.error.code == "NOT_FOUND" and unseen.error.code == "NOT_FOUND"
