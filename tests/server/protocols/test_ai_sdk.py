"""The AI SDK UI message stream adapter over the service's events, and the strict reading of requests."""

from __future__ import annotations

import pytest

from toolrun.server.protocols.ai_sdk import AISDKEncoder, DecisionError, read_request

from .conftest import failed_run, paused_run, resumed_run, sse_data


def encode(encoder: AISDKEncoder, events: list) -> list:
    frames: list[str] = []
    for event in events:
        frames.extend(encoder.feed(event))
    return sse_data(frames)


def kinds(parts: list) -> list[str]:
    return [p if p == "[DONE]" else p["type"] for p in parts]


def test_paused_run_asks_for_approval_of_the_held_call() -> None:
    parts = encode(AISDKEncoder(message_id="m1"), paused_run())
    assert kinds(parts) == [
        "start",
        "tool-input-start", "tool-input-delta", "tool-input-available",
        "tool-input-start", "tool-input-delta", "tool-input-available",
        "tool-output-available",
        "data-confirmation", "tool-approval-request",
        "finish", "[DONE]",
    ]  # fmt: skip
    assert parts[0] == {"type": "start", "messageId": "m1"}
    assert parts[6]["input"] == {"task_id": "t0"}
    assert parts[7]["output"] == {
        "status": "ok",
        "duration_ms": 1.5,
        "value": {"id": "t1", "title": "Buy milk"},
    }
    assert parts[8] == {  # what the person approves: the preview (here none: the summary)
        "type": "data-confirmation",
        "id": "conf_1",
        "data": {
            "approvalId": "conf_1",
            "toolCallId": "c_del",
            "preview": "delete_task(task_id='t0')",
            "summary": "delete_task(task_id='t0')",
        },
    }
    assert parts[9] == {"type": "tool-approval-request", "approvalId": "conf_1", "toolCallId": "c_del"}
    assert parts[10]["finishReason"] == "tool-calls"


def test_a_denial_reason_is_read_from_the_approval() -> None:
    part = {"type": "tool-delete_task", "state": "approval-responded", "toolCallId": "c"}
    body = {
        "id": "chat",
        "messages": [
            {"id": "m", "role": "assistant", "parts": [
                {**part, "approval": {"id": "a1", "approved": False, "reason": " not now "}},
                {**part, "approval": {"id": "a2", "approved": True, "reason": "ignored when approving"}},
            ]},
        ],
    }  # fmt: skip
    request = read_request(body)
    assert request.approvals == {"a1": False, "a2": True} and request.reasons == {"a1": "not now"}


@pytest.mark.parametrize("approved", [True, False])
def test_continuation_after_a_decision(approved: bool) -> None:
    parts = encode(AISDKEncoder(), resumed_run(approved=approved))
    assert parts[0] == {"type": "start"}
    if approved:
        assert parts[1]["type"] == "tool-output-available" and parts[1]["output"]["value"] == {
            "deleted": "t0"
        }
    else:
        assert parts[1] == {"type": "tool-output-denied", "toolCallId": "c_del"}
    assert kinds(parts)[2:] == ["text-start", "text-delta", "text-delta", "text-end", "finish", "[DONE]"]
    assert parts[-2] == {"type": "finish", "finishReason": "stop"}


def test_service_failure_ends_with_an_error_part() -> None:
    encoder = AISDKEncoder(message_id="m2")
    parts = encode(encoder, failed_run())
    assert kinds(parts) == ["start", "text-start", "text-delta", "text-end", "error", "finish", "[DONE]"]
    assert parts[4]["errorText"] == "The database went away."
    assert encoder.feed(paused_run()[1]) == []


def test_read_request_takes_only_the_last_message_and_strict_booleans() -> None:
    user = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hello"}]}
    request = read_request({"id": "chat", "messages": [user], "trigger": "submit-message"})
    assert (request.chat_id, request.user_text, request.approvals) == ("chat", "hello", {})

    def responded(approved: object) -> dict:
        part = {
            "type": "tool-delete_task",
            "toolCallId": "c1",
            "state": "approval-responded",
            "input": {"task_id": "t1"},
            "approval": {"id": "conf_1", "approved": approved},
        }
        return {"id": "chat", "messages": [user, {"id": "a1", "role": "assistant", "parts": [part]}]}

    assert read_request(responded(True)).approvals == {"conf_1": True}
    assert read_request(responded(False)).approvals == {"conf_1": False}
    assert read_request(responded(True)).user_text is None
    for loose in ("true", 1, 0, None, "false"):
        with pytest.raises(DecisionError):
            read_request(responded(loose))
    for bad in ({}, {"messages": []}, {"messages": "x"}, [], {"id": 3, "messages": [user]}):
        with pytest.raises(DecisionError):
            read_request(bad)
