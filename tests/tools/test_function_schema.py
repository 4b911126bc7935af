"""Schemas built from signatures and docstrings (snapshot-style: the exact JSON Schema a model sees)."""

from __future__ import annotations

import datetime as dt
from enum import Enum
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from toolrun import Tool, ToolContext, ToolDefinitionError, tool


def test_google_docstring_gives_descriptions_and_context_is_hidden() -> None:
    @tool(destructive=True, timeout=5.0)
    async def delete_task(task_id: str, *, ctx: ToolContext) -> dict[str, str]:
        """Delete a task permanently. Use when the user explicitly asks to delete a task.

        Args:
            task_id: The task's id, e.g. "task-123".
        """
        return {"deleted": task_id}

    assert delete_task.name == "delete_task"
    assert delete_task.description == (
        "Delete a task permanently. Use when the user explicitly asks to delete a task."
    )
    assert delete_task.parameters == {
        "type": "object",
        "properties": {"task_id": {"type": "string", "description": 'The task\'s id, e.g. "task-123".'}},
        "required": ["task_id"],
        "additionalProperties": False,
    }
    assert delete_task.takes_context
    assert delete_task.is_async
    assert delete_task.options.requires_confirmation  # destructive defaults to needing confirmation


def test_defaults_enums_optionals_and_dates() -> None:
    class Priority(Enum):
        LOW = "low"
        HIGH = "high"

    @tool
    def add_task(
        title: str,
        due: dt.date | None = None,
        priority: Priority = Priority.LOW,
        labels: list[str] | None = None,
        status: Literal["open", "done"] = "open",
    ) -> dict[str, Any]:
        """Add a task.

        Args:
            title: Short title.
            due: Due date.
            priority: How urgent.
        """
        return {}

    params = add_task.parameters
    assert params["required"] == ["title"]
    props = params["properties"]
    assert props["title"] == {"type": "string", "description": "Short title."}
    assert props["due"]["anyOf"] == [{"type": "string", "format": "date"}, {"type": "null"}]
    assert props["due"]["description"] == "Due date."
    # Enums are inlined (no $ref: simpler for every provider, and Gemini cannot take $ref).
    assert props["priority"] == {
        "default": "low",
        "description": "How urgent.",
        "enum": ["low", "high"],
        "type": "string",
    }
    assert props["status"] == {"type": "string", "enum": ["open", "done"], "default": "open"}
    assert "title" not in params  # Pydantic's titles are dropped


def test_numpy_and_sphinx_docstrings() -> None:
    def numpy_style(query: str, limit: int = 5) -> list[str]:
        """Search.

        Parameters
        ----------
        query : str
            Words to find.
        limit : int
            At most this many.
        """
        return []

    def sphinx_style(query: str) -> list[str]:
        """Search.

        :param query: Words to find.
        :returns: matches
        """
        return []

    for fn in (numpy_style, sphinx_style):
        made = Tool.from_function(fn)
        assert made.description == "Search."
        assert made.parameters["properties"]["query"]["description"] == "Words to find."


def test_explicit_field_description_wins_over_docstring() -> None:
    @tool
    def f(x: Annotated[int, Field(description="From Field.", ge=0)] = 1, y: int = Field(2, le=9)) -> int:
        """Do it.

        Args:
            x: From docstring.
            y: Y from docstring.
        """
        return x

    assert f.parameters["properties"]["x"]["description"] == "From Field."
    assert f.parameters["properties"]["x"]["minimum"] == 0
    assert f.parameters["properties"]["y"] == {
        "type": "integer",
        "default": 2,
        "maximum": 9,
        "description": "Y from docstring.",
    }


def test_single_pydantic_model_parameter_is_the_whole_argument_object() -> None:
    class NewTask(BaseModel):
        """A task to create."""

        title: str = Field(description="The title.")
        done: bool = False

    @tool
    def create(task: NewTask) -> NewTask:
        """Create a task."""
        return task

    assert create.parameters["properties"] == {
        "title": {"type": "string", "description": "The title."},
        "done": {"type": "boolean", "default": False},
    }
    kwargs = create.validate('{"title": "x"}')
    assert isinstance(kwargs["task"], NewTask)
    assert kwargs["task"].title == "x"

    @tool(flatten_model=False)
    def create_nested(task: NewTask) -> NewTask:
        """Create a task."""
        return task

    assert list(create_nested.parameters["properties"]) == ["task"]


def test_context_in_any_position_and_optional() -> None:
    def f(ctx: ToolContext | None, a: int, *, other: ToolContext[Any] | None = None) -> int:
        """F."""
        return a

    with pytest.raises(ToolDefinitionError, match="only one parameter"):
        Tool.from_function(f)

    def g(ctx: ToolContext, a: int) -> int:
        """G."""
        return a

    made = Tool.from_function(g)
    assert list(made.parameters["properties"]) == ["a"]


def test_reserved_and_underscore_names_are_kept_for_the_model() -> None:
    @tool
    def f(json: bool = False, _hidden: int = 0, schema: str = "s") -> dict[str, Any]:
        """F."""
        return {"json": json, "_hidden": _hidden, "schema": schema}

    assert set(f.parameters["properties"]) == {"json", "_hidden", "schema"}
    assert f.validate({"json": True, "_hidden": 3}) == {"json": True, "_hidden": 3, "schema": "s"}
    assert f.invoke(f.validate({"schema": "x"})) == {"json": False, "_hidden": 0, "schema": "x"}


def test_positional_only_parameters_are_passed_by_position() -> None:
    def f(a: int, /, b: int) -> int:
        """F."""
        return a * 10 + b

    made = Tool.from_function(f)
    assert made.invoke(made.validate({"a": 1, "b": 2})) == 12


def test_output_schema_from_return_annotation() -> None:
    class Out(BaseModel):
        n: int

    @tool
    def f() -> Out:
        """F."""
        return Out(n=1)

    @tool
    def g() -> None:
        """G."""

    assert f.output_schema == {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    assert g.output_schema is None
    assert f.output_problems({"n": "x"})
    assert f.output_problems({"n": 2}) == []


@pytest.mark.parametrize(
    ("fn_source", "match"),
    [
        ("def f(*args: int) -> int:\n    'F.'\n    return 0", r"\*args is not supported"),
        ("def f(**kw: int) -> int:\n    'F.'\n    return 0", r"\*\*kw is not supported"),
        ("def f(a: int) -> int:\n    return a", "has no description"),
        ("def f(a: int) -> int:\n    '   '\n    return a", "has no description"),
    ],
)
def test_definition_errors_name_the_tool_and_the_fix(fn_source: str, match: str) -> None:
    namespace: dict[str, Any] = {}
    exec(fn_source, namespace)
    with pytest.raises(ToolDefinitionError, match=match) as info:
        Tool.from_function(namespace["f"])
    assert "'f'" in str(info.value)


def test_unresolvable_annotation_is_a_definition_error() -> None:
    def f(a: NotDefinedAnywhere) -> int:  # type: ignore[name-defined]  # noqa: F821
        """F."""
        return 0

    with pytest.raises(ToolDefinitionError, match="cannot read the type annotations"):
        Tool.from_function(f)
