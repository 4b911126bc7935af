"""Property tests: generated schemas export everywhere cleanly, strict exports stay within the tool's own
validator, and parsers never fail with anything but `ToolCallParseError`."""

from __future__ import annotations

import json
import string
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from toolrun import Tool
from toolrun.exceptions import ArgumentsError, SchemaError
from toolrun.formats import FORMATS, ToolCallParseError, check
from toolrun.formats._schema import iter_nodes, resolve_pointer

PROFILE = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

names = st.text(alphabet=string.ascii_lowercase + "_", min_size=1, max_size=8)
descriptions = st.one_of(st.none(), st.text(alphabet=string.ascii_letters + " .", max_size=20))
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-1000, 1000),
    st.floats(-1e6, 1e6, allow_nan=False),
    st.text(max_size=5),
)


def _described(schema: dict[str, Any], description: str | None) -> dict[str, Any]:
    return {**schema, "description": description} if description else schema


@st.composite
def scalar_schemas(draw: st.DrawFn, *, constrained: bool = True) -> dict[str, Any]:
    """Scalars, enums, consts and "any" (with constraints strict modes must move, when `constrained`)."""
    kind = draw(st.sampled_from(["string", "integer", "number", "boolean", "enum", "const", "any"]))
    schema: dict[str, Any]
    if kind == "string":
        schema = {"type": "string"}
        if constrained and draw(st.booleans()):
            schema["minLength"] = draw(st.integers(0, 3))
            schema["maxLength"] = draw(st.integers(3, 10))
        if constrained and draw(st.booleans()):
            schema["format"] = draw(
                st.sampled_from(["date-time", "email", "uri", "uuid", "hostname", "binary"])
            )
        if constrained and draw(st.booleans()):
            schema["pattern"] = draw(st.sampled_from(["^[a-z]+$", "^(?!x).*$", "\\bword\\b", "^\\d{3}$"]))
    elif kind in ("integer", "number"):
        schema = {"type": kind}
        if constrained and draw(st.booleans()):
            schema["minimum"] = draw(st.integers(-5, 0))
        if constrained and draw(st.booleans()):
            schema["maximum"] = draw(st.integers(1, 50))
        if constrained and draw(st.booleans()):
            schema["multipleOf"] = 1
        if constrained and draw(st.booleans()):
            schema["format"] = draw(st.sampled_from(["int32", "int64", "float", "double"]))
    elif kind == "boolean":
        schema = {"type": "boolean"}
    elif kind == "enum":
        values = draw(
            st.one_of(
                st.lists(
                    st.text(string.ascii_lowercase, min_size=1, max_size=4),
                    min_size=1,
                    max_size=4,
                    unique=True,
                ),
                st.lists(st.integers(0, 9), min_size=1, max_size=4, unique=True),
            )
        )
        schema = {"enum": values}
        if draw(st.booleans()):
            schema["type"] = "string" if isinstance(values[0], str) else "integer"
    elif kind == "const":
        schema = {
            "const": draw(
                st.one_of(st.text(string.ascii_lowercase, min_size=1, max_size=3), st.integers(0, 5))
            )
        }
    else:
        schema = {}
    if constrained and draw(st.booleans()) and kind not in ("enum", "const", "any"):
        schema["default"] = draw(json_scalars)
    return _described(schema, draw(descriptions))


def containers(
    children: st.SearchStrategy[dict[str, Any]], *, constrained: bool = True
) -> st.SearchStrategy[dict[str, Any]]:
    """Objects, arrays, nullable wrappers and unions built over `children`."""

    @st.composite
    def objects(draw: st.DrawFn) -> dict[str, Any]:
        props = draw(st.dictionaries(names, children, max_size=4))
        schema: dict[str, Any] = {"type": "object", "properties": props}
        if props:
            schema["required"] = draw(st.lists(st.sampled_from(sorted(props)), unique=True))
        extra = draw(st.sampled_from(["absent", "false", "true", "schema"]))
        if extra == "false":
            schema["additionalProperties"] = False
        elif extra == "true":
            schema["additionalProperties"] = True
        elif extra == "schema":
            schema["additionalProperties"] = draw(children)
        return schema

    @st.composite
    def arrays(draw: st.DrawFn) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "array", "items": draw(children)}
        if draw(st.booleans()):
            schema["minItems"] = draw(st.integers(0, 2 if constrained else 1))
        if constrained and draw(st.booleans()):
            schema["maxItems"] = draw(st.integers(2, 5))
        if constrained and draw(st.booleans()):
            schema["uniqueItems"] = True
        return schema

    @st.composite
    def nullable(draw: st.DrawFn) -> dict[str, Any]:
        inner = draw(children)
        if "type" in inner and isinstance(inner["type"], str) and draw(st.booleans()) and "enum" not in inner:
            return {**inner, "type": [inner["type"], "null"]}
        return {"anyOf": [inner, {"type": "null"}]}

    @st.composite
    def unions(draw: st.DrawFn) -> dict[str, Any]:
        keyword = draw(st.sampled_from(["anyOf", "oneOf"] if constrained else ["anyOf"]))
        return {keyword: draw(st.lists(children, min_size=2, max_size=3))}

    @st.composite
    def tuples(draw: st.DrawFn) -> dict[str, Any]:
        return {"type": "array", "prefixItems": draw(st.lists(children, min_size=1, max_size=3))}

    @st.composite
    def all_of(draw: st.DrawFn) -> dict[str, Any]:
        return {"allOf": [draw(objects()), draw(objects())]}

    options = [objects(), arrays(), nullable(), unions()]
    if constrained:
        options += [tuples(), all_of()]
    return st.one_of(*options)


