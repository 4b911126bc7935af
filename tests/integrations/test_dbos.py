"""DurableAgent in one process: runs as DBOS workflows, steps recorded, approvals as durable waits, background
jobs; each on SQLite and on PostgreSQL through psycopg 3 (the driver the `dbos` extra installs)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from dbos import DBOS

from processes import scratch_postgres
from toolrun import ToolCall, ToolContext, ToolExecutor, ToolRegistry, tool
from toolrun.agent import (
    AgentRun,
    Approve,
    ConfirmationRequired,
    Deny,
    RunFinished,
    TextDelta,
    ToolCallFinished,
)
from toolrun.exceptions import ToolrunError
from toolrun.integrations.dbos import (
    DurableAgent,
    DurableAgentExistsError,
    JobStore,
    dbos_config,
    idempotency_key,
)
from toolrun.models import ScriptedModel, UserMessage

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["sqlite", "postgresql"])
def system_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """DBOS's system database (which the job store shares): a SQLite file, or a scratch PostgreSQL
    database reached with psycopg 3, the driver the `dbos` extra installs."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/dbos.sqlite"
        return
    with scratch_postgres("hpg_dbos") as url:
        yield url


@pytest.fixture
async def dbos_db(system_db: str) -> AsyncIterator[None]:
    DBOS(config=dbos_config(system_db, polling_interval=0.02))
    DBOS.launch()
    try:
        yield
    finally:
        DBOS.destroy()


def _agent(name: str, script: list[Any], calls: list[str], keys: list[str | None]) -> DurableAgent:
    return DurableAgent(ScriptedModel(script), _notes(calls, keys), name=name)


def _notes(calls: list[str], keys: list[str | None]) -> ToolRegistry:
    """`add_note` and `delete_note`, which record their calls and idempotency keys."""
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

    return registry


async def test_a_run_is_a_workflow_of_model_and_tool_steps(dbos_db: None) -> None:
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
    # the run's final state is published just before its workflow returns
    result = await (await DBOS.retrieve_workflow_async(run.run_id)).get_result()
    assert result["output"] == "Saved."
    status = await DBOS.get_workflow_status_async(run.run_id)
    assert status is not None
    assert status.status == "SUCCESS"


async def test_starting_a_run_id_twice_is_one_run(dbos_db: None) -> None:
    calls: list[str] = []
    agent = _agent("notes_b", [ToolCall(id="c1", name="add_note", arguments={"text": "x"}), "ok"], calls, [])
    first = await agent.start("x", run_id="run_same")
    second = await agent.start("x", run_id="run_same")
    assert first == second == "run_same"
    run = await agent.wait("run_same")
    assert run.status == "completed"
    assert calls == ["x"]


async def test_an_approval_is_a_durable_wait_then_runs_once(dbos_db: None) -> None:
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


async def test_decide_by_confirmation_id_as_agent_decide_does(dbos_db: None) -> None:
    """`DurableAgent.decide(confirmation_id, decision, context=)`, the call `Agent.decide` offers: the run is
    the one the confirmation's record names; another user, an unknown id and a second decision are refused
    with a code, and the call runs once."""
    from toolrun.agent import DecisionRefusedError, RunErrorCode

    calls: list[str] = []
    agent = _agent(
        "notes_k",
        [ToolCall(id="d1", name="delete_note", arguments={"text": "old"}), "Deleted it."],
        calls,
        [],
    )
    alice = ToolContext(user_id="alice")
    run = await agent.run("delete old", context=alice)
    cid = run.pending[0].confirmation_id
    for who, which in ((ToolContext(user_id="mallory"), cid), (alice, "conf_nope")):
        with pytest.raises(DecisionRefusedError) as refused:
            await agent.decide(which, True, context=who)
        assert refused.value.code == RunErrorCode.CONFIRMATION_UNKNOWN
    done = await agent.decide(cid, True, context=alice)
    assert done.run_id == run.run_id and done.status == "completed", done.error
    assert calls == ["deleted old"]
    with pytest.raises(DecisionRefusedError):
        await agent.decide(cid, True, context=alice)
    assert calls == ["deleted old"]


