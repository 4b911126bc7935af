"""Approvals 2.0 in the executor: previews from the application's records, edit then approve, denial
reasons, standing approval rules (audited with their id), and per-run/per-user call limits."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from toolrun import ErrorCode, ToolContext, tool
from toolrun.runtime import InMemoryAuditSink, ToolExecutor
from toolrun.runtime import _preview as preview_module
from toolrun.store import ApprovalRule, InMemoryApprovalRuleStore
from toolrun.tools import ToolBudget

from .conftest import call


@pytest.fixture
def notes_db(tmp_path: Path) -> Path:
    path = tmp_path / "notes.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (id TEXT PRIMARY KEY, title TEXT, words INTEGER)")
        db.execute("INSERT INTO notes VALUES ('n1', 'Renew passport', 12), ('n2', 'Buy milk', 2)")
    return path


def make_tools(db: Path, runs: list[dict[str, Any]]) -> list[Any]:
    def describe(args: Mapping[str, Any], ctx: ToolContext) -> str:  # sync: runs in a worker thread
        with sqlite3.connect(db) as conn:
            row = conn.execute("SELECT title, words FROM notes WHERE id = ?", (args["note_id"],)).fetchone()
        if row is None:
            return f"Delete a note that does not exist ({args['note_id']})"
        return f"Delete the note '{row[0]}' ({row[1]} words)"

    @tool(destructive=True, preview=describe)
    async def delete_note(note_id: str, ctx: ToolContext) -> str:
        """Delete a note of the user's. Use when they ask to remove one.

        Args:
            note_id: The note's id.
        """
        runs.append({"note_id": note_id, "user": ctx.user_id})
        with sqlite3.connect(db) as conn:
            conn.execute("DELETE FROM notes WHERE id = ?", (note_id,))
        return f"deleted {note_id}"

    return [delete_note]


async def test_the_preview_is_written_from_the_records_and_stored_with_the_confirmation(
    notes_db: Path, make_executor: Any
) -> None:
    ex = make_executor(*make_tools(notes_db, []))
    ctx = ToolContext(user_id="u1")
    held = await ex.execute(call("delete_note", {"note_id": "n1"}), ctx)
    assert held.status == "confirmation_required"
    record = await ex.confirmation.store.get(held.confirmation_id)
    assert record is not None
    assert record.preview == "Delete the note 'Renew passport' (12 words)"
    assert record.shown == record.preview
    assert "delete_note" in record.summary  # the plain summary stays beside it
    [listed] = await ex.pending_confirmations(ctx)
    assert listed.preview == record.preview
    assert record.to_dict()["preview"] == record.preview
    assert type(record).from_dict(record.to_dict()) == record


async def test_a_tool_without_a_preview_has_none_and_shows_its_summary(make_executor: Any) -> None:
    @tool(destructive=True)
    async def wipe(target: str) -> str:
        """Wipe a target."""
        return target

    ex = make_executor(wipe)
    held = await ex.execute(call("wipe", {"target": "x"}), ToolContext(user_id="u1"))
    record = await ex.confirmation.store.get(held.confirmation_id)
    assert record is not None and record.preview is None and record.shown == record.summary


@pytest.mark.parametrize("failure", ["raises", "not_text", "mutates", "slow"])
async def test_a_failing_preview_falls_back_to_the_summary_and_says_so(
    failure: str, make_executor: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(preview_module, "PREVIEW_TIMEOUT", 0.2)
    released = asyncio.Event()

    async def preview(args: Mapping[str, Any], ctx: ToolContext) -> Any:
        if failure == "raises":
            raise LookupError("secret row text")
        if failure == "not_text":
            return {"title": "x"}
        if failure == "mutates":
            args["target"] = "something else"  # type: ignore[index]
        await released.wait()  # slow: never released
        return "unreachable"

    runs: list[str] = []

    @tool(destructive=True, preview=preview)
    async def wipe(target: str) -> str:
        """Wipe a target."""
        runs.append(target)
        return target

    ex = make_executor(wipe)
    ctx = ToolContext(user_id="u1")
    held = await ex.execute(call("wipe", {"target": "disk"}), ctx)
    record = await ex.confirmation.store.get(held.confirmation_id)
    assert record is not None and record.preview is not None
    first, rest = record.preview.split("\n", 1)
    assert first.startswith("(The preview of this action could not be made, error id err_")
    assert rest == record.summary
    assert "LookupError: secret row text" not in caplog.text  # the message is redacted in the log
    assert (await ex.approve(held.confirmation_id, ctx)).value == "disk"  # the stored call is untouched
    assert runs == ["disk"]


async def test_invisible_characters_of_a_preview_are_shown_escaped(make_executor: Any) -> None:
    @tool(destructive=True, preview=lambda args, ctx: "Delete 'inv\u202eoice.txt'\nand\u200b more")
    async def wipe(target: str) -> str:
        """Wipe a target."""
        return target

    ex = make_executor(wipe)
    held = await ex.execute(call("wipe", {"target": "x"}), ToolContext(user_id="u1"))
    record = await ex.confirmation.store.get(held.confirmation_id)
    assert record is not None
    assert record.preview == "Delete 'inv\\u202eoice.txt'\nand\\u200b more"


async def test_edit_then_approve_runs_the_edited_call_once_and_tells_the_model(
    notes_db: Path, make_executor: Any
) -> None:
    runs: list[dict[str, Any]] = []
    sink = InMemoryAuditSink()
    ex = make_executor(*make_tools(notes_db, runs), audit=sink, audit_logger=None)
    ctx = ToolContext(user_id="u1")
    held = await ex.execute(call("delete_note", {"note_id": "n1"}, id="c1"), ctx)
    cid = held.confirmation_id

    bad = await ex.approve(cid, ctx, arguments={"note_id": 5})
    assert bad.error is not None and bad.error.code == ErrorCode.INVALID_ARGUMENTS and runs == []
    assert await ex.confirmation.store.get(cid) is not None  # still pending: the person can fix it

    seen = await ex.preview_edit(cid, ctx, {"note_id": "n2"})
    assert seen.value["preview"] == "Delete the note 'Buy milk' (2 words)"
    assert seen.value["changes"] == ['note_id: "n1" → "n2"']
    assert await ex.confirmation.store.get(cid) is not None  # looking decides nothing

    result = await ex.approve(cid, ctx, arguments={"note_id": "n2"})
    assert result.status == "ok" and result.call_id == "c1"
    assert runs == [{"note_id": "n2", "user": "u1"}]
    assert result.metadata["edited"] == ['note_id: "n1" → "n2"']
    assert 'note_id: "n1" → "n2"' in result.render() and "deleted n2" in result.render()
    again = await ex.approve(cid, ctx, arguments={"note_id": "n1"})
    assert again.error is not None and again.error.code == ErrorCode.CONFIRMATION_NOT_FOUND
    assert runs == [{"note_id": "n2", "user": "u1"}]
    approved = [r for r in sink.records if r.action == "approve" and r.outcome == "ok"]
    assert [r.arguments_hash for r in approved] == [ex.hasher.arguments({"note_id": "n2"})]


async def test_edited_text_that_is_not_unicode_never_reaches_the_tool(
    notes_db: Path, make_executor: Any
) -> None:
    # Every door (HTTP, AG-UI, AI SDK, MCP, LangGraph, Python) edits through the executor: it refuses.
    runs: list[dict[str, Any]] = []
    ex = make_executor(*make_tools(notes_db, runs))
    ctx = ToolContext(user_id="u1")
    cid = (await ex.execute(call("delete_note", {"note_id": "n1"}), ctx)).confirmation_id
    for edited in ({"note_id": "n2\ud800"}, {"note_id": "n\x002"}, {"note_id": "n2", "\udc80": 1}):
        for attempt in (
            await ex.preview_edit(cid, ctx, edited),
            await ex.approve(cid, ctx, arguments=edited),
        ):
            assert attempt.error is not None and attempt.error.code == ErrorCode.INVALID_ARGUMENTS, edited
            assert "cannot be taken" in attempt.error.message
    assert runs == [] and await ex.confirmation.store.get(cid) is not None  # still pending, never run


async def test_someone_else_cannot_edit_or_preview_a_confirmation(notes_db: Path, make_executor: Any) -> None:
    runs: list[dict[str, Any]] = []
    ex = make_executor(*make_tools(notes_db, runs))
    held = await ex.execute(call("delete_note", {"note_id": "n1"}), ToolContext(user_id="u1"))
    other = ToolContext(user_id="u2")
    for attempt in (
        await ex.preview_edit(held.confirmation_id, other, {"note_id": "n2"}),
        await ex.approve(held.confirmation_id, other, arguments={"note_id": "n2"}),
    ):
        assert attempt.error is not None and attempt.error.code == ErrorCode.CONFIRMATION_NOT_FOUND
    assert runs == [] and await ex.confirmation.store.get(held.confirmation_id) is not None


async def test_a_denial_carries_the_persons_reason_to_the_model(notes_db: Path, make_executor: Any) -> None:
    ex = make_executor(*make_tools(notes_db, []))
    ctx = ToolContext(user_id="u1")
    held = await ex.execute(call("delete_note", {"note_id": "n1"}), ctx)
    denied = await ex.deny(held.confirmation_id, ctx, "not this one, the milk note")
    assert denied.error is not None and denied.error.code == ErrorCode.CONFIRMATION_DENIED
    assert "The user said: not this one, the milk note" in denied.render()


async def test_an_allow_rule_runs_matching_calls_without_asking_and_is_audited(
    notes_db: Path, make_executor: Any
) -> None:
    runs: list[dict[str, Any]] = []
    sink = InMemoryAuditSink()
    ex: ToolExecutor = make_executor(*make_tools(notes_db, runs), audit=sink, audit_logger=None)
    u1 = ToolContext(user_id="u1")
    rule = await ex.approval_rules.add(
        ApprovalRule(
            user_id="u1", tool="delete_note", arguments={"note_id": "n2"}, expires_at=time.time() + 60
        )
    )
    assert rule.id.startswith("rule_") and rule.created_at > 0

    ran = await ex.execute(call("delete_note", {"note_id": "n2"}), u1)
    assert ran.status == "ok" and runs == [{"note_id": "n2", "user": "u1"}]
    assert [(r.outcome, r.rule_id) for r in sink.records] == [("ok", rule.id)]

    other_args = await ex.execute(call("delete_note", {"note_id": "n1"}), u1)  # outside the constraint
    other_user = await ex.execute(call("delete_note", {"note_id": "n2"}), ToolContext(user_id="u2"))
    no_user = await ex.execute(call("delete_note", {"note_id": "n2"}), ToolContext())
    assert {other_args.status, other_user.status, no_user.status} == {"confirmation_required"}
    assert len(runs) == 1

    assert await ex.approval_rules.remove(rule.id, user_id="u2") is False  # not theirs
    assert await ex.approval_rules.remove(rule.id, user_id="u1") is True
    again = await ex.execute(call("delete_note", {"note_id": "n2"}), u1)
    assert again.status == "confirmation_required"  # revoked: asked again


async def test_a_deny_rule_wins_and_an_expired_rule_does_nothing(notes_db: Path, make_executor: Any) -> None:
    runs: list[dict[str, Any]] = []
    sink = InMemoryAuditSink()
    ex: ToolExecutor = make_executor(*make_tools(notes_db, runs), audit=sink, audit_logger=None)
    u1 = ToolContext(user_id="u1")
    await ex.approval_rules.add(ApprovalRule(user_id="u1", tool="delete_note"))
    deny = await ex.approval_rules.add(ApprovalRule(user_id="u1", tool="delete_note", decision="deny"))
    refused = await ex.execute(call("delete_note", {"note_id": "n1"}), u1)
    assert refused.error is not None and refused.error.code == ErrorCode.CONFIRMATION_DENIED
    assert refused.error.details["reason"] == "rule" and runs == []
    assert sink.records[-1].rule_id == deny.id

    ex2: ToolExecutor = make_executor(*make_tools(notes_db, runs))
    await ex2.approval_rules.add(ApprovalRule(user_id="u1", tool="delete_note", expires_at=time.time() - 1))
    assert (await ex2.execute(call("delete_note", {"note_id": "n1"}), u1)).status == "confirmation_required"


def test_a_rule_needs_a_user_a_tool_and_a_known_decision() -> None:
    for bad in (
        {"user_id": "", "tool": "t"},
        {"user_id": "u", "tool": ""},
        {"user_id": "u", "tool": "t", "decision": "maybe"},
    ):
        with pytest.raises(ValueError):
            ApprovalRule(**bad)


async def test_a_tool_without_rules_never_reads_the_rule_store(make_executor: Any) -> None:
    class Counting(InMemoryApprovalRuleStore):
        reads = 0

        async def list_rules(self, user_id: str, *, tool: str | None = None) -> list[ApprovalRule]:
            Counting.reads += 1
            return await super().list_rules(user_id, tool=tool)

    @tool
    async def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    ex = make_executor(add, approval_rules=Counting())
    assert (await ex.execute(call("add", {"a": 1, "b": 2}), ToolContext(user_id="u1"))).value == 3
    assert Counting.reads == 0


async def test_max_calls_per_run_refuses_the_extra_call_with_a_result_the_model_can_use(
    make_executor: Any,
) -> None:
    sent: list[str] = []

    @tool(max_calls=2)
    async def send(text: str) -> str:
        """Send a message."""
        sent.append(text)
        return "sent"

    ex = make_executor(send)
    budget = ToolBudget()
    ctx = ToolContext(user_id="u1", budget=budget)
    results = await ex.execute_many([call("send", {"text": str(i)}) for i in range(4)], ctx)
    assert [r.status for r in results] == ["ok", "ok", "error", "error"]
    refused = results[2].error
    assert refused is not None and refused.code == ErrorCode.BUDGET_EXCEEDED
    assert refused.details == {"max_calls": 2, "limit": "tool"} and "at most 2" in refused.message
    assert len(sent) == 2 and budget.tool_calls == {"send": 2}
    # another run, another count
    fresh = await ex.execute(call("send", {"text": "x"}), ToolContext(user_id="u1", budget=ToolBudget()))
    assert fresh.status == "ok"
    # without a budget: counted per run id
    runs = [await ex.execute(call("send", {"text": "r"}), ToolContext(run_id="r1")) for _ in range(3)]
    assert [r.status for r in runs] == ["ok", "ok", "error"]


async def test_a_run_budget_limits_one_tool(make_executor: Any) -> None:
    @tool
    async def search(q: str) -> str:
        """Search."""
        return q

    ex = make_executor(search)
    ctx = ToolContext(budget=ToolBudget(tool_limits={"search": 1}))
    first, second = [await ex.execute(call("search", {"q": "a"}), ctx) for _ in range(2)]
    assert first.status == "ok" and second.error is not None and second.error.details["limit"] == "tool"


async def test_a_user_quota_spans_tools_and_users_are_apart(make_executor: Any) -> None:
    @tool
    async def one() -> int:
        """One."""
        return 1

    @tool
    async def two() -> int:
        """Two."""
        return 2

    ex = make_executor(one, two, quota="2/hour")
    u1, u2 = ToolContext(user_id="u1"), ToolContext(user_id="u2")
    results = [await ex.execute(call(n), u1) for n in ("one", "two", "one")]
    assert [r.status for r in results] == ["ok", "ok", "error"]
    over = results[2].error
    assert over is not None and over.code == ErrorCode.RATE_LIMITED and over.details["quota"] is True
    assert 0 < over.details["retry_after"] <= 1800
    assert (await ex.execute(call("two"), u2)).status == "ok"


async def test_a_rules_decision_is_an_event_naming_the_rule_and_its_refusal_names_the_call(
    notes_db: Path, make_executor: Any
) -> None:
    """Subscribers see which rule decided (its id in place of a confirmation id); the refusal a deny rule
    gives is the model's to read: this call's id and tool, what happened, what to do instead."""
    from toolrun.runtime import ConfirmationResolved

    runs: list[dict[str, Any]] = []
    ex: ToolExecutor = make_executor(*make_tools(notes_db, runs))
    seen: list[Any] = []
    ex.subscribe(seen.append, ConfirmationResolved)
    u1 = ToolContext(user_id="u1")
    allow = await ex.approval_rules.add(
        ApprovalRule(user_id="u1", tool="delete_note", arguments={"note_id": "n2"})
    )
    assert (await ex.execute(call("delete_note", {"note_id": "n2"}, id="c-allow"), u1)).status == "ok"
    deny = await ex.approval_rules.add(ApprovalRule(user_id="u1", tool="delete_note", decision="deny"))
    refused = await ex.execute(call("delete_note", {"note_id": "n1"}, id="c-deny"), u1)
    await asyncio.sleep(0)
    assert [(e.call_id, e.tool_name, e.confirmation_id, e.decision) for e in seen] == [
        ("c-allow", "delete_note", allow.id, "approved"),
        ("c-deny", "delete_note", deny.id, "denied"),
    ]
    assert (refused.call_id, refused.tool_name) == ("c-deny", "delete_note")
    assert refused.error is not None
    assert refused.error.message == (
        "The user has a standing rule to refuse 'delete_note' calls like this one; it did not run."
    )
    assert refused.error.recover_action == "Do not try this action again; tell the user if they need it."
    assert runs == [{"note_id": "n2", "user": "u1"}]


async def test_a_rule_store_that_fails_holds_the_call_and_says_why_in_the_log(
    notes_db: Path, make_executor: Any, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken(InMemoryApprovalRuleStore):
        def empty(self) -> bool | None:
            return False  # it may hold rules: it has to be read

        async def list_rules(self, user_id: str, *, tool: str | None = None) -> list[ApprovalRule]:
            raise ConnectionError("rules database down")

    runs: list[dict[str, Any]] = []
    ex: ToolExecutor = make_executor(*make_tools(notes_db, runs), approval_rules=Broken())
    with caplog.at_level("WARNING", logger="toolrun"):
        held = await ex.execute(call("delete_note", {"note_id": "n1"}), ToolContext(user_id="u1"))
    assert held.status == "confirmation_required" and runs == []  # fails closed: a person decides
    (record,) = [r for r in caplog.records if "Approval rules could not be read" in r.getMessage()]
    assert record.getMessage().startswith("Approval rules could not be read; the call is held")
    assert record.exc_info is not None and record.exc_info[0].__name__ == "ConnectionError"  # redacted
    assert record.name == "toolrun" and record.levelname == "ERROR"
