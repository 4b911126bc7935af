"""Content both ways over MCP: toolrun's server sends image, audio, resource and resource_link blocks to
the official `mcp` client (both protocol eras, in memory and over stdio); toolrun's client turns a remote
tool's blocks (FastMCP's and toolrun's own) back into content items, so a remote image reaches the local
model as an image."""

from __future__ import annotations

import base64
import os
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from content_tools import content_registry
from fastmcp import FastMCP
from fastmcp.utilities.types import Image as FastImage

from mcp import Client, StdioServerParameters
from media_samples import png
from toolrun import Agent, ToolCall, ToolContext, ToolExecutor, ToolRegistry
from toolrun.content import Audio, File, Image, ResourceLink, Text
from toolrun.mcp import MCPToolset, create_server
from toolrun.models import FunctionModel, ModelResponse, ToolResultMessage

HERE = Path(__file__).parent
KINDS = [
    "TextContent",
    "TextContent",
    "ImageContent",
    "AudioContent",
    "EmbeddedResource",
    "EmbeddedResource",
    "ResourceLink",
]


def check_blocks(result: types.CallToolResult) -> None:
    assert not result.is_error
    assert [type(b).__name__ for b in result.content] == KINDS
    image = result.content[2]
    assert isinstance(image, types.ImageContent) and base64.b64decode(image.data) == png(2, 2)
    assert image.mime_type == "image/png"
    pdf_block, csv_block = result.content[4], result.content[5]
    assert isinstance(pdf_block, types.EmbeddedResource) and isinstance(
        pdf_block.resource, types.BlobResourceContents
    )
    assert isinstance(csv_block, types.EmbeddedResource) and isinstance(
        csv_block.resource, types.TextResourceContents
    )
    assert csv_block.resource.text == "a,b\n1,2\n"
    assert result.structured_content == {"points": 12}


@pytest.fixture
def content_server() -> Any:
    executor = ToolExecutor(content_registry)
    yield create_server(content_registry, executor=executor, principal=ToolContext(user_id="u1"))
    executor.close()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_official_client_receives_every_block(content_server: Any, mode: str) -> None:
    async with Client(content_server, mode=mode) as client:
        result = await client.call_tool("chart", {"title": "sales"})
    check_blocks(result)


@pytest.mark.slow
@pytest.mark.timeout(60)
async def test_over_stdio() -> None:
    path = os.pathsep.join([str(HERE), str(HERE.parent), os.environ.get("PYTHONPATH", "")])
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolrun.mcp", "serve", "content_tools:content_registry", "--user", "u1"],
        env={**os.environ, "PYTHONPATH": path},
    )
    async with Client(params) as client:
        result = await client.call_tool("chart", {"title": "sales"})
    check_blocks(result)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_toolruns_client_turns_blocks_back_into_content(content_server: Any, mode: str) -> None:
    registry = ToolRegistry()
    async with MCPToolset(content_server, prefix="remote", mode=mode) as remote:
        await remote.register(registry)
        executor = ToolExecutor(registry)
        result = await executor.execute(
            ToolCall(name="remote_chart", arguments={"title": "sales"}), ToolContext()
        )
        executor.close()
    assert result.status == "ok" and result.value == {"points": 12}
    kinds = [type(item) for item in result.content]
    assert kinds == [Image, Audio, File, File, ResourceLink]  # the text copy of the value is not repeated
    assert result.content[0] == Image(data=png(2, 2))
    assert result.content[3] == File(data=b"a,b\n1,2\n", name="data.csv", media_type="text/csv")


def fastmcp_with_image() -> FastMCP:
    fm = FastMCP("peer")

    @fm.tool(annotations={"readOnlyHint": True})
    def snapshot() -> FastImage:
        """A snapshot."""
        return FastImage(data=png(3, 3), format="png")

    @fm.tool(annotations={"readOnlyHint": True})
    def lying() -> types.ImageContent:
        """Claims a PNG, sends text."""
        return types.ImageContent(
            type="image", data=base64.b64encode(b"not a png").decode(), mime_type="image/png"
        )

    return fm


async def test_a_remote_image_reaches_the_local_model_as_an_image() -> None:
    seen: list[Any] = []

    def reply(messages, tools):  # type: ignore[no-untyped-def]
        seen.append(messages)
        if len(seen) == 1:
            return ModelResponse.from_tool_calls(("peer_snapshot", {}), ("peer_lying", {}))
        return ModelResponse.from_text("done")

    fm = fastmcp_with_image()
    registry = ToolRegistry()
    async with MCPToolset(fm._mcp_server, prefix="peer", mode="legacy") as remote:
        await remote.register(registry)
        run = await Agent(FunctionModel(reply), registry).run("snap")
    assert run.status == "completed"
    results = [m for m in seen[-1] if isinstance(m, ToolResultMessage)]
    assert results[0].parts == (Image(data=png(3, 3)),)
    # an untrusted server's bytes that are not what it says become a note, not a failure
    (note,) = results[1].parts
    assert isinstance(note, Text) and "image content (image/png) that could not be read" in note.text


def test_older_protocol_versions_get_notes_for_blocks_they_lack() -> None:
    from toolrun.mcp._server import _block_for

    audio = {"type": "audio", "data": "AA==", "mimeType": "audio/wav"}
    link = {"type": "resource_link", "uri": "https://example.org/a", "name": "a"}
    assert _block_for(audio, "2024-11-05")["type"] == "text"
    assert _block_for(audio, "2025-03-26") == audio
    assert _block_for(link, "2025-03-26") == {"type": "text", "text": "[resource a: https://example.org/a]"}
    assert _block_for(link, "2025-06-18") == link
