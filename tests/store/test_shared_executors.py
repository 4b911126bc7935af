"""Two `ToolExecutor`s sharing one store, as two server processes would: each has its own engine or client.

Confirmations: one executor asks, the other approves; the tool runs exactly once, even when both approve
at the same moment. Rate limits: together the executors never let more calls through than the limit.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from toolrun import ErrorCode, ToolCall, ToolContext, ToolExecutor, ToolRegistry, tool
from toolrun.store import ConfirmationStore, RateLimitStore

from .conftest import delete_redis_prefix, open_postgres, open_redis, unique

HASH_KEY = b"shared-deployment-key-0123456789"
"""Processes sharing a confirmation store must share the argument-hash key."""
CTX = ToolContext(user_id="u1")
RACES = 10
"""Confirmations each approved through both executors at the same moment."""
CALLS = 30
"""Calls sent at once, half through each executor, at a limit of `LIMIT` per hour."""
LIMIT = 5


def make_registry(runs: list[str]) -> ToolRegistry:
    @tool(destructive=True)
    async def delete_task(task_id: str) -> dict[str, str]:
        """Delete a task permanently."""
        runs.append(task_id)
        return {"deleted": task_id}

    @tool(rate_limit=f"{LIMIT}/hour")
    async def search(query: str) -> list[str]:
        """Search tasks."""
        runs.append(query)
        return [query]

    return ToolRegistry([delete_task, search])


def delete_call(task_id: str) -> ToolCall:
    return ToolCall(id=f"call_{task_id}", name="delete_task", arguments=json.dumps({"task_id": task_id}))


Opener = Callable[[], Any]


@pytest.fixture(params=["postgresql", "redis"])
async def open_stores(request: pytest.FixtureRequest) -> AsyncIterator[Opener]:
    """Opens store sets on one shared state (tables or keys), each on its own engine / client."""
    opened: list[Any] = []
    if request.param == "postgresql":
        prefix = unique("t") + "_"
        first = await open_postgres(prefix)
        await first.create_tables()
        opened.append(first)

        async def opener() -> Any:
            stores = await open_postgres(prefix)
            opened.append(stores)
            return stores

    else:
        prefix = unique("toolrun-test:") + ":"

        async def opener() -> Any:
            stores = await open_redis(prefix)
            opened.append(stores)
            return stores

    try:
        yield opener
    finally:
        if request.param == "postgresql":
            await opened[0].drop_tables()
        for stores in opened:
            await stores.aclose()
        if request.param == "redis":
            await delete_redis_prefix(prefix)


@pytest.fixture
async def two_executors(open_stores: Opener) -> AsyncIterator[tuple[ToolExecutor, ToolExecutor, list[str]]]:
    runs: list[str] = []
    registry = make_registry(runs)
    executors = []
    for _ in range(2):
        stores = await open_stores()
        confirmations: ConfirmationStore = stores.confirmations
        rate_limits: RateLimitStore = stores.rate_limits
        executors.append(
            ToolExecutor(registry, confirmations=confirmations, rate_limits=rate_limits, hash_key=HASH_KEY)
        )
    try:
        yield executors[0], executors[1], runs
    finally:
        for executor in executors:
            await executor.aclose()


async def test_asked_through_one_approved_through_the_other(
    two_executors: tuple[ToolExecutor, ToolExecutor, list[str]],
) -> None:
    a, b, runs = two_executors
    asked = await a.execute(delete_call("t1"), CTX)
    assert asked.status == "confirmation_required"
    assert asked.confirmation_id is not None
    assert runs == []
    assert [p.id for p in await b.pending_confirmations(CTX)] == [asked.confirmation_id]

    done = await b.approve(asked.confirmation_id, CTX)
    assert done.status == "ok", done.error
    assert done.value == {"deleted": "t1"}
    assert done.call_id == "call_t1"
    assert runs == ["t1"]

    again = await a.approve(asked.confirmation_id, CTX)  # single use, across processes
    assert again.error is not None and again.error.code == ErrorCode.CONFIRMATION_NOT_FOUND
    assert runs == ["t1"]
    assert await a.pending_confirmations(CTX) == []


async def test_an_edited_approval_in_the_other_process(
    two_executors: tuple[ToolExecutor, ToolExecutor, list[str]],
) -> None:
    a, b, runs = two_executors
    asked = await a.execute(delete_call("t2"), CTX)
    assert asked.confirmation_id is not None
    shown = await b.preview_edit(asked.confirmation_id, CTX, {"task_id": "t2b"})
    assert shown.status == "ok" and shown.value["changes"] == ['task_id: "t2" → "t2b"']
    done = await b.approve(asked.confirmation_id, CTX, arguments={"task_id": "t2b"})
    assert done.status == "ok", done.error
    assert runs == ["t2b"]
    again = await a.deny(asked.confirmation_id, CTX)  # used, across processes
    assert again.error is not None and again.error.code == ErrorCode.CONFIRMATION_NOT_FOUND


async def test_another_user_cannot_approve_through_the_other_process(
    two_executors: tuple[ToolExecutor, ToolExecutor, list[str]],
) -> None:
    a, b, runs = two_executors
    asked = await a.execute(delete_call("t3"), CTX)
    assert asked.confirmation_id is not None
    stolen = await b.approve(asked.confirmation_id, ToolContext(user_id="intruder"))
    assert stolen.error is not None and stolen.error.code == ErrorCode.CONFIRMATION_NOT_FOUND
    assert runs == []
    assert (await a.approve(asked.confirmation_id, CTX)).status == "ok"  # still there for its owner
    assert runs == ["t3"]


async def test_simultaneous_approvals_through_both_run_the_tool_once(
    two_executors: tuple[ToolExecutor, ToolExecutor, list[str]],
) -> None:
    a, b, runs = two_executors
    asked = [await a.execute(delete_call(f"r{i}"), CTX) for i in range(RACES)]
    ids = [r.confirmation_id for r in asked]
    assert all(ids)
    results = await asyncio.gather(*(executor.approve(cid, CTX) for cid in ids if cid for executor in (a, b)))
    ok = [r for r in results if r.status == "ok"]
    refused = [r for r in results if r.status != "ok"]
    assert len(ok) == RACES
    assert all(r.error is not None and r.error.code == ErrorCode.CONFIRMATION_NOT_FOUND for r in refused)
    assert sorted(runs) == sorted(f"r{i}" for i in range(RACES))  # each ran exactly once


async def test_a_different_hash_key_cannot_run_an_approval(open_stores: Opener) -> None:
    runs: list[str] = []
    registry = make_registry(runs)
    first, second = await open_stores(), await open_stores()
    a = ToolExecutor(registry, confirmations=first.confirmations, hash_key=HASH_KEY)
    b = ToolExecutor(
        registry, confirmations=second.confirmations, hash_key=b"another-key-9876543210-abcdefgh"
    )
    try:
        asked = await a.execute(delete_call("t4"), CTX)
        assert asked.confirmation_id is not None
        refused = await b.approve(asked.confirmation_id, CTX)
        # The arguments hash to something else under another key: the approval does not match.
        assert refused.error is not None and refused.error.code == ErrorCode.CONFIRMATION_DENIED
        assert runs == []
    finally:
        await a.aclose()
        await b.aclose()


async def test_a_shared_rate_limit_holds_across_executors(
    two_executors: tuple[ToolExecutor, ToolExecutor, list[str]],
) -> None:
    a, b, runs = two_executors
    calls = [
        (a if i % 2 else b).execute(ToolCall(id=f"s{i}", name="search", arguments='{"query": "x"}'), CTX)
        for i in range(CALLS)
    ]
    results = await asyncio.gather(*calls)
    ok = [r for r in results if r.status == "ok"]
    limited = [r for r in results if r.error is not None and r.error.code == ErrorCode.RATE_LIMITED]
    assert len(ok) == LIMIT
    assert len(limited) == CALLS - LIMIT
    assert len(runs) == LIMIT
    # The next token comes back in about period / limit = 720 s.
    assert all(700 < r.error.details["retry_after"] <= 720 for r in limited if r.error is not None)
    # Another user has a bucket of their own, in both processes.
    other = await b.execute(
        ToolCall(id="s_other", name="search", arguments='{"query": "y"}'), ToolContext(user_id="u2")
    )
    assert other.status == "ok"
