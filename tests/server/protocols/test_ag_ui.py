"""The AG-UI adapter over real agent runs: event order, one tool call at a time, interrupt and resume."""

from __future__ import annotations

import pytest
from ag_ui.core import ResumeEntry, RunAgentInput, UserMessage

from toolrun.server.protocols.ag_ui import AGUIEncoder, DecisionError, last_user_message, read_resume

from .conftest import CTX, Kit, add_then_delete, collect, sse_data


def encode(encoder: AGUIEncoder, events: list) -> list[dict]:
    frames = [encoder.run_started()]
    for event in events:
        frames.extend(encoder.feed(event))
    return sse_data(frames)


async def test_run_pauses_with_an_interrupt_then_resume_emits_only_the_result(kit: Kit) -> None:
    agent = kit.agent(add_then_delete())
    events = await collect(agent.stream("add and delete", context=CTX))
    run = events[-1].run  # type: ignore[union-attr]
    assert run.status == "awaiting_confirmation"

    first = encode(
        AGUIEncoder(thread_id="th", run_id="r1", expires_at=lambda _: "2030-01-01T00:00:00Z"), events
    )
    types = [e["type"] for e in first]
    assert types == [
        "RUN_STARTED",
        "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT",  # add: one at a time
        "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END",  # delete: no result, it waits
        "RUN_FINISHED",
    ]  # fmt: skip
    assert first[0]["protocolVersion"] == "1.0"
    assert first[1]["toolCallId"] == "c_add" and first[5]["toolCallId"] == "c_del"
    assert first[6]["delta"] == '{"task_id": "t0"}'
    outcome = first[-1]["outcome"]
    assert outcome["type"] == "interrupt"
    (interrupt,) = outcome["interrupts"]
    assert interrupt["id"] == run.pending[0].confirmation_id
    assert interrupt["reason"] == "tool_call"
    assert interrupt["toolCallId"] == "c_del"
    assert interrupt["expiresAt"] == "2030-01-01T00:00:00Z"
    assert interrupt["responseSchema"]["properties"]["approved"]["type"] == "boolean"
    assert interrupt["metadata"] == {"tool": "delete_task", "arguments": {"task_id": "t0"}}
    assert kit.runs == {"add_task": 1, "delete_task": 0}

    resumed = await collect(agent.stream_resume(run, {interrupt["id"]: True}, context=CTX))
    second = encode(AGUIEncoder(thread_id="th", run_id="r2"), resumed)
    types = [e["type"] for e in second]
    assert types == [
        "RUN_STARTED", "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START",
        *["TEXT_MESSAGE_CONTENT"] * types.count("TEXT_MESSAGE_CONTENT"),
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]  # fmt: skip
    assert second[1]["toolCallId"] == "c_del"
    assert '"deleted": "t0"' in second[1]["content"]
    text = "".join(e["delta"] for e in second if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "Added t1 and deleted t0."
    assert second[-1]["outcome"] == {"type": "success"}
    assert kit.runs["delete_task"] == 1


async def test_failed_run_ends_with_run_error_and_nothing_after(kit: Kit) -> None:
    agent = kit.agent([RuntimeError("provider down")])
    events = await collect(agent.stream("hi", context=CTX))
    encoder = AGUIEncoder(thread_id="th", run_id="r")
    out = encode(encoder, events)
    assert [e["type"] for e in out] == ["RUN_STARTED", "RUN_ERROR"]
    assert out[-1]["code"] == "failed"
    assert encoder.feed(events[-1]) == [] and encoder.run_error("again") == []


def test_read_resume_is_strict() -> None:
    assert read_resume([ResumeEntry(interrupt_id="a", status="resolved", payload={"approved": True})]) == {
        "a": True
    }
    assert read_resume([ResumeEntry(interrupt_id="a", status="cancelled")]) == {"a": False}
    for payload in ({"approved": "true"}, {"approved": 1}, {"approved": None}, {}, None, "yes"):
        with pytest.raises(DecisionError):
            read_resume([ResumeEntry(interrupt_id="a", status="resolved", payload=payload)])
    twice = [ResumeEntry(interrupt_id="a", status="cancelled")] * 2
    with pytest.raises(DecisionError):
        read_resume(twice)


def test_last_user_message_only_counts_the_last_one() -> None:
    def run_input(*messages: object) -> RunAgentInput:
        return RunAgentInput.model_validate({"threadId": "t", "runId": "r", "messages": list(messages)})

    assert last_user_message(run_input({"id": "m1", "role": "user", "content": "hello"})) == ("m1", "hello")
    assistant_last = run_input(
        {"id": "m1", "role": "user", "content": "hello"}, {"id": "m2", "role": "assistant", "content": "hi"}
    )
    assert last_user_message(assistant_last) is None
    assert last_user_message(run_input()) is None
    assert isinstance(UserMessage(id="x", content="y"), UserMessage)
