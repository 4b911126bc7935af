"""`Agent.decide`: a confirmation decided by id, from any process, with the paused run kept in a run store.

Each "process" is its own `Agent`, `ToolExecutor` and stores (on SQLite, PostgreSQL and Redis: its own
engine or client on one database), sharing only the database and the hash key, as two workers of a team's
app do. The tool counts its runs; every refusal is matched by its code.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from servers import POSTGRES_URL, REDIS_URL
from toolrun import Agent, ErrorCode, ToolCall, ToolContext, ToolExecutor, ToolRegistry, tool
from toolrun.agent import (
    AgentRun,
    Approve,
    DecisionRefusedError,
    Deny,
    InvalidDecisionError,
    RunErrorCode,
    RunFinished,
    TextDelta,
    ToolCallFinished,
)
from toolrun.models import ScriptedModel, ToolResultMessage
from toolrun.store import InMemoryConfirmationStore, InMemoryRunStore
from toolrun.store.redis import create_redis_stores
from toolrun.store.sql import SQLStores, create_sql_stores

HASH_KEY = b"decide-test-key-0123456789abcdef"
U1, U2 = ToolContext(user_id="u1"), ToolContext(user_id="u2")


class Side:
    """One process: its tool, agent and stores."""

    def __init__(self, stores: Any, script: list[Any], ran: list[str], gate: asyncio.Event | None) -> None:
        @tool(destructive=True)
        async def delete_task(task_id: str) -> dict[str, str]:
            """Delete a task permanently."""
            ran.append(task_id)
            if gate is not None:
                await gate.wait()
            return {"deleted": task_id}

        registry = ToolRegistry([delete_task])
        self.executor = ToolExecutor(registry, confirmations=stores.confirmations, hash_key=HASH_KEY)
        self.model = ScriptedModel(script)
        self.agent = Agent(self.model, registry, executor=self.executor, runs=stores.runs)


class MemoryStores:
    def __init__(self) -> None:
        self.confirmations = InMemoryConfirmationStore()
        self.runs = InMemoryRunStore()


Factory = Callable[..., Side]


@pytest.fixture(params=["memory", "sqlite", "postgresql", "redis"])
async def make(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Factory]:
    """`make(script, ran, gate=None)`: a new process's side on the one shared state of this backend."""
    opened: list[Any] = []
    memory = MemoryStores()
    prefix = f"d{uuid.uuid4().hex[:12]}_"
    url = f"sqlite+aiosqlite:///{tmp_path / 'app.db'}" if request.param == "sqlite" else POSTGRES_URL

    def factory(script: list[Any], ran: list[str], gate: asyncio.Event | None = None) -> Side:
        if request.param == "memory":
            return Side(memory, script, ran, gate)
        if request.param == "redis":
            redis_stores = create_redis_stores(REDIS_URL, key_prefix=f"toolrun-test:{prefix}")
            opened.append(redis_stores)
            return Side(redis_stores, script, ran, gate)
        stores = create_sql_stores(url, table_prefix=prefix)
        opened.append(stores)
        return Side(stores, script, ran, gate)

    first: SQLStores | None = None
    if request.param in ("sqlite", "postgresql"):
        first = create_sql_stores(url, table_prefix=prefix)
        await first.create_tables()  # PostgreSQL down: fails, never skips
        opened.append(first)
    try:
        yield factory
    finally:
        if first is not None:
            await first.drop_tables()
        for stores in opened:
            await stores.aclose()
        if request.param == "redis":
            await delete_redis_prefix(f"toolrun-test:{prefix}")


async def delete_redis_prefix(prefix: str) -> None:
    client = Redis.from_url(REDIS_URL)
    try:
        keys = [key async for key in client.scan_iter(match=prefix + "*", count=500)]
        if keys:
            await client.unlink(*keys)
    finally:
        await client.aclose()


def delete(task: str = "t1", call_id: str = "d1") -> ToolCall:
    return ToolCall(id=call_id, name="delete_task", arguments={"task_id": task})


# The model's turns, by position in the conversation (every process plays the same script).
GONE: list[Any] = [delete(), "Task t1 is gone."]


async def paused_run(make: Factory, ran: list[str], ctx: ToolContext[Any] = U1) -> AgentRun:
    """Process A: run until the destructive call pauses the run (kept in the run store)."""
    run = await make(GONE, ran).agent.run("Delete task t1", context=ctx)
    assert run.status == "awaiting_confirmation" and ran == []
    return run


