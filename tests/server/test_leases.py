"""Conversation leases in one process: the heartbeat keeps a long run's conversation, a run that lost its
lease writes nothing, and what a closed run's held calls say for each record of their confirmation."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from toolrun import ToolCall, tool
from toolrun.models import FunctionModel, Message, ModelResponse, ToolResultMessage
from toolrun.server import _db, _recovery

from .conftest import Service, make_service, sqlite_settings

LEASE = 0.3


class Gate:
    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = False


@pytest.fixture
async def gated(tmp_path: Path) -> AsyncIterator[tuple[Service, Gate]]:
    gate = Gate()

    @tool
    async def wait_here() -> str:
        """Wait until released."""
        gate.started.set()
        try:
            await gate.release.wait()
        except asyncio.CancelledError:
            gate.cancelled = True
            raise
        return "released"

    def script(messages: list[Message], tools: Any) -> Any:
        if isinstance(messages[-1], ToolResultMessage):
            return "all done"
        if messages[-1].content != "go":  # type: ignore[union-attr]
            return "hi"
        return ModelResponse(text="On it.", tool_calls=[ToolCall(id="g1", name="wait_here", arguments="{}")])

    settings = sqlite_settings(tmp_path, lease_seconds=LEASE)
    async for s in make_service(settings, model=FunctionModel(script, name="gated"), extra_tools=[wait_here]):
        yield s, gate


async def _scalar(service: Service, query: str, **params: Any) -> Any:
    async with service.state.engine.connect() as conn:
        return (await conn.execute(sa.text(query), params)).scalar()


async def test_the_heartbeat_keeps_a_run_longer_than_its_lease(gated: tuple[Service, Gate]) -> None:
    service, gate = gated
    a = service.alice
    conv = (await a.chat("hello"))["conversation_id"]
    running = asyncio.create_task(
        a.http.post("/api/v1/chat", json={"message": "go", "conversation_id": conv})
    )
    await asyncio.wait_for(gate.started.wait(), 10)
    first = await _scalar(service, "SELECT lease_until FROM toolrun_conversations")
    deadline = time.time() + 10
    while await _scalar(service, "SELECT lease_until FROM toolrun_conversations") == first:
        assert time.time() < deadline, "the lease was never renewed"
        await asyncio.sleep(0.02)
    await asyncio.sleep(LEASE * 2)  # well past the first lease: still held
    busy = await a.http.post("/api/v1/chat", json={"message": "again", "conversation_id": conv})
    assert busy.status_code == 409 and busy.json()["code"] == "conversation_busy"
    partial = await _scalar(service, "SELECT partial FROM toolrun_runs WHERE status = 'running'")
    assert partial == "On it."
    gate.release.set()
    done = (await running).json()
    assert done["status"] == "completed" and done["output"] == "all done"
    assert await _scalar(service, "SELECT lease_owner FROM toolrun_conversations") is None
    assert await _scalar(service, "SELECT count(*) FROM toolrun_runs WHERE partial IS NOT NULL") == 0


async def test_a_run_that_lost_its_lease_stops_and_writes_nothing(gated: tuple[Service, Gate]) -> None:
    service, gate = gated
    a = service.alice
    conv = (await a.chat("hello"))["conversation_id"]
    before = await _scalar(service, "SELECT count(*) FROM toolrun_messages")
    running = asyncio.create_task(
        a.http.post("/api/v1/chat", json={"message": "go", "conversation_id": conv})
    )
    await asyncio.wait_for(gate.started.wait(), 10)
    async with service.state.engine.begin() as conn:  # another process took the conversation over
        await conn.execute(
            sa.text("UPDATE toolrun_conversations SET lease_owner = 'run_other', lease_until = :t"),
            {"t": time.time() + 60},
        )
    reply = await asyncio.wait_for(running, 10)
    assert reply.status_code == 500 and "lost its conversation" in reply.json()["detail"]
    assert gate.cancelled  # the tool was stopped, not left running
    # only the user message of the cut run, written when it started; nothing after the takeover
    assert await _scalar(service, "SELECT count(*) FROM toolrun_messages") == before + 1
    assert await _scalar(service, "SELECT lease_owner FROM toolrun_conversations") == "run_other"


@pytest.mark.parametrize(
    ("state", "audit", "expected", "is_error"),
    [
        (
            "expired",
            None,
            "Error CONFIRMATION_EXPIRED: the user did not decide in time; the action did not run.",
            True,
        ),
        ("unknown", None, "Error RESULT_UNKNOWN: the server has no record", True),
        ("consumed", None, "Error RESULT_UNKNOWN: the user approved this action and it started", True),
        ("consumed", ("approve", "ok", None), "The user approved this action and it ran to the end", False),
        (
            "consumed",
            ("approve", "error", "TIMEOUT"),
            "Error TIMEOUT: the user approved this action and it ran",
            True,
        ),
        (
            "consumed",
            ("deny", "error", "CONFIRMATION_DENIED"),
            "Error CONFIRMATION_DENIED: the user declined",
            True,
        ),
        (
            "consumed",
            ("execute", "confirmation_required", None),
            "Error RESULT_UNKNOWN: the user approved",
            True,
        ),
    ],
)
async def test_a_held_call_result_says_what_the_records_show(
    tmp_path: Path, state: str, audit: tuple[str, str, str | None] | None, expected: str, is_error: bool
) -> None:
    async for service in make_service(sqlite_settings(tmp_path)):
        async with service.state.engine.begin() as conn:
            if audit is not None:
                for user in ("mallory", "u1"):  # another user's record of the same id does not count
                    await conn.execute(
                        _db.audit.insert().values(
                            timestamp=time.time(),
                            action=audit[0] if user == "u1" else "approve",
                            tool="wipe",
                            call_id="c1",
                            user_id=user,
                            outcome=audit[1] if user == "u1" else "ok",
                            code=audit[2],
                            duration_ms=1.0,
                            attempts=1,
                            cached=False,
                            confirmation_id="conf_1",
                        )
                    )
            call = ToolCall(id="c1", name="wipe", arguments=json.dumps({}))
            message = await _recovery.held_call_result(conn, call, "conf_1", state, "u1")
        assert message.content.startswith(expected) and message.is_error is is_error
        assert message.call_id == "c1" and message.tool_name == "wipe"


async def test_confirmation_states_come_from_the_store(service: Service) -> None:
    a = service.alice
    task = json.loads((await a.chat("add Keep"))["messages"][-2]["content"])
    paused = await a.chat(f"delete {task['id']}")
    cid = paused["pending"][0]["confirmation_id"]
    store = service.state.chat.confirmations
    now = time.time()
    assert await _recovery.confirmation_state(store, cid, now) == "pending"
    assert await _recovery.confirmation_state(store, cid, now + 10_000) == "expired"
    assert await store.consume(cid, user_id=a.user_id) is not None
    assert await _recovery.confirmation_state(store, cid, now) == "consumed"
    assert await store.consume(cid, user_id=a.user_id) is None  # single use, still
    assert await _recovery.confirmation_state(store, "conf_nope", now) == "unknown"