def parameter_schemas(*, constrained: bool = True) -> st.SearchStrategy[dict[str, Any]]:
    """A tool's parameters: an object whose properties are generated schemas, sometimes with `$defs`.

    With `constrained=False`, only what every strict mode keeps as it is: no keyword a strict export moves
    into a description (length, bounds, formats, patterns, `maxItems`), no `oneOf` (read as `anyOf`), no
    `allOf` (folded) and no tuples (approximated).
    """
    values = st.recursive(
        scalar_schemas(constrained=constrained),
        lambda children: containers(children, constrained=constrained),
        max_leaves=8,
    )

    @st.composite
    def root(draw: st.DrawFn) -> dict[str, Any]:
        props = draw(st.dictionaries(names, values, max_size=5))
        schema: dict[str, Any] = {"type": "object", "properties": props}
        if props:
            schema["required"] = draw(st.lists(st.sampled_from(sorted(props)), unique=True))
        if draw(st.booleans()):
            definition = draw(values)
            schema["$defs"] = {"Shared": definition}
            schema["properties"]["shared"] = {"$ref": "#/$defs/Shared"}
        return schema

    return root()


def _levels(schema: dict[str, Any]) -> int:
    return max((level for _, level, _ in iter_nodes(schema)), default=0)


@PROFILE
@given(parameter_schemas())
def test_generated_tools_export_to_every_format_without_checker_errors(parameters: dict[str, Any]) -> None:
    tool = Tool.from_schema("generated_tool", "A generated tool.", parameters)
    for name, fmt in FORMATS.items():
        for strict in (False, True):
            try:
                definition = fmt.definition(tool, strict=strict)
            except SchemaError as exc:
                # Only OpenAI's hard strict-mode limits may refuse; generated schemas rarely nest that deep.
                assert name.startswith("openai") and strict and "OAI-L-DEPTH" in str(exc)
                assert _levels(tool.parameters) > 8
                continue
            # Not even a warning: the documented ones (parameter names Gemini dislikes, MCP names with ':',
            # more than 500 enum values) cannot occur in these generated schemas.
            # A free-form object makes a strict export non-strict, named by a FREEFORM warning.
            problems = [
                v for v in check(definition, name, strict=strict) if not v.rule.endswith("-S-FREEFORM")
            ]
            assert problems == [], (name, strict, json.dumps(definition)[:2000])


# --------------------------------------------------------------------------------------------------------
# Strict exports are narrower than the tool's own schema: whatever a strict-mode model sends validates.


