"""The AG-UI adapter over the service's events: order, one tool call at a time, interrupt and resume."""

from __future__ import annotations

import pytest
from ag_ui.core import ResumeEntry, RunAgentInput

from toolrun.server.protocols.ag_ui import (
    APPROVAL_SCHEMA,
    AGUIEncoder,
    DecisionError,
    last_user_message,
    read_resume,
    read_resume_extras,
)

from .conftest import failed_run, paused_run, resumed_run, sse_data


def encode(encoder: AGUIEncoder, events: list) -> list[dict]:
    frames: list[str] = []
    for event in events:
        frames.extend(encoder.feed(event))
    return sse_data(frames)


def test_paused_run_ends_with_an_interrupt_and_calls_never_interleave() -> None:
    out = encode(AGUIEncoder(thread_id="th", run_id="client-run-1"), paused_run())
    assert [e["type"] for e in out] == [
        "RUN_STARTED",
        "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT",  # create: whole, first
        "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END",  # delete: no result, it waits
        "RUN_FINISHED",
    ]  # fmt: skip
    assert out[0]["protocolVersion"] == "1.0" and out[0]["threadId"] == "th"
    assert out[0]["runId"] == out[-1]["runId"] == "client-run-1"
    assert [out[1]["toolCallId"], out[5]["toolCallId"]] == ["c_add", "c_del"]
    assert out[6]["delta"] == '{"task_id": "t0"}'
    assert '"title": "Buy milk"' in out[4]["content"]
    outcome = out[-1]["outcome"]
    assert outcome["type"] == "interrupt"
    assert outcome["interrupts"] == [
        {
            "id": "conf_1",
            "reason": "tool_call",
            "message": "delete_task(task_id='t0')",
            "toolCallId": "c_del",
            "responseSchema": APPROVAL_SCHEMA,
            "expiresAt": "2030-01-01T00:00:00Z",
            "metadata": {
                "tool": "delete_task",
                "arguments": {"task_id": "t0"},
                "summary": "delete_task(task_id='t0')",
                "preview": None,
            },
        }
    ]
    assert APPROVAL_SCHEMA["required"] == ["approved"] and set(APPROVAL_SCHEMA["properties"]) == {
        "approved",
        "arguments",
        "reason",
    }


def test_the_interrupt_message_is_the_preview_when_there_is_one() -> None:
    events = paused_run()
    preview = "Delete the task 'Renew passport' (due 1 Dec 2026), permanently."
    for event in events:
        pending = getattr(event, "pending", None)
        if isinstance(pending, dict):
            pending["preview"] = preview
        response = getattr(event, "response", None)
        if isinstance(response, dict):
            response["pending"][0]["preview"] = preview
    out = encode(AGUIEncoder(thread_id="th", run_id="r"), events)
    [interrupt] = out[-1]["outcome"]["interrupts"]
    assert interrupt["message"] == preview and interrupt["metadata"]["preview"] == preview
    assert interrupt["metadata"]["summary"] == "delete_task(task_id='t0')"


def test_resume_extras_carry_edits_and_reasons_and_refuse_bad_ones() -> None:
    entries = [
        ResumeEntry(interrupt_id="a", status="resolved", payload={"approved": True, "arguments": {"x": 1}}),
        ResumeEntry(
            interrupt_id="b", status="resolved", payload={"approved": False, "reason": " no thanks "}
        ),
        ResumeEntry(interrupt_id="c", status="resolved", payload={"approved": True}),
    ]
    assert read_resume_extras(entries) == {"a": {"arguments": {"x": 1}}, "b": {"reason": "no thanks"}}
    for payload in ({"approved": True, "arguments": [1]}, {"approved": False, "reason": 5}):
        with pytest.raises(DecisionError):
            read_resume_extras([ResumeEntry(interrupt_id="d", status="resolved", payload=payload)])


@pytest.mark.parametrize("approved", [True, False])
def test_resumed_run_emits_only_the_held_calls_result_then_the_answer(approved: bool) -> None:
    out = encode(AGUIEncoder(thread_id="th", run_id="client-run-2"), resumed_run(approved=approved))
    assert [e["type"] for e in out] == [
        "RUN_STARTED", "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]  # fmt: skip
    assert out[1]["toolCallId"] == "c_del"
    assert ('"deleted": "t0"' in out[1]["content"]) is approved
    assert ("CONFIRMATION_DENIED" in out[1]["content"]) is not approved
    assert out[-1]["outcome"] == {"type": "success"}


def test_service_failure_ends_with_run_error_and_nothing_after() -> None:
    encoder = AGUIEncoder(thread_id="th", run_id="r")
    out = encode(encoder, failed_run())
    assert [e["type"] for e in out] == [
        "RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "RUN_ERROR",
    ]  # fmt: skip
    assert out[-1]["code"] == "INTERNAL"
    assert encoder.feed(paused_run()[-1]) == [] and encoder.run_error("again") == []


def test_a_refusal_before_any_event_is_a_well_formed_run() -> None:
    out = sse_data(
        AGUIEncoder(thread_id="th", run_id="r").run_error("Answer the open interrupt first.", "BUSY")
    )
    assert [e["type"] for e in out] == ["RUN_STARTED", "RUN_ERROR"]


def test_read_resume_is_strict() -> None:
    assert read_resume([ResumeEntry(interrupt_id="a", status="resolved", payload={"approved": True})]) == {
        "a": True
    }
    assert read_resume([ResumeEntry(interrupt_id="a", status="cancelled")]) == {"a": False}
    for payload in ({"approved": "true"}, {"approved": 1}, {"approved": None}, {}, None, "yes"):
        with pytest.raises(DecisionError):
            read_resume([ResumeEntry(interrupt_id="a", status="resolved", payload=payload)])
    with pytest.raises(DecisionError):
        read_resume([ResumeEntry(interrupt_id="a", status="cancelled")] * 2)


def test_last_user_message_only_counts_the_last_one() -> None:
    def run_input(*messages: object) -> RunAgentInput:
        return RunAgentInput.model_validate({"threadId": "t", "runId": "r", "messages": list(messages)})

    assert last_user_message(run_input({"id": "m1", "role": "user", "content": "hello"})) == ("m1", "hello")
    parts = {
        "id": "m1",
        "role": "user",
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
    }
    assert last_user_message(run_input(parts)) == ("m1", "a\nb")
    assistant_last = run_input(
        {"id": "m1", "role": "user", "content": "hello"}, {"id": "m2", "role": "assistant", "content": "hi"}
    )
    assert last_user_message(assistant_last) is None
    assert last_user_message(run_input()) is None
