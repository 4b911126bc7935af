"""Anthropic Messages API (`anthropic`): export, strict tool use, `tool_use` blocks, `tool_result` blocks."""

from __future__ import annotations

from typing import Any

import pytest
from anthropic.types import Message

from toolrun import Tool, ToolError, ToolRegistry, ToolResult, tool
from toolrun.formats import ToolCallParseError, check_request, get_format
from toolrun.formats.anthropic import AnthropicSchema, AnthropicStrictSchema

from .conftest import errors, search_tasks

anthropic = get_format("anthropic")

# A Messages API response that uses a tool, as documented ("tool use" guide).
MESSAGE: dict[str, Any] = {
    "id": "msg_01Aq9w938a90dw8q",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "content": [
        {"type": "text", "text": "I'll check the current weather in Paris for you."},
        {
            "type": "tool_use",
            "id": "toolu_01A09q90qw90lq917835lq9",
            "name": "weather_current",
            "input": {"city": "Paris", "unit": "c"},
        },
    ],
    "usage": {"input_tokens": 10, "output_tokens": 20},
}


def test_plain_export_snapshot_with_examples(weather: Tool) -> None:
    assert anthropic.definition(weather, name="weather_current") == {
        "name": "weather_current",
        "description": "Current weather for a city.",
        "input_schema": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "minLength": 1, "description": "City name"},
                "days": {"type": "integer", "minimum": 1, "maximum": 7, "default": 1},
                "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
            },
            "required": ["city"],
            "additionalProperties": False,
        },
        "input_examples": [{"city": "Paris"}],
    }


def test_strict_export_snapshot(weather: Tool) -> None:
    assert anthropic.definition(weather, strict=True, name="weather_current") == {
        "name": "weather_current",
        "description": "Current weather for a city.",
        "input_schema": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name. At least 1 character."},
                "days": {"type": "integer", "default": 1, "description": "Minimum: 1. Maximum: 7."},
                "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
            },
            "required": ["city"],
            "additionalProperties": False,
        },
        "strict": True,
        "input_examples": [{"city": "Paris"}],
    }


@pytest.mark.parametrize("strict", [False, True])
def test_exports_pass_the_checker(strict: bool, registry: ToolRegistry) -> None:
    definitions = registry.definitions("anthropic", strict=strict)
    for definition in definitions:
        assert errors(definition, "anthropic", strict=strict) == []
    assert [v for v in check_request(definitions, "anthropic", strict=strict) if v.severity == "error"] == []


def test_strict_optional_parameters_stay_optional_without_nulls() -> None:
    schema = anthropic.definition(search_tasks, strict=True)["input_schema"]
    assert schema["required"] == ["query"]
    # `status: Literal[...] | None = None` loses its null branch: leaving it out means the same.
    assert schema["properties"]["status"] == {
        "type": "string",
        "enum": ["open", "done"],
        "description": "Only tasks with this status.",
    }
    assert search_tasks.validate({"query": "x"}) == {"query": "x", "limit": 10, "status": None, "tags": None}


def test_plain_export_moves_top_level_combinators_out_of_the_root() -> None:
    tool_ = Tool.from_schema(
        "pick",
        "Pick by id or by name.",
        {
            "type": "object",
            "properties": {"id": {"type": "string"}, "name": {"type": "string"}},
            "anyOf": [{"required": ["id"]}, {"required": ["name"]}],
            "allOf": [{"properties": {"note": {"type": "string"}}}],
        },
    )
    definition = anthropic.definition(tool_)
    schema = definition["input_schema"]
    assert "anyOf" not in schema and "allOf" not in schema
    assert schema["properties"].keys() == {"id", "name", "note"}
    assert schema["description"].startswith("Must match one of:")
    assert errors(definition, "anthropic", strict=False) == []
    assert errors(anthropic.definition(tool_, strict=True), "anthropic", strict=True) == []


