"""Tools with rich results for the live server (`_live_server.py ... rich`), and a model that calls them.

`chart <metric>` calls `chart`: it reports progress while it draws (`ctx.report_progress`), then returns a
value, a text and a PNG bar chart. `scan <n>` calls `scan`, an async generator tool whose partial results
are progress reports. Anything else goes to the demo model. `registry` serves the same tools over MCP.
"""

from __future__ import annotations

import asyncio
import struct
import zlib
from collections.abc import AsyncIterator
from typing import Any

from toolrun import ToolContext, ToolRegistry, tool
from toolrun.apps.tasks import create_demo_model
from toolrun.content import Image, Text, ToolOutput
from toolrun.models import FunctionModel, ModelResponse, ToolResultMessage, UserMessage

CHART_SIZE = (640, 360)
BARS = (3, 5, 4, 7, 6, 9, 8, 11)
STEPS = 6
STEP_SECONDS = 0.15  # longer than the agent's progress interval (0.1 s): every report gets through
# Each tool waits a step AFTER its last report, as real work would go on (formatting, saving). The MCP
# TypeScript SDK's client drops a progress notification that reaches it in the same read as the call's
# response: it handles notifications a microtask late (`Promise.resolve().then`) and the response at once,
# which forgets the progress token first ("unknown token"; modelcontextprotocol/typescript-sdk#2580, "a race
# servers cannot avoid"). Reported back to back, the last report is lost there now and then.


def chart_png(width: int = CHART_SIZE[0], height: int = CHART_SIZE[1]) -> bytes:
    """A bar chart as a real RGB PNG: white ground, an axis, blue bars of `BARS`."""
    ground, axis, bar = b"\xff\xff\xff", b"\x33\x33\x33", b"\x25\x63\xeb"
    margin = 24
    slot = (width - 2 * margin) // len(BARS)
    top = max(BARS)
    rows = []
    for y in range(height):
        row = bytearray(ground * width)
        for i, value in enumerate(BARS):
            bar_top = height - margin - (height - 2 * margin) * value // top
            if bar_top <= y < height - margin:
                start = margin + i * slot + slot // 6
                row[start * 3 : (start + slot * 2 // 3) * 3] = bar * (slot * 2 // 3)
        if y == height - margin:
            row[margin * 3 : (width - margin) * 3] = axis * (width - 2 * margin)
        rows.append(b"\x00" + bytes(row))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"".join(rows), 9))
        + chunk(b"IEND", b"")
    )


@tool(read_only=True)
async def chart(metric: str, ctx: ToolContext) -> ToolOutput[dict[str, Any]]:
    """Draw a bar chart of a metric. Use when the user asks to see a metric.

    Args:
        metric: What to chart, e.g. "sales".
    """
    for step in range(1, STEPS + 1):
        await ctx.report_progress(step, STEPS, f"drawing {metric}")
        await asyncio.sleep(STEP_SECONDS)
    return ToolOutput(
        value={"metric": metric, "points": len(BARS)},
        content=[Text(f"{metric}: {len(BARS)} points, rising"), Image(data=chart_png())],
    )


@tool(read_only=True)
async def scan(hosts: int) -> AsyncIterator[dict[str, int]]:
    """Scan hosts, showing the count so far. Use when the user asks for a scan.

    Args:
        hosts: How many hosts to scan.
    """
    for done in range(1, hosts + 1):
        yield {"scanned": done, "of": hosts}
        await asyncio.sleep(STEP_SECONDS)


RICH_TOOLS = [chart, scan]
registry = ToolRegistry(RICH_TOOLS)
"""For `toolrun mcp serve _rich:registry` (the MCP TypeScript SDK test)."""
_demo = create_demo_model().function


def _reply(messages: list[Any], tools: list[Any]) -> ModelResponse:
    last = messages[-1]
    if isinstance(last, ToolResultMessage) and last.tool_name == "chart":
        return ModelResponse.from_text("Here is the chart.")
    if isinstance(last, ToolResultMessage) and last.tool_name == "scan":
        return ModelResponse.from_text("Scan finished.")
    if isinstance(last, UserMessage):
        words = last.content.split()
        if words and words[0] == "chart":
            return ModelResponse.from_tool_calls(("chart", {"metric": " ".join(words[1:]) or "sales"}))
        if len(words) == 2 and words[0] == "scan" and words[1].isdigit():
            return ModelResponse.from_tool_calls(("scan", {"hosts": int(words[1])}))
    return _demo(messages, tools)  # type: ignore[no-any-return]


def rich_model() -> FunctionModel:
    """The demo model, plus `chart <metric>` and `scan <n>`."""
    return FunctionModel(_reply, name="demo-rich")