async def test_two_decisions_sent_at_once_one_goes_on_the_other_is_refused(dbos_db: None) -> None:
    """Both pass the confirmation check before the workflow takes either: the workflow takes one, and the
    other caller is told so (`decided_elsewhere`), not handed the run as if its decision had counted."""
    from toolrun.agent import DecisionRefusedError, RunErrorCode

    calls: list[str] = []
    agent = _agent(
        "notes_k2",
        [ToolCall(id="d1", name="delete_note", arguments={"text": "old"}), "Deleted it."],
        calls,
        [],
    )
    alice = ToolContext(user_id="alice")
    run = await agent.run("delete old", context=alice)
    cid = run.pending[0].confirmation_id
    # Both read the confirmation before the workflow takes either (one event loop: each awaits its read
    # first), so both pass the check and send.
    outcomes = await asyncio.gather(
        agent.decide(cid, True, context=alice), agent.decide(cid, True, context=alice), return_exceptions=True
    )
    done = [o for o in outcomes if isinstance(o, AgentRun)]
    refused = [o for o in outcomes if isinstance(o, DecisionRefusedError)]
    assert len(done) == 1 and len(refused) == 1, outcomes
    assert refused[0].code == RunErrorCode.DECIDED_ELSEWHERE
    assert done[0].status == "completed" and calls == ["deleted old"]  # the one taken, once


async def test_a_denial_reaches_the_model_and_nothing_runs(dbos_db: None) -> None:
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


async def test_a_denial_s_reason_reaches_the_model(dbos_db: None) -> None:
    calls: list[str] = []
    agent = _agent(
        "notes_reason",
        [ToolCall(id="d1", name="delete_note", arguments={"text": "old"}), "Kept it."],
        calls,
        [],
    )
    u = ToolContext(user_id="u")
    run = await agent.run("delete old", context=u)
    reason = "Keep it: the auditors need it until March."
    done = await agent.resume(run, {run.pending[0].confirmation_id: Deny(reason=reason)}, context=u)
    assert done.status == "completed" and calls == []
    error = done.tool_calls[0].result.error
    assert error is not None and error.code == "CONFIRMATION_DENIED"
    seen = agent.model.inner.requests[-1].messages[-1].content
    assert reason in seen  # the model was told why


async def test_an_edited_approval_is_validated_then_runs_once_with_the_person_s_arguments(
    dbos_db: None,
) -> None:
    calls: list[str] = []
    agent = _agent(
        "notes_edit",
        [ToolCall(id="d1", name="delete_note", arguments={"text": "old"}), "Deleted the older one."],
        calls,
        [],
    )
    u = ToolContext(user_id="u")
    run = await agent.run("delete old", context=u)
    cid = run.pending[0].confirmation_id
    with pytest.raises(ValueError, match="refused, nothing was sent"):  # checked before anything is sent
        await agent.resume(run, {cid: Approve(arguments={"text": 5})}, context=u)
    with pytest.raises(ValueError, match="refused, nothing was sent"):
        await agent.resume(run, {cid: Approve(arguments={"text": "x", "extra": 1})}, context=u)
    assert (await agent.state(run.run_id))[1].status == "awaiting_confirmation"  # still waiting
    done = await agent.resume(run, {cid: Approve(arguments={"text": "older"})}, context=u)
    assert done.status == "completed", done.error
    assert calls == ["deleted older"]  # the person's arguments, once
    told = agent.model.inner.requests[-1].messages[-1].content
    assert "older" in told
    steps = [s["function_name"] for s in await DBOS.list_workflow_steps_async(run.run_id)]
    assert "toolrun.confirmation.preview_edit" in steps  # checked again inside the workflow, as a step
    with pytest.raises(ValueError, match="not waiting"):
        await agent.resume(run, {cid: Approve(arguments={"text": "oldest"})}, context=u)
    assert calls == ["deleted older"]


