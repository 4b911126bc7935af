"""Raw schemas whose root is a `$ref`, an `allOf`, or `anyOf`/`oneOf` alternatives make callable tools."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolrun import Tool
from toolrun.exceptions import ArgumentsError, SchemaError
from toolrun.formats import FORMATS, check, get_format

A = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
B = {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]}

ROOTS: dict[str, dict[str, Any]] = {
    "allOf": {"allOf": [A, {"properties": {"b": {"type": "integer"}}}]},
    "oneOf": {"oneOf": [A, B]},
    "anyOf": {"type": "object", "anyOf": [A, B]},
    "$ref": {
        "$ref": "#/$defs/P",
        "$defs": {"P": {**A, "properties": {**A["properties"], "b": {"type": "integer"}}}},
    },
    "$ref to allOf": {"$ref": "#/$defs/P", "$defs": {"P": {"allOf": [{"$ref": "#/$defs/Q"}, A]}, "Q": B}},
}


def _tool(kind: str) -> Tool:
    return Tool.from_schema("pick", "Pick a thing.", json.loads(json.dumps(ROOTS[kind])))


@pytest.mark.parametrize("kind", list(ROOTS))
def test_the_fields_a_composed_root_describes_can_be_sent(kind: str) -> None:
    tool = _tool(kind)
    assert set(tool.parameters["properties"]) == {"a", "b"}
    assert tool.parameters["type"] == "object"
    good = {"allOf": {"a": "x", "b": 1}, "oneOf": {"b": 2}, "anyOf": {"a": "x"}, "$ref": {"a": "x"}}
    arguments = good.get(kind, {"a": "x", "b": 1})
    assert tool.validate(arguments) == arguments
    with pytest.raises(ArgumentsError, match="unknown field"):
        tool.validate({**arguments, "zzz": 1})


def test_alternatives_are_still_enforced() -> None:
    tool = _tool("oneOf")
    assert tool.validate({"a": "x"}) == {"a": "x"}
    with pytest.raises(ArgumentsError):
        tool.validate({})  # matches neither alternative
    with pytest.raises(ArgumentsError):
        tool.validate({"a": "x", "b": 1})  # matches both: oneOf wants exactly one
    required_by_all = Tool.from_schema(
        "q", "Q.", {"anyOf": [{"properties": {"k": {"type": "string"}, "x": {}}, "required": ["k"]},
                              {"properties": {"k": {"type": "string"}, "y": {}}, "required": ["k"]}]},
    )  # fmt: skip
    assert required_by_all.parameters["required"] == ["k"]


def test_an_unresolvable_root_ref_is_refused_at_definition() -> None:
    with pytest.raises(SchemaError, match="does not resolve"):
        Tool.from_schema("t", "T.", {"$ref": "#/$defs/Missing"})


@pytest.mark.parametrize("kind", list(ROOTS))
@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("strict", [False, True])
def test_every_export_lists_the_fields_and_is_checker_clean(kind: str, fmt: str, strict: bool) -> None:
    tool = _tool(kind)
    definition = get_format(fmt).definition(tool, strict=strict)
    schema = definition.get("function", definition)
    params = schema.get("parameters") or schema.get("input_schema") or schema.get("inputSchema")
    assert set(params["properties"]) == {"a", "b"}, definition  # Gemini used to drop every parameter
    assert [v for v in check(definition, fmt, strict=strict) if v.severity == "error"] == []
    if kind in ("oneOf", "anyOf"):
        assert not set(params.get("required", [])) - {"a", "b"}
        if fmt == "gemini":
            assert "required" not in params  # not the first alternative's required fields
        if fmt == "mcp":  # MCP takes the alternatives as they are: a faithful export
            assert kind in params
        else:  # the others get them as text, and `check(tool)` says so
            assert "Must match one of: fields a (required); fields b (required)." in params["description"]
            assert "SCHEMA-ROOT-UNION" in {v.rule for v in check(tool, fmt, strict=strict)}


@st.composite
def composed_roots(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """A root that spreads its fields over allOf parts and anyOf alternatives, and arguments that fit."""
    names = draw(st.lists(st.from_regex(r"[a-z]{1,6}", fullmatch=True), min_size=1, max_size=6, unique=True))
    kinds = {n: draw(st.sampled_from(["string", "integer", "boolean"])) for n in names}
    groups = draw(st.lists(st.integers(0, 2), min_size=len(names), max_size=len(names)))
    parts: list[list[str]] = [[], [], []]
    for name, group in zip(names, groups, strict=True):
        parts[group].append(name)

    def obj(fields: list[str]) -> dict[str, Any]:
        return {"type": "object", "properties": {n: {"type": kinds[n]} for n in fields}}

    root: dict[str, Any] = obj(parts[0])
    if parts[1]:
        root["allOf"] = [obj(parts[1][:1]), obj(parts[1][1:])]
    if parts[2]:
        root["anyOf"] = [obj(parts[2]), {"type": "object"}]
    sample = {"string": "s", "integer": 1, "boolean": True}
    arguments = {n: sample[kinds[n]] for n in names}
    return root, arguments


@settings(max_examples=60, deadline=None)
@given(composed_roots())
def test_generated_composed_roots_accept_every_field_they_describe(case: tuple[dict[str, Any], Any]) -> None:
    root, arguments = case
    tool = Tool.from_schema("t", "T.", root)
    assert tool.validate(arguments) == arguments
    with pytest.raises(ArgumentsError):
        tool.validate({**arguments, "UNKNOWN": 1})
    gemini = get_format("gemini").definition(tool)
    assert set(gemini["parameters"]["properties"]) == set(arguments)
