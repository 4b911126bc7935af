"""An agent with a harmless tool and a destructive one, scripted, for the protocol adapters' tests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from toolrun import Agent, ToolContext, ToolRegistry, tool
from toolrun.agent import AgentEvent
from toolrun.models import ScriptedModel
from toolrun.tools import ToolCall

CTX = ToolContext(user_id="u1", roles=("member",))


class Kit:
    def __init__(self) -> None:
        self.runs = {"add_task": 0, "delete_task": 0}

        @tool
        def add_task(title: str) -> dict[str, Any]:
            """Add a task."""
            self.runs["add_task"] += 1
            return {"id": "t1", "title": title}

        @tool(destructive=True)
        def delete_task(task_id: str) -> dict[str, Any]:
            """Delete a task permanently."""
            self.runs["delete_task"] += 1
            return {"deleted": task_id}

        self.registry = ToolRegistry([add_task, delete_task])

    def agent(self, script: list[Any]) -> Agent:
        return Agent(ScriptedModel(script), self.registry)


@pytest.fixture
def kit() -> Kit:
    return Kit()


def add_then_delete() -> list[Any]:
    """One turn with two calls (the second needs approval), then the answer."""
    return [
        [
            ToolCall(id="c_add", name="add_task", arguments={"title": "Buy milk"}),
            ToolCall(id="c_del", name="delete_task", arguments={"task_id": "t0"}),
        ],
        "Added t1 and deleted t0.",
    ]


async def collect(events: AsyncIterator[AgentEvent]) -> list[AgentEvent]:
    return [e async for e in events]


def sse_data(frames: list[str]) -> list[Any]:
    """The JSON of each `data:` frame (`[DONE]` kept as the string)."""
    out: list[Any] = []
    for frame in frames:
        assert frame.startswith("data: ") and frame.endswith("\n\n"), frame
        body = frame[len("data: ") : -2]
        out.append(body if body == "[DONE]" else json.loads(body))
    return out
