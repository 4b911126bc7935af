"""MCP (`mcp`): `Tool` definitions with annotations and output schemas, `tools/call`, `CallToolResult`."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from toolrun import Tool, ToolError, ToolRegistry, ToolResult, tool
from toolrun.formats import ToolCallParseError, check, get_format

from .conftest import delete_task, errors, search_tasks

mcp = get_format("mcp")


class Forecast(BaseModel):
    city: str
    temp: float


@tool(read_only=True, open_world=True)
def forecast(city: str) -> Forecast:
    """Tomorrow's forecast for a city."""
    return Forecast(city=city, temp=20.0)


@tool(idempotent=True)
def count_tasks(status: str = "open") -> int:
    """Count tasks with a status."""
    return 3


def test_export_snapshot_destructive_tool() -> None:
    assert mcp.definition(delete_task) == {
        "name": "delete_task",
        "description": "Delete a task permanently.",
        "inputSchema": {
            "type": "object",
            "properties": {"task_id": {"type": "string", "description": 'The task\'s id, e.g. "task-123".'}},
            "required": ["task_id"],
            "additionalProperties": False,
        },
        "outputSchema": {
            "type": "object",
            "additionalProperties": True,
        },
        "annotations": {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False},
    }


def test_object_output_schema_is_used_as_is_and_annotations_follow_options() -> None:
    definition = mcp.definition(forecast)
    assert definition["outputSchema"]["type"] == "object"
    assert definition["outputSchema"]["properties"].keys() == {"city", "temp"}
    assert definition["annotations"] == {
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": True,
    }
    assert errors(definition, "mcp", strict=False) == []


def test_non_object_output_is_wrapped_under_result() -> None:
    definition = mcp.definition(count_tasks)
    assert definition["outputSchema"] == {
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
    }
    assert check(definition, "mcp") == []
    result = ToolResult.ok(3, call_id="7", tool_name="count_tasks")
    assert mcp.tool_result_message(result, tool=count_tasks)["structuredContent"] == {"result": 3}


def test_wrapped_output_keeps_its_definitions_at_the_root() -> None:
    @tool
    def forecasts(cities: list[str]) -> list[Forecast]:
        """Forecasts for several cities."""
        return []

    schema = mcp.definition(forecasts)["outputSchema"]
    assert schema["properties"]["result"] == {"type": "array", "items": {"$ref": "#/$defs/Forecast"}}
    assert schema["$defs"]["Forecast"]["required"] == ["city", "temp"]
    assert check(mcp.definition(forecasts), "mcp") == []


def test_strict_has_no_effect_and_dotted_names_are_kept(weather: Tool) -> None:
    assert mcp.definition(weather, strict=True) == mcp.definition(weather)
    assert mcp.definition(weather)["name"] == "weather.current"


@pytest.mark.parametrize("strict", [False, True])
def test_exports_pass_the_checker(strict: bool, registry: ToolRegistry) -> None:
    for definition in registry.definitions("mcp", strict=strict):
        assert errors(definition, "mcp", strict=strict) == []


# --------------------------------------------------------------------------------------------------------
# Calls

REQUEST: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "weather_current", "arguments": {"city": "New York"}},
}


def test_parse_request_and_params(registry: ToolRegistry) -> None:
    [call] = mcp.parse_tool_calls(REQUEST, names=registry)
    assert (call.id, call.name, call.arguments) == ("2", "weather.current", {"city": "New York"})
    [from_params] = mcp.parse_tool_calls(REQUEST["params"])
    assert from_params.name == "weather_current"
    assert from_params.id == mcp.parse_tool_calls(REQUEST["params"])[0].id  # stable without a request id
    [bare] = mcp.parse_tool_calls({"name": "list_tasks"})
    assert bare.arguments is None


class _Params(BaseModel):
    """The shape of the MCP SDK's `CallToolRequestParams`."""

    name: str
    arguments: dict[str, Any] | None = None


def test_parse_sdk_object() -> None:
    [call] = mcp.parse_tool_calls(_Params(name="search_tasks", arguments={"query": "x"}))
    assert (call.name, call.arguments) == ("search_tasks", {"query": "x"})
    assert search_tasks.validate(call.arguments)["limit"] == 10


@pytest.mark.parametrize(
    ("message", "where"),
    [
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, "expected 'tools/call'"),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}, "missing key 'params'"),
        ({"name": 5}, "name: expected a string"),
        ({"name": "f", "arguments": [1]}, "arguments: expected an object"),
        ([], "expected a tools/call request"),
    ],
)
def test_parse_malformed_raises_one_clear_error(message: Any, where: str) -> None:
    with pytest.raises(ToolCallParseError, match=where):
        mcp.parse_tool_calls(message)


# --------------------------------------------------------------------------------------------------------
# Results


def test_call_tool_results_for_each_status() -> None:
    ok = ToolResult.ok({"city": "Oslo", "temp": 3.5}, call_id="2", tool_name="forecast")
    assert mcp.tool_result_message(ok, tool=forecast) == {
        "content": [{"type": "text", "text": '{"city":"Oslo","temp":3.5}'}],
        "structuredContent": {"city": "Oslo", "temp": 3.5},
        "isError": False,
    }
    text = ToolResult.ok("done", call_id="2")
    assert mcp.tool_result_message(text) == {"content": [{"type": "text", "text": "done"}], "isError": False}
    failed = ToolResult.fail(ToolError("RATE_LIMITED", "Too many calls.", retryable=True), call_id="2")
    message = mcp.tool_result_message(failed)
    assert message["isError"] is True
    assert "structuredContent" not in message
    assert message["content"][0]["text"] == "Error RATE_LIMITED: Too many calls."
    pending = ToolResult.confirmation_required_result("c1", "delete task t1", call_id="2")
    message = mcp.tool_result_message(pending, tool=delete_task)
    assert message["isError"] is False
    assert "structuredContent" not in message
    assert "has NOT run" in message["content"][0]["text"]
    hidden = ToolResult.ok({"secret": 1}, call_id="2", exclude_value_from_context=True)
    assert "secret" not in str(mcp.tool_result_message(hidden))


def test_json_schema_tool_with_declared_output_schema() -> None:
    tool_ = Tool.from_schema(
        "add", "Add two numbers.", {"type": "object", "properties": {"a": {"type": "number"}}},
        output_schema={"type": "number"},
    )  # fmt: skip
    assert mcp.definition(tool_)["outputSchema"]["properties"]["result"] == {"type": "number"}
    result = ToolResult.ok(4, call_id="1")
    assert mcp.tool_result_message(result, tool=tool_)["structuredContent"] == {"result": 4}
