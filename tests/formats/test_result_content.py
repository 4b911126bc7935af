"""Results with content (images, files, audio, text blocks, links) in every wire format: golden JSON,
checked by the project's own result checker (`check_result`) and, for MCP, by the official `mcp` types.

Regenerate the golden files after a deliberate change with `TOOLRUN_UPDATE_GOLDEN=1` and read the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from media_samples import pdf, png, wav
from toolrun import ToolResult
from toolrun.content import Audio, File, Image, ResourceLink, Text
from toolrun.formats import FORMATS, check_result, get_format

GOLDEN = Path(__file__).parent / "golden"


def rich_result() -> ToolResult:
    return ToolResult(
        call_id="call_1",
        tool_name="chart",
        value={"points": 12},
        content=(
            Text("12 points, rising"),
            Image(data=png(1, 1)),
            Image(url="https://example.org/chart.png", media_type="image/png"),
            File(data=pdf("hi"), name="report.pdf"),
            File(data=b"a,b\n1,2\n", name="data.txt", media_type="text/plain"),
            Audio(data=wav(4)),
            ResourceLink(uri="https://example.org/full", name="full data", media_type="text/csv"),
        ),
    )


def rendered(fmt: str, result: ToolResult) -> dict[str, Any]:
    wire = get_format(fmt)
    return {"message": wire.tool_result_message(result), "followups": wire.content_followups([result])}


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_golden_and_conforming(fmt: str) -> None:
    out = rendered(fmt, rich_result())
    assert check_result(out["message"], fmt) == []
    for followup in out["followups"]:
        assert check_result(followup, fmt, followup=True) == []
    path = GOLDEN / f"result_content_{fmt}.json"
    text = json.dumps(out, indent=1, ensure_ascii=False) + "\n"
    if os.environ.get("TOOLRUN_UPDATE_GOLDEN"):
        path.write_text(text)
    assert json.loads(path.read_text()) == out


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_plain_results_keep_their_old_shape(fmt: str) -> None:
    plain = ToolResult(call_id="call_1", tool_name="t", value={"a": 1})
    wire = get_format(fmt)
    assert wire.content_followups([plain]) == []
    message = wire.tool_result_message(plain)
    assert check_result(message, fmt) == []
    assert "parts" not in json.dumps(message) or fmt != "gemini"


def test_every_item_reaches_the_model_in_each_format() -> None:
    result = rich_result()
    responses = rendered("openai-responses", result)["message"]["output"]
    assert [p["type"] for p in responses] == [
        "input_text",  # the value
        "input_text",  # the text block
        "input_image",
        "input_image",
        "input_file",
        "input_text",  # the text file
        "input_text",  # audio: a note
        "input_text",  # the link: a note
    ]
    chat = rendered("openai", result)
    assert "[image/png image" in chat["message"]["content"]
    (user,) = chat["followups"]
    assert [p["type"] for p in user["content"]] == [
        "text",
        "image_url",
        "image_url",
        "file",
        "text",
        "input_audio",
    ]
    anthropic = rendered("anthropic", result)["message"]["content"]
    assert [b["type"] for b in anthropic] == [
        "text",
        "text",
        "image",
        "image",
        "document",
        "document",
        "text",
        "text",
    ]
    gemini = rendered("gemini", result)
    response = gemini["message"]["functionResponse"]
    assert response["response"] == {"output": {"points": 12}, "text": "12 points, rising"}
    assert [p["inlineData"]["mimeType"] for p in response["parts"]] == [
        "image/png",
        "application/pdf",
        "text/plain",
    ]
    assert [next(iter(p)) for p in gemini["followups"]] == ["text", "fileData", "inlineData", "text"]


def test_mcp_blocks_validate_with_the_official_types() -> None:
    from mcp import types

    message = rendered("mcp", rich_result())["message"]
    parsed = types.CallToolResult.model_validate(message)
    kinds = [type(block).__name__ for block in parsed.content]
    assert kinds == [
        "TextContent",
        "TextContent",
        "ImageContent",
        "ResourceLink",
        "EmbeddedResource",
        "EmbeddedResource",
        "AudioContent",
        "ResourceLink",
    ]


@pytest.mark.parametrize(
    ("fmt", "message", "followup", "rule"),
    [
        (
            "openai",
            {"role": "tool", "tool_call_id": "c", "content": [{"type": "image_url"}]},
            False,
            "RES-PART",
        ),
        (
            "openai",
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "ftp://x"}}]},
            True,
            "RES-DATA",
        ),
        (
            "openai",
            {
                "role": "user",
                "content": [{"type": "input_audio", "input_audio": {"data": "AA==", "format": "ogg"}}],
            },
            True,
            "RES-MEDIA",
        ),
        (
            "openai-responses",
            {"type": "function_call_output", "call_id": "c", "output": [{"type": "image"}]},
            False,
            "RES-PART",
        ),
        ("openai-responses", {"type": "function_call_output", "output": "x"}, False, "RES-SHAPE"),
        (
            "openai-responses",
            {
                "type": "function_call_output",
                "call_id": "c",
                "output": [{"type": "input_image", "image_url": "data:image/png;base64,%%%"}],
            },
            False,
            "RES-DATA",
        ),
        (
            "anthropic",
            {
                "type": "tool_result",
                "tool_use_id": "t",
                "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/bmp", "data": "AA=="}}
                ],
            },
            False,
            "RES-MEDIA",
        ),
        (
            "anthropic",
            {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "audio"}]},
            False,
            "RES-PART",
        ),
        (
            "anthropic",
            {
                "type": "tool_result",
                "tool_use_id": "t",
                "content": [
                    {
                        "type": "document",
                        "source": {"type": "base64", "media_type": "application/pdf", "data": "not base64!"},
                    }
                ],
            },
            False,
            "RES-DATA",
        ),
        (
            "gemini",
            {
                "functionResponse": {
                    "name": "f",
                    "response": {},
                    "parts": [{"inlineData": {"mimeType": "audio/wav", "data": "AA=="}}],
                }
            },
            False,
            "RES-MEDIA",
        ),
        ("gemini", {"functionResponse": {"response": {}}}, False, "RES-SHAPE"),
        ("gemini", {"image": "x"}, True, "RES-PART"),
        ("mcp", {"content": [{"type": "video", "data": "AA=="}]}, False, "RES-PART"),
        ("mcp", {"content": [{"type": "image", "mimeType": "image/png", "data": "?"}]}, False, "RES-DATA"),
        ("mcp", {"isError": False}, False, "RES-SHAPE"),
    ],
)
def test_the_checker_catches_what_providers_reject(fmt: str, message: Any, followup: bool, rule: str) -> None:
    found = check_result(message, fmt, followup=followup)
    assert rule in {v.rule for v in found}, found
