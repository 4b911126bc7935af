"""`AgentRun.error_code`: every early end of a run carries a code to match, beside its words, and keeps it
through JSON (a run saved before codes existed still loads)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolrun import Agent, ToolCall, ToolContext, ToolError, ToolRegistry, tool
from toolrun.agent import AgentRun, InvalidRunError, RunErrorCode
from toolrun.models import ProviderUnavailableError, ScriptedModel

CTX = ToolContext(user_id="u1")


@tool(destructive=True)
async def delete_task(task_id: str) -> dict[str, str]:
    """Delete a task permanently."""
    return {"deleted": task_id}


@tool
async def broken(x: int) -> int:
    """Always fails."""
    raise ToolError("no")


def call(name: str = "delete_task", **arguments: Any) -> ToolCall:
    return ToolCall(name=name, arguments=arguments or {"task_id": "t1"})


async def paused(agent: Agent) -> AgentRun:
    run = await agent.run("Delete task t1", context=CTX)
    assert run.status == "awaiting_confirmation" and run.error_code is None
    return run


async def test_a_completed_run_has_no_code() -> None:
    run = await Agent(ScriptedModel(["hi"]), ToolRegistry()).run("hello")
    assert run.status == "completed" and run.error_code is None


async def test_limits_end_with_limit_reached() -> None:
    loop = [call("broken", x=1)] * 5
    run = await Agent(ScriptedModel(loop), [broken], max_steps=1, max_tool_errors=9).run("go")
    assert (run.status, run.error_code) == ("max_steps", RunErrorCode.LIMIT_REACHED)
    run = await Agent(ScriptedModel(loop), [broken], max_tool_calls=1, max_tool_errors=9).run("go")
    assert (run.status, run.error_code) == ("budget_exceeded", RunErrorCode.LIMIT_REACHED)


async def test_a_failing_tool_ends_with_tool_failing() -> None:
    run = await Agent(ScriptedModel([call("broken", x=1)] * 4), [broken], max_tool_errors=2).run("go")
    assert (run.status, run.error_code) == ("failed", RunErrorCode.TOOL_FAILING)


async def test_a_failed_model_request_ends_with_model_failed() -> None:
    model = ScriptedModel([ProviderUnavailableError("down", provider="openai")])
    run = await Agent(model, ToolRegistry()).run("go")
    assert (run.status, run.error_code) == ("failed", RunErrorCode.MODEL_FAILED)


async def test_planner_without_a_plan_ends_with_invalid_plan() -> None:
    run = await Agent(ScriptedModel(["no plan", "still none"]), [broken], mode="planner").run("go")
    assert (run.status, run.error_code) == ("failed", RunErrorCode.INVALID_PLAN)


async def test_abandon_ends_with_abandoned() -> None:
    agent = Agent(ScriptedModel([call(), "x"]), [delete_task])
    run = await agent.abandon(await paused(agent), "the user left", context=CTX)
    assert (run.status, run.error_code) == ("failed", RunErrorCode.ABANDONED)


async def test_refused_resumes_say_which_refusal() -> None:
    agent = Agent(ScriptedModel([call(), "Gone."]), [delete_task])
    run = await paused(agent)
    cid = run.pending[0].confirmation_id
    saved = run.to_json()

    edited = AgentRun.from_json(saved)
    edited.pending[0].summary = "something harmless"
    refused = await agent.resume(edited, {cid: True}, context=CTX)
    assert (refused.status, refused.error_code) == ("failed", RunErrorCode.RUN_MISMATCH)

    other = await agent.resume(AgentRun.from_json(saved), {cid: True}, context=ToolContext(user_id="u2"))
    assert other.error_code == RunErrorCode.CONFIRMATION_UNKNOWN

    done = await agent.resume(AgentRun.from_json(saved), {cid: True}, context=CTX)
    assert done.status == "completed" and done.error_code is None
    replay = await agent.resume(AgentRun.from_json(saved), {cid: True}, context=CTX)
    assert replay.error_code == RunErrorCode.CONFIRMATION_UNKNOWN


async def test_the_code_travels_in_the_runs_json_and_old_json_still_loads() -> None:
    agent = Agent(ScriptedModel([call("broken", x=1)] * 4), [broken], max_tool_errors=1)
    run = await agent.run("go")
    data = run.to_dict()
    assert data["error_code"] == "tool_failing"
    assert AgentRun.from_dict(data).error_code is RunErrorCode.TOOL_FAILING
    assert agent.load_run(agent.dump_run(run)).error_code is RunErrorCode.TOOL_FAILING
    old = {k: v for k, v in data.items() if k != "error_code"}  # saved before the field existed
    assert AgentRun.from_dict(old).error_code is None
    assert AgentRun.from_json(json.dumps(old)).error == run.error
    with pytest.raises(InvalidRunError) as bad:
        AgentRun.from_dict({**data, "error_code": "no_such_code"})
    assert bad.value.field == "error_code"
