"""The schema transformers: bounds on untrusted schemas, edge cases, and a zoo of Python types."""

from __future__ import annotations

import datetime
import decimal
import enum
import json
import uuid
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from toolrun import Tool, tool
from toolrun.exceptions import SchemaError
from toolrun.formats import FORMATS, check, get_format
from toolrun.formats._schema import MAX_DEPTH, SchemaTransformer, with_notes
from toolrun.formats.anthropic import AnthropicSchema, AnthropicStrictSchema
from toolrun.formats.gemini import GeminiSchema
from toolrun.formats.openai import OpenAIStrictSchema

from .conftest import ALL_EXPORTS, errors

TRANSFORMERS = [SchemaTransformer, AnthropicSchema, AnthropicStrictSchema, OpenAIStrictSchema, GeminiSchema]


def _definition(fmt: str, schema: dict[str, Any], *, strict: bool) -> dict[str, Any]:
    """A definition around an already transformed schema, for the checker."""
    if fmt in ("openai", "openai-responses"):
        function = {"name": "t", "description": "T.", "parameters": schema, "strict": strict}
        return (
            {"type": "function", "function": function}
            if fmt == "openai"
            else {"type": "function", **function}
        )
    if fmt == "anthropic":
        return {
            "name": "t",
            "description": "T.",
            "input_schema": schema,
            **({"strict": True} if strict else {}),
        }
    if fmt == "gemini":
        return {"name": "t", "description": "T.", "parameters": schema}
    return {"name": "t", "description": "T.", "inputSchema": schema}


# --------------------------------------------------------------------------------------------------------
# Bounds: untrusted schemas end in SchemaError, never RecursionError or a hang


def _nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


@pytest.mark.parametrize("kind", TRANSFORMERS)
def test_deep_nesting_is_refused_not_a_recursion_error(kind: type[SchemaTransformer]) -> None:
    with pytest.raises(SchemaError, match="deeper than"):
        kind(_nested(5_000)).transform()
    with pytest.raises(SchemaError):
        kind({"type": "object", "properties": {"x": {"anyOf": [_nested(MAX_DEPTH + 1)]}}}).transform()


@pytest.mark.parametrize("kind", [GeminiSchema, AnthropicStrictSchema])
def test_ref_cycles_are_expanded_a_bounded_number_of_times(kind: type[SchemaTransformer]) -> None:
    cyclic = {
        "type": "object",
        "$defs": {
            "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}},
            "B": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}},
            "Self": {"$ref": "#/$defs/Self"},
        },
        "properties": {
            "a": {"$ref": "#/$defs/A"},
            "self": {"$ref": "#/$defs/Self"},
            "root": {"$ref": "#"},
            "pointer": {"type": "array", "items": {"$ref": "#/properties/pointer"}},
        },
    }
    transformer = kind(cyclic)
    out = transformer.transform()
    assert sum("cut after" in c for c in transformer.changes) >= 4
    fmt = "gemini" if kind is GeminiSchema else "anthropic"
    assert errors(_definition(fmt, out, strict=True), fmt, strict=True) == []


@pytest.mark.parametrize(("kind", "string"), [(GeminiSchema, "STRING"), (AnthropicStrictSchema, "string")])
def test_a_required_recursion_is_cut_to_a_string_and_says_so(
    kind: type[SchemaTransformer], string: str
) -> None:
    schema = {
        "type": "object",
        "$defs": {
            "N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}, "required": ["next"]}
        },
        "properties": {"n": {"$ref": "#/$defs/N"}},
        "required": ["n"],
    }
    out = kind(schema).transform()
    cut = out["properties"]["n"]["properties"]["next"]["properties"]["next"]
    assert cut["type"] == string
    assert "not described" in cut["description"]


def test_openai_strict_keeps_recursion_through_definitions() -> None:
    schema = {
        "type": "object",
        "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
        "properties": {"head": {"$ref": "#/$defs/Node"}, "root": {"$ref": "#"}},
        "required": ["head", "root"],
    }
    out = OpenAIStrictSchema(schema).transform()
    assert out["properties"]["head"] == {"$ref": "#/$defs/Node"}
    assert out["properties"]["root"] == {"$ref": "#"}
    node = out["$defs"]["Node"]
    assert node["properties"]["next"] == {"$ref": "#/$defs/Node"}
    assert node["required"] == ["next"] and node["additionalProperties"] is False
    assert errors(_definition("openai", out, strict=True), "openai", strict=True) == []


