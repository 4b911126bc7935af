"""The demo model's grammar: what each command calls, and that anything else gets the help text."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from toolrun import ToolCall
from toolrun.apps.tasks import DEMO_HELP, create_demo_model, parse_command
from toolrun.apps.tasks._demo import demo_reply
from toolrun.models import AssistantMessage, ModelRequest, ToolResultMessage, UserMessage

NOW = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "name", "arguments"),
    [
        ("add Buy milk", "create_task", {"title": "Buy milk"}),
        ("Add task: Buy milk", "create_task", {"title": "Buy milk"}),
        ("create a task Renew passport", "create_task", {"title": "Renew passport"}),
        (
            "add Renew passport !high due 2026-12-01 #admin #travel",
            "create_task",
            {"title": "Renew passport", "priority": "high", "eta": "2026-12-01", "tags": ["admin", "travel"]},
        ),
        ("new Pay rent priority critical due tomorrow", "create_task",
         {"title": "Pay rent", "priority": "critical", "eta": "2026-11-24"}),
        ("add Call mum due today", "create_task", {"title": "Call mum", "eta": "2026-11-23"}),
        ("list", "query_tasks", {"filters": {}}),
        ("show my tasks", "query_tasks", {"filters": {}}),
        ("list done tasks", "query_tasks", {"filters": {"status": "done"}}),
        ("List in progress tasks", "query_tasks", {"filters": {"status": "in_progress"}}),
        ("list open tasks", "query_tasks", {"filters": {"status": "pending"}}),
        ("search kitchen sink", "query_tasks", {"filters": {"text": "kitchen sink"}}),
        ("find for plumber", "query_tasks", {"filters": {"text": "plumber"}}),
        ("done task_1a2b", "set_task_status", {"task_id": "task_1a2b", "status": "done"}),
        ("mark task_1a2b as done", "set_task_status", {"task_id": "task_1a2b", "status": "done"}),
        ("start task_1a2b", "set_task_status", {"task_id": "task_1a2b", "status": "in_progress"}),
        ("delete task_1a2b", "delete_task", {"task_id": "task_1a2b"}),
        ("remove task task_1a2b", "delete_task", {"task_id": "task_1a2b"}),
        ("attach https://github.com/o/r/pull/3 to task_1a2b", "add_attachment",
         {"task_id": "task_1a2b", "url": "https://github.com/o/r/pull/3"}),
        ("attach https://x.y/z to task_1a2b as The spec", "add_attachment",
         {"task_id": "task_1a2b", "url": "https://x.y/z", "title": "The spec"}),
        ("attachments of task_1a2b", "list_attachments", {"task_id": "task_1a2b"}),
        ("detach att_9", "delete_attachment", {"attachment_id": "att_9"}),
        ("refresh att_9", "refresh_attachment", {"attachment_id": "att_9"}),
    ],
)  # fmt: skip
def test_commands(text: str, name: str, arguments: dict[str, Any]) -> None:
    call = parse_command(text, now=NOW)
    assert isinstance(call, ToolCall)
    assert (call.name, call.arguments) == (name, arguments)


@pytest.mark.parametrize("text", ["hello", "what's the weather?", "delete", "add", "list tasks please now"])
def test_anything_else_gets_help(text: str) -> None:
    reply = parse_command(text, now=NOW)
    assert isinstance(reply, str)
    assert reply.startswith("I did not understand that.") and DEMO_HELP in reply
    assert "TOOLRUN_MODEL=openai:" in reply


def test_help() -> None:
    assert parse_command("help") == DEMO_HELP


async def test_the_model_answers_from_tool_results() -> None:
    model = create_demo_model()
    assert model.name == "demo"
    call = ToolCall(id="c1", name="delete_task", arguments={"task_id": "t1"})
    messages: list[Any] = [
        UserMessage(content="delete t1"),
        AssistantMessage(tool_calls=[call]),
        ToolResultMessage(call_id="c1", tool_name="delete_task", content='{"deleted":"t1","title":"X"}'),
    ]
    response = await model.request(ModelRequest(messages))
    assert response.text == "Deleted task t1 (X)." and not response.tool_calls
    denied = "Error CONFIRMATION_DENIED: The user declined"
    assert demo_reply("delete_task", denied, True) == "OK, I did not do it."
    assert demo_reply("query_tasks", '{"tasks": [], "total": 0}', False) == "No tasks match."
    assert demo_reply("update_task", "Error NOT_FOUND: no", True) == "That did not work. Error NOT_FOUND: no"


async def test_the_model_calls_only_tools_it_has() -> None:
    response = await create_demo_model().request(ModelRequest([UserMessage(content="list")], tools=[]))
    assert response.text == "The tool query_tasks is not available to you."
