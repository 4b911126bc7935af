"""Gemini (`gemini`): declarations in the OpenAPI Schema subset, `functionCall`, `functionResponse`."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from toolrun import Tool, ToolError, ToolRegistry, ToolResult, tool
from toolrun.exceptions import SchemaError
from toolrun.formats import ToolCallParseError, check, get_format
from toolrun.formats.gemini import GENERATED_ID_PREFIX, GeminiSchema, gemini_name

from .conftest import errors, search_tasks

gemini = get_format("gemini")

# A generateContent response with two parallel function calls (REST JSON, camelCase), as documented.
RESPONSE: dict[str, Any] = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {"functionCall": {"name": "weather_current", "args": {"city": "Paris"}}},
                    {"functionCall": {"name": "search_tasks", "args": {"query": "rain"}, "id": "fc-7"}},
                ],
            },
            "finishReason": "STOP",
            "index": 0,
        }
    ],
    "usageMetadata": {"promptTokenCount": 40, "candidatesTokenCount": 12, "totalTokenCount": 52},
    "modelVersion": "gemini-2.0-flash",
}


def test_export_snapshot(weather: Tool) -> None:
    assert gemini.definition(weather, name="weather_current") == {
        "name": "weather_current",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "OBJECT",
            "properties": {
                "city": {"type": "STRING", "description": "City name. At least 1 character."},
                "days": {"type": "INTEGER", "description": "Minimum: 1. Maximum: 7. Default: 1."},
                "unit": {"type": "STRING", "enum": ["c", "f"], "description": 'Default: "c".'},
            },
            "required": ["city"],
        },
    }


def test_strict_has_no_effect(weather: Tool) -> None:
    assert gemini.definition(weather, strict=True, name="w") == gemini.definition(weather, name="w")


def test_nullable_unions_enums_and_any() -> None:
    schema = {
        "type": "object",
        "properties": {
            "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "either": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
            "listed": {"type": ["number", "null"], "format": "double"},
            "level": {"type": "integer", "enum": [1, 2, 3]},
            "fixed": {"const": "v1"},
            "anything": {},
            "stamp": {"type": "string", "format": "date-time"},
            "day": {"type": "string", "format": "date"},
            "open": {"type": "object", "additionalProperties": {"type": "integer"}},
            "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
            "bare": {"type": "array"},
        },
    }
    props = GeminiSchema(schema).transform()["properties"]
    assert props["maybe"] == {"type": "STRING", "nullable": True}
    assert props["either"] == {"type": "INTEGER", "description": "Also accepts: string."}
    assert props["listed"] == {"type": "NUMBER", "format": "double", "nullable": True}
    assert props["level"] == {"type": "INTEGER", "description": "Allowed values: 1, 2, 3."}
    assert props["fixed"] == {"type": "STRING", "enum": ["v1"]}
    assert props["anything"] == {"type": "STRING"}
    assert props["stamp"] == {"type": "STRING", "format": "date-time"}
    assert props["day"] == {"type": "STRING", "description": "Format: date."}
    assert props["open"] == {"type": "OBJECT", "description": "Other keys: integer."}
    assert props["pair"] == {
        "type": "ARRAY",
        "items": {"type": "INTEGER"},
        "minItems": 2,
        "maxItems": 2,
        "description": "Items in order: 1: integer; 2: string.",
    }
    assert props["bare"] == {"type": "ARRAY", "items": {"type": "STRING"}}


class Leaf(BaseModel):
    name: str


class Tree(BaseModel):
    leaf: Leaf
    children: list[Tree] = []


@tool
def plant(tree: Tree) -> str:
    """Plant a tree."""
    return "ok"


def test_refs_are_inlined_and_recursion_cut() -> None:
    definition = gemini.definition(plant)
    assert errors(definition, "gemini", strict=False) == []
    tree = definition["parameters"]  # the one model parameter is flattened into the arguments
    assert tree["properties"]["leaf"]["properties"]["name"] == {"type": "STRING"}
    level2 = tree["properties"]["children"]["items"]["properties"]["children"]["items"]
    assert level2["properties"].keys() == {"leaf"}  # `children` is optional: left out at the cut
    assert "$ref" not in str(definition) and "$defs" not in str(definition)


def test_tool_without_parameters_has_no_parameters_key() -> None:
    @tool
    def now() -> str:
        """The time."""
        return "now"

    assert gemini.definition(now) == {"name": "now", "description": "The time."}


def test_names_starting_with_a_digit_or_too_long_are_made_safe_and_mapped_back() -> None:
    first = Tool.from_schema("3d_render", "Render in 3D.", {"type": "object", "properties": {}})
    long = Tool.from_schema("x" * 64, "A long name.", {"type": "object", "properties": {}})
    registry = ToolRegistry([first, long])
    names = [d["name"] for d in registry.definitions("gemini")]
    assert names[0] == "_3d_render"
    assert len(names[1]) == 63
    for definition in registry.definitions("gemini"):
        assert check(definition, "gemini") == []
    response = {"candidates": [{"content": {"parts": [{"functionCall": {"name": n}} for n in names]}}]}
    assert [c.name for c in gemini.parse_tool_calls(response, names=registry)] == ["3d_render", "x" * 64]
    assert gemini.parse_tool_calls(response)[0].name == "3d_render"
    with pytest.raises(SchemaError, match="ToolRegistry"):
        gemini_name("a.b")


def test_exports_pass_the_checker(registry: ToolRegistry) -> None:
    for definition in registry.definitions("gemini"):
        assert errors(definition, "gemini", strict=False) == []


# --------------------------------------------------------------------------------------------------------
# Calls


def test_parse_rest_json_with_stable_generated_ids(registry: ToolRegistry) -> None:
    calls = gemini.parse_tool_calls(RESPONSE, names=registry)
    assert [(c.name, c.arguments) for c in calls] == [
        ("weather.current", {"city": "Paris"}),
        ("search_tasks", {"query": "rain"}),
    ]
    assert calls[0].id.startswith(GENERATED_ID_PREFIX)
    assert calls[1].id == "fc-7"
    assert gemini.parse_tool_calls(RESPONSE, names=registry)[0].id == calls[0].id  # stable


class _FunctionCall(BaseModel):
    name: str
    args: dict[str, Any] | None = None
    id: str | None = None


class _Part(BaseModel):
    text: str | None = None
    function_call: _FunctionCall | None = None


class _Content(BaseModel):
    role: str
    parts: list[_Part]


class _Candidate(BaseModel):
    content: _Content | None = None


class _Response(BaseModel):
    """The shape google-genai's `GenerateContentResponse.model_dump()` gives (snake_case fields)."""

    candidates: list[_Candidate]


