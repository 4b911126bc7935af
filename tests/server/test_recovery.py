"""`server/_recovery` on a real SQLite database: a run a crash cut is closed with what it had said so far,
only in its own conversation and never the claiming run; a held call says what the records show."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from toolrun import ToolCall, ToolResult
from toolrun.agent import AgentRun
from toolrun.agent._run import ToolCallRecord
from toolrun.server import _db, _recovery
from toolrun.store import PendingConfirmation
from toolrun.store.sql import SQLConfirmationStore

NOW = 1_234.5


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path}/recovery.db")
    async with engine.begin() as conn:
        await conn.run_sync(_db.metadata.create_all)
    yield engine
    await engine.dispose()


def run_row(run_id: str, conversation: str, status: str, partial: str | None) -> dict[str, Any]:
    return {
        "id": run_id,
        "user_id": "u1",
        "conversation_id": conversation,
        "status": status,
        "model": "m",
        "partial": partial,
        "created_at": 1.0,
        "updated_at": 2.0,
    }


def message_row(conversation: str, seq: int) -> dict[str, Any]:
    return {
        "conversation_id": conversation,
        "user_id": "u1",
        "run_id": "r0",
        "seq": seq,
        "role": "user",
        "data": "{}",
        "created_at": 1.0,
    }


async def test_stale_runs_of_the_conversation_are_interrupted_and_their_partial_answers_kept(
    engine: AsyncEngine,
) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            _db.runs.insert(),
            [
                run_row("r1", "c1", "running", "half an answer"),
                run_row("r2", "c1", "running", None),
                run_row("r3", "c1", "running", "also cut"),
                run_row("owner", "c1", "running", "mine"),  # the run now claiming the conversation
                run_row("r4", "c1", "completed", "done"),
                run_row("r5", "c2", "running", "other conversation"),
            ],
        )
        await conn.execute(_db.messages.insert(), [message_row("c1", 0), message_row("c1", 1)])
        await _recovery.interrupt_stale_runs(conn, "c1", "u1", "owner", NOW)
        runs = {
            row.id: (row.status, row.error, row.partial, row.updated_at)
            for row in (await conn.execute(sa.select(_db.runs))).all()
        }
        added = (await conn.execute(sa.select(_db.messages).where(_db.messages.c.seq >= 2))).all()
    cut = ("interrupted", _recovery.INTERRUPTED, None, NOW)
    assert runs == {
        "r1": cut,
        "r2": cut,
        "r3": cut,
        "owner": ("running", None, "mine", 2.0),
        "r4": ("completed", None, "done", 2.0),
        "r5": ("running", None, "other conversation", 2.0),
    }
    assert _recovery.INTERRUPTED == "The server stopped while this run was working."
    assert sorted((m.seq, m.run_id, m.role, m.user_id, m.created_at) for m in added) == [
        (2, "r1", "assistant", "u1", NOW),
        (3, "r3", "assistant", "u1", NOW),
    ]
    by_run = {m.run_id: json.loads(m.data) for m in added}
    assert by_run["r1"] == _recovery.interrupted_message("half an answer")
    assert by_run["r3"]["content"] == "also cut" and by_run["r3"]["interrupted"] is True


async def test_nothing_changes_without_a_stale_run_and_numbering_starts_at_zero(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        await conn.execute(_db.runs.insert(), [run_row("owner", "c1", "running", "mine")])
        await _recovery.interrupt_stale_runs(conn, "c1", "u1", "owner", NOW)
        assert await _recovery.next_seq(conn, "c1") == 0
        await conn.execute(_db.runs.insert(), [run_row("r1", "c1", "running", "cut")])
        await _recovery.interrupt_stale_runs(conn, "c1", "u1", "owner", NOW)
        [message] = (await conn.execute(sa.select(_db.messages))).all()
        assert message.seq == 0 and await _recovery.next_seq(conn, "c1") == 1
        assert await _recovery.next_seq(conn, "c2") == 0


def test_an_interrupted_message_is_an_assistant_message_flagged() -> None:
    stored = _recovery.interrupted_message("so far")
    assert stored["interrupted"] is True and stored["role"] == "assistant" and stored["content"] == "so far"


# ------------------------------------------------------------------------------------------------------
# confirmation states and held calls


def pending(cid: str, expires_at: float) -> PendingConfirmation:
    return PendingConfirmation(
        id=cid,
        user_id="u1",
        tool_name="wipe",
        arguments_hash="h",
        call={"id": "c1", "name": "wipe", "arguments": "{}"},
        summary="wipe",
        created_at=NOW,
        expires_at=expires_at,
    )


async def test_a_confirmation_is_pending_until_it_expires_consumed_once_taken(engine: AsyncEngine) -> None:
    store = SQLConfirmationStore(engine)
    await store.create_tables()
    await store.add(pending("conf_1", NOW + 10))
    assert await _recovery.confirmation_state(store, "conf_1", NOW + 9.9) == "pending"
    assert await _recovery.confirmation_state(store, "conf_1", NOW + 10) == "expired"
    assert await store.consume("conf_1", user_id="u1") is not None
    assert await _recovery.confirmation_state(store, "conf_1", NOW) == "consumed"
    assert await _recovery.confirmation_state(store, "conf_nope", NOW) == "unknown"


async def test_a_store_without_consumption_records_says_unknown(engine: AsyncEngine) -> None:
    from toolrun.store import InMemoryConfirmationStore

    store = InMemoryConfirmationStore()
    await store.add(pending("conf_1", NOW + 10))
    assert await store.consume("conf_1", user_id="u1") is not None
    assert await _recovery.confirmation_state(store, "conf_1", NOW) == "unknown"


async def audit_row(
    conn: Any,
    action: str,
    outcome: str,
    code: str | None,
    at: float,
    user: str = "u1",
    confirmation_id: str = "conf_1",
) -> None:
    await conn.execute(
        _db.audit.insert().values(
            timestamp=at,
            action=action,
            tool="wipe",
            call_id="c1",
            user_id=user,
            outcome=outcome,
            code=code,
            duration_ms=1.0,
            attempts=1,
            cached=False,
            confirmation_id=confirmation_id,
        )
    )


CALL = ToolCall(id="c1", name="wipe", arguments="{}")


@pytest.mark.parametrize(
    ("rows", "content", "is_error"),
    [
        (
            [("approve", "error", None, 1.0)],
            "Error EXECUTION_FAILED: the user approved this action and it ran, but it ended with "
            "EXECUTION_FAILED (error); the server stopped before its result was saved.",
            True,
        ),
        (
            [("approve", "error", "TIMEOUT", 1.0)],
            "Error TIMEOUT: the user approved this action and it ran, but it ended with TIMEOUT (error); "
            "the server stopped before its result was saved.",
            True,
        ),
        (
            [("approve", "ok", None, 1.0)],
            "The user approved this action and it ran to the end (the audit trail records it), but the "
            "server stopped before its result was saved: the result is not available.",
            False,
        ),
        (  # the latest record decides
            [("approve", "ok", None, 1.0), ("deny", "error", "CONFIRMATION_DENIED", 2.0)],
            "Error CONFIRMATION_DENIED: the user declined to run 'wipe'; it did not run.",
            True,
        ),
        (  # a held call's own `execute` record (confirmation_required) says nothing about the decision
            [("execute", "ok", None, 5.0)],
            "Error RESULT_UNKNOWN: the user approved this action and it started, but the server stopped "
            "before its result was saved: it may or may not have taken effect. Check before you try it "
            "again.",
            True,
        ),
    ],
)
async def test_a_consumed_confirmation_says_what_the_audit_trail_knows(
    engine: AsyncEngine, rows: list[tuple[str, str, str | None, float]], content: str, is_error: bool
) -> None:
    async with engine.begin() as conn:
        await audit_row(conn, "approve", "ok", None, 9.0, user="mallory")  # not this user's record
        await audit_row(conn, "deny", "error", "X", 9.0, confirmation_id="conf_2")  # another confirmation
        for row in rows:
            await audit_row(conn, *row)
        message = await _recovery.held_call_result(conn, CALL, "conf_1", "consumed", "u1")
    assert (message.content, message.is_error, message.call_id, message.tool_name) == (
        content,
        is_error,
        "c1",
        "wipe",
    )


@pytest.mark.parametrize(
    ("confirmation_id", "state", "content"),
    [
        (None, "consumed", _recovery.EXPIRED),
        ("conf_1", "expired", _recovery.EXPIRED),
        ("conf_1", "pending", _recovery.EXPIRED),
        (
            "conf_1",
            "unknown",
            "Error RESULT_UNKNOWN: the server has no record of this action's confirmation any more, so "
            "whether it ran is unknown: it may or may not have taken effect. Check before you try it again.",
        ),
    ],
)
async def test_an_unconsumed_or_unrecorded_confirmation(
    engine: AsyncEngine, confirmation_id: str | None, state: str, content: str
) -> None:
    async with engine.begin() as conn:
        await audit_row(conn, "approve", "ok", None, 1.0)  # never read for these states
        message = await _recovery.held_call_result(conn, CALL, confirmation_id, state, "u1")
    assert (message.content, message.is_error) == (content, True)
    assert (
        _recovery.EXPIRED
        == "Error CONFIRMATION_EXPIRED: the user did not decide in time; the action did not run."
    )


def test_held_calls_pairs_the_last_batch_with_its_results() -> None:
    calls = [ToolCall(id=i, name="wipe", arguments="{}") for i in ("a", "b", "c", "d")]
    ok = ToolResult(call_id="a", tool_name="wipe", value=1)
    held = ToolResult(call_id="b", tool_name="wipe", status="confirmation_required")
    old = ToolResult(call_id="c", tool_name="wipe", value=2)
    run = AgentRun(run_id="r", steps=2)
    run.batch = calls
    run.tool_calls = [
        ToolCallRecord(call=calls[0], result=ok, step=2),
        ToolCallRecord(call=calls[1], result=held, step=2),
        ToolCallRecord(call=calls[2], result=old, step=1),  # an earlier step's result is not this batch's
    ]
    assert _recovery.held_calls(run) == [(calls[0], ok), (calls[1], None), (calls[2], None), (calls[3], None)]
