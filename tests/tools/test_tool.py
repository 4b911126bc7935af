"""Tool construction: options, names, examples, subclasses, raw schemas, lenient dialects."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from toolrun import ArgumentsError, SchemaError, Tool, ToolContext, ToolDefinitionError, ToolRegistry, tool
from toolrun.exceptions import ToolExampleError
from toolrun.tools import RateLimit, ToolExample
from toolrun.tools._options import parse_rate_limit


def noop() -> None:
    """Do nothing."""


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"read_only": True, "destructive": True}, "cannot be both read_only and destructive"),
        ({"cache_ttl": 10}, "cache_ttl needs read_only=True or idempotent=True"),
        ({"timeout": 0}, "timeout must be a positive number"),
        ({"timeout": True}, "timeout must be a positive number"),
        ({"retries": -1}, "retries must be a whole number"),
        ({"rate_limit": "lots"}, "Cannot read rate limit 'lots'"),
        ({"roles": [""]}, "roles must be a collection of non-empty strings"),
        ({"colour": "red"}, r"unknown option\(s\) \['colour'\]"),
        ({"examples": [{"output": 1}]}, "must be a ToolExample or a mapping with an 'input' key"),
    ],
)
def test_contradictory_or_bad_options_are_refused(options: dict[str, Any], match: str) -> None:
    with pytest.raises(ToolDefinitionError, match=match):
        Tool.from_function(noop, **options)


def test_option_defaults_and_implications() -> None:
    t = Tool.from_function(noop, read_only=True, cache_ttl=30, roles="admin", tags=["a", "b"])
    assert t.options.idempotent  # read-only implies idempotent
    assert not t.options.requires_confirmation
    assert t.options.roles == frozenset({"admin"})
    assert t.options.tags == frozenset({"a", "b"})
    d = Tool.from_function(noop, destructive=True)
    assert d.options.requires_confirmation
    d2 = Tool.from_function(noop, destructive=True, requires_confirmation=False)
    assert not d2.options.requires_confirmation


@pytest.mark.parametrize(
    ("spec", "limit", "period"),
    [("5/minute", 5, 60.0), ("100 per hour", 100, 3600.0), ("10/30s", 10, 30.0), ("1/day", 1, 86400.0)],
)
def test_rate_limit_strings(spec: str, limit: int, period: float) -> None:
    parsed = parse_rate_limit(spec)
    assert (parsed.limit, parsed.period) == (limit, period)


def test_rate_limit_key_is_shared() -> None:
    rl = RateLimit(limit=3, period=1.0, key="github")
    a = Tool.from_function(noop, rate_limit=rl)
    assert a.options.rate_limit == rl
    assert parse_rate_limit({"limit": 2, "period": 10, "key": "k"}).key == "k"


@pytest.mark.parametrize("name", ["", "has space", "ünïcode", "a/b", "x" * 129, ".dot_first"])
def test_bad_names_are_refused_with_a_suggestion(name: str) -> None:
    with pytest.raises(ToolDefinitionError, match=r"Invalid tool name .*e\.g\. '"):
        Tool.from_function(noop, name=name)


def test_dotted_and_long_names_are_accepted_and_aliased_later() -> None:
    assert Tool.from_function(noop, name="math.factorial").name == "math.factorial"
    assert Tool.from_function(noop, name="y" * 100).name == "y" * 100


def test_examples_are_checked_against_parameters_and_output() -> None:
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    ok = Tool.from_function(add, examples=[{"input": {"a": 1, "b": 2}, "output": 3}])
    assert ok.options.examples == (ToolExample(input={"a": 1, "b": 2}, output=3),)
    with pytest.raises(ToolExampleError, match="example 0 does not match the parameters"):
        Tool.from_function(add, examples=[{"input": {"a": "x"}}])
    with pytest.raises(ToolExampleError, match="example 1 output does not match the return type"):
        Tool.from_function(
            add, examples=[{"input": {"a": 1, "b": 2}}, {"input": {"a": 1, "b": 2}, "output": "x"}]
        )


def test_bare_and_parenthesised_decorator_and_direct_call() -> None:
    @tool
    def a(x: int) -> int:
        """A."""
        return x + 1

    @tool(name="b_tool", description="Custom.", idempotent=True)
    async def b(x: int) -> int:
        return x * 2

    assert isinstance(a, Tool)
    assert a(1) == 2  # still callable like the function
    assert b.name == "b_tool"
    assert b.description == "Custom."
    assert asyncio.run(b.invoke(b.validate({"x": 2}))) == 4


def test_subclass_with_params_model_and_run() -> None:
    class DeleteTask(Tool, destructive=True, timeout=3.0):
        """Delete a task permanently."""

        class Params(BaseModel):
            task_id: str

        async def run(self, params: Params, ctx: ToolContext) -> dict[str, str]:
            return {"deleted": params.task_id, "by": ctx.user_id or ""}

    t = DeleteTask()
    assert t.name == "delete_task"
    assert t.description == "Delete a task permanently."
    assert t.options.destructive and t.options.timeout == 3.0
    assert t.parameters["properties"] == {"task_id": {"type": "string"}}
    result = asyncio.run(t.invoke(t.validate('{"task_id": "t1"}'), ToolContext(user_id="u1")))
    assert result == {"deleted": "t1", "by": "u1"}
    assert DeleteTask(name="remove_task").name == "remove_task"


def test_subclass_without_docstring_is_refused() -> None:
    class Nameless(Tool):
        def run(self, x: int) -> int:
            return x

    with pytest.raises(ToolDefinitionError, match="has no description"):
        Nameless()


def test_tool_is_not_built_directly() -> None:
    with pytest.raises(ToolDefinitionError, match="use @tool"):
        Tool()


def test_from_schema_checks_the_schema() -> None:
    with pytest.raises(SchemaError, match="must describe an object"):
        Tool.from_schema("t", "T.", {"type": "string"})
    with pytest.raises(SchemaError, match=r"invalid JSON Schema .*lenient=True"):
        Tool.from_schema("t", "T.", {"type": "object", "properties": {"a": {"type": "dict"}}})
    with pytest.raises(ToolDefinitionError, match="has no description"):
        Tool.from_schema("t", "", {"type": "object"})


def test_from_schema_without_handler_validates_but_cannot_run() -> None:
    t = Tool.from_schema("t", "T.", {"type": "object", "properties": {"a": {"type": "integer"}}})
    assert t.validate({"a": 1}) == {"a": 1}
    with pytest.raises(NotImplementedError, match="without a handler"):
        t.invoke({"a": 1})


def test_from_schema_handler_gets_context() -> None:
    def handler(q: str, ctx: ToolContext) -> str:
        return f"{q}:{ctx.user_id}"

    t = Tool.from_schema("t", "T.", {"type": "object", "properties": {"q": {"type": "string"}}}, handler)
    assert t.takes_context
    assert t.invoke(t.validate({"q": "x"}), ToolContext(user_id="u")) == "x:u"


def test_lenient_bfcl_dialect() -> None:
    t = Tool.from_schema(
        "math.factorial",
        "Calculate the factorial.",
        {
            "type": "dict",
            "properties": {
                "number": {"type": "integer", "description": "n"},
                "precision": {"type": "float", "default": None, "optional": True},
                "point": {"type": "tuple", "items": {"type": "float"}},
                "extra": {"type": "any"},
                "opts": {"type": "dict", "properties": {"x": {"type": "String"}}},
            },
            "required": ["number", "precision", "ghost"],
        },
        lenient=True,
    )
    assert t.parameters["type"] == "object"
    props = t.parameters["properties"]
    assert props["precision"] == {"type": "number"}
    assert props["point"] == {"type": "array", "items": {"type": "number"}}
    assert props["extra"] == {}
    assert props["opts"]["properties"]["x"] == {"type": "string"}
    assert t.parameters["required"] == ["number"]
    assert "$: type 'dict' → 'object'" in t.lenient_changes
    assert "$.precision: removed non-standard 'optional' flag" in t.lenient_changes
    assert any("required" in c and "ghost" in c for c in t.lenient_changes)
    assert t.validate({"number": 5, "precision": None, "extra": [1]}) == {"number": 5, "extra": [1]}


def test_a_nested_object_takes_the_keys_its_schema_allows_and_the_root_stays_closed() -> None:
    """BFCL's shape: `data` lists example properties and says nothing of other keys, so JSON Schema takes
    any; the gold call sends `email` and `name`. Below the root toolrun follows the schema; unknown top-level
    parameters are still refused, and so are keys of an object the schema closes."""
    from jsonschema import Draft202012Validator

    schema = {
        "type": "dict",
        "properties": {
            "table": {"type": "string"},
            "data": {
                "type": "dict",
                "description": "The row to insert.",
                "properties": {"param1": {"type": "string"}, "param2": {"type": "integer"}},
            },
            "options": {
                "type": "dict",
                "properties": {"upsert": {"type": "boolean"}},
                "additionalProperties": False,
            },
        },
        "required": ["table", "data"],
    }
    t = Tool.from_schema("insert_row", "Insert a row.", schema, lenient=True)
    gold = {"table": "users", "data": {"email": "a@example.com", "name": "Ann"}}
    data_schema = {
        "type": "object",
        "properties": {"param1": {"type": "string"}, "param2": {"type": "integer"}},
    }
    Draft202012Validator(data_schema).validate(gold["data"])  # JSON Schema takes it
    assert t.validate(gold) == gold
    assert t.validate({"table": "u", "data": {"param2": 3, "extra": [1]}})["data"] == {
        "param2": 3,
        "extra": [1],
    }
    with pytest.raises(ArgumentsError) as info:  # what the schema does say is still checked
        t.validate({"table": "u", "data": {"param2": "three"}})
    assert [p.path for p in info.value.problems] == ["data.param2"]
    with pytest.raises(ArgumentsError, match="unknown field"):
        t.validate({**gold, "not_a_parameter": 1})
    with pytest.raises(ArgumentsError) as info:
        t.validate({**gold, "options": {"upsert": True, "ttl": 5}})
    assert "ttl" in info.value.render()
    # The export is closed all the same: a strict export needs it, and it stays strict.
    assert t.parameters["properties"]["data"]["additionalProperties"] is False
    [definition] = ToolRegistry([t]).definitions("openai", strict=True)
    assert definition["function"]["strict"] is True


def test_lenient_widens_unknown_types_saying_so_and_bounds_depth() -> None:
    t = Tool.from_schema(
        "t", "T.", {"type": "object", "properties": {"q": {"type": "quaternion"}}}, lenient=True
    )
    assert t.parameters["properties"]["q"] == {}
    [change] = [c for c in t.lenient_changes if c.path == "$.q"]
    assert (change.kind, change.before, change.after) == ("type-any", "quaternion", None)
    deep: dict[str, Any] = {"type": "object"}
    node = deep
    for _ in range(200):
        child: dict[str, Any] = {"type": "object"}
        node["properties"] = {"x": child}
        node = child
    with pytest.raises(SchemaError, match="nested deeper than 64"):
        Tool.from_schema("t", "T.", deep, lenient=True)


def test_from_schema_refuses_a_schema_too_deep_to_check() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(3000):
        deep = {"type": "object", "properties": {"x": deep}}
    with pytest.raises(SchemaError, match="nested too deeply"):
        Tool.from_schema("t", "T.", deep)


def test_flattened_model_reads_null_as_default() -> None:
    class Query(BaseModel):
        text: str
        limit: int = 10
        note: str | None = "n"

    @tool
    def find(query: Query) -> int:
        """Find."""
        return query.limit

    kwargs = find.validate({"text": "x", "limit": None, "note": None})
    assert kwargs["query"].limit == 10  # null for a non-nullable optional field: the default
    assert kwargs["query"].note == "n"  # null means "not given" for a nullable field with a default too
    with pytest.raises(ArgumentsError, match="text"):
        find.validate({"text": None})
