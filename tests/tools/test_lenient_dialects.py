"""`Tool.from_schema(..., lenient=True)` on the dialects of real function docs beyond BFCL.

Each fixture is a hand-written doc in the style of a public data set or catalogue (xLAM/APIGen, ToolBench/
RapidAPI, API-Bank, Gorilla java/javascript, OpenAPI-derived specs, Glaive-style hand-written specs), with
a call that is valid under the doc's evident meaning: it must validate, and the report must say, per path,
what was changed and which quirk it was.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolrun import Tool
from toolrun.exceptions import ArgumentsError
from toolrun.formats import FORMATS, check
from toolrun.tools import SchemaChange

# (id, doc parameters, a valid call, what it validates to (None: as sent), {(path, kind)} reported)
CASES: list[tuple[str, Any, dict[str, Any], dict[str, Any] | None, set[tuple[str, str]]]] = [
    (
        "capitalised and padded type names",
        {"type": "object", "properties": {"city": {"type": "String"}, "metric": {"type": "boolean "}},
         "required": ["city"]},
        {"city": "Paris", "metric": True}, None,
        {("$.city", "type-name"), ("$.metric", "type-name")},
    ),
    (
        "type unions with null",
        {"type": "object", "properties": {"limit": {"type": "integer|null"}, "q": {"type": "str | None"}}},
        {"limit": None, "q": None}, None, {("$.limit", "type-expression"), ("$.q", "type-expression")},
    ),
    (
        "python generics (xLAM/APIGen)",
        {"nums": {"type": "List[int]", "description": "Numbers."},
         "weights": {"type": "Dict[str, float]", "description": "Weights."},
         "mode": {"type": "str, optional", "description": "Mode.", "default": "fast"}},
        {"nums": [1, 2], "weights": {"a": 0.5}}, {"nums": [1, 2], "weights": {"a": 0.5}, "mode": "fast"},
        {("$", "object-shape"), ("$.nums", "type-expression"), ("$.weights", "type-expression")},
    ),
    (
        "prose and bracket array types",
        {"type": "object", "properties": {"tags": {"type": "array of strings"}, "ids": {"type": "int[]"},
                                          "names": {"type": "list[str]"}}},
        {"tags": ["a"], "ids": [1], "names": ["x"]}, None,
        {("$.tags", "type-expression"), ("$.ids", "type-expression"), ("$.names", "type-expression")},
    ),
    (
        "required as a flag on each property",
        {"type": "object", "properties": {"query": {"type": "string", "required": True},
                                          "page": {"type": "int", "required": False}}},
        {"query": "x"}, None, {("$.query", "required-flag"), ("$.page", "required-flag")},
    ),
    (
        "required as a string",
        {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
         "required": "a, b"},
        {"a": "x", "b": "y"}, None, {("$", "required-string")},
    ),
    (
        "enum as a comma string",
        {"type": "object", "properties": {"unit": {"type": "string", "enum": "celsius, fahrenheit"}}},
        {"unit": "fahrenheit"}, None, {("$.unit", "enum-string")},
    ),
    (
        "optional flag and ToolBench optional list",
        {"type": "object",
         "properties": {"url": {"type": "string"}, "lang": {"type": "string", "optional": True}},
         "required": ["url", "lang"], "optional": ["url"]},
        {}, None, {("$", "optional"), ("$.lang", "optional")},
    ),
    (
        "items missing, given as a type name, or as a list of names",
        {"type": "object", "properties": {"any": {"type": "array"}, "s": {"type": "array", "items": "string"},
                                          "n": {"type": "list", "items": ["int"]}}},
        {"any": [1, "x", None], "s": ["a"], "n": [3]}, None, {("$.s", "items"), ("$.n", "items")},
    ),
    (
        "properties at the top without a type",
        {"properties": {"x": {"type": "number"}, "inner": {"properties": {"y": {"type": "string"}}}}},
        {"x": 1.5, "inner": {"y": "z"}}, None, {("$.inner", "object-shape")},
    ),
    (
        "numbers and booleans as strings in defaults and bounds",
        {"type": "object", "properties": {"n": {"type": "integer", "default": "10", "minimum": "1"},
                                          "f": {"type": "boolean", "default": "false"},
                                          "xs": {"type": "array", "default": "[]"}}},
        {}, {"n": 10, "f": False, "xs": []},
        {("$.n", "default"), ("$.n", "number-keyword"), ("$.f", "default"), ("$.xs", "default")},
    ),
    (
        "format hints as types",
        {"type": "object",
         "properties": {"when": {"type": "date"}, "id": {"type": "uuid"}, "home": {"type": "url"}}},
        {"when": "2024-01-31", "id": "a3bb189e-8bf9-3888-9912-ace4e6543002", "home": "https://x.org"}, None,
        {("$.when", "type-format"), ("$.id", "type-format"), ("$.home", "type-format")},
    ),
    (
        "type lists with loose names",
        {"type": "object", "properties": {"v": {"type": ["String", "Integer", "None"]}}},
        {"v": 3}, None, {("$.v", "type-list")},
    ),
    (
        "OpenAPI nullable",
        {"type": "object", "properties": {"cursor": {"type": "string", "nullable": True},
                                          "size": {"type": "integer", "format": "int32", "nullable": False}},
         "required": ["cursor"]},
        {"cursor": None, "size": 5}, None, {("$.cursor", "nullable"), ("$.size", "nullable")},
    ),
    (
        "Gorilla java and javascript type names",
        {"type": "dict", "properties": {"map": {"type": "HashMap"}, "xs": {"type": "ArrayList"},
                                        "n": {"type": "long"}, "c": {"type": "char"}, "d": {"type": "double"},
                                        "o": {"type": "any"}}},
        {"map": {"k": "v"}, "xs": [1], "n": 7, "c": "x", "d": 1.5, "o": {"any": "thing"}}, None,
        {("$", "type-name"), ("$.map", "type-name"), ("$.xs", "type-name"), ("$.n", "type-name"),
         ("$.o", "type-any")},
    ),
    (
        "a list of parameter specs (API-Bank, ToolBench)",
        [{"name": "token", "type": "str", "description": "Token.", "required": True},
         {"name": "count", "type": "int", "description": "Count.", "required": False}],
        {"token": "t"}, None, {("$", "object-shape")},
    ),
    (
        "properties given as a list and a bare type name",
        {"type": "object", "properties": [{"name": "q", "type": "string", "required": True}]},
        {"q": "x"}, None, {("$", "object-shape")},
    ),
    (
        "a property given as a bare type name",
        {"type": "object", "properties": {"q": "string", "n": "integer"}, "required": ["q"]},
        {"q": "x", "n": 1}, None, {("$.q", "object-shape"), ("$.n", "object-shape")},
    ),
    (
        "examples as a single value and a non-string description",
        {"type": "object", "properties": {"q": {"type": "string", "examples": "hello", "description": 42}}},
        {"q": "x"}, None, {("$.q", "examples"), ("$.q", "description")},
    ),
    (
        # BFCL live_simple's shape (BFCL_v4_live_simple.json, e.g. GitHub traffic `metrics`): the enum of an
        # array-typed parameter lists the allowed items, and the gold answer is a list of them.
        "array-level enum of items (BFCL live)",
        {"type": "dict", "required": ["repo", "metrics"], "properties": {
            "repo": {"type": "string", "description": "owner/repo"},
            "metrics": {"type": "array", "items": {"type": "string"}, "enum": ["view", "clone", "referrer"],
                        "description": "Which traffic metrics to fetch."},
            "days": {"type": "array", "items": "integer", "enum": "1, 7, 30"}}},
        {"repo": "o/r", "metrics": ["view", "clone"], "days": [7]}, None,
        {("$.metrics", "enum-items"), ("$.days", "enum-items"), ("$.days[]", "enum-values")},
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("doc", "call", "expected", "reported"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_lenient_reads_each_quirk_by_its_evident_meaning(
    doc: Any, call: dict[str, Any], expected: dict[str, Any] | None, reported: set[tuple[str, str]]
) -> None:
    # Each quirk is one: without lenient, this doc or this call fails. (Nested properties without a type
    # are valid JSON Schema; lenient gives them one for the providers that need it, e.g. Gemini.)
    assert not _loads_strictly(doc, call) or "inner" in call
    tool = Tool.from_schema("t", "T.", doc, lenient=True)
    assert tool.validate(call) == (call if expected is None else expected)
    changes = tool.lenient_changes
    assert all(isinstance(c, SchemaChange) and c.startswith(c.path + ": ") for c in changes)
    assert reported <= {(c.path, c.kind) for c in changes}, [c.as_dict() for c in changes]
    with pytest.raises(ArgumentsError):
        tool.validate({**call, "not_a_parameter": 1})
    for fmt in FORMATS:
        for strict in (False, True):
            assert [v for v in check(tool, fmt, strict=strict) if v.severity == "error"] == []


def _loads_strictly(doc: Any, call: dict[str, Any]) -> bool:
    try:
        Tool.from_schema("t", "T.", doc).validate(call)
    except Exception:
        return False
    return True


@given(
    allowed=st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=6, unique=True),
    picks=st.lists(st.integers(0, 5), max_size=4),
    stranger=st.text(min_size=1, max_size=8),
)
def test_an_array_enum_admits_lists_of_those_items_only(
    allowed: list[str], picks: list[int], stranger: str
) -> None:
    doc = {
        "type": "object",
        "properties": {"x": {"type": "array", "items": {"type": "string"}, "enum": allowed}},
    }
    tool = Tool.from_schema("t", "T.", doc, lenient=True)
    chosen = [allowed[i % len(allowed)] for i in picks]
    assert tool.validate({"x": chosen}) == {"x": chosen}
    if stranger not in allowed:
        with pytest.raises(ArgumentsError):
            tool.validate({"x": [*chosen, stranger]})
    with pytest.raises(ArgumentsError):
        tool.validate({"x": allowed[0]})  # a single item is not the list
    whole = {"type": "object", "properties": {"x": {"type": "array", "enum": [["a", "b"], ["c"]]}}}
    assert Tool.from_schema("t", "T.", whole, lenient=True).validate({"x": ["c"]}) == {"x": ["c"]}  # kept


def test_required_flags_make_required_fields() -> None:
    tool = Tool.from_schema(
        "t", "T.", {"type": "object", "properties": {"q": {"type": "string", "required": True}}}, lenient=True
    )
    assert tool.parameters["required"] == ["q"]
    with pytest.raises(ArgumentsError, match="required"):
        tool.validate({})


def test_a_change_reads_and_serialises() -> None:
    tool = Tool.from_schema("t", "T.", {"type": "object", "properties": {"n": {"type": "int"}}}, lenient=True)
    [change] = tool.lenient_changes
    assert change == "$.n: type 'int' → 'integer'"
    assert change.as_dict() == {
        "path": "$.n", "kind": "type-name", "before": "int", "after": "integer", "message": str(change)
    }  # fmt: skip


_NAMES = ["str", "String", "int", "Integer", "float", "double", "bool", "Boolean", "list", "dict", "any"]


@given(
    st.sampled_from(_NAMES),
    st.sampled_from(["{}", "{} | None", "Optional[{}]", "List[{}]", "{}[]", "array of {}", "{}, optional"]),
)
def test_type_expressions_always_give_valid_schemas(name: str, template: str) -> None:
    expression = template.format(name)
    tool = Tool.from_schema(
        "t", "T.", {"type": "object", "properties": {"x": {"type": expression}}}, lenient=True
    )
    assert tool.parameters["properties"]["x"].get("type") != expression
    tool.validate({})
