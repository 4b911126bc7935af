"""`Agent.resume` trusts the confirmation store, never the run's JSON (issue 7, items 1, 7 and 8).

What a resume runs is the store's record for this run, this user (or "no user") and this conversation.
A pending entry that does not match its record, or has none, fails the whole resume: nothing of it runs
and nothing is consumed, and the run ends `failed` with the reason.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolrun import Agent, ErrorCode, ToolCall, ToolContext, ToolExecutor, ToolRegistry, tool
from toolrun.agent import AgentRun, InvalidRunError, RunFinished, RunSignatureError
from toolrun.models import ScriptedModel
from toolrun.store import NO_USER, InMemoryConfirmationStore

CTX = ToolContext(user_id="u1")
KEY = b"a-shared-hash-key-of-32-bytes..."


def make_registry() -> tuple[ToolRegistry, list[tuple[str, dict[str, Any]]]]:
    ran: list[tuple[str, dict[str, Any]]] = []

    @tool(destructive=True)
    async def delete_task(task_id: str) -> dict[str, str]:
        """Delete a task permanently."""
        ran.append(("delete_task", {"task_id": task_id}))
        return {"deleted": task_id}

    @tool(requires_confirmation=True)
    async def send_email(to: str, body: str) -> str:
        """Send an e-mail. It cannot be recalled."""
        ran.append(("send_email", {"to": to, "body": body}))
        return "sent"

    return ToolRegistry([delete_task, send_email]), ran


def delete(task: str, call_id: str = "d1") -> ToolCall:
    return ToolCall(id=call_id, name="delete_task", arguments={"task_id": task})


def agent_for(registry: ToolRegistry, script: list[Any], executor: ToolExecutor | None = None) -> Agent:
    return Agent(ScriptedModel(script), registry, executor=executor or ToolExecutor(registry, hash_key=KEY))


async def paused_run(agent: Agent, ctx: ToolContext | None = CTX) -> AgentRun:
    run = await agent.run("do it", context=ctx)
    assert run.status == "awaiting_confirmation"
    return run


def edited(run: AgentRun, change: Any) -> AgentRun:
    data = run.to_dict()
    change(data)
    return AgentRun.from_dict(json.loads(json.dumps(data)))


# ---------------------------------------------------------------------------------------------------------
# Item 1: the store is the source of truth


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(
            lambda d: d["pending"][0]["call"].update(arguments={"task_id": "t-other"}), id="arguments"
        ),
        pytest.param(lambda d: d["pending"][0]["call"].update(arguments='{"task_id": "t-other"}'), id="text"),
        pytest.param(lambda d: d["pending"][0]["call"].update(name="send_email"), id="tool"),
        pytest.param(lambda d: d["pending"][0]["call"].update(id="d9"), id="call-id"),
        pytest.param(
            lambda d: d["pending"][0].update(summary='delete_task(task_id="t-other")'), id="summary"
        ),
        pytest.param(
            lambda d: d["pending"][0].update(arguments={"task_id": "t-other"}), id="shown-arguments"
        ),
    ],
)
async def test_an_edited_pending_entry_fails_the_resume_and_runs_nothing(change: Any) -> None:
    registry, ran = make_registry()
    agent = agent_for(registry, [delete("t1"), "Deleted."])
    run = await paused_run(agent)
    tampered = edited(run, change)
    out = await agent.resume(tampered, {tampered.pending[0].confirmation_id: True}, context=CTX)
    assert out.status == "failed" and "does not match the call in this run" in (out.error or "")
    assert ran == []
    # Nothing was consumed: the genuine run still resumes, and runs what the store holds.
    done = await agent.resume(run, {run.pending[0].confirmation_id: True}, context=CTX)
    assert done.status == "completed" and ran == [("delete_task", {"task_id": "t1"})]


async def test_a_confirmation_of_another_run_cannot_be_smuggled_in() -> None:
    registry, ran = make_registry()
    executor = ToolExecutor(registry, hash_key=KEY)
    victim = await paused_run(agent_for(registry, [delete("t-precious", "v1"), "ok"], executor))
    agent = agent_for(registry, [delete("t1"), "Deleted."], executor)
    run = await paused_run(agent)
    # Same user, same executor: the id is valid in the store, but it was issued for the other run.
    smuggled = edited(run, lambda d: d["pending"].append(victim.to_dict()["pending"][0]))
    approvals = {p.confirmation_id: True for p in smuggled.pending}
    out = await agent.resume(smuggled, approvals, context=CTX)
    assert out.status == "failed" and "was not issued for this run" in (out.error or "")
    assert ran == []  # all or nothing: not even this run's own, genuine call ran
    # Both confirmations are still there for their own runs.
    done = await agent.resume(victim, {victim.pending[0].confirmation_id: False}, context=CTX)
    assert done.tool_calls[0].result.error is not None
    assert done.tool_calls[0].result.error.code == ErrorCode.CONFIRMATION_DENIED
    assert (await agent.resume(run, approvals={run.pending[0].confirmation_id: True}, context=CTX)).done
    assert ran == [("delete_task", {"task_id": "t1"})]


async def test_a_confirmation_is_bound_to_its_conversation() -> None:
    registry, ran = make_registry()
    agent = agent_for(registry, [delete("t1"), "Deleted."])
    run = await paused_run(agent, CTX.evolve(conversation_id="conv-a"))
    out = await agent.resume(
        run, {run.pending[0].confirmation_id: True}, context=CTX.evolve(conversation_id="conv-b")
    )
    assert out.status == "failed" and "another conversation" in (out.error or "") and ran == []


async def test_the_executor_refuses_a_run_bound_confirmation_outside_its_run() -> None:
    registry, ran = make_registry()
    agent = agent_for(registry, [delete("t1"), "Deleted."])
    run = await paused_run(agent)
    cid = run.pending[0].confirmation_id
    for ctx in (CTX, CTX.evolve(run_id="run_other")):
        result = await agent.executor.approve(cid, ctx)
        assert result.error is not None and result.error.code == ErrorCode.CONFIRMATION_NOT_FOUND
        result = await agent.executor.deny(cid, ctx)
        assert result.error is not None and result.error.code == ErrorCode.CONFIRMATION_NOT_FOUND
        result = await agent.executor.approve(cid, ctx, arguments={"task_id": "t1"})
        assert result.error is not None and ran == []
    # Still there: the run itself can decide it.
    assert (await agent.executor.approve(cid, CTX.evolve(run_id=run.run_id))).status == "ok"


async def test_pending_entries_show_the_store_record_with_the_full_arguments() -> None:
    registry, _ = make_registry()
    body = "Dear Bob, " + "please find the report attached. " * 6 + "Pay to IBAN DE89 3704 0044 0532 0130 00."
    agent = agent_for(registry, [ToolCall(id="e1", name="send_email", arguments={"to": "bob", "body": body})])
    run = await paused_run(agent)
    [entry] = run.pending
    record = await agent.executor.confirmation.store.get(entry.confirmation_id)
    assert record is not None
    assert entry.summary == record.summary and "DE89 3704 0044 0532 0130 00" in entry.summary.replace(
        "\n    ", ""
    )
    assert entry.arguments == record.metadata["arguments"] == {"to": "bob", "body": body}
    assert AgentRun.from_json(run.to_json()).pending[0].arguments == entry.arguments


async def test_partial_approvals_keep_the_rest_pending_and_check_every_entry() -> None:
    registry, ran = make_registry()
    agent = agent_for(registry, [[delete("t1", "d1"), delete("t2", "d2")], "Both done."])
    run = await paused_run(agent)
    first, second = run.pending
    run = await agent.resume(run, {first.confirmation_id: True}, context=CTX)
    assert run.status == "awaiting_confirmation" and [p.confirmation_id for p in run.pending] == [
        second.confirmation_id
    ]
    assert ran == [("delete_task", {"task_id": "t1"})]
    run = await agent.resume(run, {second.confirmation_id: True}, context=CTX)
    assert run.status == "completed" and len(ran) == 2


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda d: d.update(pending=[]), id="nothing-pending"),
        pytest.param(lambda d: d["pending"].append(d["pending"][0]), id="duplicate"),
        pytest.param(lambda d: d["batch"].append({"id": "x9", "name": "delete_task"}), id="batch-extra"),
        pytest.param(lambda d: d.update(batch=[]), id="batch-empty"),
        pytest.param(lambda d: d.update(steps=5), id="steps"),
    ],
)
async def test_an_inconsistent_paused_run_fails_the_resume(change: Any) -> None:
    registry, ran = make_registry()
    agent = agent_for(registry, [delete("t1"), "Deleted."])
    run = await paused_run(agent)
    tampered = edited(run, change)
    approvals = {p.confirmation_id: True for p in tampered.pending}
    out = await agent.resume(tampered, approvals, context=CTX)
    assert out.status == "failed" and "do not agree" in (out.error or "") and ran == []


async def test_stream_resume_ends_with_the_refusal() -> None:
    registry, ran = make_registry()
    agent = agent_for(registry, [delete("t1"), "Deleted."])
    run = await paused_run(agent)
    tampered = edited(run, lambda d: d["pending"][0]["call"].update(arguments={"task_id": "t2"}))
    events = [
        e
        async for e in agent.stream_resume(tampered, {tampered.pending[0].confirmation_id: True}, context=CTX)
    ]
    assert len(events) == 1 and isinstance(events[0], RunFinished) and events[0].run.status == "failed"
    assert ran == []


# ---------------------------------------------------------------------------------------------------------
# Signed runs


async def test_dump_and_load_run_round_trip_and_refuse_any_edit() -> None:
    registry, ran = make_registry()
    agent = agent_for(registry, [delete("t1"), "Deleted."])
    run = await paused_run(agent)
    text = agent.dump_run(run)
    assert agent.load_run(text).to_dict() == run.to_dict()
    # Another agent on the same key (another process) reads it too.
    assert agent_for(registry, [], ToolExecutor(registry, hash_key=KEY)).load_run(text).run_id == run.run_id

    data = json.loads(text)
    for field, value in [("output", "x"), ("status", "failed"), ("steps", 7), ("error", "e")]:
        changed = dict(data, **{field: value})
        with pytest.raises(RunSignatureError, match="changed after it was signed"):
            agent.load_run(json.dumps(changed))
    nested = json.loads(text)
    nested["messages"][-1]["tool_calls"][0]["arguments"] = {"task_id": "t2"}
    with pytest.raises(RunSignatureError):
        agent.load_run(json.dumps(nested))
    with pytest.raises(RunSignatureError, match="not signed"):
        agent.load_run(run.to_json())
    with pytest.raises(RunSignatureError):
        agent_for(registry, [], ToolExecutor(registry, hash_key=b"k" * 32)).load_run(text)
    # A RunSignatureError is an InvalidRunError, a ToolrunError and a ValueError: one clear error.
    assert issubclass(RunSignatureError, InvalidRunError) and issubclass(RunSignatureError, ValueError)
    assert ran == []


# ---------------------------------------------------------------------------------------------------------
# Item 7: a resume the executor cannot honour says so


async def test_a_fresh_agent_without_the_shared_store_fails_clearly() -> None:
    registry, ran = make_registry()
    run = await paused_run(agent_for(registry, [delete("t1"), "Deleted."]))
    fresh = Agent(ScriptedModel(["Deleted."]), registry)  # its own in-memory store and random key
    out = await fresh.resume(
        AgentRun.from_json(run.to_json()), {run.pending[0].confirmation_id: True}, context=CTX
    )
    assert out.status == "failed" and out.done
    assert "unknown to this executor's confirmation store" in (out.error or "")
    assert "hash_key" in (out.error or "") and ran == []


async def test_a_shared_store_with_another_hash_key_fails_clearly() -> None:
    registry, ran = make_registry()
    store = InMemoryConfirmationStore()
    first = agent_for(registry, [delete("t1")], ToolExecutor(registry, confirmations=store, hash_key=KEY))
    run = await paused_run(first)
    second = agent_for(registry, ["x"], ToolExecutor(registry, confirmations=store, hash_key=b"o" * 32))
    out = await second.resume(run, {run.pending[0].confirmation_id: True}, context=CTX)
    assert out.status == "failed" and "hash_key" in (out.error or "") and ran == []


async def test_a_replayed_resume_fails_instead_of_completing() -> None:
    registry, ran = make_registry()
    agent = agent_for(registry, [delete("t1"), "Deleted.", "Deleted again."])
    run = await paused_run(agent)
    saved = run.to_json()
    assert (
        await agent.resume(run, {run.pending[0].confirmation_id: True}, context=CTX)
    ).status == "completed"
    replay = AgentRun.from_json(saved)
    out = await agent.resume(replay, {replay.pending[0].confirmation_id: True}, context=CTX)
    assert out.status == "failed" and len(ran) == 1


# ---------------------------------------------------------------------------------------------------------
# Item 8: runs without a user pause like any other


async def test_a_run_without_a_user_pauses_and_only_a_caller_without_a_user_decides() -> None:
    registry, ran = make_registry()
    agent = agent_for(registry, [delete("t1"), "Deleted."])
    run = await agent.run("delete t1")  # no context at all: a library user's script
    assert run.status == "awaiting_confirmation" and ran == []
    record = await agent.executor.confirmation.store.get(run.pending[0].confirmation_id)
    assert record is not None and record.user_id == NO_USER and record.run_id == run.run_id
    saved = run.to_json()

    signed_in = await agent.resume(
        AgentRun.from_json(saved), {run.pending[0].confirmation_id: True}, context=CTX
    )
    assert signed_in.status == "failed" and ran == []  # a signed-in caller cannot approve it

    done = await agent.resume(AgentRun.from_json(saved), {run.pending[0].confirmation_id: True})
    assert done.status == "completed" and ran == [("delete_task", {"task_id": "t1"})]


async def test_a_signed_in_run_cannot_be_decided_without_a_user() -> None:
    registry, ran = make_registry()
    agent = agent_for(registry, [delete("t1"), "Deleted."])
    run = await paused_run(agent)
    out = await agent.resume(run, {run.pending[0].confirmation_id: True})
    assert out.status == "failed" and ran == []
    assert (
        await agent.executor.approve(run.pending[0].confirmation_id, ToolContext(run_id=run.run_id))
    ).status == "error"


async def test_anonymous_runs_cannot_decide_each_others_confirmations() -> None:
    registry, ran = make_registry()
    executor = ToolExecutor(registry, hash_key=KEY)
    other = await agent_for(registry, [delete("t-theirs", "x1")], executor).run("delete")
    agent = agent_for(registry, [delete("t1"), "Deleted."], executor)
    run = await agent.run("delete t1")
    smuggled = edited(run, lambda d: d["pending"].append(other.to_dict()["pending"][0]))
    out = await agent.resume(smuggled, {p.confirmation_id: True for p in smuggled.pending})
    assert out.status == "failed" and "not issued for this run" in (out.error or "") and ran == []
    # And directly through the executor, under this run's id: not theirs.
    cid = other.pending[0].confirmation_id
    r = await executor.approve(cid, ToolContext(run_id=run.run_id))
    assert r.error is not None and r.error.code == ErrorCode.CONFIRMATION_NOT_FOUND and ran == []


async def test_servers_can_require_signed_in_users() -> None:
    registry, ran = make_registry()
    executor = ToolExecutor(registry, hash_key=KEY, require_user_for_confirmation=True)
    run = await agent_for(registry, [delete("t1"), "I cannot do that."], executor).run("delete t1")
    assert run.status == "completed" and ran == []
    error = run.tool_calls[0].result.error
    assert error is not None and error.code == ErrorCode.CONFIRMATION_DENIED
    assert error.details == {"reason": "no_user"}