def test_ref_fan_out_is_stopped() -> None:
    defs: dict[str, Any] = {"L30": {"type": "string"}}
    for i in range(30):
        defs[f"L{i}"] = {
            "type": "object",
            "properties": {"a": {"$ref": f"#/$defs/L{i + 1}"}, "b": {"$ref": f"#/$defs/L{i + 1}"}},
        }
    schema = {"type": "object", "$defs": defs, "properties": {"x": {"$ref": "#/$defs/L0"}}, "required": ["x"]}
    with pytest.raises(SchemaError, match="more than"):
        GeminiSchema(schema).transform()
    # Exporters that keep `$ref`s never expand them.
    assert OpenAIStrictSchema(schema).transform()["properties"]["x"] == {"$ref": "#/$defs/L0"}
    AnthropicStrictSchema(schema).transform()


def test_dangling_refs_boolean_schemas_and_non_schemas() -> None:
    schema = {
        "type": "object",
        "properties": {
            "gone": {"$ref": "#/$defs/Missing"},
            "yes": True,
            "no": False,
            "list": {"type": "array", "items": True},
        },
    }
    assert SchemaTransformer(schema).transform()["properties"] == {
        "gone": {"$ref": "#/$defs/Missing"},
        "yes": {},
        "no": {"not": {}},
        "list": {"type": "array", "items": {}},
    }
    gemini = GeminiSchema(schema)
    assert gemini.transform()["properties"]["gone"] == {"type": "STRING"}
    assert any("does not resolve" in c for c in gemini.changes)
    strict = OpenAIStrictSchema(schema).transform()
    assert errors(_definition("openai", strict, strict=True), "openai", strict=True) == []
    with pytest.raises(SchemaError, match="expected a schema object at /properties/x"):
        SchemaTransformer({"type": "object", "properties": {"x": 5}}).transform()


def test_transformers_never_change_their_input() -> None:
    schema = {
        "type": "object",
        "$defs": {"P": {"type": "object", "properties": {"x": {"type": "integer", "default": 1}}}},
        "properties": {"p": {"$ref": "#/$defs/P"}, "q": {"allOf": [{"$ref": "#/$defs/P"}], "default": {}}},
    }
    before = json.dumps(schema, sort_keys=True)
    for kind in TRANSFORMERS:
        kind(schema).transform()
    assert json.dumps(schema, sort_keys=True) == before


def test_all_of_folding_keeps_conflicts_for_the_dialect_to_state() -> None:
    schema = {
        "type": "object",
        "properties": {
            "x": {
                "allOf": [
                    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}}},
                ]
            }
        },
    }
    out = OpenAIStrictSchema(schema).transform()["properties"]["x"]["anyOf"][0]
    assert out["properties"]["b"] == {"type": "boolean"}
    # The branches disagree on `a`: its type stays the first branch's, the other is stated on `a` itself
    # (not lost, and not left as a loose `{"properties": ...}` fragment that reads as an open object).
    assert out["properties"]["a"]["type"] == "string"
    assert (
        "allOf:" in out["properties"]["a"]["description"]
        and "integer" in out["properties"]["a"]["description"]
    )
    assert out["additionalProperties"] is False


@pytest.mark.parametrize("fmt", ["openai", "openai-responses", "anthropic"])
def test_all_of_branches_describing_one_property_differently_stay_strict(fmt: str) -> None:
    # Found by the property test with ten times its examples: two closed branches that say different
    # things about the same property (one narrows it, one describes it) made the strict export fall back
    # to non-strict, and the checker then found the plain schema breaking strict rules.
    def closed(props: dict[str, Any]) -> dict[str, Any]:
        return {"type": "object", "properties": props, "required": [], "additionalProperties": False}

    shared = {
        "allOf": [
            closed({"name": {"type": "string", "maxLength": 10}}),
            closed({"name": {"type": "string", "minLength": 1, "description": "The name."}}),
        ]
    }
    params = {
        "type": "object",
        "properties": {"s": {"$ref": "#/$defs/S"}},
        "required": ["s"],
        "$defs": {"S": shared},
    }
    tool = Tool.from_schema("t", "A tool.", params)
    definition = FORMATS[fmt].definition(tool, strict=True)
    body = definition.get("function", definition)
    assert body["strict"] is True
    assert check(definition, fmt, strict=True) == []
    name = (body.get("parameters") or body["input_schema"])["$defs"]["S"]["properties"]["name"]
    assert name["type"] == "string" and name["description"].startswith("The name.")


