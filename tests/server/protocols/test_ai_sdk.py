"""The AI SDK UI message stream adapter over real agent runs, and the strict reading of its requests."""

from __future__ import annotations

import pytest

from toolrun.server.protocols.ai_sdk import AISDKEncoder, DecisionError, read_request

from .conftest import CTX, Kit, add_then_delete, collect, sse_data


def encode(encoder: AISDKEncoder, events: list) -> list:
    frames = [encoder.start()]
    for event in events:
        frames.extend(encoder.feed(event))
    return sse_data(frames)


async def test_approval_request_then_approved_and_denied_continuations(kit: Kit) -> None:
    agent = kit.agent(add_then_delete())
    events = await collect(agent.stream("add and delete", context=CTX))
    run = events[-1].run  # type: ignore[union-attr]
    parts = encode(AISDKEncoder(message_id="m1"), events)
    types = [p if p == "[DONE]" else p["type"] for p in parts]
    assert types == [
        "start",
        "tool-input-start", "tool-input-delta", "tool-input-available",
        "tool-input-start", "tool-input-delta", "tool-input-available",
        "tool-output-available",
        "tool-approval-request",
        "finish", "[DONE]",
    ]  # fmt: skip
    assert parts[0] == {"type": "start", "messageId": "m1"}
    assert parts[6]["input"] == {"task_id": "t0"}
    assert parts[7]["output"]["value"] == {"id": "t1", "title": "Buy milk"}
    approval = parts[8]
    assert approval == {
        "type": "tool-approval-request",
        "approvalId": run.pending[0].confirmation_id,
        "toolCallId": "c_del",
    }
    assert parts[9]["finishReason"] == "tool-calls"

    denied = await collect(agent.stream_resume(run, {approval["approvalId"]: False}, context=CTX))
    parts = encode(AISDKEncoder(), denied)
    assert parts[0] == {"type": "start"}
    assert parts[1] == {"type": "tool-output-denied", "toolCallId": "c_del"}
    assert parts[-2] == {"type": "finish", "finishReason": "stop"} and parts[-1] == "[DONE]"
    assert kit.runs["delete_task"] == 0


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
