"""What a confirmation is bound to, and what the person approving it sees (issue 7, items 1, 2, 8, 20).

Bound: the principal (a user id, or "no user"), the tool, the keyed hash of the validated arguments, and
the agent run it was requested in. Shown: every argument value in full, or plainly said to be too long,
with the full validated arguments in the record.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from toolrun import ErrorCode, ToolContext, ToolRegistry, tool
from toolrun.runtime import ToolExecutor
from toolrun.runtime._stages import MAX_SHOWN_VALUE, SUMMARY_WIDTH, summarize_call
from toolrun.store import NO_USER, InMemoryConfirmationStore

from .conftest import call

U1 = ToolContext(user_id="u1")
ANON = ToolContext()


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def make_tools(runs: list[tuple[str | None, dict[str, Any]]]) -> list[Any]:
    @tool(destructive=True)
    async def wipe(target: str, ctx: ToolContext) -> str:
        """Wipe a target. Irreversible."""
        runs.append((ctx.user_id, {"target": target}))
        return "wiped"

    @tool(requires_confirmation=True)
    async def send_email(to: str, subject: str, body: str, cc: list[str] | None = None) -> str:
        """Send an e-mail. It cannot be recalled."""
        runs.append((None, {"to": to, "body": body}))
        return "sent"

    return [wipe, send_email]


@pytest.fixture
def runs() -> list[tuple[str | None, dict[str, Any]]]:
    return []


async def held(ex: ToolExecutor, ctx: ToolContext, target: str = "t1", name: str = "wipe") -> str:
    r = await ex.execute(call(name, {"target": target}), ctx)
    assert r.status == "confirmation_required" and r.confirmation_id is not None
    return r.confirmation_id


# ---------------------------------------------------------------------------------------------------------
# The ttl (mutation survivors: no test set it; a NaN ttl would never expire)


@pytest.mark.parametrize("ttl", [math.nan, math.inf, -math.inf, 0, 0.0, -1, True, "600", None])
def test_a_ttl_that_is_not_a_finite_positive_number_is_refused(ttl: Any) -> None:
    with pytest.raises(ValueError, match="finite positive"):
        ToolExecutor(ToolRegistry(), confirmation_ttl=ttl)


async def test_a_confirmation_expires_after_exactly_its_ttl(make_executor: Any, runs: list[Any]) -> None:
    clock = Clock()
    ex = make_executor(*make_tools(runs), confirmation_ttl=5, clock=clock)
    cid = await held(ex, U1)
    [pending] = await ex.pending_confirmations(U1)
    assert pending.expires_at == clock.now + 5
    clock.now += 4.999
    assert (await ex.approve(cid, U1)).status == "ok"
    cid = await held(ex, U1)
    clock.now += 5
    r = await ex.approve(cid, U1)
    assert r.error is not None and r.error.details == {"reason": "expired"} and len(runs) == 1


# ---------------------------------------------------------------------------------------------------------
# The binding check (`ConfirmationStage._matches`), clause by clause, on both approval paths


async def test_the_approve_path_rechecks_the_argument_hash(runs: list[Any]) -> None:
    # Two executors share the store but not the hash key: the record's hash cannot match what would run.
    store = InMemoryConfirmationStore()
    tools = make_tools(runs)
    a = ToolExecutor(ToolRegistry(tools), confirmations=store, hash_key=b"a" * 32)
    b = ToolExecutor(ToolRegistry(tools), confirmations=store, hash_key=b"b" * 32)
    cid = await held(a, U1)
    r = await b.approve(cid, U1)
    assert r.error is not None and r.error.code == ErrorCode.CONFIRMATION_DENIED
    assert r.error.details == {"reason": "mismatch"} and runs == []


async def test_the_approve_path_rechecks_the_validated_arguments(runs: list[Any]) -> None:
    registry = ToolRegistry(make_tools(runs))
    ex = ToolExecutor(registry)
    cid = await held(ex, U1)
    registry.unregister("wipe")

    @registry.register(name="wipe", destructive=True)
    async def wipe_v2(target: str, recursive: bool = True) -> str:
        """Wipe, now recursively by default."""
        runs.append((None, {"target": target}))
        return "v2"

    # The stored call still validates, but to other arguments than the ones approved.
    r = await ex.approve(cid, U1)
    assert r.error is not None and r.error.details == {"reason": "mismatch"} and runs == []


async def test_an_approval_is_bound_to_its_run(make_executor: Any, runs: list[Any]) -> None:
    ex = make_executor(*make_tools(runs))
    in_run = U1.evolve(run_id="run_a")
    cid = await held(ex, in_run)
    for ctx in (U1.evolve(run_id="run_b"), U1):
        for attempt in (ex.approve(cid, ctx), ex.deny(cid, ctx)):
            r = await attempt
            assert r.error is not None and r.error.code == ErrorCode.CONFIRMATION_NOT_FOUND
            assert r.error.details == {"reason": "unknown_or_used"} and runs == []
    [pending] = await ex.pending_confirmations(U1)  # none of that consumed it
    assert pending.run_id == "run_a"
    r = await ex.approve(cid, in_run)
    assert r.status == "ok" and runs == [("u1", {"target": "t1"})]


async def test_a_confirmation_outside_any_run_stays_decidable_by_its_user(
    make_executor: Any, runs: list[Any]
) -> None:
    ex = make_executor(*make_tools(runs))
    cid = await held(ex, U1)
    [pending] = await ex.pending_confirmations(U1)
    assert pending.run_id is None
    assert (await ex.approve(cid, U1.evolve(run_id="run_any"))).status == "ok"


# ---------------------------------------------------------------------------------------------------------
# Calls without a user (item 8)


async def test_a_call_without_a_user_is_held_for_a_caller_without_a_user(
    make_executor: Any, runs: list[Any]
) -> None:
    ex = make_executor(*make_tools(runs))
    cid = await held(ex, ANON)
    pending = await ex.confirmation.store.get(cid)
    assert pending is not None and pending.user_id == NO_USER == ""
    assert await ex.pending_confirmations(ANON) == []  # nobody lists everybody's anonymous actions
    # A signed-in user can neither approve nor deny it (nor edit it); none of that burns it.
    for attempt in (ex.approve(cid, U1), ex.deny(cid, U1), ex.approve(cid, U1, arguments={"target": "t9"})):
        r = await attempt
        assert r.error is not None and r.error.code == ErrorCode.CONFIRMATION_NOT_FOUND
    assert runs == []
    r = await ex.approve(cid, ANON)
    assert r.status == "ok" and runs == [(None, {"target": "t1"})]


async def test_an_anonymous_approval_runs_once(make_executor: Any, runs: list[Any]) -> None:
    ex = make_executor(*make_tools(runs))
    cid = await held(ex, ANON)
    assert (await ex.approve(cid, ANON)).status == "ok"
    assert (await ex.approve(cid, ANON)).error is not None
    assert (await ex.deny(cid, ANON)).error is not None
    assert runs == [(None, {"target": "t1"})]


async def test_an_anonymous_caller_lists_only_its_own_run_or_conversation(
    make_executor: Any, runs: list[Any]
) -> None:
    ex = make_executor(*make_tools(runs))
    mine = await held(ex, ToolContext(run_id="run-a"), target="a")
    theirs = await held(ex, ToolContext(run_id="run-b"), target="b")
    in_chat = await held(ex, ToolContext(conversation_id="chat-c"), target="c")
    assert [p.id for p in await ex.pending_confirmations(ToolContext(run_id="run-a"))] == [mine]
    assert [p.id for p in await ex.pending_confirmations(ToolContext(run_id="run-b"))] == [theirs]
    assert [p.id for p in await ex.pending_confirmations(ToolContext(conversation_id="chat-c"))] == [in_chat]
    assert await ex.pending_confirmations(ToolContext(conversation_id="chat-x")) == []
    assert await ex.pending_confirmations(ANON) == []
    assert await ex.pending_confirmations(U1) == []  # a user never sees "no user"'s calls


# ---------------------------------------------------------------------------------------------------------
# What the person approving sees (item 2)


def email(body: str, **more: Any) -> dict[str, Any]:
    return {"to": "bob@example.com", "subject": "Invoice", "body": body, **more}


async def test_the_whole_body_is_shown_folded_never_cut(make_executor: Any, runs: list[Any]) -> None:
    iban = "DE89 3704 0044 0532 0130 00"
    body = "Hello Bob, " + "here is the invoice for last month. " * 12 + f"Please pay to {iban}."
    ex = make_executor(*make_tools(runs))
    r = await ex.execute(call("send_email", email(body)), U1)
    summary = r.message or ""
    assert summary.startswith('send_email — Send an e-mail\n  to: "bob@example.com"\n')
    assert all(len(line) <= SUMMARY_WIDTH for line in summary.splitlines())
    lines = summary.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  body: "))
    shown = lines[start][len("  body: ") :]
    for line in lines[start + 1 :]:
        if not line.startswith("    "):
            break
        shown += line[4:]
    assert shown == '"' + body + '"'  # joined again, the folded pieces are the exact value
    [pending] = await ex.pending_confirmations(U1)
    assert pending.summary == summary
    assert pending.metadata["arguments"] == {**email(body), "cc": None}


def test_invisible_characters_are_made_visible() -> None:
    @tool
    def pay(to: str) -> None:
        """Pay someone."""

    text = summarize_call(pay, {"to": "alice\u202e00.0001\u200b\x07"})
    assert "\u202e" not in text and "\u200b" not in text
    assert "\\u202e" in text and "\\u200b" in text and "\\u0007" in text
    assert summarize_call(pay, {"to": "日本 ✓"}) == 'pay(to="日本 ✓") — Pay someone'


async def test_a_value_too_long_to_show_is_said_plainly(make_executor: Any, runs: list[Any]) -> None:
    body = "A" * (MAX_SHOWN_VALUE + 10)
    ex = make_executor(*make_tools(runs))
    r = await ex.execute(call("send_email", email(body, cc=["carol@example.com"])), U1)
    summary = r.message or ""
    assert "AAAA" not in summary
    assert f"body: (not shown: {len(body) + 2:,} characters, too long to show here)" in summary
    assert "look at the full arguments before you approve" in summary
    assert 'cc: ["carol@example.com"]' in summary and "Invoice" in summary
    [pending] = await ex.pending_confirmations(U1)
    assert pending.metadata["arguments"]["body"] == body  # the full value, for a UI to show


def test_the_total_shown_is_bounded_too() -> None:
    @tool
    def many(a: str, b: str, c: str, d: str, e: str) -> None:
        """Take many long values."""

    values = {k: k * 3_900 for k in "abcde"}
    text = summarize_call(many, values)
    assert text.count("not shown") == 1 and "e: (not shown" in text
    assert len(text) < 17_500
