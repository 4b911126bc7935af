"""Tests for the provider conformance checker (``toolrun.formats._check``)."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolrun.formats._check import MAX_DEPTH, PROVIDERS, Violation, check, check_request

# --------------------------------------------------------------------------------------------------
# Builders
# --------------------------------------------------------------------------------------------------

DESC = "Get the current weather for a city."

# Satisfies every strict subset: all objects closed, all properties required, optional via null unions,
# only supported keywords; exercises items, anyOf, enum, local $ref and $defs.
STRICT_PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name", "pattern": "^[A-Z][a-z]+$"},
        "unit": {"type": ["string", "null"], "enum": ["c", "f", None]},
        "when": {"type": "string", "format": "date-time"},
        "days": {"type": "array", "items": {"$ref": "#/$defs/day"}, "minItems": 1},
        "place": {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {"lat": {"type": "number"}},
                    "required": ["lat"],
                    "additionalProperties": False,
                },
                {"type": "null"},
            ]
        },
    },
    "required": ["city", "unit", "when", "days", "place"],
    "additionalProperties": False,
    "$defs": {
        "day": {
            "type": "object",
            "properties": {"date": {"type": "string", "format": "date"}},
            "required": ["date"],
            "additionalProperties": False,
        }
    },
}

GEMINI_PARAMS: dict[str, Any] = {
    "type": "OBJECT",
    "properties": {
        "city": {"type": "STRING", "description": "City name"},
        "unit": {"type": "string", "enum": ["c", "f"], "nullable": True, "format": "enum"},
        "days": {
            "type": "ARRAY",
            "items": {"type": "INTEGER", "format": "int32"},
            "minItems": 1,
            "maxItems": 7,
        },
        "where": {
            "type": "OBJECT",
            "properties": {"lat": {"type": "NUMBER", "format": "double"}},
            "property_ordering": ["lat"],
        },
    },
    "required": ["city"],
    "propertyOrdering": ["city", "unit", "days", "where"],
}


def params(**properties: Any) -> dict[str, Any]:
    """A strict-clean object schema around the given properties."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def oai(
    parameters: Any = None, *, strict: Any = None, name: str = "get_weather", **extra: Any
) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name, "description": DESC, **extra}
    if parameters is not None:
        function["parameters"] = parameters
    if strict is not None:
        function["strict"] = strict
    return {"type": "function", "function": function}


def resp(
    parameters: Any = None, *, strict: Any = False, name: str = "get_weather", **extra: Any
) -> dict[str, Any]:
    tool: dict[str, Any] = {"type": "function", "name": name, "description": DESC, **extra}
    if parameters is not None:
        tool["parameters"] = parameters
    if strict is not None:
        tool["strict"] = strict
    return tool


def ant(schema: Any = None, *, strict: Any = None, name: str = "get_weather", **extra: Any) -> dict[str, Any]:
    tool: dict[str, Any] = {"name": name, "description": DESC, "input_schema": schema or params(), **extra}
    if strict is not None:
        tool["strict"] = strict
    return tool


def gem(parameters: Any = None, *, name: str = "get_weather", **extra: Any) -> dict[str, Any]:
    declaration: dict[str, Any] = {"name": name, "description": DESC, **extra}
    if parameters is not None:
        declaration["parameters"] = parameters
    return declaration


def gem_props(**properties: Any) -> dict[str, Any]:
    return {"type": "OBJECT", "properties": properties}


