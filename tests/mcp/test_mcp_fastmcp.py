"""toolrun's MCP server under another framework's MCP client: FastMCP's `Client`, over stdio (`python -m
toolrun.mcp serve` as a subprocess), with a typed elicitation handler answering the confirmation form.

FastMCP turns the requested schema into a dataclass (`json_schema_to_type`), hands it to the handler, and
sends back every field of the instance the handler returns, then checks that answer against the schema:
field names must be Python identifiers (no dots) and every optional field needs a default of its type
(an unset `reason` would otherwise go out as `null` and fail the check).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

HERE = Path(__file__).parent

pytestmark = pytest.mark.slow


def transport() -> StdioTransport:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    args = ["-m", "toolrun.mcp", "serve", "sample_tools:registry", "--user", "u1"]
    return StdioTransport(command=sys.executable, args=args, env=env, keep_alive=False)


class Person:
    """A typed elicitation handler: each answer is the form's own dataclass, built with `changes`."""

    def __init__(self, *answers: dict[str, Any]) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, type[Any]]] = []

    async def __call__(self, message: str, response_type: type[Any] | None, params: Any, context: Any) -> Any:
        assert response_type is not None and dataclasses.is_dataclass(response_type)
        self.asked.append((message, response_type))
        return response_type(**self.answers[len(self.asked) - 1])


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_fastmcp_lists_calls_and_confirms_with_a_typed_handler(mode: str) -> None:
    person = Person({"approve": True})
    async with Client(transport(), elicitation_handler=person, mode=mode) as client:
        names = [t.name for t in await client.list_tools()]
        added = await client.call_tool("add", {"a": 40, "b": 2})
        deleted = await client.call_tool("delete_task", {"task_id": "t9"})
    assert {"add", "delete_task"} <= set(names) and "purge_cache" not in names
    assert added.structured_content == {"result": 42}
    assert not deleted.is_error and deleted.structured_content == {"deleted": "t9"}
    [(message, form)] = person.asked
    assert "delete_task" in message
    assert {f.name for f in dataclasses.fields(form)} == {"approve", "reason", "arg_task_id"}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_fastmcp_edits_the_call_through_the_typed_form(mode: str) -> None:
    """The person changes the task id in the typed form: shown again, then the edited call runs."""
    person = Person({"approve": True, "arg_task_id": "t7"}, {"approve": True})
    async with Client(transport(), elicitation_handler=person, mode=mode) as client:
        deleted = await client.call_tool("delete_task", {"task_id": "t1"})
    assert not deleted.is_error and deleted.structured_content == {"deleted": "t7"}
    assert len(person.asked) == 2 and 'task_id: "t1" → "t7"' in person.asked[1][0]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_fastmcp_refusal_with_a_typed_handler_runs_nothing(mode: str) -> None:
    person = Person({"approve": False, "reason": "not that one"})
    async with Client(transport(), elicitation_handler=person, mode=mode) as client:
        refused = await client.call_tool("delete_task", {"task_id": "t1"}, raise_on_error=False)
    assert refused.is_error
    assert "not that one" in refused.content[0].text  # type: ignore[union-attr]
