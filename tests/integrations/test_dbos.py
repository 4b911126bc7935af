"""DurableAgent in one process: runs as DBOS workflows, steps recorded, approvals as durable waits."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from dbos import DBOS

from toolrun import ToolCall, ToolContext, ToolRegistry, tool
from toolrun.agent import ConfirmationRequired, RunFinished, TextDelta, ToolCallFinished
from toolrun.integrations.dbos import DurableAgent, dbos_config, idempotency_key
from toolrun.models import ScriptedModel

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def dbos_sqlite(tmp_path: Path) -> AsyncIterator[None]:
    DBOS(config=dbos_config(f"sqlite:///{tmp_path}/dbos.sqlite", polling_interval=0.02))
    DBOS.launch()
    try:
        yield
    finally:
        DBOS.destroy()


def _agent(name: str, script: list[Any], calls: list[str], keys: list[str | None]) -> DurableAgent:
    registry = ToolRegistry()

    @registry.register
    @tool
    async def add_note(text: str, *, ctx: ToolContext) -> dict[str, str]:
        """Add a note."""
        calls.append(text)
        keys.append(ctx.idempotency_key)
        return {"saved": text}

    @registry.register
    @tool(destructive=True)
    async def delete_note(text: str, *, ctx: ToolContext) -> str:
        """Delete a note."""
        calls.append(f"deleted {text}")
        keys.append(ctx.idempotency_key)
        return "deleted"

    return DurableAgent(ScriptedModel(script), registry, name=name)


async def test_a_run_is_a_workflow_of_model_and_tool_steps(dbos_sqlite: None) -> None:
    calls: list[str] = []
    keys: list[str | None] = []
    agent = _agent(
        "notes_a",
        [ToolCall(id="c1", name="add_note", arguments={"text": "milk"}), "Saved."],
        calls,
        keys,
    )
    run = await agent.run("note milk", context=ToolContext(user_id="u1"))
    assert run.status == "completed", run.error
    assert run.output == "Saved."
    assert calls == ["milk"]
    assert keys == [idempotency_key(run.run_id, "c1")]
    steps = [s["function_name"] for s in await DBOS.list_workflow_steps_async(run.run_id)]
    assert steps[:4] == [
        "toolrun.model.request",
        "toolrun.tool.begin:add_note",
        "toolrun.tool:add_note",
        "toolrun.model.request",
    ]
    status = await DBOS.get_workflow_status_async(run.run_id)
    assert status is not None
    assert status.status == "SUCCESS"


async def test_starting_a_run_id_twice_is_one_run(dbos_sqlite: None) -> None:
    calls: list[str] = []
    agent = _agent("notes_b", [ToolCall(id="c1", name="add_note", arguments={"text": "x"}), "ok"], calls, [])
    first = await agent.start("x", run_id="run_same")
    second = await agent.start("x", run_id="run_same")
    assert first == second == "run_same"
    run = await agent.wait("run_same")
    assert run.status == "completed"
    assert calls == ["x"]


async def test_an_approval_is_a_durable_wait_then_runs_once(dbos_sqlite: None) -> None:
    calls: list[str] = []
    agent = _agent(
        "notes_c",
        [ToolCall(id="d1", name="delete_note", arguments={"text": "old"}), "Deleted it."],
        calls,
        [],
    )
    alice = ToolContext(user_id="alice")
    run = await agent.run("delete old", context=alice)
    assert run.status == "awaiting_confirmation"
    assert calls == []
    status = await DBOS.get_workflow_status_async(run.run_id)
    assert status is not None
    assert status.status == "PENDING"  # the workflow itself waits
    cid = run.pending[0].confirmation_id
    with pytest.raises(ValueError, match="this user"):
        await agent.resume(run, {cid: True}, context=ToolContext(user_id="mallory"))
    with pytest.raises(ValueError, match="No pending"):
        await agent.resume(run, {"nope": True}, context=alice)
    done = await agent.resume(run, {cid: True}, context=alice)
    assert done.status == "completed", done.error
    assert done.output == "Deleted it."
    assert calls == ["deleted old"]
    # single use: the run is over, nothing waits for a second decision
    with pytest.raises(ValueError, match="not waiting"):
        await agent.resume(run, {cid: True}, context=alice)
    assert calls == ["deleted old"]


async def test_a_denial_reaches_the_model_and_nothing_runs(dbos_sqlite: None) -> None:
    calls: list[str] = []
    agent = _agent(
        "notes_d",
        [ToolCall(id="d1", name="delete_note", arguments={"text": "old"}), "Kept it."],
        calls,
        [],
    )
    run = await agent.run("delete old", context=ToolContext(user_id="u"))
    done = await agent.resume(run, {run.pending[0].confirmation_id: False}, context=ToolContext(user_id="u"))
    assert done.status == "completed"
    assert calls == []
    assert done.tool_calls[0].result.error is not None
    assert done.tool_calls[0].result.error.code == "CONFIRMATION_DENIED"


async def test_stream_yields_live_events_of_the_workflow(dbos_sqlite: None) -> None:
    calls: list[str] = []
    agent = _agent(
        "notes_e",
        [ToolCall(id="d1", name="delete_note", arguments={"text": "a"}), "Done deleting."],
        calls,
        [],
    )
    ctx = ToolContext(user_id="u")
    events = [e async for e in agent.stream("go", context=ctx)]
    assert isinstance(events[-1], RunFinished)
    paused = events[-1].run
    assert paused.status == "awaiting_confirmation"
    assert any(isinstance(e, ConfirmationRequired) for e in events)
    more = [
        e async for e in agent.stream_resume(paused, {paused.pending[0].confirmation_id: True}, context=ctx)
    ]
    assert any(isinstance(e, ToolCallFinished) and e.result.status == "ok" for e in more)
    assert "".join(e.text for e in more if isinstance(e, TextDelta)) == "Done deleting."
    assert isinstance(more[-1], RunFinished)
    assert more[-1].run.status == "completed"
    assert calls == ["deleted a"]


def test_planner_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="native"):
        DurableAgent(ScriptedModel(["x"]), ToolRegistry(), name="p", mode="planner")
