"""Validation edges pinned by mutation testing (docs/mutation.md): raw-schema `null` handling, nesting too
deep to validate, the exact problem each engine reports, bounded renderings."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from toolrun import ArgumentsError, Tool, tool
from toolrun.exceptions import ArgumentProblem
from toolrun.tools._validation import JsonSchemaArguments, PydanticArguments, _admits_null, short_repr


def raw(properties: dict[str, Any], required: list[str] | None = None) -> JsonSchemaArguments:
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required is not None:
        schema["required"] = required
    return JsonSchemaArguments("t", schema)


def problems_of(validator: Any, arguments: Any) -> list[ArgumentProblem]:
    with pytest.raises(ArgumentsError) as info:
        validator.validate(arguments)
    return list(info.value.problems)


@pytest.mark.parametrize(
    ("schema", "admits"),
    [
        ({}, True),  # no constraint: anything, null included
        ({"description": "free"}, True),
        ({"$ref": "#/$defs/x"}, False),  # unknown target: do not assume null is allowed
        ({"const": 1}, False),
        ({"type": "null"}, True),
        ({"type": ["string", "null"]}, True),
        ({"type": ["string", "integer"]}, False),
        ({"type": "string"}, False),
        ({"enum": ["a", None]}, True),
        ({"enum": ["a", "b"]}, False),
        ({"type": "string", "enum": ["a", None]}, True),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, True),
        ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, False),
        ({"oneOf": [{"type": "integer"}, {"type": "null"}]}, True),
        ({"oneOf": [{"type": "integer"}]}, False),
        ({"anyOf": None, "type": "string"}, False),
        (True, True),  # a boolean schema is not a mapping: it admits null
    ],
)
def test_which_raw_schemas_admit_null(schema: Any, admits: bool) -> None:
    assert _admits_null(schema) is admits


def test_null_for_a_raw_optional_parameter_means_not_given_unless_null_is_its_meaning() -> None:
    v = raw(
        {
            "n": {"type": "integer", "default": 5},  # null -> left out -> default
            "s": {"type": "string"},  # null -> left out, no default
            "maybe": {"type": ["string", "null"], "default": "d"},  # a non-null default: null -> "d"
            "nullable": {"type": ["string", "null"]},  # null admitted, no default: null is the value
            "none_default": {"type": ["string", "null"], "default": None},  # null is the default itself
            "req": {"type": "string"},
        },
        required=["req"],
    )
    sent = {"req": "x", "n": None, "s": None, "maybe": None, "nullable": None, "none_default": None}
    assert v.validate(sent) == {"req": "x", "n": 5, "maybe": "d", "nullable": None, "none_default": None}
    assert v.validate({"req": "x"}) == {"req": "x", "n": 5, "maybe": "d", "none_default": None}
    # A required parameter never turns null into "not given": null is checked, and refused.
    [problem] = problems_of(v, {"req": None})
    assert problem.path == "req" and problem.expected == "string" and problem.given == "null"


def test_a_required_parameter_with_a_default_is_not_filled_in() -> None:
    v = raw({"a": {"type": "integer", "default": 1}}, required=["a"])
    [problem] = problems_of(v, {})
    assert (problem.path, problem.message, problem.expected) == ("a", "required field is missing", "a value")


def test_raw_schema_problems_name_the_path_the_rule_and_the_value() -> None:
    v = raw(
        {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"id": {"type": "integer"}},
                    "required": ["id"],
                    "additionalProperties": False,
                },
            },
            "kind": {"enum": ["a", "b"]},
            "fixed": {"const": "x"},
            "n": {"type": "integer", "minimum": 3},
        }
    )
    found = {p.path: p for p in problems_of(v, {"items": [{"id": 1}, {}, {"id": 1, "z": 2}], "kind": "c"})}
    assert found["items[1].id"].message == "required field is missing"
    assert found["items[2]"].message == "unknown field(s) 'z'; allowed fields: id"
    assert found["kind"].expected == 'one of ["a", "b"]' and found["kind"].given == '"c"'
    found = {p.path: p for p in problems_of(v, {"fixed": "y", "n": 1})}
    assert found["fixed"].expected == '"x"' and found["fixed"].given == '"y"'
    assert found["n"].expected == "minimum 3" and found["n"].given == "1"
    [problem] = problems_of(raw({}), {"a": 1, "b": 2})
    assert problem.path == "" and problem.message == "unknown field(s) 'a', 'b'; allowed fields: (none)"


def test_raw_schema_problems_are_sorted_by_path_and_capped_at_twenty() -> None:
    v = raw({f"p{i:02d}": {"type": "integer"} for i in range(30)})
    found = problems_of(v, {f"p{i:02d}": "x" for i in reversed(range(30))})
    assert [p.path for p in found] == [f"p{i:02d}" for i in range(20)]


def test_a_long_raw_schema_message_is_cut_to_200_characters() -> None:
    v = raw({"s": {"type": "string", "pattern": "^" + "a" * 300 + "$"}})
    [problem] = problems_of(v, {"s": "b"})
    assert len(problem.message) == 200 and problem.message.endswith("…")


# Arrays of arrays of any depth: validating a deep value recurses as deep as the value.
RECURSIVE: dict[str, Any] = {
    "type": "object",
    "properties": {"v": {"$ref": "#/$defs/nest"}},
    "$defs": {"nest": {"type": "array", "items": {"$ref": "#/$defs/nest"}}},
}


def nested(depth: int) -> str:
    return '{"v": ' + "[" * depth + "]" * depth + "}"


def test_arguments_nested_too_deeply_are_one_problem_for_either_engine() -> None:
    deep_list = [1]
    for _ in range(5000):
        deep_list = [deep_list]
    v = JsonSchemaArguments("t", RECURSIVE)
    [problem] = problems_of(v, {"v": deep_list})
    assert problem.message == "arguments are nested too deeply" and problem.expected == "a shallower object"

    @tool
    def takes(v: Any) -> None:
        """Take anything."""

    with pytest.raises(ArgumentsError) as info:
        takes.validate(nested(100_000))
    assert len(info.value.problems) == 1 and info.value.problems[0].path == ""


def test_pydantic_problems_are_capped_and_counted() -> None:
    class Many(BaseModel):
        model_config = {"extra": "forbid"}
        a: int
        b: int

    v = PydanticArguments("t", Many)
    found = problems_of(v, {f"x{i}": 1 for i in range(25)} | {"a": "no"})
    assert len(found) == 21 and found[-1].message == "and 7 more problem(s) not listed"
    assert "allowed fields: a, b" in found[0].message or any(
        "allowed fields: a, b" in p.message for p in found
    )
    [problem] = problems_of(v, "[1]")
    assert problem.message == "arguments must be a JSON object" and problem.given == "list [1]"
    [missing] = problems_of(v, {"a": 1})
    assert (missing.path, missing.message, missing.expected) == ("b", "required field is missing", "a value")
    [wrong] = problems_of(v, {"a": 1, "b": "x"})
    assert wrong.path == "b" and wrong.expected == "integer" and wrong.given == '"x"'
    assert wrong.message.startswith("input should be")


def test_nested_unknown_fields_do_not_list_the_top_level_fields() -> None:
    class Inner(BaseModel):
        model_config = {"extra": "forbid"}
        x: int

    class Outer(BaseModel):
        model_config = {"extra": "forbid"}
        inner: Inner

    [problem] = problems_of(PydanticArguments("t", Outer), {"inner": {"x": 1, "y": 2}})
    assert (problem.path, problem.message) == ("inner.y", "unknown field 'y'")


def test_renamed_and_model_parameters() -> None:
    class Args(BaseModel):
        a: int

    assert PydanticArguments("t", Args, renamed={"a": "alpha"}).validate({"a": 1}) == {"alpha": 1}
    got = PydanticArguments("t", Args, model_param="args").validate('{"a": 2}')
    assert got == {"args": Args(a=2)}
    assert PydanticArguments("t", Args, model_param="args").validate_model({"a": 3}) == Args(a=3)
    assert PydanticArguments("t", Args).validate_model({"a": 4}) == Args(a=4)
    assert PydanticArguments("t", Args).model is Args


def test_arguments_that_are_not_text_or_an_object() -> None:
    v = raw({})
    for value, given in ((b"{}", "bytes "), (7, "int 7"), ([1], "list [1]")):
        [problem] = problems_of(v, value)
        assert problem.message == "arguments must be a JSON object" and problem.given.startswith(given)
    [problem] = problems_of(v, "{bad")
    assert problem.message.startswith("arguments are not valid JSON (") and "[type=" not in problem.message
    assert problem.expected == "a JSON object of arguments"
    assert v.validate("   ") == {} and v.validate("") == {} and v.validate(None) == {}


def test_short_repr_is_bounded_and_never_fails() -> None:
    assert short_repr("é") == '"é"'
    assert short_repr("x" * 78) == json.dumps("x" * 78)  # 80 characters: kept whole
    cut = short_repr("x" * 79)
    assert len(cut) == 80 and cut.endswith("…")
    loop: list[Any] = []
    loop.append(loop)
    assert short_repr(loop) == "<list>"
    assert short_repr(object()).startswith('"<object object')


def test_a_raw_tool_validates_through_the_same_engine() -> None:
    t = Tool.from_schema("t", "T.", RECURSIVE)
    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(ArgumentsError, match="nested too deeply"):
        t.validate({"v": deep})


def test_lax_coercion_reads_scalars_only_where_the_schema_asks_for_them() -> None:
    from toolrun.tools._validation import _coerced

    def same(got: Any, want: Any) -> bool:
        return type(got) is type(want) and got == want

    integer, number, boolean = {"type": "integer"}, {"type": "number"}, {"type": "boolean"}
    assert same(_coerced("5", integer, 0), 5) and same(_coerced(" -1_000 ", integer, 0), -1000)
    assert same(_coerced("5", {"type": ["integer", "null"]}, 0), 5)
    assert same(_coerced("5", {"type": ["string", "integer"]}, 0), "5")
    assert same(_coerced("5", {}, 0), "5") and same(_coerced("5", {"type": 7}, 0), "5")
    assert same(_coerced("x", integer, 0), "x") and same(_coerced("yes", integer, 0), "yes")
    assert same(_coerced("5", number, 0), 5.0) and same(_coerced("abc", number, 0), "abc")
    assert same(_coerced("nan", number, 0), "nan")
    assert same(_coerced(" Yes ", boolean, 0), True) and same(_coerced("off", boolean, 0), False)
    assert same(_coerced("maybe", boolean, 0), "maybe")
    assert same(_coerced(True, integer, 0), 1) and same(_coerced(False, integer, 0), 0)
    assert same(_coerced(True, {"type": ["integer", "boolean"]}, 0), True)
    assert same(_coerced(True, {"type": "string"}, 0), True)
    assert same(_coerced(1, boolean, 0), True) and same(_coerced(0, boolean, 0), False)
    assert same(_coerced(2, boolean, 0), 2) and same(_coerced(True, boolean, 0), True)
    assert same(_coerced(1, {"type": ["boolean", "integer"]}, 0), 1)
    assert same(_coerced(1, {"type": ["boolean", "number"]}, 0), 1)
    assert same(_coerced(1, {"type": "string"}, 0), 1)


def test_lax_coercion_goes_32_levels_deep_and_no_further() -> None:
    from toolrun.tools._validation import _coerced

    integer = {"type": "integer"}
    assert _coerced("5", integer, 32) == 5 and _coerced("5", integer, 33) == "5"
    obj = {"properties": {"a": integer}}
    assert _coerced({"a": "5"}, obj, 31) == {"a": 5} and _coerced({"a": "5"}, obj, 32) == {"a": "5"}
    arr = {"items": integer}
    assert _coerced(["5"], arr, 31) == [5] and _coerced(["5"], arr, 32) == ["5"]
    assert _coerced({"b": "5"}, obj, 0) == {"b": "5"} and _coerced(["5"], {}, 0) == ["5"]


def test_may_hold_floats_follows_every_place_a_number_can_hide() -> None:
    from toolrun.tools._validation import may_hold_floats

    integer = {"type": "integer"}
    number = {"type": "number"}
    holds = [
        number,
        {"type": ["number", "null"]},
        {},
        {"description": "anything"},
        {"type": "object"},
        {"type": "object", "properties": {"a": integer}, "additionalProperties": True},
        {"type": "object", "properties": {"a": True}},
        {"type": "object", "properties": {"a": integer}, "additionalProperties": number},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/X"}}, "$defs": {"X": number}},
        {"type": "object", "properties": {"a": {"$ref": "#/definitions/X"}}, "definitions": {"X": number}},
        {"type": "object", "properties": {"a": integer}, "patternProperties": {"^b": number}},
        {"type": "array", "items": number},
        {"type": "integer", "not": number},
        {"anyOf": [integer, number]},
        {"oneOf": [integer, number]},
        {"allOf": [integer, number]},
        {"type": "array", "prefixItems": [integer, number]},
    ]
    lacks = [
        integer,
        {"type": "string"},
        {"type": ["integer", "null"]},
        {"type": "object", "properties": {"a": integer}},
        {"type": "object", "properties": {"a": integer}, "additionalProperties": False},
        {"type": "array", "items": integer},
        {"enum": [1, 2]},
        {"const": 1},
        {"anyOf": [integer, {"type": "string"}]},
    ]
    assert [s for s in holds if not may_hold_floats(s)] == []
    assert [s for s in lacks if may_hold_floats(s)] == []


def test_may_hold_floats_assumes_floats_past_10000_schema_nodes() -> None:
    from toolrun.tools._validation import may_hold_floats

    def wide(n: int) -> dict[str, Any]:
        return {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(n)}}

    assert may_hold_floats(wide(9_999)) is False  # 10,000 nodes with the root: all looked at
    assert may_hold_floats(wide(10_000)) is True


def test_pydantic_problems_are_exact() -> None:
    class A(BaseModel):
        model_config = {"extra": "forbid"}
        a: int
        b: str = ""

    class Nothing(BaseModel):
        model_config = {"extra": "forbid"}

    def rows(validator: Any, arguments: Any) -> list[tuple[Any, ...]]:
        return [(p.path, p.message, p.expected, p.given) for p in problems_of(validator, arguments)]

    v = PydanticArguments("t", A)
    assert rows(v, '{"a": ') == [
        (
            "",
            "arguments are not valid JSON (EOF while parsing a value at line 1 column 6)",
            "a JSON object of arguments",
            None,
        )
    ]
    assert rows(v, {"a": "x", "zz": 1}) == [
        ("a", "input should be a valid integer", "integer", '"x"'),
        ("zz", "unknown field 'zz'; allowed fields: a, b", None, None),
    ]
    assert rows(PydanticArguments("t", Nothing), {"x": 1}) == [
        ("x", "unknown field 'x'; this tool takes no arguments", None, None)
    ]


def test_integral_floats_are_not_counted_among_the_problems_not_listed() -> None:
    class Ints(BaseModel):
        model_config = {"extra": "forbid"}
        a: int
        b: int

    v = PydanticArguments("t", Ints)
    unknown = {f"x{i:02d}": 1 for i in range(20)}
    found = problems_of(v, {"a": 5.0, "b": 6.0} | unknown)  # 22 errors: 2 integral floats, 20 unknown
    assert [p.path for p in found[:-1]] == [f"x{i:02d}" for i in range(18)]
    assert (found[-1].path, found[-1].message) == ("", "and 2 more problem(s) not listed")
    exactly = problems_of(v, {"a": 5.0, "b": 6.0} | {f"x{i:02d}": 1 for i in range(18)})
    assert len(exactly) == 18 and all(p.message.startswith("unknown field") for p in exactly)


def test_finite_looks_everywhere_a_decoded_object_can_hold_a_number() -> None:
    from types import MappingProxyType

    from toolrun.tools._validation import _finite

    class Sub(float):
        pass

    nan, inf = float("nan"), float("inf")
    assert _finite({"a": [1, "x", True, None, 1.5, {"b": -2.0}]}) is True
    assert _finite({"a": nan}) is False and _finite([1, inf]) is False and _finite(-inf) is False
    assert _finite([nan, "x"]) is False and _finite([nan, 1]) is False and _finite([nan, True]) is False
    assert _finite([nan, None]) is False
    assert _finite(Sub("nan")) is False and _finite(Sub("1.5")) is True
    assert _finite(MappingProxyType({"a": nan})) is False and _finite((1, (nan,))) is False
    assert _finite(MappingProxyType({"a": 1.0})) is True and _finite((1, 2.0)) is True


def test_finite_gives_up_after_100000_items() -> None:
    from toolrun.tools._validation import _finite

    # The list and its items: 100,000 looked at, the NaN (popped last) included; one more and it is not.
    assert _finite([float("nan")] + [0] * 99_998) is False
    assert _finite([float("nan")] + [0] * 99_999) is True


def test_json_schema_problems_are_exact_and_name_the_tool() -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": ["integer", "null"]},
            "f": {"type": ["integer", "number"]},
            "o": {"type": "object", "properties": {"x": {"type": "integer"}}, "additionalProperties": False},
        },
        "additionalProperties": False,
    }
    v = JsonSchemaArguments("mytool", schema)
    got = v.validate({"n": 5.0, "f": 5.0})
    assert type(got["n"]) is int and type(got["f"]) is float

    def rows(arguments: Any) -> list[tuple[Any, ...]]:
        with pytest.raises(ArgumentsError) as info:
            v.validate(arguments)
        assert info.value.tool == "mytool"
        return [(p.path, p.message, p.expected, p.given) for p in info.value.problems]

    assert rows("[1]") == [("", "arguments must be a JSON object", "object", "list [1]")]
    assert rows('{"n": NaN}') == [
        (
            "",
            "arguments hold a non-finite number (NaN or Infinity), which JSON does not have",
            "finite numbers",
            None,
        )
    ]
    assert rows({"zz": 1}) == [("", "unknown field(s) 'zz'; allowed fields: f, n, o", None, None)]
    assert rows({"o": {"y": 1}}) == [("o", "unknown field(s) 'y'; allowed fields: x", None, None)]
    assert rows({"n": "x"}) == [("n", "'x' is not of type 'integer', 'null'", "['integer', 'null']", '"x"')]


def test_pydantic_validator_defaults_renames_and_tool_name() -> None:
    class Open(BaseModel):
        a: int = 0
        b: int = 0
        f: float = 0.0

    def tool_of(validator: Any, arguments: Any) -> str:
        with pytest.raises(ArgumentsError) as info:
            validator.validate(arguments)
        return str(info.value.tool)

    v = PydanticArguments("mytool", Open)
    assert v.forbid_extra is True and v.scan_floats is True
    assert tool_of(v, {"zz": 1}) == "mytool"  # unknown fields refused by default
    assert tool_of(v, {"f": float("nan")}) == "mytool"  # decoded NaN refused by default
    assert tool_of(v, '{"f": NaN}') == "mytool" and tool_of(v, "[1]") == "mytool"
    assert tool_of(v, ["not", "an", "object"]) == "mytool"
    assert PydanticArguments("t", Open, renamed={"a": "alpha"}).validate({"a": 1, "b": 2}) == {
        "alpha": 1,
        "b": 2,
        "f": 0.0,
    }
    lax = PydanticArguments("t", Open, forbid_extra=False)
    assert lax.validate({"zz": 1}) == {"a": 0, "b": 0, "f": 0.0}


def test_may_hold_floats_knows_each_typing_keyword() -> None:
    from toolrun.tools._validation import may_hold_floats

    integer = {"type": "integer"}
    for typed in (
        {"$ref": "#/$defs/X"},
        {"oneOf": [integer]},
        {"allOf": [integer]},
        {"properties": {"a": integer}},
        {"items": integer},
        {"type": "object", "additionalProperties": False},
    ):
        assert may_hold_floats(typed) is False, typed


def test_integral_floats_are_integers_at_any_depth_and_from_text() -> None:
    class Inner(BaseModel):
        model_config = {"extra": "forbid"}
        x: int

    class Outer(BaseModel):
        model_config = {"extra": "forbid"}
        o: Inner
        xs: list[int]

    v = PydanticArguments("t", Outer)
    got = v.validate({"o": {"x": 5.0}, "xs": [1.0, 2.0]})
    assert got["o"].x == 5 and type(got["o"].x) is int and got["xs"] == [1, 2]
    assert all(type(i) is int for i in got["xs"])
    from_text = v.validate('{"o": {"x": 5.0}, "xs": [3.0]}')
    assert from_text["o"].x == 5 and from_text["xs"] == [3]


def test_json_schema_text_arguments_infinity_and_bad_json_exactly() -> None:
    v = JsonSchemaArguments("jt", {"type": "object"})

    def rows(arguments: str) -> tuple[str, list[tuple[Any, ...]]]:
        with pytest.raises(ArgumentsError) as info:
            v.validate(arguments)
        return info.value.tool, [(p.path, p.message, p.expected) for p in info.value.problems]

    assert rows('{"a": Infinity}') == (
        "jt",
        [
            (
                "",
                "arguments hold a non-finite number (NaN or Infinity), which JSON does not have",
                "finite numbers",
            )
        ],
    )
    assert rows("{bad") == (
        "jt",
        [
            (
                "",
                "arguments are not valid JSON (key must be a string at line 1 column 2)",
                "a JSON object of arguments",
            )
        ],
    )
