"""Provider-neutral types: JSON round trips (agent runs are resumed from JSON), usage, settings."""

from __future__ import annotations

import json

import pytest

from toolrun import ToolCall, ToolError, ToolResult
from toolrun.models import (
    AssistantMessage,
    Message,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    SystemMessage,
    ToolResultMessage,
    Usage,
    UserMessage,
    messages_from_json,
    messages_to_json,
)
from toolrun.models._messages import message_from_dict

CONVERSATION: list[Message] = [
    SystemMessage(content="You manage tasks."),
    UserMessage(content="Delete task t1 — ünïcode ok"),
    AssistantMessage(
        content="",
        tool_calls=[
            ToolCall(id="c1", name="delete_task", arguments='{"task_id": "t1"}'),
            ToolCall(id="c2", name="tasks.list", arguments={"limit": 2}),
            ToolCall(id="c3", name="ping", arguments=None),
        ],
    ),
    ToolResultMessage(call_id="c1", tool_name="delete_task", content='{"deleted":true}'),
    ToolResultMessage(call_id="c2", tool_name="tasks.list", content="Error X: y", is_error=True),
    AssistantMessage(content="Done."),
]


def test_conversation_round_trips_through_json() -> None:
    text = messages_to_json(CONVERSATION)
    assert messages_from_json(text) == CONVERSATION
    assert messages_from_json(text.encode()) == CONVERSATION


def test_json_form_is_documented_shape() -> None:
    data = json.loads(messages_to_json(CONVERSATION))
    assert data[0] == {"role": "system", "content": "You manage tasks."}
    assert data[2] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "name": "delete_task", "arguments": '{"task_id": "t1"}'},
            {"id": "c2", "name": "tasks.list", "arguments": {"limit": 2}},
            {"id": "c3", "name": "ping", "arguments": None},
        ],
    }
    assert data[4] == {
        "role": "tool",
        "call_id": "c2",
        "tool_name": "tasks.list",
        "content": "Error X: y",
        "is_error": True,
    }


def test_unknown_role_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown role"):
        message_from_dict({"role": "robot", "content": "x"})


def test_tool_result_message_from_result() -> None:
    ok = ToolResult.ok({"a": 1}, call_id="c1", tool_name="t")
    assert ToolResultMessage.from_result(ok) == ToolResultMessage(
        call_id="c1", tool_name="t", content='{"a":1}'
    )
    failed = ToolResult.fail(
        ToolError("BAD", "nope", recover_action="try again"), call_id="c2", tool_name="t"
    )
    message = ToolResultMessage.from_result(failed)
    assert message.is_error
    assert message.content == failed.render()
    paused = ToolResult.confirmation_required_result("conf1", "delete t1", call_id="c3", tool_name="t")
    assert ToolResultMessage.from_result(paused).is_error is False


def test_usage_adds_up_and_round_trips() -> None:
    total = Usage(input_tokens=10, output_tokens=2, requests=1) + Usage(
        input_tokens=5, output_tokens=1, cache_read_tokens=3, requests=1
    )
    assert total == Usage(input_tokens=15, output_tokens=3, cache_read_tokens=3, requests=2)
    assert total.total_tokens == 18
    assert Usage.from_dict(json.loads(json.dumps(total.to_dict()))) == total


def test_settings_merge_and_round_trip() -> None:
    defaults = ModelSettings(temperature=0.7, max_tokens=100, tool_choice="auto")
    merged = defaults.merge(ModelSettings(temperature=0.0, stop=("x",)))
    assert merged == ModelSettings(temperature=0.0, max_tokens=100, tool_choice="auto", stop=("x",))
    assert defaults.merge(None) is defaults
    settings = ModelSettings(stop=("a", "b"), extra_body={"k": 1}, parallel_tool_calls=False)
    assert ModelSettings.from_dict(json.loads(json.dumps(settings.to_dict()))) == settings


def test_response_round_trips_without_raw() -> None:
    response = ModelResponse(
        text="hi",
        tool_calls=[ToolCall(id="c", name="t", arguments="{}")],
        usage=Usage(input_tokens=1, output_tokens=2, requests=1),
        provider_finish_reason="tool_use",
        model_name="m",
        response_id="r",
        raw={"big": "payload"},
    )
    data = json.loads(json.dumps(response.to_dict()))
    assert "raw" not in data
    assert ModelResponse.from_dict(data) == response  # raw is not compared
    assert response.to_message() == AssistantMessage(content="hi", tool_calls=response.tool_calls)


def test_request_wraps_a_tool_list_once(tools) -> None:
    request = ModelRequest([UserMessage(content="x")], tools)
    assert request.tools.names() == ["get_weather", "tasks.create"]
    assert request.wire_name("tasks.create") == "tasks_create"
    assert request.wire_name("unknown.tool") == "unknown.tool"
    assert len(ModelRequest([]).tools) == 0
