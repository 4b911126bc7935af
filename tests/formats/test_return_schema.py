"""Return annotations as output schemas: MCP `outputSchema` + `structuredContent`; with
`include_return_schema=True`, formats without such a field state the schema in the description."""

from __future__ import annotations

import json

from pydantic import BaseModel

from toolrun import ToolCall, ToolContext, ToolRegistry, tool
from toolrun.formats import FORMATS, check, get_format
from toolrun.runtime import ToolExecutor


class Weather(BaseModel):
    city: str
    celsius: float


@tool(read_only=True, include_return_schema=True)
async def weather(city: str) -> Weather:
    """Current weather in a city."""
    return Weather(city=city, celsius=21.5)


@tool(read_only=True)
async def plain_weather(city: str) -> Weather:
    """Current weather in a city."""
    return Weather(city=city, celsius=21.5)


@tool(read_only=True)
async def lying(city: str) -> Weather:
    """Returns something else."""
    return {"city": city}  # type: ignore[return-value]


def test_formats_without_a_field_describe_the_schema_when_asked() -> None:
    for name in ("openai", "openai-responses", "anthropic", "gemini"):
        fmt = get_format(name)
        asked = json.dumps(fmt.definition(weather))
        assert "Returns JSON matching this schema" in asked and "celsius" in asked, name
        assert "Returns JSON" not in json.dumps(fmt.definition(plain_weather)), name
        assert [v for v in check(fmt.definition(weather), name) if v.severity == "error"] == [], name
    mcp = get_format("mcp").definition(weather)
    assert mcp["description"] == "Current weather in a city."  # MCP has outputSchema for it
    assert mcp["outputSchema"]["properties"]["celsius"]["type"] == "number"
    assert set(FORMATS) == {"openai", "openai-responses", "anthropic", "gemini", "mcp"}


async def test_structured_content_is_validated_before_it_leaves() -> None:
    executor = ToolExecutor(ToolRegistry([weather, lying]))
    good = await executor.execute(ToolCall(name="weather", arguments={"city": "Oslo"}), ToolContext())
    bad = await executor.execute(ToolCall(name="lying", arguments={"city": "Oslo"}), ToolContext())
    executor.close()
    message = get_format("mcp").tool_result_message(good, tool=weather)
    assert message["structuredContent"] == {"city": "Oslo", "celsius": 21.5}
    assert bad.error.code == "RESULT_INVALID"
    assert "structuredContent" not in get_format("mcp").tool_result_message(bad, tool=lying)
