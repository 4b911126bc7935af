"""OpenAI Chat Completions (`openai`) and Responses (`openai-responses`): export, strict, calls, results."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai.types.chat import ChatCompletion, ChatCompletionMessage
from openai.types.responses import Response
from pydantic import BaseModel

from toolrun import Tool, ToolError, ToolRegistry, ToolResult, tool
from toolrun.exceptions import SchemaError
from toolrun.formats import ToolCallParseError, check, get_format
from toolrun.formats.openai import OpenAIStrictSchema

from .conftest import Address, errors, search_tasks, weather_tool

chat = get_format("openai")
responses = get_format("openai-responses")

# A Chat Completions response with two tool calls, as documented in the API reference.
CHAT_RESPONSE: dict[str, Any] = {
    "id": "chatcmpl-abc123",
    "object": "chat.completion",
    "created": 1699896916,
    "model": "gpt-4o-mini",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_abc123",
                        "type": "function",
                        "function": {"name": "weather_current", "arguments": '{\n"city": "Boston"\n}'},
                    },
                    {
                        "id": "call_def456",
                        "type": "function",
                        "function": {"name": "search_tasks", "arguments": '{"query": "rain", "limit": null}'},
                    },
                ],
            },
            "logprobs": None,
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99},
}

# A Responses API response: a reasoning item, a function call, as documented.
RESPONSES_RESPONSE: dict[str, Any] = {
    "id": "resp_67ca09c5efe0819096d0511c92b8c890096610f474011cc0",
    "object": "response",
    "created_at": 1741294021,
    "status": "completed",
    "model": "gpt-4.1-2025-04-14",
    "output": [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {
            "type": "function_call",
            "id": "fc_67ca09c6bedc8190a7abfec07b1a1332096610f474011cc0",
            "call_id": "call_unLAR8MvFNptuiZK6K6HCy5k",
            "name": "weather_current",
            "arguments": '{"city":"Boston","unit":"c"}',
            "status": "completed",
        },
    ],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
}


# --------------------------------------------------------------------------------------------------------
# Export


def test_chat_plain_export_snapshot(weather: Tool) -> None:
    assert chat.definition(weather, name="weather_current") == {
        "type": "function",
        "function": {
            "name": "weather_current",
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "minLength": 1, "description": "City name"},
                    "days": {"type": "integer", "minimum": 1, "maximum": 7, "default": 1},
                    "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
                },
                "required": ["city"],
                "additionalProperties": False,
            },
            "strict": False,
        },
    }


def test_chat_strict_export_snapshot() -> None:
    assert chat.definition(search_tasks, strict=True) == {
        "type": "function",
        "function": {
            "name": "search_tasks",
            "description": "Search tasks by text. Use when the user asks to find tasks.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Words to look for."},
                    "limit": {
                        "type": ["integer", "null"],
                        "description": "How many tasks to return at most. Default: 10.",
                    },
                    "status": {
                        "anyOf": [{"type": "string", "enum": ["open", "done"]}, {"type": "null"}],
                        "description": "Only tasks with this status.",
                    },
                    "tags": {
                        "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
                        "description": "Only tasks carrying all these tags.",
                    },
                },
                "required": ["query", "limit", "status", "tags"],
                "additionalProperties": False,
            },
            "strict": True,
        },
    }


def test_responses_export_is_flat_and_always_sets_strict(weather: Tool) -> None:
    plain = responses.definition(weather, name="weather_current")
    assert plain["type"] == "function"
    assert plain["name"] == "weather_current"
    assert plain["strict"] is False  # the Responses API would default to true (OAI-STRICT-DEFAULT)
    assert "function" not in plain
    strict = responses.definition(weather, strict=True, name="weather_current")
    assert strict["strict"] is True
    assert (
        strict["parameters"]
        == chat.definition(weather, strict=True, name="weather_current")["function"]["parameters"]
    )


@pytest.mark.parametrize("fmt", ["openai", "openai-responses"])
@pytest.mark.parametrize("strict", [False, True])
def test_exports_pass_the_checker(fmt: str, strict: bool, registry: ToolRegistry) -> None:
    for definition in registry.definitions(fmt, strict=strict):
        assert errors(definition, fmt, strict=strict) == []


def test_unsafe_name_without_alias_is_refused_with_the_fix(weather: Tool) -> None:
    with pytest.raises(SchemaError, match=r"ToolRegistry.*'weather_current'"):
        chat.definition(weather)


def test_export_does_not_share_or_change_the_tool_schema(weather: Tool) -> None:
    before = json.dumps(weather.parameters, sort_keys=True)
    exported = chat.definition(weather, strict=True, name="w")["function"]["parameters"]
    exported["properties"]["city"]["type"] = "integer"
    assert json.dumps(weather.parameters, sort_keys=True) == before


# --------------------------------------------------------------------------------------------------------
# Strict mode keeps optional parameters optional


def test_strict_null_for_an_optional_parameter_means_its_default() -> None:
    strict = chat.definition(search_tasks, strict=True)["function"]["parameters"]
    assert set(strict["required"]) == set(strict["properties"])
    # What a strict-mode model sends when it has no value for the optional parameters:
    call = {"query": "rain", "limit": None, "status": None, "tags": None}
    assert search_tasks.validate(json.dumps(call)) == {
        "query": "rain",
        "limit": 10,
        "status": None,
        "tags": None,
    }


def test_strict_null_for_an_optional_json_schema_parameter_means_its_default(weather: Tool) -> None:
    strict = chat.definition(weather, strict=True, name="w")["function"]["parameters"]
    assert strict["properties"]["days"]["type"] == ["integer", "null"]
    assert strict["properties"]["unit"]["enum"] == ["c", "f", None]
    assert "default" not in strict["properties"]["days"]
    assert strict["properties"]["days"]["description"] == "Default: 1."
    assert weather.validate({"city": "Oslo", "days": None, "unit": None}) == {
        "city": "Oslo",
        "days": 1,
        "unit": "c",
    }


class Query(BaseModel):
    text: str
    limit: int = 10


@tool
def find(query: Query) -> list[str]:
    """Find things (the one model parameter is flattened into the arguments)."""
    return []


def test_strict_null_for_an_optional_field_of_a_flattened_model_means_its_default() -> None:
    strict = chat.definition(find, strict=True)["function"]["parameters"]
    assert strict["properties"]["limit"]["type"] == ["integer", "null"]
    assert find.validate({"text": "x", "limit": None})["query"].limit == 10


def test_strict_nested_optional_properties_become_required_not_nullable() -> None:
    strict = chat.definition(ship, strict=True)["function"]["parameters"]
    address = strict["properties"]["address"]
    assert address["required"] == ["street", "city"]
    assert address["properties"]["city"] == {"type": "string", "description": 'Default: "Paris".'}
    assert address["additionalProperties"] is False
    # The nested validator rejects null, so strict mode must not offer it there:
    ship.validate({"address": {"street": "1 Rue", "city": "Lyon"}, "express": None})


@tool
def ship(address: Address, express: bool = False) -> str:
    """Ship an order."""
    return "ok"


def test_strict_moves_unsupported_keywords_into_descriptions() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 20, "format": "hostname"},
            "site": {"type": "string", "format": "uri"},
            "ids": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
            "code": {"type": "string", "pattern": "^(?!x)[a-z]+$"},
        },
        "required": ["name", "site", "ids", "code"],
    }
    out = OpenAIStrictSchema(schema).transform()
    props = out["properties"]
    assert props["name"] == {"type": "string", "format": "hostname", "description": "At most 20 characters."}
    assert props["site"] == {"type": "string", "description": "Format: uri."}
    assert props["ids"]["description"] == "Items must be unique."
    assert props["code"] == {
        "type": "string",
        "description": "Must match the regular expression ^(?!x)[a-z]+$.",
    }


def test_strict_any_value_and_free_form_object_are_narrowed_and_documented() -> None:
    schema = {
        "type": "object",
        "properties": {"anything": {"description": "Any value."}, "extra": {"type": "object"}},
        "required": ["anything", "extra"],
        "additionalProperties": False,
    }
    transformer = OpenAIStrictSchema(schema)
    out = transformer.transform()
    anything = out["properties"]["anything"]
    assert anything["description"] == "Any value."
    assert [b.get("type") for b in anything["anyOf"]] == ["string", "number", "boolean", "null", "array"]
    assert out["properties"]["extra"] == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }
    assert any("any value" in c for c in transformer.changes)
    # A free-form object cannot be expressed: the format exports such a tool non-strict (see below).
    assert transformer.free_form == ["/properties/extra"]
    assert [rule for rule, _, _ in transformer.findings] == ["OAI-S-ANY"]


def test_a_free_form_object_makes_the_strict_export_non_strict_with_a_finding_naming_it() -> None:
    """dict[str, X], list[dict] and free-form objects would be closed in strict mode (only {} could be
    sent): the tool is exported non-strict, faithfully, and `check(tool)` names the parameter."""

    @tool
    def tag(labels: dict[str, int], rows: list[dict[str, str]], note: str = "") -> str:
        """Tag things."""
        return "ok"

    for fmt, path in (("openai", "/function/parameters"), ("openai-responses", "/parameters")):
        definition = get_format(fmt).definition(tag, strict=True)
        body = definition.get("function", definition)
        assert body["strict"] is False
        assert body["parameters"]["properties"]["labels"]["additionalProperties"] == {"type": "integer"}
        assert body["parameters"]["properties"]["rows"]["items"]["additionalProperties"] == {"type": "string"}
        assert check(definition, fmt, strict=True) == [
            v for v in check(definition, fmt, strict=True) if v.rule == "OAI-S-FREEFORM"
        ]
        found = {(v.rule, v.path) for v in check(tag, fmt, strict=True)}
        assert ("OAI-S-FREEFORM", f"{path}/properties/labels") in found
        assert ("OAI-S-FREEFORM", f"{path}/properties/rows/items") in found
    anthropic = get_format("anthropic").definition(tag, strict=True)
    assert "strict" not in anthropic
    assert {v.rule for v in check(tag, "anthropic", strict=True)} == {"ANT-S-FREEFORM"}
    # A closed tool stays strict, and its check has nothing to say.
    assert chat.definition(ship, strict=True)["function"]["strict"] is True
    assert check(ship, "openai", strict=True) == []


def test_strict_rewrites_oneof_allof_type_lists_and_ref_siblings() -> None:
    schema = {
        "type": "object",
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}},
        "properties": {
            "shape": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            "merged": {
                "allOf": [
                    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                    {"properties": {"b": {"type": "integer"}}},
                ]
            },
            "either": {"type": ["string", "array"], "items": {"type": "integer"}, "maxLength": 3},
            "where": {"$ref": "#/$defs/Point", "description": "The point."},
        },
        "required": ["shape", "merged", "either", "where"],
    }
    out = OpenAIStrictSchema(schema).transform()
    props = out["properties"]
    assert props["shape"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert props["merged"]["properties"].keys() == {"a", "b"}
    assert props["merged"]["required"] == ["a", "b"]
    assert props["either"] == {
        "anyOf": [
            {"type": "string", "description": "At most 3 characters."},
            {"type": "array", "items": {"type": "integer"}},
        ]
    }
    assert props["where"] == {"anyOf": [{"$ref": "#/$defs/Point"}], "description": "The point."}
    assert out["$defs"]["Point"]["additionalProperties"] is False


def test_strict_refuses_schemas_beyond_hard_limits() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(11):
        deep = {"type": "object", "properties": {"x": deep}, "required": ["x"]}
    with pytest.raises(SchemaError, match="OAI-L-DEPTH"):
        OpenAIStrictSchema(deep).transform()
    many = {"type": "object", "properties": {"e": {"type": "string", "enum": [f"v{i}" for i in range(1001)]}}}
    with pytest.raises(SchemaError, match="OAI-L-ENUM"):
        OpenAIStrictSchema(many).transform()


# --------------------------------------------------------------------------------------------------------
# Parsing calls


def test_chat_parse_dict_response_keeps_arguments_raw() -> None:
    calls = chat.parse_tool_calls(CHAT_RESPONSE)
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("call_abc123", "weather_current", '{\n"city": "Boston"\n}'),
        ("call_def456", "search_tasks", '{"query": "rain", "limit": null}'),
    ]


def test_chat_parse_maps_aliases_back(registry: ToolRegistry) -> None:
    calls = chat.parse_tool_calls(CHAT_RESPONSE, names=registry)
    assert [c.name for c in calls] == ["weather.current", "search_tasks"]
    assert chat.parse_tool_calls(CHAT_RESPONSE, names={"weather_current": "weather.current"})[0].name == (
        "weather.current"
    )


def test_chat_parse_sdk_objects_and_bare_messages() -> None:
    completion = ChatCompletion.model_validate(CHAT_RESPONSE)
    assert chat.parse_tool_calls(completion) == chat.parse_tool_calls(CHAT_RESPONSE)
    message = ChatCompletionMessage.model_validate(CHAT_RESPONSE["choices"][0]["message"])
    assert len(chat.parse_tool_calls(message)) == 2
    assert len(chat.parse_tool_calls(CHAT_RESPONSE["choices"][0]["message"])) == 2
    assert chat.parse_tool_calls({"role": "assistant", "content": "Hello"}) == []
    assert chat.parse_tool_calls({**CHAT_RESPONSE, "choices": []}) == []


def test_chat_parse_accepts_object_arguments_from_compatible_servers() -> None:
    message = {
        "role": "assistant",
        "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": {"a": 1}}}],
    }
    assert chat.parse_tool_calls(message)[0].arguments == {"a": 1}


@pytest.mark.parametrize(
    ("response", "where"),
    [
        ({"choices": [{"index": 0}]}, r"choices\[0\]: missing key 'message'"),
        ({"choices": "x"}, "choices: expected a list"),
        (
            {"role": "assistant", "tool_calls": [{"id": {"x": 1}, "function": {"name": "f"}}]},
            r"tool_calls\[0\]\.id: a tool call id must be a string",
        ),
        (
            {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": 3}}]},
            r"tool_calls\[0\]\.function\.name: expected a string",
        ),
        (
            {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": 5}}]},
            "arguments: expected JSON text",
        ),
        (
            {"role": "assistant", "tool_calls": [{"id": "c", "type": "custom", "custom": {}}]},
            "unsupported tool call type 'custom'",
        ),
        ({"unrelated": True}, "expected a Chat Completions response"),
        ([1, 2], "expected a Chat Completions response"),
        ("text", "expected a Chat Completions response"),
    ],
)
def test_chat_parse_malformed_raises_one_clear_error(response: Any, where: str) -> None:
    with pytest.raises(ToolCallParseError, match=where) as info:
        chat.parse_tool_calls(response)
    assert isinstance(info.value, ValueError)
    assert info.value.format == "openai"


def test_responses_parse_dict_sdk_object_and_item_list() -> None:
    calls = responses.parse_tool_calls(RESPONSES_RESPONSE)
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("call_unLAR8MvFNptuiZK6K6HCy5k", "weather_current", '{"city":"Boston","unit":"c"}')
    ]
    assert responses.parse_tool_calls(Response.model_validate(RESPONSES_RESPONSE)) == calls
    assert responses.parse_tool_calls(RESPONSES_RESPONSE["output"]) == calls
    assert responses.parse_tool_calls(RESPONSES_RESPONSE, names={"weather_current": "weather.current"})[
        0
    ].name == ("weather.current")


@pytest.mark.parametrize(
    ("response", "where"),
    [
        ({"id": "resp_1"}, "missing key 'output'"),
        (
            {"output": [{"type": "function_call", "name": "f", "arguments": "{}"}]},
            r"output\[0\]: missing key",
        ),
        ({"output": [7]}, r"output\[0\]: expected an object"),
        (None, "expected a Responses API response or a list of output items, got null"),
    ],
)
def test_responses_parse_malformed_raises_one_clear_error(response: Any, where: str) -> None:
    with pytest.raises(ToolCallParseError, match=where):
        responses.parse_tool_calls(response)


# --------------------------------------------------------------------------------------------------------
# Results


def _results() -> dict[str, ToolResult]:
    return {
        "ok": ToolResult.ok({"temp": 21}, call_id="call_1", tool_name="weather.current"),
        "error": ToolResult.fail(
            ToolError("NOT_FOUND", "No such city.", recover_action="Ask for another city."),
            call_id="call_1",
            tool_name="weather.current",
        ),
        "confirmation_required": ToolResult.confirmation_required_result(
            "conf_1", "delete task t1", call_id="call_1", tool_name="delete_task"
        ),
    }


def test_chat_result_messages_render_each_status() -> None:
    results = _results()
    assert chat.tool_result_message(results["ok"]) == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": '{"temp":21}',
    }
    error = chat.tool_result_message(results["error"])["content"]
    assert error == "Error NOT_FOUND: No such city.\nWhat to do: Ask for another city."
    pending = chat.tool_result_message(results["confirmation_required"])["content"]
    assert "has NOT run" in pending


def test_responses_result_items_render_each_status() -> None:
    results = _results()
    assert responses.tool_result_message(results["ok"]) == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": '{"temp":21}',
    }
    assert responses.tool_result_message(results["error"])["output"].startswith("Error NOT_FOUND")
    assert "has NOT run" in responses.tool_result_message(results["confirmation_required"])["output"]


def test_whole_round_trip_through_a_registry(registry: ToolRegistry) -> None:
    tools = registry.definitions("openai", strict=True)
    assert {t["function"]["name"] for t in tools} >= {"weather_current", "search_tasks"}
    call = chat.parse_tool_calls(CHAT_RESPONSE, names=registry)[0]
    assert registry.get(call.name).validate(call.arguments) == {"city": "Boston", "days": 1, "unit": "c"}


def test_weather_tool_helper_is_exported_under_its_alias() -> None:
    registry = ToolRegistry([weather_tool()])
    assert registry.definitions("openai")[0]["function"]["name"] == "weather_current"
