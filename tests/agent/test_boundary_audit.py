"""Calls refused at the model boundary leave one content-free audit record each, like the executor's own
refusals: the registered tool or none, the fresh call id, the principal, outcome and code; no arguments."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from toolrun import Agent, ToolCall, ToolContext, ToolExecutor, ToolRegistry, tool
from toolrun.agent import OutputLimits
from toolrun.models import FunctionModel, Message
from toolrun.runtime import AuditRecord, InMemoryAuditSink

SECRET = "hunter2-SECRET"
CTX = ToolContext(user_id="u1", roles=("member",), trace_id="tr-1", conversation_id="conv-1")


def make_registry() -> tuple[ToolRegistry, list[Any]]:
    seen: list[Any] = []

    @tool
    def store(data: Any = None) -> str:
        """Store any JSON data."""
        seen.append(data)
        return "stored"

    return ToolRegistry([store]), seen


def scripted(*turns: Any) -> FunctionModel:
    script = list(turns)

    def answer(messages: list[Message], tools: list[Any]) -> Any:
        return script.pop(0) if script else "done"

    return FunctionModel(answer)


def nested(depth: int) -> Any:
    value: Any = SECRET
    for _ in range(depth):
        value = [value]
    return value


def content_free(record: AuditRecord) -> None:
    text = json.dumps(record.to_dict(), ensure_ascii=False) + str(record)
    assert SECRET not in text and "drop" not in text and "\x00" not in text


async def test_each_refused_call_leaves_one_record_with_its_code_and_no_content() -> None:
    registry, seen = make_registry()
    sink = InMemoryAuditSink()
    executor = ToolExecutor(registry, audit=sink)
    calls = [
        ToolCall(id="a", name="store", arguments={"data": "fine"}),
        ToolCall(id="a", name=f"drop\x00table 💥 {SECRET}", arguments={"data": SECRET}),  # unknown, dup id
        ToolCall(id="c", name="store", arguments={"data": SECRET * 40}),  # over max_argument_chars
        ToolCall(id="d", name="store", arguments={"data": nested(40)}),  # over max_argument_depth
        ToolCall(id="e", name="store", arguments=json.dumps({"data": SECRET})),  # over max_calls
    ]
    limits = OutputLimits(max_argument_chars=200, max_argument_depth=20, max_calls=4)
    agent = Agent(scripted(calls), registry, executor=executor, output_limits=limits)
    run = await agent.run("go", context=CTX)
    assert seen == ["fine"]  # (the run then stops: three failures of `store` in a row)

    ids = [record.call.id for record in run.tool_calls]
    by_id = {record.call_id: record for record in sink.records}
    assert len(sink.records) == 5 and set(by_id) == set(ids)  # one each, the ids the conversation keeps
    codes = [(by_id[i].tool, by_id[i].outcome, by_id[i].code) for i in ids]
    assert codes == [
        ("store", "ok", None),  # run by the executor
        (None, "error", "NOT_FOUND"),  # the made-up name stays out of the trail
        ("store", "error", "INVALID_ARGUMENTS"),
        ("store", "error", "INVALID_ARGUMENTS"),
        ("store", "error", "TOO_MANY_CALLS"),
    ]
    for call_id in ids[1:]:
        record = by_id[call_id]
        assert record.action == "execute" and record.arguments_hash is None
        assert (record.principal, record.trace_id, record.conversation_id) == ("u1", "tr-1", "conv-1")
        assert (record.attempts, record.cached, record.confirmation_id) == (0, False, None)
        content_free(record)
    assert by_id[ids[0]].arguments_hash is not None  # a call that ran is hashed, as before


async def test_refusals_are_recorded_like_the_executors_own() -> None:
    """A made-up name refused at the boundary and one refused by the executor read the same in the trail."""
    registry, _ = make_registry()
    sink = InMemoryAuditSink()
    executor = ToolExecutor(registry, audit=sink)
    calls = [ToolCall(id="x", name="no such tool", arguments={}), ToolCall(id="y", name="nope", arguments={})]
    await Agent(scripted(calls), registry, executor=executor).run("go", context=CTX)
    boundary, executor_refusal = sink.records  # "no such tool" is unsafe: refused before the executor
    assert boundary.call_id == "x" and executor_refusal.call_id == "y"
    fields = ("action", "tool", "principal", "outcome", "code", "attempts", "cached", "trace_id")
    assert [getattr(boundary, f) for f in fields] == [getattr(executor_refusal, f) for f in fields]


async def test_refusals_go_to_the_audit_logger_too(caplog: pytest.LogCaptureFixture) -> None:
    registry, _ = make_registry()
    agent = Agent(scripted(ToolCall(id="z", name="store", arguments=[SECRET])), registry)
    with caplog.at_level(logging.INFO, logger="toolrun.audit"):
        run = await agent.run("go", context=CTX)
    [line] = [r for r in caplog.records if r.name == "toolrun.audit"]
    assert run.tool_calls[0].result.error is not None
    assert "code=INVALID_ARGUMENTS" in line.getMessage() and "tool=store" in line.getMessage()
    assert SECRET not in line.getMessage()


async def test_without_sinks_or_logger_nothing_is_recorded_and_the_run_goes_on() -> None:
    registry, _ = make_registry()
    executor = ToolExecutor(registry, audit_logger=None)
    agent = Agent(scripted(ToolCall(name="??", arguments={})), registry, executor=executor)
    run = await agent.run("go", context=CTX)
    assert run.status == "completed" and run.tool_calls[0].result.error is not None


async def test_a_failing_sink_does_not_cost_the_run_or_the_other_sinks() -> None:
    class Broken:
        def write(self, record: AuditRecord) -> None:
            raise RuntimeError("disk full")

    registry, _ = make_registry()
    sink = InMemoryAuditSink()
    executor = ToolExecutor(registry, audit=[Broken(), sink], audit_logger=None)
    agent = Agent(scripted(ToolCall(name="??", arguments={})), registry, executor=executor)
    run = await agent.run("go", context=CTX)
    assert run.status == "completed" and [r.code for r in sink.records] == ["NOT_FOUND"]
