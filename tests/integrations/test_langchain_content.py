"""A result with images and files becomes a LangChain `ToolMessage` of standard content blocks."""

from __future__ import annotations

from media_samples import pdf, png
from toolrun import ToolResult
from toolrun.content import File, Image, ResourceLink, Text
from toolrun.integrations.langchain import tool_message


def test_content_becomes_standard_blocks() -> None:
    result = ToolResult(
        call_id="c1",
        tool_name="chart",
        value={"n": 1},
        content=(
            Text("caption"),
            Image(data=png()),
            Image(url="https://example.org/a.png", media_type="image/png"),
            File(data=pdf(), name="r.pdf"),
            ResourceLink(uri="https://example.org/x", name="x"),
        ),
    )
    message = tool_message(result)
    kinds = [block["type"] for block in message.content]  # type: ignore[index, union-attr]
    assert kinds == ["text", "text", "image", "image", "file", "text"]
    image = message.content[2]
    assert image["mime_type"] == "image/png" and image["base64"] == Image(data=png()).base64()  # type: ignore[index]
    assert message.content[3]["url"] == "https://example.org/a.png"  # type: ignore[index]
    assert message.content[4]["extras"] == {"filename": "r.pdf"}  # type: ignore[index]
    assert tool_message(ToolResult(call_id="c2", tool_name="t", value=1)).content == "1"
