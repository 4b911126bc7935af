"""An Agent that plans with the planning section: a scripted model plans, works the steps, completes."""

from __future__ import annotations

from typing import Any

import pytest

from toolrun import Agent, ToolCall, ToolContext, ToolExecutor, ToolRegistry, tool
from toolrun.agent import AgentRun
from toolrun.models import ScriptedModel, SystemMessage
from toolrun.planning import Plan, Session, planning_section
from toolrun.prompts import Prompt, Section


@tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"facts about {topic}"


@tool(destructive=True)
def publish(text: str) -> dict[str, str]:
    """Publish a text (needs approval)."""
    return {"published": text}


SCRIPT = [
    ToolCall(
        name="planning_setup_plan",
        arguments={"objective": "Explain tides", "initial_steps": ["Look up tides", "Write the answer"]},
    ),
    [
        ToolCall(name="planning_update_step", arguments={"step_id": 1, "status": "in_progress"}),
        ToolCall(name="lookup", arguments={"topic": "tides"}),
    ],
    [
        ToolCall(name="planning_update_step", arguments={"step_id": 1, "status": "done"}),
        ToolCall(name="planning_update_step", arguments={"step_id": 2, "status": "done"}),
    ],
    "Tides come from the moon.",
]


def make_prompt() -> Prompt:
    return Prompt(
        [Section("Role", "You answer $who's questions.", "role"), planning_section()],
        variables={"who": "Ada"},
    )


def system_text(messages: list[Any]) -> str:
    assert isinstance(messages[0], SystemMessage)
    return str(messages[0].content)


async def test_a_run_plans_updates_steps_and_completes_the_plan() -> None:
    model = ScriptedModel(SCRIPT)
    agent = Agent(model, [lookup], prompt=make_prompt())
    run = await agent.run("Why are there tides?")

    assert run.status == "completed", run.error
    assert run.output == "Tides come from the moon."
    assert [r.call.name for r in run.tool_calls] == [
        "planning_setup_plan",
        "planning_update_step",
        "lookup",
        "planning_update_step",
        "planning_update_step",
    ]
    assert all(r.result.status == "ok" for r in run.tool_calls)
    plan = Session(run.state)[Plan].latest()
    assert plan is not None and plan.status == "completed"
    assert [(s.step_id, s.status) for s in plan.steps] == [(1, "done"), (2, "done")]
    # The last planning result the model saw is the whole completed plan.
    assert run.tool_calls[-1].result.value == plan.to_public()


async def test_the_plan_is_rendered_into_the_instructions_of_every_request() -> None:
    model = ScriptedModel(SCRIPT)
    agent = Agent(model, [lookup], prompt=make_prompt())
    run = await agent.run("Why are there tides?")
    assert run.status == "completed"
    texts = [system_text(r.messages) for r in model.requests]
    assert len(texts) == 4
    assert texts[0].startswith("# Role\n\nYou answer Ada's questions.\n\n# Planning\n\n")
    assert "No plan yet." in texts[0]
    assert "[ ] 1. Look up tides (pending)" in texts[1]
    assert "[~] 1. Look up tides (in_progress)" in texts[2]
    assert "Explain tides (completed)" in texts[3] and "[x] 2. Write the answer (done)" in texts[3]
    # The plan is in the instructions, not only in tool results: a request whose history lost the
    # tool results still shows it.
    assert all("Objective: Explain tides" in t for t in texts[1:])


async def test_tools_and_instructions_come_from_the_prompt() -> None:
    prompt = make_prompt()
    agent = Agent(ScriptedModel(["hi"]), [lookup], prompt=prompt)
    assert agent.tools.names() == ["lookup", *(t.name for t in prompt.tools)]
    assert agent.instructions == prompt.render().instructions
    with pytest.raises(ValueError, match="instructions or a prompt"):
        Agent(ScriptedModel(["hi"]), prompt=prompt, instructions="Be nice.")
    # With your own executor, its registry must hold the prompt's tools.
    with pytest.raises(ValueError, match="planning_setup_plan"):
        Agent(ScriptedModel(["hi"]), prompt=prompt, executor=ToolExecutor(ToolRegistry([lookup])))
    registry = ToolRegistry([lookup, *prompt.tools])
    agent = Agent(ScriptedModel(["hi"]), prompt=prompt, executor=ToolExecutor(registry))
    assert agent.tools is registry


async def test_a_paused_run_keeps_its_plan_through_json_and_resume() -> None:
    script = [
        ToolCall(name="planning_setup_plan", arguments={"objective": "Post", "initial_steps": ["Publish"]}),
        ToolCall(id="p1", name="publish", arguments={"text": "hello"}),
        ToolCall(name="planning_update_step", arguments={"step_id": 1, "status": "done"}),
        "Published.",
    ]
    executor = ToolExecutor(ToolRegistry([publish, *planning_section().tools]))
    agent = Agent(ScriptedModel(script), prompt=Prompt([planning_section()]), executor=executor)
    ctx = ToolContext(user_id="u1")
    paused = await agent.run("Post hello", context=ctx)
    assert paused.status == "awaiting_confirmation"
    restored = AgentRun.from_json(paused.to_json())
    plan = Session(restored.state)[Plan].latest()
    assert plan is not None and plan.objective == "Post"

    model = ScriptedModel(script)
    agent = Agent(model, prompt=Prompt([planning_section()]), executor=executor)
    done = await agent.resume(restored, {restored.pending[0].confirmation_id: True}, context=ctx)
    assert done.status == "completed", done.error
    assert "Objective: Post (active)" in system_text(model.requests[0].messages)
    final = Session(done.state)[Plan].latest()
    assert final is not None and final.status == "completed"


async def test_a_context_with_its_own_state_is_the_runs_state() -> None:
    state: dict[str, Any] = {"user_pref": "short"}
    agent = Agent(ScriptedModel(SCRIPT), [lookup], prompt=make_prompt())
    run = await agent.run("Why?", context=ToolContext(state=state))
    assert run.state is state
    assert Session(state)[Plan].latest() is not None
    assert state["user_pref"] == "short"


async def test_a_state_that_is_not_json_safe_is_named_when_saving() -> None:
    agent = Agent(ScriptedModel(["ok"]))
    run = await agent.run("hi", context=ToolContext(state={"handle": object()}))
    with pytest.raises(TypeError, match=r"state\['handle'\]"):
        run.to_json()
