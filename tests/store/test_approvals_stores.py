"""Approvals 2.0 on every backend: the preview travels with the confirmation record; a user's quota lives
in the shared rate-limit store (two executors, one budget); approval rules in memory and in SQL (SQLite,
PostgreSQL) are kept per user, listed, and removed only by their user."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from toolrun import ErrorCode, ToolCall, ToolContext, ToolExecutor, ToolRegistry, tool
from toolrun.store import ApprovalRule, ApprovalRuleStore, InMemoryApprovalRuleStore, PendingConfirmation
from toolrun.store.sql import create_sql_stores

from .conftest import Backend, open_postgres, unique


async def test_the_preview_is_kept_with_the_confirmation(backend: Backend) -> None:
    now = time.time()
    pending = PendingConfirmation(
        id=unique("conf_"),
        user_id="u1",
        tool_name="delete_task",
        arguments_hash="h",
        call={"id": "c1", "name": "delete_task", "arguments": {"task_id": "t1"}},
        summary='delete_task(task_id="t1")',
        created_at=now,
        expires_at=now + 60,
        preview="Delete the task 'Renew passport' (due 1 Dec 2026) \u2014 ok",
    )
    await backend.confirmations.add(pending)
    assert await backend.confirmations.get(pending.id) == pending
    assert (await backend.confirmations.list_pending("u1", now=now))[0].preview == pending.preview
    assert await backend.confirmations.consume(pending.id, user_id="u1") == pending


async def test_a_users_quota_is_shared_by_executors_on_one_store(backend: Backend) -> None:
    @tool
    async def ping() -> str:
        """Ping."""
        return "pong"

    registry = ToolRegistry([ping])
    [peer] = await backend.peers(1, connections=1)
    first = ToolExecutor(registry, rate_limits=backend.rate_limits, quota="3/hour")
    second = ToolExecutor(registry, rate_limits=peer.rate_limits, quota="3/hour")
    ctx = ToolContext(user_id=unique("u"))
    results = [await ex.execute(ToolCall(name="ping"), ctx) for ex in (first, second, first, second)]
    assert [r.status for r in results] == ["ok", "ok", "ok", "error"]
    refused = results[-1].error
    assert refused is not None and refused.code == ErrorCode.RATE_LIMITED and refused.details["quota"]
    first.close()
    second.close()


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
async def rules(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ApprovalRuleStore]:
    if request.param == "memory":
        yield InMemoryApprovalRuleStore()
        return
    prefix = unique("t") + "_"
    if request.param == "sqlite":
        stores = create_sql_stores(f"sqlite+aiosqlite:///{tmp_path / 'r.db'}", table_prefix=prefix)
    else:
        stores = await open_postgres(prefix)
    await stores.create_tables()
    try:
        yield stores.approval_rules
    finally:
        await stores.drop_tables()
        await stores.aclose()


async def test_rules_are_kept_listed_and_removed_per_user(rules: Any) -> None:
    later = time.time() + 3600
    a = await rules.add(ApprovalRule(user_id="u1", tool="delete_task", expires_at=later, note="ok"))
    b = await rules.add(
        ApprovalRule(
            user_id="u1", tool="archive_task", decision="deny", arguments={"task_id": "t1", "n": [1, 2]}
        )
    )
    c = await rules.add(ApprovalRule(user_id="u2", tool="delete_task"))
    assert a.id.startswith("rule_") and len({a.id, b.id, c.id}) == 3
    assert [r.id for r in await rules.list_rules("u1")] == [a.id, b.id]
    assert await rules.list_rules("u1", tool="archive_task") == [b]
    assert (await rules.list_rules("u1", tool="delete_task"))[0] == a
    assert await rules.remove(a.id, user_id="u2") is False
    assert await rules.remove(a.id, user_id="u1") is True
    assert await rules.remove(a.id, user_id="u1") is False
    assert [r.id for r in await rules.list_rules("u1")] == [b.id]
    assert [r.id for r in await rules.list_rules("u2")] == [c.id]


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"note": "ok \ud800 then"}, "note is not valid Unicode: a lone surrogate at character 3"),
        ({"note": "a\x00b"}, "note holds a NUL character"),
        ({"arguments": {"task_id": "t\udfff"}}, "arguments.task_id is not valid Unicode"),
        ({"arguments": {"n": [1, {"k": "\ud83d"}]}}, "arguments.n.1.k is not valid Unicode"),
        ({"arguments": {"ta\udc80sk": 1}}, "a key in arguments is not valid Unicode"),
        ({"tool": "delete\ud800"}, "tool is not valid Unicode"),
        ({"user_id": "u\udc00"}, "user_id is not valid Unicode"),
    ],
)
async def test_a_rule_with_a_lone_surrogate_is_refused_before_anything_is_stored(
    rules: Any, fields: dict[str, Any], where: str
) -> None:
    values: dict[str, Any] = {"user_id": "u1", "tool": "delete_task", **fields}
    with pytest.raises(ValueError, match="approval rule's") as refused:
        await rules.add(ApprovalRule(**values))
    assert where in str(refused.value)
    assert await rules.list_rules("u1") == []
    # text beyond the BMP is fine: that rule is kept as given
    kept = await rules.add(ApprovalRule(user_id="u1", tool="delete_task", note="ok \U0001f600 caf\u00e9"))
    assert [r.note for r in await rules.list_rules("u1")] == [kept.note]


async def test_an_executor_on_sql_rules_runs_calls_they_allow(tmp_path: Path) -> None:
    stores = create_sql_stores(f"sqlite+aiosqlite:///{tmp_path / 'x.db'}")
    await stores.create_tables()
    ran: list[str] = []

    @tool(destructive=True)
    async def wipe(target: str) -> str:
        """Wipe."""
        ran.append(target)
        return target

    ex = ToolExecutor(
        ToolRegistry([wipe]), confirmations=stores.confirmations, approval_rules=stores.approval_rules
    )
    await ex.approval_rules.add(ApprovalRule(user_id="u1", tool="wipe", arguments={"target": "cache"}))
    ctx = ToolContext(user_id="u1")
    assert (await ex.execute(ToolCall(name="wipe", arguments={"target": "cache"}), ctx)).status == "ok"
    assert (await ex.execute(ToolCall(name="wipe", arguments={"target": "disk"}), ctx)).status == (
        "confirmation_required"
    )
    assert ran == ["cache"]
    await ex.aclose()
    await stores.aclose()