def test_parse_sdk_shaped_objects_content_and_part_lists() -> None:
    sdk = _Response(
        candidates=[
            _Candidate(
                content=_Content(
                    role="model",
                    parts=[_Part(text="Sure."), _Part(function_call=_FunctionCall(name="search_tasks"))],
                )
            )
        ]
    )
    calls = gemini.parse_tool_calls(sdk)
    assert [(c.name, c.arguments) for c in calls] == [("search_tasks", {})]
    content = RESPONSE["candidates"][0]["content"]
    assert len(gemini.parse_tool_calls(content)) == 2
    assert len(gemini.parse_tool_calls(content["parts"])) == 2
    assert gemini.parse_tool_calls({"candidates": []}) == []
    assert gemini.parse_tool_calls({"candidates": [{"finishReason": "SAFETY"}]}) == []


@pytest.mark.parametrize(
    ("response", "where"),
    [
        ({"candidates": [{"content": {"parts": [{"functionCall": {"args": {}}}]}}]}, "missing key 'name'"),
        (
            {"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": [1]}}]}}]},
            "arguments",
        ),
        ({"candidates": [{"content": {"parts": "x"}}]}, r"candidates\[0\]\.content\.parts: expected a list"),
        ({"promptFeedback": {}}, "expected a Gemini response"),
        (3.5, "expected a Gemini response"),
    ],
)
def test_parse_malformed_raises_one_clear_error(response: Any, where: str) -> None:
    with pytest.raises(ToolCallParseError, match=where):
        gemini.parse_tool_calls(response)


# --------------------------------------------------------------------------------------------------------
# Results


def test_function_responses_for_each_status() -> None:
    ok = ToolResult.ok({"temp": 21}, call_id="fc-7", tool_name="weather.current")
    assert gemini.tool_result_message(ok, name="weather_current") == {
        "functionResponse": {"name": "weather_current", "response": {"output": {"temp": 21}}, "id": "fc-7"}
    }
    # Without `name`, the registered name is made Gemini-safe; generated ids are not sent back.
    generated = ToolResult.ok(3, call_id=f"{GENERATED_ID_PREFIX}0_abc", tool_name="weather.current")
    assert gemini.tool_result_message(generated) == {
        "functionResponse": {"name": "weather_current", "response": {"output": 3}}
    }
    failed = ToolResult.fail(
        ToolError("NOT_FOUND", "No such city.", recover_action="Ask again."), call_id="fc-7"
    )
    assert gemini.tool_result_message(failed, name="w")["functionResponse"]["response"] == {
        "error": {"code": "NOT_FOUND", "message": "No such city.", "recover_action": "Ask again."}
    }
    pending = ToolResult.confirmation_required_result("c1", "delete task t1", call_id="fc-7", tool_name="d")
    response = gemini.tool_result_message(pending)["functionResponse"]["response"]
    assert "error" not in response
    assert "has NOT run" in response["output"]
    hidden = ToolResult.ok({"secret": 1}, call_id="fc-7", tool_name="d", exclude_value_from_context=True)
    assert "secret" not in str(gemini.tool_result_message(hidden))


def test_search_tasks_declaration_is_clean() -> None:
    definition = gemini.definition(search_tasks)
    assert check(definition, "gemini") == []
    assert definition["parameters"]["properties"]["status"] == {
        "type": "STRING",
        "enum": ["open", "done"],
        "nullable": True,
        "description": "Only tasks with this status.",
    }