async def test_approved_from_another_process_runs_once_and_a_second_decision_is_refused(
    make: Factory,
) -> None:
    ran: list[str] = []
    run = await paused_run(make, ran)
    cid = run.pending[0].confirmation_id
    b = make(GONE, ran)  # another process: it never saw the run
    done = await b.agent.decide(cid, True, context=U1)
    assert (done.status, done.output, done.run_id) == ("completed", "Task t1 is gone.", run.run_id)
    assert ran == ["t1"]
    c = make(GONE, ran)
    with pytest.raises(DecisionRefusedError) as refused:
        await c.agent.decide(cid, True, context=U1)
    assert refused.value.code == RunErrorCode.CONFIRMATION_UNKNOWN
    assert refused.value.confirmation_id == cid
    assert ran == ["t1"] and not c.model.requests


async def test_another_users_decision_is_refused_and_leaves_the_run_to_its_user(make: Factory) -> None:
    ran: list[str] = []
    run = await paused_run(make, ran)
    cid = run.pending[0].confirmation_id
    b = make(GONE, ran)
    for intruder in (U2, ToolContext(), None):
        with pytest.raises(DecisionRefusedError) as refused:
            await b.agent.decide(cid, True, context=intruder)
        assert refused.value.code == RunErrorCode.CONFIRMATION_UNKNOWN
    assert ran == [] and not b.model.requests
    done = await b.agent.decide(cid, True, context=U1)
    assert done.status == "completed" and ran == ["t1"]


async def test_an_unknown_confirmation_is_refused(make: Factory) -> None:
    ran: list[str] = []
    b = make(GONE, ran)
    with pytest.raises(DecisionRefusedError) as refused:
        await b.agent.decide("conf_nothing", True, context=U1)
    assert refused.value.code == "confirmation_unknown"  # a str enum: matches its text too


async def test_two_decisions_at_once_one_goes_on_the_other_is_refused(make: Factory) -> None:
    ran: list[str] = []
    run = await paused_run(make, ran)
    cid = run.pending[0].confirmation_id
    gate = asyncio.Event()  # the winner's tool waits here until the loser has been refused
    sides = [make(GONE, ran, gate) for _ in range(2)]
    tasks = [asyncio.ensure_future(s.agent.decide(cid, True, context=U1)) for s in sides]
    first, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    loser = first.pop()
    error = loser.exception()
    assert isinstance(error, DecisionRefusedError) and error.code == RunErrorCode.DECIDED_ELSEWHERE
    gate.set()
    (winner,) = [t for t in tasks if t is not loser]
    done = await winner
    assert done.status == "completed" and ran == ["t1"]
    assert [len(s.model.requests) for s in sides].count(0) == 1  # the loser never asked the model


async def test_a_denial_reaches_the_model_and_the_run_ends(make: Factory) -> None:
    ran: list[str] = []
    run = await paused_run(make, ran)
    b = make([delete(), "Kept t1."], ran)
    done = await b.agent.decide(run.pending[0].confirmation_id, Deny(reason="not that one"), context=U1)
    assert done.status == "completed" and ran == []
    told = b.model.requests[0].messages[-1]
    assert "not that one" in str(told.to_dict())
    with pytest.raises(DecisionRefusedError):
        await b.agent.decide(run.pending[0].confirmation_id, True, context=U1)


async def test_a_run_that_pauses_again_is_kept_for_the_next_decision(make: Factory) -> None:
    ran: list[str] = []
    script = [delete("t1", "d1"), delete("t2", "d2"), "Both gone."]
    run = await make(script, ran).agent.run("Delete t1, then t2", context=U1)
    b = make(script, ran)
    again = await b.agent.decide(run.pending[0].confirmation_id, True, context=U1)
    assert again.status == "awaiting_confirmation" and ran == ["t1"]
    c = make(script, ran)
    done = await c.agent.decide(again.pending[0].confirmation_id, Approve(), context=U1)
    assert (done.status, done.output, ran) == ("completed", "Both gone.", ["t1", "t2"])


