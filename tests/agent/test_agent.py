"""Agent scenarios with the scripted models: no real provider is ever called."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from toolrun import Agent, ErrorCode, ToolCall, ToolContext, ToolError, ToolRegistry, tool
from toolrun.agent import (
    AgentRun,
    ConfirmationRequired,
    OutputLimits,
    RunFinished,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from toolrun.models import (
    AssistantMessage,
    FunctionModel,
    ModelRequest,
    ModelResponse,
    ProviderUnavailableError,
    ScriptedModel,
    SystemMessage,
    ToolResultMessage,
    Usage,
    UserMessage,
)

CTX = ToolContext(user_id="u1", roles=("member",))


def make_registry() -> tuple[ToolRegistry, dict[str, int]]:
    runs = {"add": 0, "delete_task": 0, "flaky": 0}

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        runs["add"] += 1
        return a + b

    @tool(destructive=True)
    async def delete_task(task_id: str) -> dict[str, Any]:
        """Delete a task permanently."""
        runs["delete_task"] += 1
        return {"deleted": task_id}

    @tool
    def flaky(title: str) -> str:
        """Create something with a title."""
        runs["flaky"] += 1
        raise ToolError("INVALID_TITLE", "Titles must start with a capital.", recover_action="Capitalise it.")

    return ToolRegistry([add, delete_task, flaky]), runs


async def test_single_call_then_answer() -> None:
    registry, runs = make_registry()
    model = ScriptedModel([ToolCall(id="c1", name="add", arguments={"a": 1, "b": 2}), "1 + 2 = 3"])
    agent = Agent(model, registry, instructions="You add numbers.")
    run = await agent.run("What is 1 + 2?", context=CTX)

    assert run.status == "completed"
    assert run.output == "1 + 2 = 3"
    assert runs["add"] == 1
    assert [r.result.value for r in run.tool_calls] == [3]
    assert [type(m) for m in run.messages] == [
        SystemMessage,
        UserMessage,
        AssistantMessage,
        ToolResultMessage,
        AssistantMessage,
    ]
    tool_msg = run.messages[3]
    assert isinstance(tool_msg, ToolResultMessage)
    assert (tool_msg.call_id, tool_msg.content, tool_msg.is_error) == ("c1", "3", False)
    assert run.steps == 2
    assert run.usage.requests == 2
    # The model saw the tools on every request.
    assert all(req.tools.names() == ["add", "delete_task", "flaky"] for req in model.requests)


async def test_parallel_calls_keep_the_model_order() -> None:
    registry, runs = make_registry()
    calls = [ToolCall(id=f"c{i}", name="add", arguments={"a": i, "b": i}) for i in range(5)]
    agent = Agent(ScriptedModel([calls, "done"]), registry)
    run = await agent.run("double 0..4", context=CTX)
    assert run.status == "completed"
    assert runs["add"] == 5
    results = [m for m in run.messages if isinstance(m, ToolResultMessage)]
    assert [m.call_id for m in results] == ["c0", "c1", "c2", "c3", "c4"]
    assert [m.content for m in results] == ["0", "2", "4", "6", "8"]


async def test_bad_call_is_fed_back_and_corrected() -> None:
    registry, runs = make_registry()
    model = ScriptedModel(
        [
            ToolCall(id="bad", name="add", arguments='{"a": "one", "b": 2, "c": 3}'),
            ToolCall(id="good", name="add", arguments={"a": 1, "b": 2}),
            "3",
        ]
    )
    run = await Agent(model, registry).run("1+2", context=CTX)
    assert run.status == "completed"
    assert runs["add"] == 1
    first = run.tool_calls[0].result
    assert first.error is not None and first.error.code == ErrorCode.INVALID_ARGUMENTS
    feedback = next(m for m in run.messages if isinstance(m, ToolResultMessage) and m.call_id == "bad")
    assert feedback.is_error
    assert "a: input should be a valid integer" in feedback.content
    assert "unknown field 'c'" in feedback.content
    # The second request carried the feedback to the model.
    assert any(isinstance(m, ToolResultMessage) and m.call_id == "bad" for m in model.requests[1].messages)


async def test_tool_error_reaches_the_model_readably() -> None:
    registry, _ = make_registry()
    model = ScriptedModel([ToolCall(name="flaky", arguments={"title": "x"}), "Sorry, I could not."])
    run = await Agent(model, registry).run("make x", context=CTX)
    assert run.status == "completed"
    message = next(m for m in run.messages if isinstance(m, ToolResultMessage))
    assert message.is_error
    assert (
        message.content
        == "Error INVALID_TITLE: Titles must start with a capital.\nWhat to do: Capitalise it."
    )


async def test_a_tool_failing_again_and_again_ends_the_run() -> None:
    registry, runs = make_registry()
    same = [ToolCall(name="flaky", arguments={"title": "x"}) for _ in range(10)]
    run = await Agent(ScriptedModel(same), registry, max_tool_errors=3).run("go", context=CTX)
    assert run.status == "failed"
    assert runs["flaky"] == 3
    assert "failed 3 times in a row" in (run.error or "")


async def test_calls_over_the_per_response_limit_are_refusals_not_failures_of_the_tool() -> None:
    """372 calls past `max_calls` are refused `TOO_MANY_CALLS`: the tool never saw them, so they do not
    count toward `max_tool_errors`; the model reads the refusals and sends the rest again."""
    created: list[int] = []

    @tool
    async def create_task(n: int) -> int:
        """Create a task."""
        created.append(n)
        return n

    many = [ToolCall(id=f"c{n}", name="create_task", arguments={"n": n}) for n in range(500)]
    rest = [ToolCall(id=f"r{n}", name="create_task", arguments={"n": n}) for n in range(128, 256)]
    model = ScriptedModel([many, rest, "Created them."])
    run = await Agent(model, ToolRegistry([create_task]), max_tool_errors=3).run("go", context=CTX)
    assert run.status == "completed", run.error
    assert run.output == "Created them."
    assert len(model.requests) == 3
    refused = [r.result.error.code for r in run.tool_calls if r.result.error is not None]
    assert refused == ["TOO_MANY_CALLS"] * 372
    assert created == list(range(128)) + list(range(128, 256))


async def test_invalid_calls_past_the_limit_still_end_the_run() -> None:
    """Real failures of the tool around refused calls still count, refusals in between or not."""
    registry, runs = make_registry()
    calls = [ToolCall(id=f"f{n}", name="flaky", arguments={"title": "x"}) for n in range(3)]
    limits = OutputLimits(max_calls=2)
    run = await Agent(
        ScriptedModel([calls, calls[:1], "never"]), registry, max_tool_errors=3, output_limits=limits
    ).run("go", context=CTX)
    assert run.status == "failed" and "failed 3 times in a row" in (run.error or "")
    assert runs["flaky"] == 3


async def test_unknown_tool_is_a_result_not_a_crash() -> None:
    registry, _ = make_registry()
    model = ScriptedModel([ToolCall(name="ad", arguments={}), "ok"])
    run = await Agent(model, registry).run("x", context=CTX)
    assert run.status == "completed"
    err = run.tool_calls[0].result.error
    assert err is not None and err.code == ErrorCode.NOT_FOUND


def _delete_script() -> list[Any]:
    return [ToolCall(id="d1", name="delete_task", arguments={"task_id": "t1"}), "Deleted t1."]


async def test_destructive_call_pauses_then_approved_runs_once() -> None:
    registry, runs = make_registry()
    agent = Agent(ScriptedModel(_delete_script()), registry)
    run = await agent.run("delete t1", context=CTX)
    assert run.status == "awaiting_confirmation"
    assert runs["delete_task"] == 0
    assert len(run.pending) == 1
    pending = run.pending[0]
    assert pending.call.name == "delete_task"
    assert "delete_task" in pending.summary
    # No tool result for the paused call reached the conversation yet.
    assert not any(isinstance(m, ToolResultMessage) for m in run.messages)

    resumed = await agent.resume(run, approvals={pending.confirmation_id: True}, context=CTX)
    assert resumed.status == "completed"
    assert resumed.output == "Deleted t1."
    assert runs["delete_task"] == 1
    result_msg = next(m for m in resumed.messages if isinstance(m, ToolResultMessage))
    assert result_msg.call_id == "d1"
    assert json.loads(result_msg.content) == {"deleted": "t1"}


async def test_destructive_call_denied_never_runs() -> None:
    registry, runs = make_registry()
    agent = Agent(ScriptedModel([*_delete_script()[:1], "I did not delete it."]), registry)
    run = await agent.run("delete t1", context=CTX)
    run = await agent.resume(run, approvals={run.pending[0].confirmation_id: False}, context=CTX)
    assert run.status == "completed"
    assert runs["delete_task"] == 0
    err = run.tool_calls[0].result.error
    assert err is not None and err.code == ErrorCode.CONFIRMATION_DENIED
    assert any(isinstance(m, ToolResultMessage) and m.is_error for m in run.messages)


async def test_paused_run_resumes_from_json_with_a_fresh_agent() -> None:
    registry, runs = make_registry()
    first = Agent(ScriptedModel(_delete_script()), registry)
    paused = await first.run("delete t1", context=CTX)
    text = paused.to_json()

    # A new agent and model (as after a restart), sharing the executor's confirmation store.
    restored = AgentRun.from_json(text)
    assert restored.to_dict() == paused.to_dict()
    second = Agent(ScriptedModel(_delete_script()), registry, executor=first.executor)
    done = await second.resume(restored, approvals={restored.pending[0].confirmation_id: True}, context=CTX)
    assert done.status == "completed"
    assert runs["delete_task"] == 1


async def test_approval_by_another_user_does_not_run_the_tool() -> None:
    registry, runs = make_registry()
    agent = Agent(ScriptedModel(_delete_script()), registry)
    run = await agent.run("delete t1", context=CTX)
    saved = run.to_json()
    other = ToolContext(user_id="intruder")
    run = await agent.resume(run, approvals={run.pending[0].confirmation_id: True}, context=other)
    assert runs["delete_task"] == 0
    # Nothing of the resume ran, and the run says why; it does not reveal that the id exists for
    # someone else: to this caller it is simply unknown.
    assert run.status == "failed" and "unknown to this executor's confirmation store" in (run.error or "")
    assert run.tool_calls[0].result.status == "confirmation_required"
    # The intruder burnt nothing: the user can still approve it.
    restored = AgentRun.from_json(saved)
    done = await agent.resume(restored, approvals={restored.pending[0].confirmation_id: True}, context=CTX)
    assert done.status == "completed" and runs["delete_task"] == 1


async def test_resume_rejects_unknown_ids_and_finished_runs() -> None:
    registry, _ = make_registry()
    agent = Agent(ScriptedModel(_delete_script()), registry)
    run = await agent.run("delete t1", context=CTX)
    with pytest.raises(ValueError, match="No pending confirmation"):
        await agent.resume(run, approvals={"nope": True}, context=CTX)
    done = await Agent(ScriptedModel(["hi"]), registry).run("hi")
    with pytest.raises(ValueError, match="Only a run awaiting confirmation"):
        await agent.resume(done, approvals={}, context=CTX)


# ----------------------------------------------------------------------------------------------------------
# Planner mode


def plan(calls: list[dict[str, Any]], *, needs_input: str | None = None) -> str:
    return json.dumps(
        {
            "intent": "test",
            "tool_calls": calls,
            "needs_user_input": needs_input is not None,
            "input_request": needs_input,
        }
    )


async def test_planner_mode_runs_the_plan_then_answers() -> None:
    registry, runs = make_registry()
    model = ScriptedModel([plan([{"tool": "add", "args": {"a": 2, "b": 3}, "reason": "sum"}]), "It is 5."])
    agent = Agent(model, registry, mode="planner", instructions="Be brief.")
    run = await agent.run("2+3?", context=CTX)
    assert run.status == "completed"
    assert run.output == "It is 5."
    assert runs["add"] == 1
    assert run.plan is not None and run.plan["tool_calls"][0]["tool"] == "add"
    system = run.messages[0]
    assert isinstance(system, SystemMessage)
    assert "Be brief." in system.content and "- add: Add two integers." in system.content
    # The planning request offered no native tools; the answer request carried the results as text.
    assert all(len(req.tools) == 0 for req in model.requests)
    assert (
        "add(" in model.requests[1].messages[-1].content and "-> 5" in model.requests[1].messages[-1].content
    )


async def test_planner_needs_user_input_runs_no_tool() -> None:
    registry, runs = make_registry()
    model = ScriptedModel([plan([], needs_input="Which task should I delete?")])
    run = await Agent(model, registry, mode="planner").run("delete my task", context=CTX)
    assert run.status == "needs_user_input"
    assert run.output == "Which task should I delete?"
    assert sum(runs.values()) == 0
    assert run.tool_calls == []


async def test_planner_repairs_one_malformed_plan() -> None:
    registry, runs = make_registry()
    model = ScriptedModel(
        [
            "Sure! I will add them.",  # not JSON
            "```json\n" + plan([{"tool": "add", "args": {"a": 1, "b": 1}}]) + "\n```",
            "2",
        ]
    )
    run = await Agent(model, registry, mode="planner").run("1+1", context=CTX)
    assert run.status == "completed"
    assert runs["add"] == 1
    repair = model.requests[1].messages[-1]
    assert isinstance(repair, UserMessage) and "not valid" in repair.content


async def test_planner_gives_up_after_one_repair() -> None:
    registry, _ = make_registry()
    model = ScriptedModel(["nope", '{"intent": 1, "tool_calls": "x"}'])
    run = await Agent(model, registry, mode="planner").run("1+1", context=CTX)
    assert run.status == "failed"
    assert "valid plan" in (run.error or "")


async def test_planner_pause_and_resume() -> None:
    registry, runs = make_registry()
    model = ScriptedModel([plan([{"tool": "delete_task", "args": {"task_id": "t9"}}]), "Deleted."])
    agent = Agent(model, registry, mode="planner")
    run = await agent.run("delete t9", context=CTX)
    assert run.status == "awaiting_confirmation"
    run = await agent.resume(
        AgentRun.from_json(run.to_json()), {run.pending[0].confirmation_id: True}, context=CTX
    )
    assert run.status == "completed"
    assert runs["delete_task"] == 1


# ----------------------------------------------------------------------------------------------------------
# Limits and failures


async def test_max_steps() -> None:
    registry, _ = make_registry()
    forever = [ToolCall(name="add", arguments={"a": 1, "b": 1}) for _ in range(20)]
    run = await Agent(ScriptedModel(forever), registry, max_steps=4).run("loop", context=CTX)
    assert run.status == "max_steps"
    assert run.steps == 4


async def test_deadline_while_the_model_thinks() -> None:
    registry, _ = make_registry()
    gate = asyncio.Event()

    async def slow(messages: list[Any], tools: Any) -> ModelResponse:
        await gate.wait()  # never set: only the deadline ends this
        return ModelResponse.from_text("late")

    run = await Agent(FunctionModel(slow), registry, timeout=0.2).run("x", context=CTX)
    assert run.status == "deadline_exceeded"


async def test_deadline_already_passed_from_context() -> None:
    registry, _ = make_registry()
    past = CTX.evolve(deadline=0.0)
    run = await Agent(ScriptedModel(["hi"]), registry).run("x", context=past)
    assert run.status == "deadline_exceeded"
    assert run.steps == 0


async def test_tool_call_budget() -> None:
    registry, runs = make_registry()
    calls = [ToolCall(name="add", arguments={"a": 1, "b": 1}) for _ in range(3)]
    run = await Agent(ScriptedModel([calls, "done"]), registry, max_tool_calls=2).run("x", context=CTX)
    assert run.status == "budget_exceeded"
    assert runs["add"] == 2


async def test_token_budget() -> None:
    registry, _ = make_registry()
    heavy = ModelResponse.from_tool_calls(
        ("add", {"a": 1, "b": 2}), usage=Usage(input_tokens=900, output_tokens=200)
    )
    run = await Agent(ScriptedModel([heavy, "3"]), registry, max_tokens=1000).run("x", context=CTX)
    assert run.status == "budget_exceeded"
    assert run.steps == 1


async def test_provider_failure_ends_the_run_readably() -> None:
    registry, _ = make_registry()
    model = ScriptedModel([ProviderUnavailableError("the server is down")])
    run = await Agent(model, registry).run("x", context=CTX)
    assert run.status == "failed"
    assert "ProviderUnavailableError" in (run.error or "")


async def test_script_running_out_is_a_failed_run() -> None:
    registry, _ = make_registry()
    run = await Agent(ScriptedModel([ToolCall(name="add", arguments={"a": 1, "b": 1})]), registry).run("x")
    assert run.status == "failed"
    assert "ran out of responses" in (run.error or "")


# ----------------------------------------------------------------------------------------------------------
# Streaming


async def test_stream_events_in_order() -> None:
    registry, _ = make_registry()
    model = ScriptedModel([ToolCall(name="add", arguments={"a": 1, "b": 2}), "The answer is 3."])
    events = [e async for e in Agent(model, registry).stream("1+2", context=CTX)]
    kinds = [type(e) for e in events]
    assert kinds.index(ToolCallStarted) < kinds.index(ToolCallFinished) < kinds.index(TextDelta)
    assert isinstance(events[-1], RunFinished)
    assert events[-1].run.status == "completed"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "The answer is 3."


async def test_stream_reports_confirmation_required() -> None:
    registry, _ = make_registry()
    events = [e async for e in Agent(ScriptedModel(_delete_script()), registry).stream("del", context=CTX)]
    confirmations = [e for e in events if isinstance(e, ConfirmationRequired)]
    assert len(confirmations) == 1
    assert isinstance(events[-1], RunFinished)
    assert events[-1].run.status == "awaiting_confirmation"


async def test_function_model_sees_tools_and_messages() -> None:
    registry, _ = make_registry()
    seen: list[ModelRequest] = []

    def fn(messages: list[Any], tools: Any) -> ModelResponse:
        seen.append(ModelRequest(messages, tools))
        if not any(isinstance(m, ToolResultMessage) for m in messages):
            return ModelResponse.from_tool_calls(("add", {"a": 20, "b": 22}))
        return ModelResponse.from_text(next(m.content for m in messages if isinstance(m, ToolResultMessage)))

    run = await Agent(FunctionModel(fn), registry).run("x", context=CTX)
    assert run.output == "42"


async def test_agents_without_tools_do_not_share_a_registry() -> None:
    first, second = Agent(ScriptedModel(["a"])), Agent(ScriptedModel(["b"]))
    assert first.tools is not second.tools
    run = await first.run("hi")
    assert (run.status, run.output) == ("completed", "a")
