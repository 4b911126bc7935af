"""Tool names (the rule enforced is the rule stated), and every kind of callable a tool can wrap."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncGenerator, AsyncIterator, Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from toolrun import Tool, ToolContext, tool
from toolrun.exceptions import ToolDefinitionError
from toolrun.tools._tool import NAME_PATTERN, suggest_name


def test_the_name_rule_in_the_message_is_the_rule_enforced() -> None:
    # 128 characters with '.' and ':' are accepted (and aliased on export)...
    long_name = "a." + "b:" * 62 + "cd"
    assert len(long_name) == 128
    assert Tool.from_schema(long_name, "d.", {"type": "object"}).name == long_name
    # ...so the message must say so, not "1-64 letters, digits, '_' or '-'".
    with pytest.raises(ToolDefinitionError) as info:
        Tool.from_schema("x" * 129, "d.", {"type": "object"})
    message = str(info.value)
    assert "1-128 characters" in message and "'.' or ':'" in message and NAME_PATTERN.pattern in message


@pytest.mark.parametrize(
    ("bad", "fix"), [("-lead", "lead"), (".x", "x"), ("a b", "a_b"), ("", "my_tool"), ("x" * 200, "x" * 128)]
)
def test_the_suggested_name_is_itself_valid(bad: str, fix: str) -> None:
    with pytest.raises(ToolDefinitionError, match=f"e.g. {fix!r}"):
        Tool.from_schema(bad, "d.", {"type": "object"})


@given(st.text(max_size=140))
def test_every_suggestion_passes_the_name_rule(name: str) -> None:
    assert NAME_PATTERN.match(suggest_name(name))


def _add(a: int, b: int, secret: str = "default") -> str:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
        secret: Bound by the developer.
    """
    return f"{a + b}:{secret}"


def test_a_partial_is_a_tool_and_its_bound_arguments_are_not_the_models() -> None:
    t = Tool.from_function(functools.partial(_add, secret="s3cret"))
    assert t.name == "_add"
    assert t.description == "Add two numbers."
    assert set(t.parameters["properties"]) == {"a", "b"}
    assert t.parameters["properties"]["a"]["description"] == "The first number."
    assert t.invoke(t.validate({"a": 1, "b": 2})) == "3:s3cret"
    with pytest.raises(Exception, match="unknown field 'secret'"):
        t.validate({"a": 1, "b": 2, "secret": "mine"})


def test_a_partial_of_an_async_function_is_async() -> None:
    async def fetch(url: str, *, ctx: ToolContext, retries: int = 1) -> str:
        """Fetch a page."""
        return f"{url}:{retries}:{ctx.user_id}"

    t = tool(name="fetch")(functools.partial(fetch, retries=3))
    assert t.is_async and t.takes_context
    assert asyncio.run(t.invoke({"url": "u"}, ToolContext(user_id="bob"))) == "u:3:bob"


class Counter:
    """Count words in a text."""

    def __call__(self, text: str) -> int:
        return len(text.split())


class AsyncCounter:
    async def __call__(self, text: str) -> int:
        """Count words, asynchronously."""
        return len(text.split())


def test_callable_objects_are_tools() -> None:
    t = Tool.from_function(Counter())
    assert t.name == "counter" and t.description == "Count words in a text."
    assert t.parameters["required"] == ["text"] and not t.is_async
    assert t.invoke(t.validate({"text": "a b c"})) == 3
    a = Tool.from_function(AsyncCounter())
    assert a.name == "async_counter" and a.is_async and a.description == "Count words, asynchronously."
    assert asyncio.run(a.invoke({"text": "a b"})) == 2


def test_async_generators_are_tools_whose_yield_type_is_the_output_type() -> None:
    class Hit(BaseModel):
        title: str

    async def stream(n: int) -> AsyncIterator[list[Hit]]:
        """Stream hits."""
        yield []

    async def typed_gen(n: int) -> AsyncGenerator[int, None]:
        """Stream numbers."""
        yield n

    async def bare(n: int):  # type: ignore[no-untyped-def]
        """Stream anything."""
        yield n

    t = tool(stream)
    assert t.is_generator and t.is_async and t.parameters["required"] == ["n"]
    assert t.output_schema is not None and t.output_schema["type"] == "array"
    assert t.output_problems([{"title": "a"}]) == [] and t.output_problems([{"x": 1}])
    assert tool(typed_gen).output_schema == {"type": "integer"}
    assert tool(bare).is_generator and tool(bare).output_schema is None
    raw = Tool.from_schema("stream", "Stream.", {"type": "object"}, bare, output_schema={"type": "integer"})
    assert raw.is_generator and raw.is_async and raw.output_problems("x")

    class Countdown(Tool):
        """Count down."""

        async def run(self, start: int) -> AsyncIterator[int]:
            for n in range(start, -1, -1):
                yield n

    assert Countdown().is_generator and Countdown().output_schema == {"type": "integer"}
    assert not tool(name="one", description="d.")(lambda: 1).is_generator


def test_a_sync_generator_is_refused_at_definition() -> None:
    def numbers(n: int) -> Iterator[int]:
        """Numbers."""
        yield n

    with pytest.raises(ToolDefinitionError, match="async generator"):
        tool(numbers)
    with pytest.raises(ToolDefinitionError, match="async generator"):
        Tool.from_schema("numbers", "Numbers.", {"type": "object"}, numbers)


def test_an_async_generator_annotated_as_something_else_is_refused() -> None:
    async def stream(n: int) -> list[int]:  # type: ignore[misc]
        """Stream numbers."""
        yield n

    with pytest.raises(ToolDefinitionError, match=r"AsyncIterator\[X\]"):
        tool(stream)


def test_a_raw_schema_tool_with_an_async_callable_object_handler_is_async() -> None:
    t = Tool.from_schema("count", "Count.", {"type": "object", "properties": {"text": {"type": "string"}}},
                         AsyncCounter())  # fmt: skip
    assert t.is_async


def test_a_subclass_run_without_annotations_uses_its_params_class() -> None:
    class DeleteTask(Tool):
        """Delete a task."""

        class Params(BaseModel):
            task_id: str

        def run(self, params):  # type: ignore[no-untyped-def]
            return params.task_id

    t = DeleteTask()
    assert t.parameters["properties"] == {"task_id": {"type": "string"}}
    assert t.parameters["required"] == ["task_id"]
    assert t.invoke(t.validate({"task_id": "t1"})) == "t1"
    with pytest.raises(Exception, match="unknown field"):
        t.validate({"params": "anything"})


def test_tools_do_not_share_nested_schema_dicts() -> None:
    @tool
    def first(rows: list[dict[str, int]]) -> None:
        """First."""

    @tool
    def second(rows: list[dict[str, int]]) -> None:
        """Second."""

    first.parameters["properties"]["rows"]["items"]["description"] = "edited"
    assert "description" not in second.parameters["properties"]["rows"]["items"]

    shared = {
        "type": "object",
        "properties": {"q": {"type": "object", "properties": {"a": {"type": "string"}}}},
    }
    x = Tool.from_schema("x", "X.", shared)
    y = Tool.from_schema("y", "Y.", shared)
    x.parameters["properties"]["q"]["properties"]["a"]["type"] = "integer"
    assert y.parameters["properties"]["q"]["properties"]["a"]["type"] == "string"
    assert shared["properties"]["q"]["properties"]["a"] == {"type": "string"}  # type: ignore[index]