async def test_stream_yields_live_events_of_the_workflow(dbos_db: None) -> None:
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


async def test_the_agent_keeps_the_executor_it_was_given(dbos_db: None) -> None:
    """`agent.executor` is the caller's own `ToolExecutor`, not a stand-in for it: the loop's calls reach it
    as steps through the agent, and what other code reads off `agent.executor` is the executor's."""
    calls: list[str] = []
    executor = ToolExecutor(_notes(calls, []))
    agent = DurableAgent(
        ScriptedModel([ToolCall(id="c1", name="add_note", arguments={"text": "tea"}), "Saved."]),
        executor=executor,
        name="own_executor",
    )
    assert agent.executor is executor
    run = await agent.run("note tea", context=ToolContext(user_id="u1"))
    assert run.status == "completed", run.error
    assert calls == ["tea"]
    steps = [s["function_name"] for s in await DBOS.list_workflow_steps_async(run.run_id)]
    assert "toolrun.tool:add_note" in steps


async def test_stop_cancels_the_workflow_and_the_call_in_flight(dbos_db: None) -> None:
    """`DurableAgent.stop(run_id)`: DBOS cancels the workflow (no step starts again) and the tool call in
    flight here is cancelled; the model is not asked again. An unknown run is a KeyError."""
    import asyncio

    started, cancelled = asyncio.Event(), asyncio.Event()
    registry = ToolRegistry()

    @registry.register
    @tool
    async def slow_report(topic: str) -> str:
        """Write a long report."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    model = ScriptedModel([ToolCall(id="s1", name="slow_report", arguments={"topic": "x"}), "Done."])
    agent = DurableAgent(model, registry, name="stopper")
    try:
        run_id = await agent.start("report", context=ToolContext(user_id="u"))
        await asyncio.wait_for(started.wait(), 20)
        assert await agent.stop(run_id) is True
        await asyncio.wait_for(cancelled.wait(), 10)
        status = await DBOS.get_workflow_status_async(run_id)
        assert status is not None and status.status == "CANCELLED"
        assert len(model.requests) == 1  # the model was not asked about the cancelled call
        with pytest.raises(KeyError):
            await agent.stop("run_nope")
    finally:
        agent.release()


def test_planner_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="native"):
        DurableAgent(ScriptedModel(["x"]), ToolRegistry(), name="p", mode="planner")


async def test_a_second_agent_of_a_name_in_use_is_refused(dbos_db: None) -> None:
    """The name routes the workflow: a second agent of a name in use is an error, and the first keeps its
    runs; once the first is dropped (its app gone), the name is free for a new agent."""
    first = _agent("dup_a", ["from the first"], [], [])
    with pytest.raises(DurableAgentExistsError, match="'dup_a' already exists") as refused:
        _agent("dup_a", ["from the second"], [], [])
    assert isinstance(refused.value, ToolrunError) and refused.value.name == "dup_a"
    del refused  # its traceback holds both agents
    run = await first.run("hi", context=ToolContext(user_id="u1"))
    assert run.status == "completed", run.error
    assert run.output == "from the first"
    del first
    third = _agent("dup_a", ["from the third"], [], [])
    run = await third.run("hi", context=ToolContext(user_id="u1"))
    assert run.output == "from the third"
    third.release()  # as the service does when its app shuts down: the name is free though `third` lives
    fourth = _agent("dup_a", ["from the fourth"], [], [])
    assert (await fourth.run("hi", context=ToolContext(user_id="u1"))).output == "from the fourth"
    third.release()  # no longer the holder: nothing happens
    with pytest.raises(DurableAgentExistsError):
        _agent("dup_a", ["from a fifth"], [], [])


# --------------------------------------------------------------------------------------------------------
# Background jobs


async def _until(check: Any, timeout: float = 20) -> Any:
    """Poll an async check until it returns something truthy (observable state, not a sleep)."""
    import asyncio

    async with asyncio.timeout(timeout):
        while not (value := await check()):
            await asyncio.sleep(0.02)
    return value


def _job_agent(name: str, script: list[Any], url: str, *, limit: int = 5) -> tuple[DurableAgent, Any]:
    import asyncio

    gate = asyncio.Event()
    cancelled: list[int] = []
    registry = ToolRegistry()

    @registry.register
    @tool(background=True, timeout=30)
    async def crunch(n: int, *, ctx: ToolContext) -> dict[str, int]:
        """Crunch numbers for a long time."""
        await ctx.report_progress(1, total=2, message="halfway")
        try:
            await gate.wait()
        except asyncio.CancelledError:
            cancelled.append(n)
            raise
        return {"sum": n * 2}

    jobs = JobStore(url, max_running_per_user=limit)
    agent = DurableAgent(ScriptedModel(script), registry, name=name, jobs=jobs)
    return agent, (gate, cancelled, jobs)


async def test_a_background_tool_starts_a_job_whose_result_reaches_the_next_turn(
    dbos_db: None, system_db: str
) -> None:
    model_script = [
        ToolCall(id="j1", name="crunch", arguments={"n": 21}),
        "It has started.",
        "The sum is 42.",
    ]
    agent, (gate, _, jobs) = _job_agent("jobs_a", model_script, system_db)
    alice = ToolContext(user_id="alice", conversation_id="conv1")
    first = await agent.run("crunch 21", context=alice)
    assert first.status == "completed"
    value = first.tool_calls[0].result.value
    job_id = value["job_id"]
    assert value["status"] == "running"
    job = await _until(lambda: _job_with_progress(jobs, job_id))
    assert job["progress"] == {"progress": 1, "total": 2, "message": "halfway"}
    assert job["status"] == "running"
    assert await jobs.get(job_id, "mallory") is None  # someone else's job is not there
    assert [j["id"] for j in await jobs.list_jobs("alice")] == [job_id]
    gate.set()
    done = await _until(lambda: _job_in(jobs, job_id, "completed"))
    assert done["result"]["value"] == {"sum": 42}
    second = await agent.run([*first.messages, UserMessage(content="done yet?")], context=alice)
    assert second.output == "The sum is 42."
    notes = [m.content for m in second.messages if isinstance(m, UserMessage) and m.content.startswith("[")]
    assert notes == [f'[Background job {job_id} (crunch) completed] {{"sum":42}}']
    assert agent.model.inner.requests[-1].messages[-1].content == notes[0]  # the model saw it
    # delivered once: a later turn does not repeat it
    assert await jobs.take_finished("alice", "conv1") == []


async def test_a_cancelled_job_stops_its_tool(dbos_db: None, system_db: str) -> None:
    agent, (_, cancelled, jobs) = _job_agent(
        "jobs_b", [ToolCall(id="j1", name="crunch", arguments={"n": 1}), "started"], system_db
    )
    run = await agent.run("go", context=ToolContext(user_id="bob"))
    job_id = run.tool_calls[0].result.value["job_id"]
    await _until(lambda: _job_with_progress(jobs, job_id))
    assert await jobs.cancel(job_id, "mallory") is None  # not hers to cancel
    assert (await jobs.cancel(job_id, "bob"))["status"] == "cancelling"  # until its tool has stopped
    job = await _until(lambda: _job_with_result(jobs, job_id, "bob"))
    assert job["status"] == "cancelled"
    assert job["result"]["error"]["details"] == {"cancelled": True}
    assert cancelled == [1]


async def test_jobs_per_user_are_limited(dbos_db: None, system_db: str) -> None:
    calls = [
        ToolCall(id="j1", name="crunch", arguments={"n": 1}),
        ToolCall(id="j2", name="crunch", arguments={"n": 2}),
    ]
    agent, (gate, _, _jobs) = _job_agent("jobs_c", [calls, "ok"], system_db, limit=1)
    run = await agent.run("two", context=ToolContext(user_id="carol"))
    # the two starts race: exactly one gets the user's only slot, whichever it is
    results = sorted((r.result for r in run.tool_calls), key=lambda r: r.status)
    refused, started = results
    assert started.status == "ok"
    assert refused.error is not None
    assert refused.error.code == "RATE_LIMITED"
    assert len(await _jobs.list_jobs("carol")) == 1
    gate.set()
    job_id = started.value["job_id"]
    await _until(lambda: _job_with_result(_jobs, job_id, "carol"))


async def _job_with_progress(jobs: JobStore, job_id: str) -> Any:
    for job in await jobs.list_jobs("alice") + await jobs.list_jobs("bob"):
        if job["id"] == job_id and job["progress"]:
            return job
    return None


async def _job_in(jobs: JobStore, job_id: str, status: str) -> Any:
    job = await jobs.get(job_id, "alice")
    return job if job is not None and job["status"] == status and job["result"] else None


async def _job_with_result(jobs: JobStore, job_id: str, user: str) -> Any:
    job = await jobs.get(job_id, user)
    return job if job is not None and job["result"] else None


async def test_a_failing_model_request_fails_the_run_readably(dbos_db: None) -> None:
    from toolrun.models import ProviderUnavailableError

    agent = DurableAgent(
        ScriptedModel([ProviderUnavailableError("down", provider="x")]), ToolRegistry(), name="f"
    )
    try:
        run = await agent.run("hi")
    finally:
        agent.release()  # the name is free for the other parameter's agent, whatever the collector does
    assert run.status == "failed"
    assert run.error is not None
    assert "ProviderUnavailableError" in run.error


def test_async_database_urls_become_dbos_urls() -> None:
    from toolrun.integrations.dbos import sync_url

    assert sync_url("postgresql+asyncpg://u:p@h:5432/db") == "postgresql+psycopg://u:p@h:5432/db"
    assert sync_url("postgresql://u:p@h:5432/db") == "postgresql+psycopg://u:p@h:5432/db"
    assert sync_url("sqlite+aiosqlite:///./x.db") == "sqlite:///./x.db"
    assert dbos_config("sqlite+aiosqlite:///x.db", executor_id="w1")["executor_id"] == "w1"


@pytest.mark.parametrize("value", ["no", "yes", 1, {"approve": False}, ("deny", "why"), None])
def test_a_durable_decision_is_a_boolean_or_refused(value: object) -> None:
    """The truthy-approval rule holds at this door too: "no" or a dict never approves; nothing is sent."""
    from toolrun.agent import Approve, Deny
    from toolrun.approvals._decisions import encode_decision as _decision

    with pytest.raises(ValueError, match="must be True"):
        _decision("conf_1", value)
    assert _decision("conf_1", True) is True and _decision("conf_1", Approve()) is True
    assert _decision("conf_1", False) is False and _decision("conf_1", Deny()) is False
    # edits and reasons travel as JSON, and read back as the decisions they were
    from toolrun.approvals._decisions import decode_decision as _read_decision

    edit, reason = _decision("c", Approve(arguments={"text": "x"})), _decision("c", Deny(reason="keep it"))
    assert edit == {"approve": True, "arguments": {"text": "x"}}
    assert reason == {"approve": False, "reason": "keep it"}
    assert _read_decision(edit) == Approve(arguments={"text": "x"})
    assert _read_decision(reason) == Deny(reason="keep it")
    # a message that is neither (a forged one in the workflow's inbox) decides nothing
    for forged in (
        {"approve": "yes", "arguments": {}},
        {"approve": True},
        {"approve": False, "reason": 3},
        1,
        "yes",
    ):
        assert _read_decision(forged) is None
    with pytest.raises(ValueError, match="JSON"):
        _decision("c", Approve(arguments={"when": object()}))