def test_description_notes_read_as_sentences() -> None:
    assert with_notes("The count", ["Default: 1."]) == "The count. Default: 1."
    assert with_notes("The unit (metric).", ["Minimum: 0."]) == "The unit (metric). Minimum: 0."
    assert with_notes(None, ["Default: 1.", "Maximum: 5."]) == "Default: 1. Maximum: 5."
    assert with_notes("  ", []) is None


# --------------------------------------------------------------------------------------------------------
# A zoo of Python parameter types: every export is checker-clean and strict calls validate


class Kind(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Cat(BaseModel):
    kind: Literal["cat"] = "cat"
    lives: int = 9


class Dog(BaseModel):
    kind: Literal["dog"] = "dog"
    good: bool = True


class Box(BaseModel):
    label: str
    inner: Box | None = None
    sizes: dict[str, float] = {}


@tool
def zoo(
    when: datetime.datetime,
    day: datetime.date | None = None,
    span: datetime.timedelta = datetime.timedelta(seconds=5),
    amount: decimal.Decimal = decimal.Decimal("1.5"),
    ident: uuid.UUID | None = None,
    path: Path = Path("."),
    blob: bytes = b"",
    counts: dict[str, int] | None = None,
    unique: set[int] = set(),  # noqa: B006 - a default the schema shows
    frozen: frozenset[str] = frozenset(),
    pair: tuple[int, str] = (1, "a"),
    many: tuple[int, ...] = (),
    level: Kind = Kind.LOW,
    pet: Annotated[Cat | Dog, Field(discriminator="kind")] = Cat(),
    box: Box | None = None,
    ratio: Annotated[float, Field(ge=0, le=1, multiple_of=0.25)] = 0.5,
    code: Annotated[str, Field(min_length=2, max_length=5, pattern=r"^[A-Z]+$")] = "AB",
    anything: Any = None,
    choice: Literal[1, 2, "three"] = 1,
) -> dict[str, Any]:
    """Take every kind of parameter."""
    return {}


@pytest.mark.parametrize(("fmt", "strict"), ALL_EXPORTS)
def test_type_zoo_exports_cleanly(fmt: str, strict: bool) -> None:
    definition = get_format(fmt).definition(zoo, strict=strict)
    # No error, and no warning but one: `counts: dict[str, int]` and `Box.sizes: dict[str, float]` are
    # free-form objects, which strict modes can only close (the model could send only {}), so the strict
    # export falls back to the plain one, and the checker names both.
    found = check(definition, fmt, strict=strict)
    if strict and fmt in ("openai", "openai-responses", "anthropic"):
        rule = ("ANT" if fmt == "anthropic" else "OAI") + "-S-FREEFORM"
        assert {v.rule for v in found} == {rule}
        assert sorted(v.path.split("/properties/")[-1].split("/")[0] for v in found) == ["counts", "sizes"]
    else:
        assert found == []


def test_type_zoo_strict_nulls_mean_defaults() -> None:
    schema = OpenAIStrictSchema(zoo.parameters).transform()  # the strict schema (exported non-strict: counts)
    call: dict[str, Any] = dict.fromkeys(schema["required"])
    call["when"] = "2024-05-01T10:00:00Z"
    values = zoo.validate(json.dumps(call))
    assert values["span"] == datetime.timedelta(seconds=5)
    assert values["level"] is Kind.LOW
    assert values["pet"] == Cat()
    assert values["code"] == "AB"


def test_tool_without_parameters_in_every_format() -> None:
    bare = Tool.from_schema("ping", "Ping.", None)
    for fmt, strict in ALL_EXPORTS:
        definition = FORMATS[fmt].definition(bare, strict=strict)
        assert errors(definition, fmt, strict=strict) == []
        assert check(definition, fmt, strict=strict) == []
