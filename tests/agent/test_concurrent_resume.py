"""Two resumes of one paused run at the same moment (a double click reaching two processes), in the library.

Each side is its own `Agent`, `ToolExecutor` and SQL confirmation store (its own engine) on one shared
database, SQLite file or PostgreSQL, as two processes of a team's own FastAPI app would be. A gate in
front of `consume` lets neither side consume before both have bound the run to the stored record, so the
race window is hit every time: the tool runs once, the winner completes, and the loser ends refused as a
later replay does (docs/agent-resume.md) — no model request, its run's history unchanged.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from servers import POSTGRES_URL
from toolrun import Agent, ToolCall, ToolContext, ToolExecutor, ToolRegistry, tool
from toolrun.agent import AgentRun, Approve, Deny
from toolrun.models import ScriptedModel
from toolrun.store import PendingConfirmation
from toolrun.store.sql import SQLConfirmationStore

HASH_KEY = b"concurrent-resume-test-key-0123456"
CTX = ToolContext(user_id="u1")
SCRIPT: list[Any] = [ToolCall(id="d1", name="delete_task", arguments={"task_id": "t1"}), "Done with t1."]


class BothBindFirst:
    """The real store, with `consume` held until both resumes reached it (both have bound the run)."""

    def __init__(self, store: SQLConfirmationStore, gate: asyncio.Barrier) -> None:
        self.store = store
        self.gate = gate

    async def add(self, pending: PendingConfirmation) -> None:
        await self.store.add(pending)

    async def get(self, confirmation_id: str) -> PendingConfirmation | None:
        return await self.store.get(confirmation_id)

    async def consume(self, confirmation_id: str, *, user_id: str) -> PendingConfirmation | None:
        await asyncio.wait_for(self.gate.wait(), 10)
        return await self.store.consume(confirmation_id, user_id=user_id)

    async def list_pending(self, user_id: str, *, now: float) -> list[PendingConfirmation]:
        return await self.store.list_pending(user_id, now=now)

    async def purge_expired(self, now: float) -> int:
        return await self.store.purge_expired(now)


@pytest.fixture(params=["sqlite", "postgresql"])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[list[SQLConfirmationStore]]:
    """Three stores (the pausing side and two resuming sides) on one database, each on its own engine."""
    prefix = f"cr{uuid.uuid4().hex[:12]}_"
    sqlite = f"sqlite+aiosqlite:///{tmp_path / 'toolrun.db'}"
    url = sqlite if request.param == "sqlite" else POSTGRES_URL  # PostgreSQL down fails, never skips
    opened = [SQLConfirmationStore(url, table_prefix=prefix) for _ in range(3)]
    await opened[0].create_tables()
    try:
        yield opened
    finally:
        await opened[0].drop_tables()
        for store in opened:
            await store.aclose()


def side(store: Any, runs: list[str]) -> tuple[Agent, ScriptedModel]:
    @tool(destructive=True)
    async def delete_task(task_id: str) -> dict[str, str]:
        """Delete a task permanently."""
        runs.append(task_id)
        return {"deleted": task_id}

    registry = ToolRegistry([delete_task])
    model = ScriptedModel(list(SCRIPT))
    executor = ToolExecutor(registry, confirmations=store, hash_key=HASH_KEY)
    return Agent(model, registry, executor=executor), model


DECISIONS = {
    "approve": (True, ["t1"]),
    "approve edited": (Approve(arguments={"task_id": "t1"}), ["t1"]),
    "deny": (Deny(reason="not now"), []),
}


@pytest.mark.parametrize("decision", DECISIONS, ids=DECISIONS)
async def test_two_resumes_at_once_run_the_tool_once_and_the_loser_is_refused(
    stores: list[SQLConfirmationStore], decision: str
) -> None:
    choice, ran = DECISIONS[decision]
    runs: list[str] = []
    pauser, _ = side(stores[0], runs)
    paused = await pauser.run("Delete task t1.", context=CTX)
    assert paused.status == "awaiting_confirmation"
    signed = pauser.dump_run(paused)

    gate = asyncio.Barrier(2)
    (agent_a, model_a), (agent_b, model_b) = (side(BothBindFirst(s, gate), runs) for s in stores[1:])
    run_a, run_b = agent_a.load_run(signed), agent_b.load_run(signed)
    before = run_b.to_dict()
    approvals = {paused.pending[0].confirmation_id: choice}

    done = await asyncio.gather(
        agent_a.resume(run_a, approvals, context=CTX), agent_b.resume(run_b, approvals, context=CTX)
    )

    assert runs == ran  # the tool ran once (or never, denied)
    winner, loser = sorted(done, key=lambda r: r.status != "completed")
    assert winner.status == "completed" and winner.output == "Done with t1."
    assert loser.status == "failed", loser.status
    assert "decided by another resume" in (loser.error or "")
    assert loser.error_code == "decided_elsewhere"
    # The loser asked the model nothing and wrote nothing of a decision into its run: as a replay does.
    loser_model = model_a if loser is run_a else model_b
    assert list(loser_model.requests) == []
    after = loser.to_dict()
    for key in ("messages", "tool_calls", "pending", "batch", "output"):
        assert after[key] == before[key], key
    assert AgentRun.from_dict(after).tool_calls[0].result.status == "confirmation_required"


class HeldAfterBind:
    """The real store, with this side's second `get` (an edit's preview, after binding the run) held until
    `go` is set: the other resume decides the confirmation in between."""

    def __init__(self, store: SQLConfirmationStore, go: asyncio.Event) -> None:
        self.store = store
        self.go = go
        self.gets = 0
        self.bound = asyncio.Event()
        """Set once this side has read the record to bind the run."""

    async def add(self, pending: PendingConfirmation) -> None:
        await self.store.add(pending)

    async def get(self, confirmation_id: str) -> PendingConfirmation | None:
        self.gets += 1
        if self.gets == 2:
            await asyncio.wait_for(self.go.wait(), 10)
        try:
            return await self.store.get(confirmation_id)
        finally:
            self.bound.set()

    async def consume(self, confirmation_id: str, *, user_id: str) -> PendingConfirmation | None:
        return await self.store.consume(confirmation_id, user_id=user_id)

    async def list_pending(self, user_id: str, *, now: float) -> list[PendingConfirmation]:
        return await self.store.list_pending(user_id, now=now)

    async def purge_expired(self, now: float) -> int:
        return await self.store.purge_expired(now)


async def test_an_edit_overtaken_before_its_preview_is_refused_not_raised(
    stores: list[SQLConfirmationStore],
) -> None:
    runs: list[str] = []
    pauser, _ = side(stores[0], runs)
    paused = await pauser.run("Delete task t1.", context=CTX)
    signed = pauser.dump_run(paused)
    go = asyncio.Event()
    agent_a, _ = side(stores[1], runs)
    held = HeldAfterBind(stores[2], go)
    agent_b, model_b = side(held, runs)
    run_b = agent_b.load_run(signed)
    before = run_b.to_dict()
    edit = {paused.pending[0].confirmation_id: Approve(arguments={"task_id": "t1"})}

    async def first() -> AgentRun:
        await asyncio.wait_for(held.bound.wait(), 10)  # B has bound the run to the record
        try:
            return await agent_a.resume(agent_a.load_run(signed), edit, context=CTX)
        finally:
            go.set()

    winner, loser = await asyncio.gather(first(), agent_b.resume(run_b, edit, context=CTX))

    assert runs == ["t1"]
    assert winner.status == "completed"
    assert loser.status == "failed" and "decided by another resume" in (loser.error or "")
    assert list(model_b.requests) == []
    after = loser.to_dict()
    for key in ("messages", "tool_calls", "pending", "batch", "output"):
        assert after[key] == before[key], key