def instances(schema: Any, root: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Values a model constrained to `schema` (an exported strict schema) could send."""
    if not isinstance(schema, dict) or depth > 12:
        return st.none()
    if "$ref" in schema:
        return instances(resolve_pointer(root, schema["$ref"]), root, depth + 1)
    if "anyOf" in schema:
        return st.one_of(*[instances(b, root, depth + 1) for b in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "const" in schema:
        return st.just(schema["const"])
    kinds = schema["type"] if isinstance(schema.get("type"), list) else [schema.get("type")]
    options = []
    for kind in kinds:
        if kind == "string":
            options.append(st.text(max_size=6))
        elif kind == "integer":
            options.append(st.integers(schema.get("minimum", -100), schema.get("maximum", 100)))
        elif kind == "number":
            low, high = schema.get("minimum", -100), schema.get("maximum", 100)
            options.append(st.floats(low, high, allow_nan=False))
        elif kind == "boolean":
            options.append(st.booleans())
        elif kind == "null":
            options.append(st.none())
        elif kind == "array":
            low = schema.get("minItems", 0)
            options.append(
                st.lists(
                    instances(schema.get("items"), root, depth + 1),
                    min_size=low,
                    max_size=max(low, schema.get("maxItems", 3)),
                )
            )
        elif kind == "object":
            props = schema.get("properties", {})
            required = set(schema.get("required", ()))
            options.append(
                st.fixed_dictionaries(
                    {k: instances(v, root, depth + 1) for k, v in props.items() if k in required},
                    optional={
                        k: instances(v, root, depth + 1) for k, v in props.items() if k not in required
                    },
                )
            )
    return st.one_of(*options) if options else st.none()


@PROFILE
@given(st.data(), parameter_schemas(constrained=False), st.sampled_from(["openai", "anthropic"]))
def test_strict_exports_only_admit_arguments_the_tool_accepts(
    data: st.DataObject, parameters: dict[str, Any], fmt: str
) -> None:
    tool = Tool.from_schema("generated_tool", "A generated tool.", parameters)
    try:
        definition = FORMATS[fmt].definition(tool, strict=True)
    except SchemaError:
        assume(False)
        return
    strict = definition["function"]["parameters"] if fmt == "openai" else definition["input_schema"]
    arguments = data.draw(instances(strict, strict))
    try:
        tool.validate(arguments)
    except ArgumentsError as exc:
        raise AssertionError(
            f"{fmt} strict schema admits rejected arguments:\n{exc}\n{json.dumps(strict)}"
        ) from None


# --------------------------------------------------------------------------------------------------------
# Parsers: any JSON in, tool calls or ToolCallParseError out.

_KEYS = [
    "choices", "message", "tool_calls", "function", "name", "arguments", "id", "type", "role", "output",
    "call_id", "content", "input", "candidates", "parts", "functionCall", "function_call", "args", "method",
    "params", "jsonrpc",
]  # fmt: skip
_VALUES = [
    "function", "function_call", "tool_use", "tools/call", "assistant", "f", "", "call_1",
]  # fmt: skip

json_values = st.recursive(
    st.one_of(json_scalars, st.sampled_from(_VALUES)),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.one_of(st.sampled_from(_KEYS), st.text(max_size=3)), children, max_size=4),
    ),
    max_leaves=15,
)


@settings(max_examples=400, deadline=None)
@given(json_values, st.sampled_from(list(FORMATS)), st.booleans())
def test_parsers_raise_only_tool_call_parse_errors(response: Any, fmt: str, with_names: bool) -> None:
    names = {"f": "pkg.f"} if with_names else None
    try:
        calls = FORMATS[fmt].parse_tool_calls(response, names=names)
    except ToolCallParseError:
        return
    for call in calls:
        assert isinstance(call.id, str) and call.id
        assert isinstance(call.name, str) and call.name
        assert call.arguments is None or isinstance(call.arguments, str | dict)


def _shaped(leaf: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Responses of each provider's shape whose leaves (and some containers) are arbitrary JSON."""
    call = st.fixed_dictionaries(
        {},
        optional={"id": leaf, "type": st.one_of(st.just("function"), leaf), "call_id": leaf, "name": leaf,
                  "arguments": leaf, "input": leaf, "args": leaf,
                  "function": st.fixed_dictionaries({}, optional={"name": leaf, "arguments": leaf})},
    )  # fmt: skip
    item = st.one_of(
        call,
        call.map(lambda c: {**c, "type": "function_call"}),
        call.map(lambda c: {**c, "type": "tool_use"}),
        call.map(lambda c: {"functionCall": c}),
        call.map(lambda c: {"function_call": c}),
        leaf,
    )
    items = st.one_of(st.lists(item, max_size=3), leaf)
    return st.one_of(
        items.map(lambda x: {"choices": [{"message": {"role": "assistant", "tool_calls": x}}]}),
        items.map(lambda x: {"choices": [{"message": x}]}),
        items.map(lambda x: {"role": "assistant", "tool_calls": x}),
        items.map(lambda x: {"output": x}),
        items.map(lambda x: {"content": x}),
        items.map(lambda x: {"candidates": [{"content": {"parts": x}}]}),
        items.map(lambda x: {"candidates": [{"content": x}]}),
        items.map(lambda x: {"parts": x}),
        call.map(lambda c: {"jsonrpc": "2.0", "id": c.get("id"), "method": "tools/call", "params": c}),
        call,
        items,
    )


@settings(max_examples=400, deadline=None)
@given(_shaped(json_values), st.sampled_from(list(FORMATS)))
def test_parsers_raise_only_tool_call_parse_errors_on_shaped_responses(response: Any, fmt: str) -> None:
    try:
        calls = FORMATS[fmt].parse_tool_calls(response, names={"f": "pkg.f"})
    except ToolCallParseError:
        return
    for call in calls:
        assert isinstance(call.id, str) and call.id
        assert isinstance(call.name, str) and call.name
        assert call.arguments is None or isinstance(call.arguments, str | dict)
