"""Sample tools shared by the wire-format tests."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel

from toolrun import Tool, ToolRegistry, tool
from toolrun.formats import FORMATS, Violation, check

STRICT_FORMATS = ("openai", "openai-responses", "anthropic")
"""Formats with a strict mode."""
ALL_EXPORTS = [(fmt, strict) for fmt in FORMATS for strict in (False, True)]
"""Every (format, strict) pair an export can be asked for."""


class Address(BaseModel):
    street: str
    city: str = "Paris"


@tool(read_only=True)
def search_tasks(
    query: str,
    limit: int = 10,
    status: Literal["open", "done"] | None = None,
    tags: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Search tasks by text. Use when the user asks to find tasks.

    Args:
        query: Words to look for.
        limit: How many tasks to return at most.
        status: Only tasks with this status.
        tags: Only tasks carrying all these tags.
    """
    return []


@tool(destructive=True)
def delete_task(task_id: str) -> dict[str, Any]:
    """Delete a task permanently.

    Args:
        task_id: The task's id, e.g. "task-123".
    """
    return {"deleted": task_id}


@tool
def ship(address: Address, express: bool = False) -> str:
    """Ship the order to an address."""
    return "ok"


def weather_tool() -> Tool:
    """A raw JSON Schema tool: a dotted name (providers need an alias), constraints strict modes move."""
    return Tool.from_schema(
        "weather.current",
        "Current weather for a city.",
        {
            "type": "object",
            "properties": {
                "city": {"type": "string", "minLength": 1, "description": "City name"},
                "days": {"type": "integer", "minimum": 1, "maximum": 7, "default": 1},
                "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
            },
            "required": ["city"],
        },
        examples=[{"input": {"city": "Paris"}}],
        open_world=True,
        read_only=True,
    )


@pytest.fixture
def weather() -> Tool:
    return weather_tool()


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry([search_tasks, delete_task, ship, weather_tool()])


def errors(definition: dict[str, Any], fmt: str, *, strict: bool) -> list[Violation]:
    """Checker violations of error severity."""
    return [v for v in check(definition, fmt, strict=strict) if v.severity == "error"]