async def test_one_of_two_held_calls_decided_the_run_waits_for_the_other(make: Factory) -> None:
    ran: list[str] = []
    script: list[Any] = [[delete("t1", "d1"), delete("t2", "d2")], "Done."]
    run = await make(script, ran).agent.run("Delete t1 and t2", context=U1)
    first, second = (p.confirmation_id for p in run.pending)
    b = make(script, ran)
    waiting = await b.agent.decide(first, True, context=U1)
    assert waiting.status == "awaiting_confirmation" and [p.confirmation_id for p in waiting.pending] == [
        second
    ]
    assert ran == ["t1"]
    with pytest.raises(DecisionRefusedError):
        await b.agent.decide(first, True, context=U1)
    done = await b.agent.decide(second, False, context=U1)
    assert done.status == "completed" and ran == ["t1"]


async def test_an_edit_the_tool_refuses_runs_nothing_and_the_run_still_waits(make: Factory) -> None:
    ran: list[str] = []
    run = await paused_run(make, ran)
    cid = run.pending[0].confirmation_id
    b = make([delete(), "Task t9 is gone."], ran)
    with pytest.raises(ValueError, match="refused"):
        await b.agent.decide(cid, Approve(arguments={"task_id": 5}), context=U1)
    assert ran == []
    done = await b.agent.decide(cid, Approve(arguments={"task_id": "t9"}), context=U1)
    assert done.status == "completed" and ran == ["t9"]


async def test_a_decision_that_is_no_decision_is_refused_before_the_store(make: Factory) -> None:
    ran: list[str] = []
    run = await paused_run(make, ran)
    b = make(GONE, ran)
    with pytest.raises(InvalidDecisionError):
        await b.agent.decide(run.pending[0].confirmation_id, "yes", context=U1)  # type: ignore[arg-type]
    done = await make(GONE, ran).agent.decide(run.pending[0].confirmation_id, True, context=U1)
    assert done.status == "completed" and ran == ["t1"]


async def test_stream_decide_yields_the_continued_runs_events(make: Factory) -> None:
    ran: list[str] = []
    run = await paused_run(make, ran)
    b = make(GONE, ran)
    events = [e async for e in b.agent.stream_decide(run.pending[0].confirmation_id, True, context=U1)]
    assert isinstance(events[0], ToolCallFinished) and events[0].result.status == "ok"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Task t1 is gone."
    assert isinstance(events[-1], RunFinished) and events[-1].run.status == "completed"
    again = b.agent.stream_decide(run.pending[0].confirmation_id, True, context=U1)
    with pytest.raises(DecisionRefusedError):
        await anext(again)  # a refused decision yields nothing: it raises at the first event


async def test_a_decision_cut_short_puts_the_run_back(make: Factory) -> None:
    ran: list[str] = []
    run = await paused_run(make, ran)
    cid = run.pending[0].confirmation_id
    b = make(GONE, ran)
    stream = b.agent.stream_decide(cid, Approve(arguments={"task_id": 5}), context=U1)
    with pytest.raises(ValueError):
        await anext(stream)
    done = await make(GONE, ran).agent.decide(cid, True, context=U1)  # not held by the cut one
    assert done.status == "completed" and ran == ["t1"]


async def stopped_decider(make: Factory, ran: list[str], run: AgentRun, approve: str | None) -> None:
    """A process that claimed the run to decide it and was killed: its claim has lapsed, and it had
    approved and started the call of confirmation `approve` (None: it stopped before that)."""
    dead = make(GONE, ran)
    assert dead.agent.runs is not None
    cid = run.pending[0].confirmation_id
    held = await dead.agent.runs.claim(
        cid, user_id="u1", token="dead", until=time.time() - 1, now=time.time()
    )
    assert held is not None
    if approve is not None:
        await dead.executor.approve(approve, U1.evolve(run_id=run.run_id))


