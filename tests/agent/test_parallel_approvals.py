"""Several held calls in one turn, through the Agent: each decision reaches its own call (the langgraph#6533
bug sent resume values to the wrong tool), no sibling result is lost (adk#6732), every call of the turn
ends with exactly one result, and the history stays valid for every provider; edits, reasons, previews,
abandoned runs, and per-tool / per-run limits that leave no call without a result (langchain#34159)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from toolrun import Agent, ToolCall, ToolContext, ToolExecutor, ToolRegistry, tool
from toolrun.agent import AgentRun, Approve, ConfirmationRequired, Deny
from toolrun.models import (
    AssistantMessage,
    Message,
    ModelRequest,
    ScriptedModel,
    ToolResultMessage,
)
from toolrun.models.anthropic import AnthropicModel
from toolrun.models.openai import OpenAIModel

CTX = ToolContext(user_id="u1")
TITLES = {"t1": "Renew passport", "t2": "Buy milk", "t3": "Call the bank"}


def make_tools() -> tuple[ToolRegistry, list[tuple[str, str]]]:
    ran: list[tuple[str, str]] = []

    def describe(args: Mapping[str, Any], ctx: ToolContext) -> str:
        return f"Delete the task '{TITLES.get(args['task_id'], '?')}'"

    @tool(destructive=True, preview=describe)
    async def delete_task(task_id: str) -> dict[str, str]:
        """Delete a task permanently."""
        ran.append(("delete_task", task_id))
        return {"deleted": task_id}

    @tool(requires_confirmation=True)
    async def archive_task(task_id: str) -> str:
        """Archive a task."""
        ran.append(("archive_task", task_id))
        return f"archived {task_id}"

    @tool(read_only=True)
    async def list_tasks() -> list[str]:
        """List the tasks."""
        ran.append(("list_tasks", ""))
        return sorted(TITLES)

    @tool(max_calls=2)
    async def notify(text: str) -> str:
        """Notify the user."""
        ran.append(("notify", text))
        return "sent"

    return ToolRegistry([delete_task, archive_task, list_tasks, notify]), ran


def batch() -> list[ToolCall]:
    return [
        ToolCall(id="c1", name="delete_task", arguments={"task_id": "t1"}),
        ToolCall(id="c2", name="list_tasks", arguments={}),
        ToolCall(id="c3", name="archive_task", arguments={"task_id": "t2"}),
        ToolCall(id="c4", name="delete_task", arguments={"task_id": "t3"}),
    ]


def agent_for(registry: ToolRegistry, script: list[Any], **kwargs: Any) -> Agent:
    return Agent(ScriptedModel(script), registry, executor=ToolExecutor(registry), **kwargs)


def assert_history_valid(messages: Sequence[Message]) -> None:
    """Every tool call has exactly one result before the next assistant turn, none is orphaned, and the
    OpenAI and Anthropic request bodies built from the history pair every call with its result."""
    open_calls: dict[str, int] = {}
    for message in messages:
        if isinstance(message, AssistantMessage):
            assert not open_calls, f"calls without a result: {sorted(open_calls)}"
            open_calls = {c.id: 0 for c in message.tool_calls}
        elif isinstance(message, ToolResultMessage):
            assert message.call_id in open_calls, f"a result for no open call: {message.call_id}"
            open_calls[message.call_id] += 1
            assert open_calls[message.call_id] == 1, f"two results for {message.call_id}"
            if all(open_calls.values()):
                open_calls = {}
    assert not open_calls, f"calls without a result: {sorted(open_calls)}"
    request = ModelRequest(list(messages))
    body = OpenAIModel("gpt-4o-mini", api_key="sk-test").build_body(request)
    wanted: list[str] = []
    for item in body["messages"]:
        if item["role"] == "assistant":
            assert not wanted
            wanted = [c["id"] for c in item.get("tool_calls") or []]
        elif item["role"] == "tool":
            assert item["tool_call_id"] == wanted.pop(0)
    assert not wanted
    anthropic = AnthropicModel("claude-sonnet-4-5", api_key="sk-test").build_body(request)["messages"]
    for i, turn in enumerate(anthropic):
        uses = [b["id"] for b in turn["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
        if uses:
            following = anthropic[i + 1]["content"]
            results = [b["tool_use_id"] for b in following if b.get("type") == "tool_result"]
            assert sorted(results) == sorted(uses)


def results_by_call(run: AgentRun) -> dict[str, str]:
    return {m.call_id: m.content for m in run.messages if isinstance(m, ToolResultMessage)}


async def test_each_decision_reaches_its_own_call_whatever_the_order() -> None:
    registry, ran = make_tools()
    agent = agent_for(registry, [batch(), "Done."])
    run = await agent.run("tidy up", context=CTX)
    assert run.status == "awaiting_confirmation"
    by_call = {p.call.id: p for p in run.pending}
    assert set(by_call) == {"c1", "c3", "c4"}
    assert by_call["c1"].preview == "Delete the task 'Renew passport'"
    assert by_call["c4"].preview == "Delete the task 'Call the bank'"
    assert by_call["c3"].preview is None and by_call["c3"].shown == by_call["c3"].summary
    assert ran == [("list_tasks", "")]

    # decided one at a time, in the reverse order of the calls: each answer lands on its own call
    run = await agent.resume(
        run, {by_call["c4"].confirmation_id: Deny(reason="keep the bank task")}, context=CTX
    )
    assert run.status == "awaiting_confirmation" and {p.call.id for p in run.pending} == {"c1", "c3"}
    run = await agent.resume(run, {by_call["c3"].confirmation_id: True}, context=CTX)
    run = await agent.resume(run, {by_call["c1"].confirmation_id: False}, context=CTX)
    assert run.status == "completed" and run.output == "Done."
    assert ran == [("list_tasks", ""), ("archive_task", "t2")]
    results = results_by_call(run)
    assert set(results) == {"c1", "c2", "c3", "c4"}
    assert "declined" in results["c1"] and "delete_task" in results["c1"]
    assert json.loads(results["c2"]) == ["t1", "t2", "t3"]  # the sibling's result is kept (adk#6732)
    assert results["c3"] == "archived t2"
    assert "The user said: keep the bank task" in results["c4"]
    assert_history_valid(run.messages)


async def test_all_decisions_at_once_and_an_edit_reach_their_calls() -> None:
    registry, ran = make_tools()
    agent = agent_for(registry, [batch(), "Done."])
    events = [e async for e in agent.stream("tidy up", context=CTX)]
    asked = [e for e in events if isinstance(e, ConfirmationRequired)]
    assert [(e.call.id, e.preview) for e in asked] == [
        ("c1", "Delete the task 'Renew passport'"),
        ("c3", None),
        ("c4", "Delete the task 'Call the bank'"),
    ]
    run = events[-1].run  # type: ignore[attr-defined]
    ids = {p.call.id: p.confirmation_id for p in run.pending}
    run = await agent.resume(
        run,
        {ids["c1"]: Approve(arguments={"task_id": "t2"}), ids["c3"]: False, ids["c4"]: True},
        context=CTX,
    )
    assert run.status == "completed"
    assert sorted(ran) == [("delete_task", "t2"), ("delete_task", "t3"), ("list_tasks", "")]
    results = results_by_call(run)
    assert 'task_id: "t1" → "t2"' in results["c1"] and "t2" in results["c1"]
    assert "declined" in results["c3"] and json.loads(results["c4"]) == {"deleted": "t3"}
    assert_history_valid(run.messages)


async def test_an_invalid_edit_runs_nothing_and_the_run_can_still_be_decided() -> None:
    registry, ran = make_tools()
    agent = agent_for(registry, [batch(), "Done."])
    run = await agent.run("tidy up", context=CTX)
    ids = {p.call.id: p.confirmation_id for p in run.pending}
    with pytest.raises(ValueError, match="INVALID_ARGUMENTS"):
        await agent.resume(run, {ids["c3"]: True, ids["c1"]: Approve(arguments={"task_id": 7})}, context=CTX)
    assert ran == [("list_tasks", "")]  # the valid decision beside it did not run either
    run = await agent.resume(run, {ids["c1"]: True, ids["c3"]: True, ids["c4"]: True}, context=CTX)
    assert run.status == "completed" and len(ran) == 4
    assert_history_valid(run.messages)


async def test_a_run_ended_before_the_decisions_says_so_for_every_held_call() -> None:
    registry, ran = make_tools()
    agent = agent_for(registry, [batch(), "Done."])
    run = await agent.run("tidy up", context=CTX)
    ids = {p.call.id: p.confirmation_id for p in run.pending}
    run = await agent.resume(run, {ids["c3"]: True}, context=CTX)
    run = await agent.abandon(run, "the user started a new request", context=CTX)
    assert run.status == "failed" and run.error == "the user started a new request"
    results = results_by_call(run)
    assert set(results) == {"c1", "c2", "c3", "c4"}
    for held in ("c1", "c4"):
        assert "The run ended before the user decided" in results[held]
        assert await agent.executor.confirmation.store.get(ids[held]) is None  # withdrawn
    assert results["c3"] == "archived t2"
    assert ran == [("list_tasks", ""), ("archive_task", "t2")]
    assert_history_valid(run.messages)


async def test_a_tools_max_calls_leaves_every_call_with_a_result_and_the_run_goes_on() -> None:
    registry, ran = make_tools()
    calls = [ToolCall(id=f"n{i}", name="notify", arguments={"text": str(i)}) for i in range(3)]
    more = [ToolCall(id="n9", name="notify", arguments={"text": "again"})]
    agent = agent_for(registry, [calls, more, "Sent two; the limit stopped the rest."])
    run = await agent.run("notify me thrice", context=CTX)
    assert run.status == "completed" and run.output.startswith("Sent two")
    results = results_by_call(run)
    assert set(results) == {"n0", "n1", "n2", "n9"}
    assert "at most 2 time(s)" in results["n2"] and "at most 2 time(s)" in results["n9"]
    assert [r for r in ran if r[0] == "notify"] == [("notify", "0"), ("notify", "1")]
    assert_history_valid(run.messages)


async def test_agent_tool_limits_and_the_run_budget_leave_no_call_without_a_result() -> None:
    registry, ran = make_tools()
    calls = [ToolCall(id=f"l{i}", name="list_tasks", arguments={}) for i in range(3)]
    limited = agent_for(registry, [calls, "ok"], tool_limits={"list_tasks": 1})
    run = await limited.run("list", context=CTX)
    assert run.status == "completed" and len(ran) == 1
    assert_history_valid(run.messages)

    budget = agent_for(registry, [calls, "unreachable"], max_tool_calls=2)
    run = await budget.run("list", context=CTX)
    assert run.status == "budget_exceeded"  # langchain#34159: the limit still answers every call
    assert set(results_by_call(run)) == {"l0", "l1", "l2"}
    assert_history_valid(run.messages)


async def test_max_calls_counts_across_a_pause_and_resume() -> None:
    registry, _ran = make_tools()
    first = [
        ToolCall(id="a1", name="notify", arguments={"text": "1"}),
        ToolCall(id="a2", name="archive_task", arguments={"task_id": "t1"}),
    ]
    second = [
        ToolCall(id="b1", name="notify", arguments={"text": "2"}),
        ToolCall(id="b2", name="notify", arguments={"text": "3"}),
    ]
    agent = agent_for(registry, [first, second, "Done."])
    run = await agent.run("go", context=CTX)
    run = AgentRun.from_json(run.to_json())  # as if resumed in another request
    run = await agent.resume(run, {run.pending[0].confirmation_id: True}, context=CTX)
    results = results_by_call(run)
    assert results["b1"] == "sent" and "at most 2" in results["b2"]
    assert_history_valid(run.messages)
