"""The tools the MCP conformance suite's server scenarios call, written as toolrun tools.

Served by `toolrun mcp serve everything:registry --http` in `tests/mcp/test_conformance.py`. Each tool is
what the scenario of the same name asks a server to implement (the suite's `everything-server`), within
what a toolrun tool can do: return text and content, fail with a `ToolError`, report progress, and need
the person's confirmation (a destructive tool: the only input a toolrun server asks a client for).
"""

from __future__ import annotations

import asyncio
from typing import Any

from media_samples import png, wav
from toolrun import Tool, ToolContext, ToolError, ToolRegistry, tool
from toolrun.content import Audio, File, Image, Text

_PROGRESS_GAP = 0.05
"""Seconds between two progress reports, as the suite's own everything-server waits ("~50ms"): faster
than one per 0.1 s, still all three arrive (`ProgressThrottle` drops nothing of a short burst)."""


@tool(read_only=True)
async def test_simple_text() -> str:
    """Return a fixed line of text (scenario tools-call-simple-text)."""
    return "This is a simple text response for testing."


@tool(read_only=True)
async def test_image_content() -> Image:
    """Return a small PNG image (scenario tools-call-image)."""
    return Image(data=png(1, 1))


@tool(read_only=True)
async def test_audio_content() -> Audio:
    """Return a short WAV sound (scenario tools-call-audio)."""
    return Audio(data=wav(4))


@tool(read_only=True)
async def test_embedded_resource() -> File:
    """Return a text file, embedded as a resource (scenario tools-call-embedded-resource)."""
    return File(data=b"This is an embedded resource content.", name="embedded.txt", media_type="text/plain")


@tool(read_only=True)
async def test_multiple_content_types() -> list[Text | Image | File]:
    """Return text, an image and an embedded resource together (scenario tools-call-mixed-content)."""
    return [
        Text("Multiple content types test:"),
        Image(data=png(1, 1)),
        File(data=b'{"test":"data","value":123}', name="mixed.json", media_type="application/json"),
    ]


@tool(read_only=True)
async def test_error_handling() -> str:
    """Always fail (scenario tools-call-error)."""
    raise ToolError("TEST_ERROR", "This tool intentionally returns an error for testing")


@tool(read_only=True)
async def test_tool_with_progress(ctx: ToolContext) -> str:
    """Report progress 0, 50 and 100 of 100 (scenario tools-call-with-progress)."""
    for done in (0, 50, 100):
        await ctx.report_progress(done, total=100)
        if done < 100:
            await asyncio.sleep(_PROGRESS_GAP)
    return "Progress test completed"


@tool(destructive=True)
async def test_input_required_result_tampered_state() -> str:
    """A destructive tool: its confirmation is the server's InputRequiredResult, whose sealed requestState
    the scenario input-required-result-tampered-state alters."""
    return "confirmed and done"


def _contact(**arguments: Any) -> dict[str, Any]:
    return {"received": sorted(arguments)}


# The scenario json-schema-2020-12: these keywords must reach tools/list as written (SEP-1613, SEP-2106).
_JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}

json_schema_2020_12_tool = Tool.from_schema(
    "json_schema_2020_12_tool",
    "Take a contact with an address (scenario json-schema-2020-12).",
    _JSON_SCHEMA_2020_12,
    _contact,
    read_only=True,
)

# The scenario http-custom-header-server-validation: a parameter the client also sends as an
# `Mcp-Param-Region` header, which the server checks against the body (SEP-2243).
test_header_parameter = Tool.from_schema(
    "test_header_parameter",
    "Echo a region that also travels in the Mcp-Param-Region header.",
    {
        "type": "object",
        "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
        "required": ["region"],
    },
    _contact,
    read_only=True,
)


# The Tasks extension's scenarios (io.modelcontextprotocol/tasks): a sync tool and task-supporting ones
# (`background=True`: an MCP task for clients that declare the extension, where the server serves tasks).
@tool(read_only=True)
async def greet(name: str) -> str:
    """Greet someone (sync only)."""
    return f"Hello, {name}!"


@tool(background=True, read_only=True)
async def slow_compute(seconds: float = 0, label: str = "") -> str:
    """Sleep `seconds`, then answer (runs as a task); `label` only names the call (the scenarios send one)."""
    await asyncio.sleep(seconds)
    return f"computed {label} after {seconds} s" if label else f"computed after {seconds} s"


@tool(background=True, read_only=True)
async def failing_job() -> str:
    """Fail after a second (runs as a task)."""
    await asyncio.sleep(1)
    raise ToolError("JOB_FAILED", "This job always fails")


# The suite's `protocol_error_job` "panics into a protocol error" and wants the task `failed` with a
# JSON-RPC error. A toolrun tool that raises is the tool's failure, reported as `completed` with an
# `isError` result (exactly what the same call answers inline), so this one ends `completed`: the check
# tasks-lifecycle:sep-2663-tasks-get-status-failed stays in expected-failures.yml.
@tool(background=True, read_only=True)
async def protocol_error_job() -> str:
    """Crash with an unexpected exception (runs as a task)."""
    raise RuntimeError("protocol_error_job crashed")


# The suite's `confirm_delete` is a task that parks in `input_required` for an elicitation. A toolrun
# background tool never asks for input; what asks is a destructive tool, and it asks before it runs (the
# server's InputRequiredResult, answered on the retried `tools/call`), never from inside a task. So this
# `confirm_delete` answers with that InputRequiredResult and creates no task: tasks-mrtr-input, which needs
# the task in `input_required`, stays in expected-failures.yml; tasks-dispatch-and-envelope exercises its
# tasks/update-ack step only when the call creates a task, so that step is not run here (the tasks/update
# ack is covered by tests/mcp/test_mcp_tasks.py).
@tool(destructive=True)
async def confirm_delete(filename: str) -> str:
    """Delete a file once the person confirms (asks before it runs; not a task)."""
    return f"Deleted {filename}"


registry = ToolRegistry(
    [
        greet,
        slow_compute,
        failing_job,
        protocol_error_job,
        confirm_delete,
        test_simple_text,
        test_image_content,
        test_audio_content,
        test_embedded_resource,
        test_multiple_content_types,
        test_error_handling,
        test_tool_with_progress,
        test_input_required_result_tampered_state,
        json_schema_2020_12_tool,
        test_header_parameter,
    ]
)