async def test_a_decision_after_its_decider_stopped_mid_call_closes_the_run_may_have_run(
    make: Factory,
) -> None:
    ran: list[str] = []
    run = await paused_run(make, ran)
    cid = run.pending[0].confirmation_id
    await stopped_decider(make, ran, run, approve=cid)
    assert ran == ["t1"]  # it ran there; nothing was kept of its result
    b = make(GONE, ran)
    done = await b.agent.decide(cid, True, context=U1)  # the person, clicking again
    assert (done.status, done.error_code) == ("failed", RunErrorCode.DECISION_INTERRUPTED)
    assert ran == ["t1"] and not b.model.requests  # nothing ran again, no model request
    (held,) = [r.result for r in done.tool_calls if r.call.id == "d1"]
    assert held.error is not None and held.error.code == ErrorCode.RESULT_UNKNOWN
    assert "may or may not have taken effect" in held.error.message
    last = done.messages[-1]
    assert isinstance(last, ToolResultMessage) and last.call_id == "d1"  # the history is whole
    with pytest.raises(DecisionRefusedError) as refused:
        await make(GONE, ran).agent.decide(cid, True, context=U1)
    assert refused.value.code == RunErrorCode.CONFIRMATION_UNKNOWN  # closed: nothing waits any more


async def test_a_decision_after_its_decider_stopped_before_the_call_goes_on(make: Factory) -> None:
    ran: list[str] = []
    run = await paused_run(make, ran)
    await stopped_decider(make, ran, run, approve=None)
    done = await make(GONE, ran).agent.decide(run.pending[0].confirmation_id, True, context=U1)
    assert (done.status, done.output, ran) == ("completed", "Task t1 is gone.", ["t1"])


async def test_a_stopped_deciders_other_held_call_is_withdrawn_and_said_not_run(make: Factory) -> None:
    ran: list[str] = []
    script: list[Any] = [[delete("t1", "d1"), delete("t2", "d2")], "Done."]
    a = make(script, ran)
    run = await a.agent.run("Delete t1 and t2", context=U1)
    first, second = (p.confirmation_id for p in run.pending)
    await stopped_decider(make, ran, run, approve=first)
    done = await make(script, ran).agent.decide(second, True, context=U1)
    assert done.error_code == RunErrorCode.DECISION_INTERRUPTED and ran == ["t1"]
    codes = {r.call.id: r.result.error.code for r in done.tool_calls if r.result.error is not None}
    assert codes == {"d1": ErrorCode.RESULT_UNKNOWN, "d2": ErrorCode.CONFIRMATION_EXPIRED}
    late = await a.executor.approve(second, U1.evolve(run_id=run.run_id))  # withdrawn: nothing can take it
    assert late.error is not None and late.error.code == ErrorCode.CONFIRMATION_NOT_FOUND and ran == ["t1"]


async def test_the_conversation_of_the_pause_is_the_decisions(make: Factory) -> None:
    ran: list[str] = []
    ctx = ToolContext(user_id="u1", conversation_id="conv_9")
    run = await paused_run(make, ran, ctx)
    done = await make(GONE, ran).agent.decide(run.pending[0].confirmation_id, True, context=U1)
    assert done.status == "completed" and ran == ["t1"]


async def test_resume_keeps_the_store_in_step(make: Factory) -> None:
    ran: list[str] = []
    a = make(GONE, ran)
    run = await a.agent.run("Delete task t1", context=U1)
    cid = run.pending[0].confirmation_id
    done = await a.agent.resume(run, {cid: True}, context=U1)
    assert done.status == "completed"
    assert a.agent.runs is not None and await a.agent.runs.find(cid, user_id="u1") is None


async def test_decide_needs_a_run_store() -> None:
    agent = Agent(ScriptedModel(["x"]), ToolRegistry())
    with pytest.raises(ValueError, match="run store"):
        await agent.decide("conf_1", True, context=U1)


async def test_a_run_store_that_fails_refuses_the_decision_with_an_error_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Down(InMemoryRunStore):
        async def claim(self, *args: Any, **kwargs: Any) -> Any:
            raise ConnectionError("-".join(["secret", "detail"]))  # not in the traceback's source lines

    ran: list[str] = []
    side = Side(MemoryStores(), GONE, ran, None)
    side.agent.runs = Down()
    with pytest.raises(DecisionRefusedError) as refused:
        await side.agent.decide("conf_x", True, context=U1)
    assert refused.value.code == RunErrorCode.STORE_UNAVAILABLE and ran == []
    error_id = str(refused.value).split("error id ")[1].split(")")[0]
    logged = [r for r in caplog.records if error_id in r.getMessage()]
    assert logged and "the run store failed" in logged[0].getMessage()
    assert "secret-detail" not in caplog.text  # the executor does not log exception messages by default
    assert "ConnectionError: [message redacted by toolrun]" in caplog.text