def mcp(schema: Any = None, *, name: str = "get_weather", **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": DESC, "inputSchema": schema or {"type": "object"}, **extra}


def hits(violations: list[Violation], rule: str) -> list[tuple[str, str]]:
    return [(v.path, v.severity) for v in violations if v.rule == rule]


def nested_arrays(levels: int) -> dict[str, Any]:
    """``levels`` nested array schemas around a string."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "array", "items": schema}
    return schema


def deep_properties(levels: int) -> dict[str, Any]:
    """``levels`` nested strict objects, built iteratively (no recursion in the test either)."""
    root = params()
    current = root
    for _ in range(levels - 1):
        child = params()
        current["properties"]["a"] = child
        current["required"] = ["a"]
        current = child
    return root


# --------------------------------------------------------------------------------------------------
# Clean definitions pass with zero violations
# --------------------------------------------------------------------------------------------------

CLEAN = [
    pytest.param(oai(STRICT_PARAMS), "openai", False, id="openai"),
    pytest.param(oai(STRICT_PARAMS, strict=True), "openai", True, id="openai-strict"),
    pytest.param(oai(), "openai", True, id="openai-no-parameters"),
    pytest.param(
        oai({"type": "object", "properties": {"q": {"type": "string", "minLength": 1, "default": "x"}}}),
        "openai",
        False,
        id="openai-lenient-keywords",
    ),
    pytest.param(resp(STRICT_PARAMS), "openai-responses", False, id="responses"),
    pytest.param(resp(STRICT_PARAMS, strict=True), "openai-responses", True, id="responses-strict"),
    pytest.param(ant(STRICT_PARAMS), "anthropic", False, id="anthropic"),
    pytest.param(ant(STRICT_PARAMS, strict=True), "anthropic", True, id="anthropic-strict"),
    pytest.param(
        ant({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}}}),
        "anthropic",
        False,
        id="anthropic-lenient-keywords",
    ),
    pytest.param(
        ant(
            params(a=params(b={"$ref": "#/$defs/x"}), c={"$ref": "#/properties/a"})
            | {"$defs": {"x": {"type": "string"}}}
        ),
        "anthropic",
        True,
        id="anthropic-strict-non-recursive-refs",
    ),
    pytest.param(gem(GEMINI_PARAMS), "gemini", False, id="gemini"),
    pytest.param(gem(), "gemini", False, id="gemini-no-parameters"),
    pytest.param(
        {"name": "get_weather", "description": DESC, "parametersJsonSchema": STRICT_PARAMS},
        "gemini",
        False,
        id="gemini-json-schema",
    ),
    pytest.param(
        {"name": "get_weather", "description": DESC, "parameters_json_schema": STRICT_PARAMS},
        "gemini",
        False,
        id="gemini-json-schema-snake-case",
    ),
    pytest.param(
        mcp(
            STRICT_PARAMS,
            name="weather.get-v2",
            outputSchema={"type": "object"},
            annotations={"readOnlyHint": True},
        ),
        "mcp",
        False,
        id="mcp",
    ),
]


@pytest.mark.parametrize(("definition", "provider", "strict"), CLEAN)
def test_clean_definition_has_no_violations(definition: dict[str, Any], provider: str, strict: bool) -> None:
    assert check(definition, provider, strict=strict) == []


@pytest.mark.parametrize(("definition", "provider", "strict"), CLEAN)
def test_check_does_not_mutate_the_definition(
    definition: dict[str, Any], provider: str, strict: bool
) -> None:
    before = copy.deepcopy(definition)
    check(definition, provider, strict=strict)
    assert definition == before


def test_non_strict_openai_ignores_strict_only_rules() -> None:
    loose = {"type": "object", "properties": {"q": {"type": "string", "format": "uri", "not": {"const": ""}}}}
    assert check(oai(loose), "openai") == []


def test_definition_claiming_strict_is_checked_as_strict() -> None:
    loose = {"type": "object", "properties": {"q": {"type": "string"}}}
    assert hits(check(oai(loose, strict=True), "openai"), "OAI-S-ADDPROPS")
    assert hits(check(resp(loose, strict=True), "openai-responses"), "OAI-S-ADDPROPS")
    assert hits(check(ant(loose, strict=True), "anthropic"), "ANT-S-ADDPROPS")
    # strict: false in the definition does not weaken a strict check requested by the caller...
    bad_required = {**loose, "additionalProperties": False, "required": []}
    assert hits(check(oai(bad_required, strict=False), "openai", strict=True), "OAI-S-REQUIRED")
    # ...except for free-form objects: strict mode could only close them (the model could then send only
    # {}), so toolrun exports such a tool non-strict; the checker names each object and checks the rest as
    # the plain definition it is.
    for definition, provider in ((oai(loose, strict=False), "openai"), (ant(loose), "anthropic")):
        violations = check(definition, provider, strict=True)
        rule = {"openai": "OAI-S-FREEFORM", "anthropic": "ANT-S-FREEFORM"}[provider]
        assert [(v.rule, v.severity) for v in violations] == [(rule, "warning")]
        assert violations[0].path in ("/function/parameters", "/input_schema")


# --------------------------------------------------------------------------------------------------
# One violating definition per rule: rule ID, path and severity
# --------------------------------------------------------------------------------------------------

LONG = "x" * 65
ENUM_1001 = [f"v{i}" for i in range(1001)]
ENUM_600 = [f"v{i}" for i in range(600)]
ENUM_LONG = ["y" * 60 + str(i) for i in range(300)]  # > 250 values, > 15,000 characters
ENUM_BULKY = ["z" * 700 + str(i) for i in range(200)]  # 140,000 characters, <= 250 values
P = "/function/parameters"

VIOLATIONS = [
    # ---- OpenAI envelope and names ----
    ("openai", False, oai(name="math.factorial"), "OAI-NAME-1", "/function/name", "error"),
    ("openai", False, oai(name=LONG), "OAI-NAME-1", "/function/name", "error"),
    (
        "openai",
        False,
        {"type": "function", "function": {"description": DESC}},
        "OAI-NAME-1",
        "/function/name",
        "error",
    ),
    ("openai-responses", False, resp(name="has space"), "OAI-NAME-1", "/name", "error"),
    ("openai", False, {"function": {"name": "f", "description": DESC}}, "OAI-ENV-1", "/type", "error"),
    ("openai", False, {"type": "function", "name": "f"}, "OAI-ENV-1", "/function", "error"),
    ("openai", False, {"type": "function", "function": "f"}, "OAI-ENV-1", "/function", "error"),
    ("openai", False, oai(strict="yes"), "OAI-ENV-1", "/function/strict", "error"),
    ("openai", False, oai(description=3), "OAI-ENV-1", "/function/description", "error"),
    ("openai", False, oai(input_schema={}), "OAI-ENV-1", "/function/input_schema", "warning"),
    ("openai", False, ["not", "a", "tool"], "OAI-ENV-1", "", "error"),
    ("openai-responses", False, oai(), "OAI-ENV-1", "/function", "error"),
    ("openai-responses", False, resp(strict=None), "OAI-STRICT-DEFAULT", "/strict", "warning"),
    ("openai", False, oai(["type", "object"]), "OAI-PARAMS-1", P, "error"),
    ("openai", False, oai({"type": "string"}), "OAI-PARAMS-1", f"{P}/type", "warning"),
    ("openai", False, oai({"type": "object", "anyOf": [{}]}), "OAI-PARAMS-1", f"{P}/anyOf", "warning"),
    # ---- OpenAI strict subset ----
    ("openai", True, oai({"type": "array", "items": {"type": "string"}}), "OAI-S-ROOT", f"{P}/type", "error"),
    ("openai", True, oai({"anyOf": [params(), {"type": "null"}]}), "OAI-S-ROOT", f"{P}/anyOf", "error"),
    (
        "openai",
        True,
        oai({"type": "object", "properties": {}}),
        "OAI-S-ADDPROPS",
        f"{P}/additionalProperties",
        "error",
    ),
    (
        "openai",
        True,
        oai(params(tags={"type": "array", "items": {"type": "object", "properties": {}}})),
        "OAI-S-ADDPROPS",
        f"{P}/properties/tags/items/additionalProperties",
        "error",
    ),
    (
        "openai",
        True,
        oai(params(x={"anyOf": [{"type": "object", "additionalProperties": True}, {"type": "null"}]})),
        "OAI-S-ADDPROPS",
        f"{P}/properties/x/anyOf/0/additionalProperties",
        "error",
    ),
    (
        "openai",
        True,
        oai(params() | {"$defs": {"d": {"type": "object"}}}),
        "OAI-S-ADDPROPS",
        f"{P}/$defs/d/additionalProperties",
        "error",
    ),
    (
        "openai",
        True,
        oai(params(a={"type": "string"}) | {"required": []}),
        "OAI-S-REQUIRED",
        f"{P}/properties/a",
        "error",
    ),
    ("openai", True, oai(params() | {"required": ["ghost"]}), "OAI-S-REQUIRED", f"{P}/required", "warning"),
    ("openai", True, oai(params(f={"type": "file"})), "OAI-S-TYPES", f"{P}/properties/f/type", "error"),
    (
        "openai",
        True,
        oai(params(f={"description": "anything"})),
        "OAI-S-TYPES",
        f"{P}/properties/f",
        "warning",
    ),
    (
        "openai",
        True,
        oai(params(u={"type": "string", "format": "uri"})),
        "OAI-S-STRING",
        f"{P}/properties/u/format",
        "error",
    ),
    ("openai", True, oai(params() | {"allOf": [params()]}), "OAI-S-UNSUPPORTED", f"{P}/allOf", "error"),
    (
        "openai",
        True,
        oai(params(n={"not": {"type": "string"}})),
        "OAI-S-UNSUPPORTED",
        f"{P}/properties/n/not",
        "error",
    ),
    ("openai", True, oai(params() | {"if": {}, "then": {}}), "OAI-S-UNSUPPORTED", f"{P}/if", "error"),
    (
        "openai",
        True,
        oai(params(t={"type": "array", "items": {"type": "string"}, "uniqueItems": True})),
        "OAI-S-UNSUPPORTED",
        f"{P}/properties/t/uniqueItems",
        "warning",
    ),
    (
        "openai",
        True,
        oai(params(d={"type": ["string", "null"], "default": None})),
        "OAI-S-DEFAULT",
        f"{P}/properties/d/default",
        "warning",
    ),
    (
        "openai",
        True,
        oai(params(s={"type": "string", "minLength": 2})),
        "OAI-S-FT",
        f"{P}/properties/s/minLength",
        "warning",
    ),
    (
        "openai",
        True,
        oai(params(s={"type": "string", "maxLength": 2})),
        "OAI-S-FT",
        f"{P}/properties/s/maxLength",
        "warning",
    ),
    (
        "openai",
        True,
        oai(params(r={"$ref": "other.json#/x"})),
        "OAI-S-DEFS",
        f"{P}/properties/r/$ref",
        "warning",
    ),
    # ---- OpenAI strict size limits ----
    (
        "openai",
        True,
        oai(params(**{f"p{i}": {"type": "string"} for i in range(5001)})),
        "OAI-L-PROPS",
        P,
        "error",
    ),
    ("openai", True, oai(deep_properties(11)), "OAI-L-DEPTH", f"{P}" + "/properties/a" * 10, "error"),
    (
        "openai",
        True,
        # 1 object + 10 arrays = 11 levels: array levels count toward the depth limit.
        oai(params(a=nested_arrays(10))),
        "OAI-L-DEPTH",
        f"{P}/properties/a" + "/items" * 9,
        "error",
    ),
    ("openai", True, oai(params(e={"type": "string", "enum": ENUM_BULKY})), "OAI-L-STRLEN", P, "error"),
    ("openai", True, oai(params(e={"type": "string", "enum": ENUM_1001})), "OAI-L-ENUM", P, "error"),
    ("openai", True, oai(params(e={"type": "string", "enum": ENUM_600})), "OAI-L-ENUM", P, "warning"),
    (
        "openai",
        True,
        oai(params(e={"type": "string", "enum": ENUM_LONG})),
        "OAI-L-ENUMSTR",
        f"{P}/properties/e/enum",
        "error",
    ),
    # ---- Anthropic envelope ----
    ("anthropic", False, ant(name="get weather"), "ANT-NAME-1", "/name", "error"),
    ("anthropic", False, ant(name=""), "ANT-NAME-1", "/name", "error"),
    ("anthropic", False, {"name": "f", "description": DESC}, "ANT-ENV-1", "/input_schema", "error"),
    ("anthropic", False, ant(parameters={}), "ANT-ENV-1", "/parameters", "warning"),
    ("anthropic", False, ant(strict=1), "ANT-ENV-1", "/strict", "error"),
    ("anthropic", False, {"type": "bash_20250124", "name": "bash"}, "ANT-ENV-1", "/type", "warning"),
    ("anthropic", False, ant({"properties": {}}), "ANT-SCHEMA-1", "/input_schema/type", "error"),
    ("anthropic", False, ant("object"), "ANT-SCHEMA-1", "/input_schema", "error"),
    (
        "anthropic",
        False,
        ant({"type": "object", "anyOf": [{}]}),
        "ANT-SCHEMA-2",
        "/input_schema/anyOf",
        "error",
    ),
    (
        "anthropic",
        False,
        ant({"type": "object", "oneOf": [{}]}),
        "ANT-SCHEMA-2",
        "/input_schema/oneOf",
        "error",
    ),
    (
        "anthropic",
        True,
        ant({"type": "object", "allOf": [params()]}),
        "ANT-SCHEMA-2",
        "/input_schema/allOf",
        "error",
    ),
    # ---- Anthropic strict ----
    (
        "anthropic",
        True,
        ant(params(o={"type": "object", "properties": {}}), strict=True),
        "ANT-S-ADDPROPS",
        "/input_schema/properties/o/additionalProperties",
        "error",
    ),
    (
        "anthropic",
        True,
        ant(params(u={"type": "string", "format": "regex"})),
        "ANT-S-SUPPORTED",
        "/input_schema/properties/u/format",
        "error",
    ),
    (
        "anthropic",
        True,
        ant(params(e={"enum": ["a", {"b": 1}]})),
        "ANT-S-SUPPORTED",
        "/input_schema/properties/e/enum/1",
        "error",
    ),
    (
        "anthropic",
        True,
        ant(params(t={"type": "array", "items": {"type": "string"}, "minItems": 2})),
        "ANT-S-SUPPORTED",
        "/input_schema/properties/t/minItems",
        "error",
    ),
    (
        "anthropic",
        True,
        ant(params(w={"type": "string", "pattern": r"\bword\b"})),
        "ANT-S-SUPPORTED",
        "/input_schema/properties/w/pattern",
        "error",
    ),
    (
        "anthropic",
        True,
        ant(params(w={"type": "string", "pattern": r"^(?!admin).*$"})),
        "ANT-S-SUPPORTED",
        "/input_schema/properties/w/pattern",
        "error",
    ),
    (
        "anthropic",
        True,
        ant(params(w={"type": "string", "pattern": r"(a)\1"})),
        "ANT-S-SUPPORTED",
        "/input_schema/properties/w/pattern",
        "error",
    ),
    (
        "anthropic",
        True,
        ant(params(x={"allOf": [{"$ref": "#/$defs/d"}]}) | {"$defs": {"d": {"type": "string"}}}),
        "ANT-S-SUPPORTED",
        "/input_schema/properties/x/allOf",
        "error",
    ),
    (
        "anthropic",
        True,
        ant(params(x={"oneOf": [{"type": "string"}, {"type": "integer"}]})),
        "ANT-S-SUPPORTED",
        "/input_schema/properties/x/oneOf",
        "warning",
    ),
    (
        "anthropic",
        True,
        ant(params(n={"type": "integer", "minimum": 0})),
        "ANT-S-UNSUPPORTED",
        "/input_schema/properties/n/minimum",
        "error",
    ),
    (
        "anthropic",
        True,
        ant(params(s={"type": "string", "maxLength": 9})),
        "ANT-S-UNSUPPORTED",
        "/input_schema/properties/s/maxLength",
        "error",
    ),
    (
        "anthropic",
        True,
        ant(params(t={"type": "array", "items": {"type": "string"}, "maxItems": 3})),
        "ANT-S-UNSUPPORTED",
        "/input_schema/properties/t/maxItems",
        "error",
    ),
    (
        "anthropic",
        True,
        ant(params(t={"type": "array", "items": {"type": "string"}, "uniqueItems": True})),
        "ANT-S-UNSUPPORTED",
        "/input_schema/properties/t/uniqueItems",
        "warning",
    ),
    (
        "anthropic",
        True,
        ant(params(r={"$ref": "https://example.com/s.json"})),
        "ANT-S-UNSUPPORTED",
        "/input_schema/properties/r/$ref",
        "error",
    ),
    (
        "anthropic",
        True,
        ant(params(child={"anyOf": [{"$ref": "#"}, {"type": "null"}]})),
        "ANT-S-UNSUPPORTED",
        "/input_schema/properties/child/anyOf/0/$ref",
        "error",
    ),
    (
        "anthropic",
        True,
        ant(
            params(head={"$ref": "#/$defs/a"})
            | {"$defs": {"a": params(next={"$ref": "#/$defs/b"}), "b": params(back={"$ref": "#/$defs/a"})}}
        ),
        "ANT-S-UNSUPPORTED",
        "/input_schema/$defs/b/properties/back/$ref",
        "error",
    ),
    (
        "anthropic",
        True,
        ant(
            {
                "type": "object",
                "properties": {f"o{i}": {"type": "string"} for i in range(25)},
                "additionalProperties": False,
            }
        ),
        "ANT-L-OPTIONAL",
        "/input_schema",
        "error",
    ),
    (
        "anthropic",
        True,
        ant(params(**{f"u{i}": {"type": ["string", "null"]} for i in range(17)})),
        "ANT-L-UNION",
        "/input_schema",
        "error",
    ),
    # ---- Gemini ----
    ("gemini", False, gem(input_schema={}), "GEM-ENV-1", "/input_schema", "error"),
    ("gemini", False, {"functionDeclarations": [gem()]}, "GEM-ENV-1", "", "error"),
    ("gemini", False, gem(["OBJECT"]), "GEM-ENV-1", "/parameters", "error"),
    (
        "gemini",
        False,
        gem(GEMINI_PARAMS, parametersJsonSchema=STRICT_PARAMS),
        "GEM-ENV-2",
        "/parametersJsonSchema",
        "error",
    ),
    (
        "gemini",
        False,
        gem(parametersJsonSchema={"type": "string"}),
        "GEM-ENV-2",
        "/parametersJsonSchema",
        "error",
    ),
    ("gemini", False, gem(name="1st_tool"), "GEM-NAME-1", "/name", "error"),
    ("gemini", False, gem(name="weather get"), "GEM-NAME-1", "/name", "error"),
    ("gemini", False, gem(name="weather.get"), "GEM-NAME-1", "/name", "warning"),
    ("gemini", False, gem(name="a" * 64), "GEM-NAME-1", "/name", "warning"),
    (
        "gemini",
        False,
        gem(gem_props(**{"my-param": {"type": "STRING"}})),
        "GEM-PNAME-1",
        "/parameters/properties/my-param",
        "warning",
    ),
    (
        "gemini",
        False,
        gem(gem_props(x={"type": "STRING", "foo": 1})),
        "GEM-P-FIELDS",
        "/parameters/properties/x/foo",
        "error",
    ),
    (
        "gemini",
        False,
        gem(gem_props(x={"type": "INTEGER", "minimum": 1})),
        "GEM-P-FIELDS",
        "/parameters/properties/x/minimum",
        "warning",
    ),
    (
        "gemini",
        False,
        gem(gem_props(x={"anyOf": [{"type": "STRING"}, {"type": "INTEGER"}]})),
        "GEM-P-FIELDS",
        "/parameters/properties/x/anyOf",
        "warning",
    ),
    (
        "gemini",
        False,
        gem(gem_props(x={"type": "OBJECT", "defs": {}})),
        "GEM-P-FIELDS",
        "/parameters/properties/x/defs",
        "error",
    ),
    (
        "gemini",
        False,
        gem(gem_props(x={"type": "ARRAY", "items": [{"type": "STRING"}]})),
        "GEM-P-FIELDS",
        "/parameters/properties/x/items",
        "error",
    ),
    (
        "gemini",
        False,
        gem(gem_props(x={"type": ["string", "null"]})),
        "GEM-P-TYPE",
        "/parameters/properties/x/type",
        "error",
    ),
    (
        "gemini",
        False,
        gem(gem_props(x={"type": "date"})),
        "GEM-P-TYPE",
        "/parameters/properties/x/type",
        "error",
    ),
    ("gemini", False, gem({"type": "ARRAY"}), "GEM-P-TYPE", "/parameters/type", "error"),
    ("gemini", False, gem({"properties": {}}), "GEM-P-TYPE", "/parameters", "warning"),
    (
        "gemini",
        False,
        gem(gem_props(x={"type": "STRING", "nullable": "yes"})),
        "GEM-P-TYPE",
        "/parameters/properties/x/nullable",
        "error",
    ),
    (
        "gemini",
        False,
        gem(gem_props(x={"type": "INTEGER", "enum": [1, 2]})),
        "GEM-P-ENUM",
        "/parameters/properties/x/enum/0",
        "error",
    ),
    (
        "gemini",
        False,
        gem(gem_props(x={"type": "STRING", "format": "uri"})),
        "GEM-P-FORMAT",
        "/parameters/properties/x/format",
        "error",
    ),
    (
        "gemini",
        False,
        gem(gem_props(x={"type": "STRING", "format": "email"})),
        "GEM-P-FORMAT",
        "/parameters/properties/x/format",
        "warning",
    ),
    (
        "gemini",
        False,
        gem(gem_props(x={"type": "NUMBER", "format": "int32"})),
        "GEM-P-FORMAT",
        "/parameters/properties/x/format",
        "error",
    ),
    (
        "gemini",
        False,
        gem(gem_props(x={"type": "ARRAY", "items": {"type": "OBJECT", "additionalProperties": False}})),
        "GEM-P-REJECTED",
        "/parameters/properties/x/items/additionalProperties",
        "error",
    ),
    (
        "gemini",
        False,
        gem(gem_props(x={"type": "STRING", "const": "a"})),
        "GEM-P-REJECTED",
        "/parameters/properties/x/const",
        "error",
    ),
    (
        "gemini",
        False,
        gem(gem_props() | {"$schema": "https://json-schema.org/draft/2020-12/schema"}),
        "GEM-P-REJECTED",
        "/parameters/$schema",
        "error",
    ),
    (
        "gemini",
        False,
        gem(gem_props(x={"oneOf": [{"type": "STRING"}]})),
        "GEM-P-REJECTED",
        "/parameters/properties/x/oneOf",
        "error",
    ),
    (
        "gemini",
        False,
        gem(parametersJsonSchema=params(x={"type": "string"}) | {"patternProperties": {}}),
        "GEM-JS-IGNORED",
        "/parametersJsonSchema/patternProperties",
        "warning",
    ),
    # ---- MCP ----
    ("mcp", False, mcp(name="get weather!"), "MCP-NAME-1", "/name", "warning"),
    ("mcp", False, mcp(name="a" * 129), "MCP-NAME-1", "/name", "warning"),
    ("mcp", False, {"description": DESC, "inputSchema": {"type": "object"}}, "MCP-NAME-1", "/name", "error"),
    ("mcp", False, {"name": "f", "description": DESC}, "MCP-SCHEMA-1", "/inputSchema", "error"),
    ("mcp", False, mcp({"type": "string"}), "MCP-SCHEMA-1", "/inputSchema/type", "error"),
    ("mcp", False, mcp(outputSchema=[]), "MCP-SCHEMA-1", "/outputSchema", "error"),
    ("mcp", False, mcp(annotations=["readOnly"]), "MCP-ENV-1", "/annotations", "error"),
    # ---- Descriptions (every provider) ----
    ("openai", False, oai(description=""), "DESC-EMPTY", "/function/description", "warning"),
    ("openai-responses", False, resp(description="  "), "DESC-EMPTY", "/description", "warning"),
    ("anthropic", False, {"name": "f", "input_schema": params()}, "DESC-EMPTY", "/description", "warning"),
    ("gemini", False, {"name": "f"}, "DESC-EMPTY", "/description", "warning"),
    ("mcp", False, {"name": "f", "inputSchema": {"type": "object"}}, "DESC-EMPTY", "/description", "warning"),
    # ---- Generic schema rules ----
    ("openai", True, oai(params(x=True)), "SCHEMA-INVALID", f"{P}/properties/x", "error"),
    ("openai", False, oai(params(x=True)), "SCHEMA-INVALID", f"{P}/properties/x", "warning"),
    ("anthropic", False, ant(params(x=[1, 2])), "SCHEMA-INVALID", "/input_schema/properties/x", "error"),
    (
        "anthropic",
        False,
        ant({"type": "object", "properties": [1]}),
        "SCHEMA-INVALID",
        "/input_schema/properties",
        "error",
    ),
    (
        "mcp",
        False,
        mcp({"type": "object", "required": "a"}),
        "SCHEMA-INVALID",
        "/inputSchema/required",
        "error",
    ),
    (
        "mcp",
        False,
        mcp(params(a={"type": "array", "items": 5})),
        "SCHEMA-INVALID",
        "/inputSchema/properties/a/items",
        "error",
    ),
    (
        "openai",
        True,
        oai(params(r={"$ref": "#/$defs/nope"})),
        "SCHEMA-REF-UNRESOLVED",
        f"{P}/properties/r/$ref",
        "error",
    ),
    (
        "openai",
        False,
        oai(params(r={"$ref": "#/$defs/nope"})),
        "SCHEMA-REF-UNRESOLVED",
        f"{P}/properties/r/$ref",
        "warning",
    ),
]


@pytest.mark.parametrize(
    ("provider", "strict", "definition", "rule", "path", "severity"),
    VIOLATIONS,
    ids=[f"{case[3]}-{i}" for i, case in enumerate(VIOLATIONS)],
)
def test_rule_is_reported(
    provider: str, strict: bool, definition: Any, rule: str, path: str, severity: str
) -> None:
    violations = check(definition, provider, strict=strict)
    assert all(isinstance(v, Violation) for v in violations)
    assert (path, severity) in hits(violations, rule), violations


def test_every_rule_of_the_brief_is_covered() -> None:
    required = {
        "OAI-NAME-1", "OAI-ENV-1", "OAI-PARAMS-1", "OAI-S-ROOT", "OAI-S-ADDPROPS", "OAI-S-REQUIRED",
        "OAI-S-TYPES", "OAI-S-STRING", "OAI-S-UNSUPPORTED", "OAI-S-DEFAULT", "OAI-S-FT", "OAI-L-PROPS",
        "OAI-L-DEPTH", "OAI-L-STRLEN", "OAI-L-ENUM", "OAI-L-ENUMSTR", "ANT-NAME-1", "ANT-ENV-1",
        "ANT-SCHEMA-1", "ANT-SCHEMA-2", "ANT-S-ADDPROPS", "ANT-S-SUPPORTED", "ANT-S-UNSUPPORTED",
        "ANT-L-OPTIONAL", "ANT-L-UNION", "GEM-ENV-1", "GEM-ENV-2", "GEM-NAME-1", "GEM-PNAME-1",
        "GEM-P-FIELDS", "GEM-P-TYPE", "GEM-P-ENUM", "GEM-P-FORMAT", "GEM-P-REJECTED", "DESC-EMPTY",
    }  # fmt: skip
    assert required <= {case[3] for case in VIOLATIONS}


def test_fine_tuned_only_keywords_other_than_lengths_are_not_flagged() -> None:
    schema = params(
        s={"type": "string", "pattern": "^a+$", "format": "email"},
        n={"type": "number", "minimum": 0, "maximum": 5, "multipleOf": 0.5},
        t={"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
    )
    assert check(oai(schema), "openai", strict=True) == []


def test_openai_strict_allows_recursion_and_terminates() -> None:
    schema = params(node={"$ref": "#/$defs/node"}) | {
        "$defs": {
            "node": params(children={"type": "array", "items": {"$ref": "#/$defs/node"}}, up={"$ref": "#"})
        }
    }
    assert check(oai(schema), "openai", strict=True) == []


def test_gemini_json_schema_is_lenient() -> None:
    schema = params(x={"type": "integer", "minimum": 0, "exclusiveMinimum": 0, "multipleOf": 2})
    violations = check({"name": "f", "description": DESC, "parametersJsonSchema": schema}, "gemini")
    assert violations
    assert {v.severity for v in violations} == {"warning"}
    assert {v.rule for v in violations} == {"GEM-JS-IGNORED"}


def test_gemini_parameter_type_case_insensitive() -> None:
    lower = gem({"type": "object", "properties": {"x": {"type": "integer", "format": "int64"}}})
    assert check(lower, "gemini") == []


def test_unknown_provider_raises() -> None:
    with pytest.raises(ValueError, match="unknown provider"):
        check(oai(), "cohere")
    with pytest.raises(ValueError, match="unknown provider"):
        check_request([oai()], "OpenAI")


def test_violation_is_frozen_and_keyword_only() -> None:
    violation = Violation(rule="R", path="", message="m", severity="error")
    with pytest.raises(dataclasses.FrozenInstanceError):
        violation.rule = "X"  # type: ignore[misc]
    with pytest.raises(TypeError):
        Violation("R", "", "m", "error")  # type: ignore[call-arg]


# --------------------------------------------------------------------------------------------------
# Request-level checks
# --------------------------------------------------------------------------------------------------


def test_request_prefixes_paths_with_definition_index() -> None:
    violations = check_request([oai(STRICT_PARAMS), oai(name="bad.name")], "openai")
    assert hits(violations, "OAI-NAME-1") == [("/1/function/name", "error")]


def test_request_duplicate_names() -> None:
    violations = check_request([ant(), ant(name="other"), ant()], "anthropic")
    assert hits(violations, "REQ-DUP-NAME") == [("/2/name", "error")]
    gemini = check_request([gem(), gem()], "gemini")
    assert hits(gemini, "REQ-DUP-NAME") == [("/1/name", "error")]


@pytest.mark.parametrize(
    ("provider", "make", "rule"),
    [
        ("openai", lambda i: oai(name=f"f{i}"), "OAI-TOOLS-1"),
        ("openai-responses", lambda i: resp(name=f"f{i}"), "OAI-TOOLS-1"),
        ("gemini", lambda i: gem(name=f"f{i}"), "GEM-TOOLS-1"),
    ],
)
def test_request_tool_count_limit(provider: str, make: Any, rule: str) -> None:
    assert check_request([make(i) for i in range(128)], provider) == []
    assert hits(check_request([make(i) for i in range(129)], provider), rule) == [("", "error")]


def test_anthropic_strict_tool_limit() -> None:
    tools = [ant(name=f"t{i}", strict=True) for i in range(21)]
    assert hits(check_request(tools, "anthropic"), "ANT-L-TOOLS") == [("", "error")]
    assert check_request(tools[:20], "anthropic") == []
    # Non-strict tools do not count; the caller's strict flag makes all of them strict.
    loose = [ant(name=f"t{i}") for i in range(21)]
    assert check_request(loose, "anthropic") == []
    assert hits(check_request(loose, "anthropic", strict=True), "ANT-L-TOOLS") == [("", "error")]


def _optional_schema(count: int, prefix: str) -> dict[str, Any]:
    properties = {f"{prefix}{i}": {"type": "string"} for i in range(count)}
    return {"type": "object", "properties": properties, "additionalProperties": False}


def test_anthropic_optional_and_union_limits_add_up_across_strict_tools() -> None:
    tools = [
        ant(_optional_schema(13, "a"), name="a", strict=True),
        ant(_optional_schema(13, "b"), name="b", strict=True),
    ]
    violations = check_request(tools, "anthropic")
    assert hits(violations, "ANT-L-OPTIONAL") == [("", "error")]
    # A non-strict tool's optional parameters are not counted.
    tools[1] = ant(_optional_schema(13, "b"), name="b")
    assert check_request(tools, "anthropic") == []

    def unions(prefix: str) -> dict[str, Any]:
        return params(**{f"{prefix}{i}": {"anyOf": [{"type": "string"}, {"type": "null"}]} for i in range(9)})

    violations = check_request(
        [ant(unions("a"), name="a"), ant(unions("b"), name="b")], "anthropic", strict=True
    )
    assert hits(violations, "ANT-L-UNION") == [("", "error")]


def test_anthropic_per_tool_excess_is_not_repeated_at_request_level() -> None:
    violations = check_request([ant(_optional_schema(25, "o"), strict=True)], "anthropic")
    assert hits(violations, "ANT-L-OPTIONAL") == [("/0/input_schema", "error")]


# --------------------------------------------------------------------------------------------------
# Hostile input: depth, cycles, garbage
# --------------------------------------------------------------------------------------------------


def _wrap(provider: str, schema: Any) -> dict[str, Any]:
    return {
        "openai": lambda: oai(schema),
        "openai-responses": lambda: resp(schema),
        "anthropic": lambda: ant(schema),
        "gemini": lambda: gem(schema),
        "mcp": lambda: mcp(schema),
    }[provider]()


def _deep(levels: int, keyword: str) -> dict[str, Any]:
    root: dict[str, Any] = {"type": "object"}
    current = root
    for _ in range(levels):
        child: dict[str, Any] = {"type": "object"}
        if keyword == "properties":
            current["properties"] = {"a": child}
        elif keyword == "items":
            current["items"] = child
        else:
            current[keyword] = [child]
        current = child
    return root


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("keyword", ["properties", "items", "anyOf", "allOf"])
def test_ten_thousand_levels_report_too_deep(provider: str, strict: bool, keyword: str) -> None:
    schema = _deep(10_000, keyword)
    violations = check(_wrap(provider, schema), provider, strict=strict)
    too_deep = [v for v in violations if v.rule == "SCHEMA-TOO-DEEP"]
    assert len(too_deep) == 1
    assert too_deep[0].severity == "error"
    # The walk stopped at MAX_DEPTH + 1 steps below the root.
    step = {"properties": "/properties/a", "items": "/items", "anyOf": "/anyOf/0", "allOf": "/allOf/0"}[
        keyword
    ]
    assert too_deep[0].path.endswith(step * (MAX_DEPTH + 1))


def test_depth_at_the_limit_is_fine() -> None:
    violations = check(mcp(_deep(MAX_DEPTH, "properties")), "mcp")
    assert not hits(violations, "SCHEMA-TOO-DEEP")


def test_request_with_deep_schemas() -> None:
    tools = [ant(_deep(10_000, "properties"), name=f"t{i}", strict=True) for i in range(3)]
    violations = check_request(tools, "anthropic")
    assert [v.path[:3] for v in violations if v.rule == "SCHEMA-TOO-DEEP"] == ["/0/", "/1/", "/2/"]


def test_self_containing_python_structure_terminates() -> None:
    # Only possible from Python callers, but it must not hang: the depth bound stops it.
    schema: dict[str, Any] = {"type": "object", "additionalProperties": False, "required": ["me"]}
    schema["properties"] = {"me": schema}
    violations = check(oai(schema), "openai", strict=True)
    assert hits(violations, "SCHEMA-TOO-DEEP")


def test_many_ref_sites_do_not_blow_up() -> None:
    schema = params(**{f"p{i}": {"$ref": "#/$defs/s"} for i in range(600)}) | {
        "$defs": {"s": {"type": "string"}}
    }
    violations = check(ant(schema), "anthropic", strict=True)
    assert hits(violations, "ANT-S-UNSUPPORTED") == [("/input_schema", "warning")]


def test_hostile_values_are_reported_not_rendered() -> None:
    # Values that repr()/str() cannot render: 10,000-deep lists (RecursionError) and huge ints (ValueError).
    deep: Any = []
    for _ in range(10_000):
        deep = [deep]
    huge = 10**5000
    schema = params(
        a={
            "type": deep,
            "minItems": deep,
            "enum": [deep, huge],
            "const": huge,
            "format": deep,
            "pattern": deep,
        },
        b={"type": "integer", "minItems": huge, "enum": [huge]},
    ) | {huge: 1, (1, 2): deep}
    for provider in PROVIDERS:
        for strict in (False, True):
            for definition in (_wrap(provider, schema), {"name": deep, "description": huge, "type": deep}):
                violations = check(definition, provider, strict=strict)
                assert all(len(v.message) < 1_000 for v in violations)
    long_name = check(oai(name="n" * 1_000_000), "openai")
    assert len(long_name[0].message) < 1_000


def test_property_named_like_a_definitions_keyword_is_still_checked_for_recursion() -> None:
    schema = params(**{"$defs": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}})
    violations = check(ant(schema, strict=True), "anthropic")
    assert hits(violations, "ANT-S-UNSUPPORTED") == [("/input_schema/properties/$defs/anyOf/0/$ref", "error")]


_KEYWORD_TEXT = (
    "type properties items prefixItems anyOf oneOf allOf not if then else $defs definitions defs "
    "additionalProperties required enum const format pattern minItems $ref nullable default name description "
    "function parameters input_schema inputSchema parametersJsonSchema strict minLength propertyOrdering "
    "property_ordering"
)
_KEYWORDS = _KEYWORD_TEXT.split()
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=8),
    st.sampled_from(
        ["object", "OBJECT", "string", "array", "null", "#", "#/$defs/a", "#/properties", "date-time"]
    ),
)
JSON = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(_KEYWORDS), st.text(max_size=5)), inner, max_size=5),
    ),
    max_leaves=40,
)
FUZZ = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(schema=JSON, provider=st.sampled_from(PROVIDERS), strict=st.booleans())
def test_random_schemas_never_crash(schema: Any, provider: str, strict: bool) -> None:
    result = check(_wrap(provider, schema), provider, strict=strict)
    assert isinstance(result, list)
    assert all(isinstance(v, Violation) and v.severity in ("error", "warning") for v in result)


@FUZZ
@given(definition=JSON, provider=st.sampled_from(PROVIDERS), strict=st.booleans())
def test_random_definitions_never_crash(definition: Any, provider: str, strict: bool) -> None:
    assert isinstance(check(definition, provider, strict=strict), list)
    assert isinstance(check_request([definition, definition], provider, strict=strict), list)


@FUZZ
@given(schema=JSON)
def test_random_schemas_under_strict_keywords_never_crash(schema: Any) -> None:
    # Put random values where the rules look hardest: inside properties, $defs and anyOf branches.
    wrapped = {
        "type": "object",
        "properties": {"x": schema},
        "$defs": {"d": schema},
        "anyOf": [schema],
        "items": schema,
        "required": ["x"],
    }
    for provider in PROVIDERS:
        for strict in (False, True):
            assert isinstance(check(_wrap(provider, wrapped), provider, strict=strict), list)