def test_strict_inlines_recursive_definitions_and_keeps_the_others() -> None:
    schema = {
        "type": "object",
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "value": {"type": "integer"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                },
                "required": ["value"],
            },
            "Color": {"type": "string", "enum": ["red", "blue"]},
        },
        "properties": {"tree": {"$ref": "#/$defs/Node"}, "color": {"$ref": "#/$defs/Color"}},
        "required": ["tree", "color"],
    }
    transformer = AnthropicStrictSchema(schema)
    out = transformer.transform()
    assert out["$defs"].keys() == {"Color"}
    assert out["properties"]["color"] == {"$ref": "#/$defs/Color"}
    level2 = out["properties"]["tree"]["properties"]["children"]["items"]
    assert level2["properties"]["value"] == {"type": "integer"}
    assert "children" not in level2["properties"]  # optional, so left out where the recursion is cut
    assert any("recursive $ref" in c for c in transformer.changes)
    assert errors({"name": "t", "description": "T.", "input_schema": out}, "anthropic", strict=True) == []


def test_strict_budgets_make_deep_optional_properties_required_and_collapse_unions() -> None:
    many_optional = {f"p{i}": {"type": "string"} for i in range(30)}
    nested = {"type": "object", "properties": {f"n{i}": {"type": ["string", "integer"]} for i in range(20)}}
    schema = {"type": "object", "properties": {**many_optional, "nested": nested}}
    out = AnthropicStrictSchema(schema).transform()
    definition = {"name": "big", "description": "Big.", "input_schema": out}
    assert errors(definition, "anthropic", strict=True) == []
    inner = out["properties"]["nested"]
    assert set(inner["required"]) == set(inner["properties"])  # the deepest were made required first
    assert sum(1 for p in inner["properties"].values() if isinstance(p["type"], list)) <= 16


def test_plain_schema_is_a_faithful_copy() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}}, "required": ["a"]}
    assert AnthropicSchema(schema).transform() == schema


# --------------------------------------------------------------------------------------------------------
# Calls


def test_parse_dict_sdk_object_and_block_list(registry: ToolRegistry) -> None:
    calls = anthropic.parse_tool_calls(MESSAGE)
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("toolu_01A09q90qw90lq917835lq9", "weather_current", {"city": "Paris", "unit": "c"})
    ]
    assert anthropic.parse_tool_calls(Message.model_validate(MESSAGE)) == calls
    assert anthropic.parse_tool_calls(MESSAGE["content"]) == calls
    mapped = anthropic.parse_tool_calls(MESSAGE, names=registry)[0]
    assert mapped.name == "weather.current"
    assert registry.get(mapped.name).validate(mapped.arguments) == {"city": "Paris", "days": 1, "unit": "c"}


def test_parse_text_only_message_has_no_calls() -> None:
    assert anthropic.parse_tool_calls({**MESSAGE, "content": [{"type": "text", "text": "Hi"}]}) == []


@pytest.mark.parametrize(
    ("response", "where"),
    [
        ({"id": "msg"}, "missing key 'content'"),
        ({"content": [{"type": "tool_use", "name": "f", "input": {}}]}, r"content\[0\]: missing key 'id'"),
        (
            {"content": [{"type": "tool_use", "id": "t", "name": "f", "input": "x"}]},
            "expected an object of arguments",
        ),
        ({"content": "hello"}, "content: expected a list"),
        (42, "expected a Messages API message or a list of content blocks, got a number"),
    ],
)
def test_parse_malformed_raises_one_clear_error(response: Any, where: str) -> None:
    with pytest.raises(ToolCallParseError, match=where):
        anthropic.parse_tool_calls(response)


# --------------------------------------------------------------------------------------------------------
# Results


def test_tool_result_blocks_for_each_status() -> None:
    ok = ToolResult.ok([1, 2], call_id="toolu_1", tool_name="f")
    assert anthropic.tool_result_message(ok) == {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": "[1,2]",
        "is_error": False,
    }
    failed = ToolResult.fail(ToolError("TIMEOUT", "Took too long.", retryable=True), call_id="toolu_1")
    block = anthropic.tool_result_message(failed)
    assert block["is_error"] is True
    assert block["content"] == "Error TIMEOUT: Took too long."
    pending = ToolResult.confirmation_required_result("c1", "delete task t1", call_id="toolu_1")
    block = anthropic.tool_result_message(pending)
    assert block["is_error"] is False
    assert "has NOT run" in block["content"]


@tool
def no_params() -> str:
    """Return the time."""
    return "now"


def test_tool_without_parameters() -> None:
    for strict in (False, True):
        definition = anthropic.definition(no_params, strict=strict)
        assert definition["input_schema"]["type"] == "object"
        assert errors(definition, "anthropic", strict=strict) == []
