"""Confirmations: held calls, approve / deny, and the safety property (no destructive run without a
matching, unused, unexpired approval) under every interleaving."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from toolrun import ErrorCode, ToolCall, ToolContext, ToolRegistry, tool
from toolrun.runtime import ConfirmationRequested, ConfirmationResolved, ToolExecutor
from toolrun.store import InMemoryConfirmationStore, PendingConfirmation

from .conftest import Recorder, call


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def make_wipe(runs: list[tuple[str | None, str]]) -> Any:
    @tool(destructive=True)
    async def wipe(target: str, ctx: ToolContext, force: bool = False) -> str:
        """Wipe a target. Irreversible.

        Args:
            target: What to wipe.
            force: Skip the recycle bin.
        """
        runs.append((ctx.user_id, target))
        return f"wiped {target}"

    return wipe


@pytest.fixture
def runs() -> list[tuple[str | None, str]]:
    return []


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def ex(make_executor: Any, runs: list[tuple[str | None, str]], clock: Clock) -> ToolExecutor:
    return make_executor(make_wipe(runs), clock=clock)  # type: ignore[no-any-return]


U1 = ToolContext(user_id="u1")
U2 = ToolContext(user_id="u2")


async def request(ex: ToolExecutor, target: str = "t1", ctx: ToolContext = U1, id: str = "c1") -> str:
    r = await ex.execute(call("wipe", {"target": target}, id=id), ctx)
    assert r.status == "confirmation_required" and r.confirmation_id is not None
    return r.confirmation_id


async def test_a_destructive_call_is_held_with_a_summary(ex: ToolExecutor, runs: list[Any]) -> None:
    r = await ex.execute(call("wipe", {"target": "disk-7", "force": True}, id="c1"), U1)
    assert r.status == "confirmation_required" and runs == []
    assert r.call_id == "c1" and r.tool_name == "wipe" and r.attempts == 0
    assert r.confirmation_id is not None and r.confirmation_id.startswith("conf_")
    assert r.message == 'wipe(target="disk-7", force=true) — Wipe a target'
    assert "has NOT run" in r.render()
    [pending] = await ex.pending_confirmations(U1)
    assert (pending.id, pending.user_id, pending.tool_name) == (r.confirmation_id, "u1", "wipe")
    assert pending.expires_at - pending.created_at == 600
    assert await ex.pending_confirmations(U2) == []
    assert await ex.pending_confirmations(ToolContext()) == []


async def test_approve_runs_the_stored_call_exactly_once(ex: ToolExecutor, runs: list[Any]) -> None:
    cid = await request(ex, "t1", id="orig")
    r = await ex.approve(cid, U1)
    assert (r.status, r.value, r.call_id, r.attempts) == ("ok", "wiped t1", "orig", 1)
    assert runs == [("u1", "t1")]
    again = await ex.approve(cid, U1)
    assert again.error is not None and again.error.code == ErrorCode.CONFIRMATION_NOT_FOUND
    assert again.error.details == {"reason": "unknown_or_used"} and runs == [("u1", "t1")]


async def test_only_the_requesting_user_can_approve(ex: ToolExecutor, runs: list[Any]) -> None:
    cid = await request(ex)
    r = await ex.approve(cid, U2)
    assert r.error is not None and r.error.code == ErrorCode.CONFIRMATION_NOT_FOUND and runs == []
    r = await ex.approve(cid, ToolContext())  # "no user" is a principal of its own, not a wildcard
    assert r.error is not None and r.error.code == ErrorCode.CONFIRMATION_NOT_FOUND
    assert r.error.details == {"reason": "unknown_or_used"} and runs == []
    assert (await ex.approve(cid, U1)).status == "ok"  # the other attempts did not burn it


async def test_expired_approvals_do_not_run(ex: ToolExecutor, runs: list[Any], clock: Clock) -> None:
    cid = await request(ex)
    clock.now += 600
    r = await ex.approve(cid, U1)
    assert r.error is not None and r.error.code == ErrorCode.CONFIRMATION_EXPIRED
    assert r.error.details == {"reason": "expired"} and r.call_id == "c1" and runs == []
    assert (await ex.approve(cid, U1)).error is not None  # and it is gone


async def test_deny_never_runs_and_tells_the_model(ex: ToolExecutor, runs: list[Any]) -> None:
    cid = await request(ex, id="orig")
    r = await ex.deny(cid, U1, reason="not that one")
    assert r.error is not None and r.error.code == ErrorCode.CONFIRMATION_DENIED
    assert r.call_id == "orig" and r.tool_name == "wipe" and "not that one" in r.error.message
    assert r.error.details == {"reason": "denied"}
    r = await ex.approve(cid, U1)
    assert r.error is not None and r.error.code == ErrorCode.CONFIRMATION_NOT_FOUND and runs == []
    r = await ex.deny(cid, U1)
    assert r.error is not None and r.error.code == ErrorCode.CONFIRMATION_NOT_FOUND
    cid = await request(ex)
    r = await ex.deny(cid, U2)
    assert r.error is not None and r.error.code == ErrorCode.CONFIRMATION_NOT_FOUND
    assert (await ex.pending_confirmations(U1))[0].id == cid


async def test_an_approval_runs_the_held_call_once_for_its_user_only(
    ex: ToolExecutor, runs: list[Any]
) -> None:
    r = await ex.execute(call("wipe", ' { "force" : false, "target" : "t1" } '), U1)
    cid = r.confirmation_id
    assert cid is not None
    for ctx in (U2, ToolContext()):  # another user, no user: unknown to them, and not burnt
        r = await ex.approve(cid, ctx)
        assert r.error is not None and r.error.code == ErrorCode.CONFIRMATION_NOT_FOUND
    r = await ex.approve("conf_made_up", U1)
    assert r.error is not None and r.error.code == ErrorCode.CONFIRMATION_NOT_FOUND and runs == []
    r = await ex.approve(cid, U1)  # the held call as the model spelled it, validated again
    assert r.value == "wiped t1" and runs == [("u1", "t1")]
    r = await ex.approve(cid, U1)
    assert r.error is not None and r.error.code == ErrorCode.CONFIRMATION_NOT_FOUND and len(runs) == 1


async def test_an_approval_is_bound_to_its_tool(make_executor: Any, runs: list[Any]) -> None:
    @tool(destructive=True, name="wipe_other")
    async def other(target: str) -> str:
        """Wipe something else."""
        runs.append(("other", target))
        return "other"

    ex = make_executor(make_wipe(runs), other)
    cid = await request(ex, "t1")
    held_other = await ex.execute(call("wipe_other", {"target": "t1"}), U1)
    assert held_other.confirmation_id is not None
    assert (await ex.approve(cid, U1)).value == "wiped t1" and runs == [("u1", "t1")]
    store = ex.confirmation.store
    [pending] = await ex.pending_confirmations(U1)
    assert pending.tool_name == "wipe_other"
    # A record whose call names another tool than the one it was approved for runs nothing.
    await store.consume(pending.id, user_id="u1")
    await store.add(dataclasses.replace(pending, call={**pending.call, "name": "wipe"}))
    r = await ex.approve(pending.id, U1)
    assert r.error is not None and r.error.code == ErrorCode.CONFIRMATION_DENIED and len(runs) == 1
    assert r.error.details == {"reason": "mismatch"}


async def test_concurrent_approvals_run_the_call_once(ex: ToolExecutor, runs: list[Any]) -> None:
    cid = await request(ex)
    results = await asyncio.gather(
        *[ex.approve(cid, U1) for _ in range(10)],
        *[ex.deny(cid, U1) for _ in range(10)],
    )
    decided = [r for r in results if r.status == "ok" or r.error.details.get("reason") == "denied"]
    assert len(decided) == 1 and len(runs) == sum(r.status == "ok" for r in results) <= 1
    assert all(r.error is not None for r in results if r.status != "ok")


async def test_a_call_without_a_user_is_refused_when_users_are_required(
    make_executor: Any, runs: list[Any]
) -> None:
    ex = make_executor(make_wipe(runs), require_user_for_confirmation=True)
    r = await ex.execute(call("wipe", {"target": "t1"}))
    assert r.error is not None and r.error.code == ErrorCode.CONFIRMATION_DENIED
    assert r.error.details == {"reason": "no_user"} and runs == []
    cid = await request(ex)
    for attempt in (ex.approve(cid, ToolContext()), ex.deny(cid, ToolContext())):
        r = await attempt
        assert r.error is not None and r.error.code == ErrorCode.CONFIRMATION_DENIED
        assert r.error.details == {"reason": "no_user"}
    assert runs == [] and (await ex.approve(cid, U1)).status == "ok"


async def test_approve_revalidates_against_the_current_registry(runs: list[Any]) -> None:
    registry = ToolRegistry([make_wipe(runs)])
    ex = ToolExecutor(registry)
    cid = await request(ex)
    registry.unregister("wipe")
    r = await ex.approve(cid, U1)
    assert r.error is not None and r.error.code == ErrorCode.NOT_FOUND and runs == []

    cid2 = "unused"
    registry.register(make_wipe(runs))
    cid2 = await request(ex)
    registry.unregister("wipe")

    @registry.register(name="wipe", destructive=True)
    async def wipe_v2(target: int) -> str:
        """Wipe by number."""
        return "v2"

    r = await ex.approve(cid2, U1)
    assert r.error is not None and r.error.code == ErrorCode.INVALID_ARGUMENTS and runs == []


async def test_confirmation_events(ex: ToolExecutor) -> None:
    rec = Recorder()
    ex.subscribe(rec)
    cid = await request(ex)
    await ex.approve(cid, U1)
    await ex.approve(cid, U1)
    [requested] = rec.of(ConfirmationRequested)
    assert requested.confirmation_id == cid and requested.user_id == "u1"
    assert [e.decision for e in rec.of(ConfirmationResolved)] == ["approved", "unknown"]
    cid = await request(ex)
    await ex.deny(cid, U1)
    cid = await request(ex)
    store = ex.confirmation.store
    pending = await store.consume(cid, user_id="u1")  # held again under another argument hash
    assert pending is not None
    await store.add(dataclasses.replace(pending, arguments_hash="0" * 64))
    await ex.approve(cid, U1)
    decisions = [e.decision for e in rec.of(ConfirmationResolved)]
    assert decisions == ["approved", "unknown", "denied", "mismatch"]


class BrokenStore(InMemoryConfirmationStore):
    async def add(self, pending: PendingConfirmation) -> None:
        raise ConnectionError("down")

    async def get(self, confirmation_id: str) -> PendingConfirmation | None:
        raise ConnectionError("down")

    async def consume(self, confirmation_id: str, *, user_id: str) -> PendingConfirmation | None:
        raise ConnectionError("down")


async def test_a_failing_store_fails_closed(make_executor: Any, runs: list[Any]) -> None:
    ex = make_executor(make_wipe(runs), confirmations=BrokenStore())
    r = await ex.execute(call("wipe", {"target": "t1"}), U1)
    assert r.error is not None and r.error.code == ErrorCode.EXECUTION_FAILED and runs == []
    r = await ex.approve("conf_x", U1)
    assert r.error is not None and r.error.code == ErrorCode.EXECUTION_FAILED
    r = await ex.deny("conf_x", U1)
    assert r.error is not None and r.error.code == ErrorCode.EXECUTION_FAILED and runs == []


async def test_non_destructive_tools_can_require_confirmation_and_others_run_at_once(
    make_executor: Any,
) -> None:
    @tool(requires_confirmation=True)
    async def send_email(to: str) -> str:
        """Send an email."""
        return "sent"

    @tool
    async def ping() -> str:
        """Ping."""
        return "pong"

    ex = make_executor(send_email, ping)
    assert (await ex.execute(call("send_email", {"to": "a@b.c"}), U1)).status == "confirmation_required"
    assert (await ex.execute(call("ping"), U1)).value == "pong"


async def test_mapping_arguments_are_stored_json_safe(ex: ToolExecutor, runs: list[Any]) -> None:
    r = await ex.execute(ToolCall(id="m", name="wipe", arguments={"target": "t9"}), U1)
    assert r.confirmation_id is not None
    [pending] = await ex.pending_confirmations(U1)
    assert json.loads(json.dumps(pending.to_dict()))["call"]["arguments"] == {"target": "t9"}
    assert (await ex.approve(r.confirmation_id, U1)).value == "wiped t9"


# ---------------------------------------------------------------------------------------------------------
# Property: no interleaving runs the tool without a matching, unused, unexpired approval.

USERS = ["u1", "u2", None]
TARGETS = ["a", "b"]


class ConfirmationMachine(RuleBasedStateMachine):
    """Drives approve / deny / clock moves / races against a model of what may run."""

    requests = Bundle("requests")

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = Clock()
        self.runs: list[tuple[str | None, str]] = []
        self.ex = ToolExecutor(ToolRegistry([make_wipe(self.runs)]), clock=self.clock)
        # confirmation id -> [user, target, expires_at, used]
        self.model: dict[str, list[Any]] = {}
        self.expected_runs: list[tuple[str | None, str]] = []

    def teardown(self) -> None:
        self.ex.close()
        self.loop.close()

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def usable(self, cid: str, user: str | None) -> bool:
        entry = self.model.get(cid)
        return entry is not None and not entry[3] and entry[0] == user and self.clock.now < entry[2]

    @rule(target=requests, user=st.sampled_from(USERS), target_=st.sampled_from(TARGETS))
    def request(self, user: str | None, target_: str) -> str:
        r = self.run(self.ex.execute(call("wipe", {"target": target_}), ToolContext(user_id=user)))
        assert r.status == "confirmation_required" and r.confirmation_id is not None
        self.model[r.confirmation_id] = [user, target_, self.clock.now + 600, False]
        return r.confirmation_id  # type: ignore[no-any-return]

    @rule(cid=st.one_of(requests, st.just("conf_unknown")), user=st.sampled_from(USERS))
    def approve(self, cid: str, user: str | None) -> None:
        ok = self.usable(cid, user)
        r = self.run(self.ex.approve(cid, ToolContext(user_id=user)))
        entry = self.model.get(cid)
        if entry is not None and entry[0] == user:
            entry[3] = True  # consumed, whether or not it was still valid
        if ok:
            assert entry is not None
            self.expected_runs.append((user, entry[1]))
            assert r.status == "ok"
        else:
            assert r.status == "error"

    @rule(cid=requests, user=st.sampled_from(USERS))
    def deny(self, cid: str, user: str | None) -> None:
        r = self.run(self.ex.deny(cid, ToolContext(user_id=user)))
        entry = self.model[cid]
        if entry[0] == user and not entry[3]:
            entry[3] = True
        assert r.status == "error"

    @rule(cid=requests, approvers=st.integers(2, 6), with_deny=st.booleans())
    def race(self, cid: str, approvers: int, with_deny: bool) -> None:
        entry = self.model[cid]
        user, target_ = entry[0], entry[1]
        valid = self.usable(cid, user)
        ctx = ToolContext(user_id=user)
        coros: list[Any] = [self.ex.approve(cid, ctx) for _ in range(approvers)]
        if with_deny:
            coros.append(self.ex.deny(cid, ctx))
        before = len(self.runs)

        async def together() -> list[Any]:
            return await asyncio.gather(*coros)

        results = self.run(together())
        ran = len(self.runs) - before
        assert ran <= 1 and sum(r.status == "ok" for r in results) == ran
        if ran:
            assert valid
            self.expected_runs.append((user, target_))
        elif valid and not with_deny:
            raise AssertionError("a valid approval raced only by approvals must run once")
        entry[3] = True

    @rule(seconds=st.sampled_from([1.0, 299.0, 601.0]))
    def advance(self, seconds: float) -> None:
        self.clock.now += seconds

    @invariant()
    def runs_match_the_model(self) -> None:
        assert self.runs == self.expected_runs


ConfirmationMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_no_interleaving_runs_without_a_valid_approval = ConfirmationMachine.TestCase
