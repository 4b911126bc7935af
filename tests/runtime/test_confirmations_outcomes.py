"""An approval decided with `approve(id, ctx)`: every outcome's result and the event it emits (who, which
confirmation, what was decided). Pinned by mutation testing (docs/mutation.md)."""

from __future__ import annotations

import re
from typing import Any

from toolrun import ErrorCode, ToolContext
from toolrun.runtime import ConfirmationResolved, ToolExecutor

from .conftest import Recorder, call
from .test_confirmations import Clock, make_wipe

U1 = ToolContext(user_id="u1", trace_id="tr1")


async def held(ex: ToolExecutor, target: str = "t1", ctx: ToolContext = U1) -> str:
    r = await ex.execute(call("wipe", {"target": target}, id="c1"), ctx)
    assert r.confirmation_id is not None
    return r.confirmation_id


def resolved(rec: Recorder) -> list[tuple[Any, ...]]:
    return [
        (e.call_id, e.tool_name, e.trace_id, e.user_id, e.confirmation_id, e.decision)
        for e in rec.of(ConfirmationResolved)
    ]


async def test_each_outcome_of_an_approval_and_its_event(make_executor: Any) -> None:
    runs: list[Any] = []
    clock = Clock()
    ex = make_executor(make_wipe(runs), clock=clock, confirmation_ttl=60)
    rec = Recorder()
    ex.subscribe(rec)

    r = await ex.approve("conf_unknown", U1)
    assert r.error is not None and r.error.code == ErrorCode.CONFIRMATION_NOT_FOUND
    assert r.error.details.get("reason") == "unknown_or_used" and (r.call_id, r.tool_name) == ("", "")

    first = await held(ex)
    r = await ex.approve(first, U1)
    assert r.status == "ok" and len(runs) == 1 and r.call_id == "c1"

    cid = await held(ex)
    clock.now += 61
    r = await ex.approve(cid, U1)
    assert r.error is not None and r.error.code == ErrorCode.CONFIRMATION_EXPIRED
    assert r.error.details.get("reason") == "expired" and len(runs) == 1
    assert (r.call_id, r.tool_name) == ("c1", "wipe")  # it names the call it refused

    assert resolved(rec) == [
        ("", None, "tr1", "u1", "conf_unknown", "unknown"),
        ("c1", "wipe", "tr1", "u1", first, "approved"),
        ("c1", "wipe", "tr1", "u1", cid, "expired"),
    ]


async def test_another_users_approval_is_unknown_to_them(make_executor: Any) -> None:
    runs: list[Any] = []
    ex = make_executor(make_wipe(runs), clock=Clock())
    rec = Recorder()
    ex.subscribe(rec)
    cid = await held(ex)
    u2 = ToolContext(user_id="u2")
    r = await ex.approve(cid, u2)
    assert r.error is not None and r.error.code == ErrorCode.CONFIRMATION_NOT_FOUND and runs == []
    assert resolved(rec) == [("", None, None, "u2", cid, "unknown")]
    r = await ex.approve(cid, U1)  # still the owner's
    assert r.status == "ok" and len(runs) == 1


async def test_without_a_user_where_one_is_required_the_approval_is_refused(make_executor: Any) -> None:
    runs: list[Any] = []
    ex = make_executor(make_wipe(runs), clock=Clock(), require_user_for_confirmation=True)
    rec = Recorder()
    ex.subscribe(rec)
    r = await ex.approve("conf_x", ToolContext())
    assert r.error is not None and r.error.code == ErrorCode.CONFIRMATION_DENIED
    assert r.error.details.get("reason") == "no_user" and runs == [] and resolved(rec) == []


class RacingStore:
    """A confirmation store where another approver always consumes the confirmation first (between our
    look and our take), or whose reads fail."""

    def __init__(self, *, fail: bool = False) -> None:
        from toolrun.store import InMemoryConfirmationStore

        self.inner = InMemoryConfirmationStore()
        self.fail = fail

    async def add(self, pending: Any) -> None:
        await self.inner.add(pending)

    async def get(self, confirmation_id: str) -> Any:
        if self.fail:
            raise ConnectionError("store down")
        return await self.inner.get(confirmation_id)

    async def consume(self, confirmation_id: str, *, user_id: str) -> Any:
        await self.inner.consume(confirmation_id, user_id=user_id)  # the other approver wins
        return None

    async def list_pending(self, user_id: str, *, now: float) -> Any:
        return await self.inner.list_pending(user_id, now=now)

    async def purge_expired(self, now: float) -> int:
        return await self.inner.purge_expired(now)


async def test_an_approval_taken_by_someone_else_in_between_is_unknown(make_executor: Any) -> None:
    runs: list[Any] = []
    ex = make_executor(make_wipe(runs), clock=Clock(), confirmations=RacingStore())
    rec = Recorder()
    ex.subscribe(rec)
    cid = await held(ex)
    r = await ex.approve(cid, U1)
    assert r.error is not None and r.error.code == ErrorCode.CONFIRMATION_NOT_FOUND and runs == []
    assert r.error.details.get("reason") == "unknown_or_used"
    assert resolved(rec) == [("", None, "tr1", "u1", cid, "unknown")]


async def test_a_failing_store_refuses_the_approval_as_retryable(make_executor: Any) -> None:
    runs: list[Any] = []
    store = RacingStore()
    ex = make_executor(make_wipe(runs), clock=Clock(), confirmations=store)
    cid = await held(ex)
    store.fail = True
    for attempt in (ex.approve(cid, U1), ex.deny(cid, U1), ex.approve(cid, U1, arguments={"target": "t2"})):
        r = await attempt
        assert runs == [] and r.error is not None and r.error.retryable
        assert r.error.code == ErrorCode.EXECUTION_FAILED
        assert re.fullmatch(r"The confirmation could not be checked \(error id [^)]+\)\.", r.error.message)


async def test_a_store_that_cannot_hold_a_confirmation_fails_the_call_closed(make_executor: Any) -> None:
    class Full(RacingStore):
        async def add(self, pending: Any) -> None:
            raise ConnectionError("store down")

    runs: list[Any] = []
    ex = make_executor(make_wipe(runs), clock=Clock(), confirmations=Full())
    r = await ex.execute(call("wipe", {"target": "t1"}, id="h1"), U1)
    assert runs == [] and r.status == "error" and r.error is not None and r.error.retryable
    assert (r.call_id, r.tool_name) == (
        "h1",
        "wipe",
    ) and "could not be held for confirmation" in r.error.message


async def test_confirmation_ids_are_unguessable_and_unique(make_executor: Any) -> None:
    ex = make_executor(make_wipe([]), clock=Clock())
    ids = {await held(ex) for _ in range(20)}
    assert len(ids) == 20 and all(i.startswith("conf_") and len(i) == 5 + 24 for i in ids)


MISMATCH_MESSAGE = (
    "The approval presented is for a different action (another tool, other arguments, another user or "
    "another run); this call did not run."
)
MISMATCH_RECOVER = "Call the tool again without an approval to ask the user to confirm this action."


class TamperingStore(RacingStore):
    """Hands out, when consumed, the confirmation with another argument hash: what runs then is not what
    was approved."""

    async def consume(self, confirmation_id: str, *, user_id: str) -> Any:
        import dataclasses

        taken = await self.inner.consume(confirmation_id, user_id=user_id)
        return None if taken is None else dataclasses.replace(taken, arguments_hash="0" * 64)


def assert_mismatch(r: Any, call_id: str) -> None:
    assert r.error is not None and r.error.code == ErrorCode.CONFIRMATION_DENIED
    assert (r.call_id, r.tool_name) == (call_id, "wipe")
    assert r.error.message == MISMATCH_MESSAGE and r.error.recover_action == MISMATCH_RECOVER
    assert r.error.details.get("reason") == "mismatch"


async def test_approve_emits_the_approved_event_with_its_confirmation(make_executor: Any) -> None:
    runs: list[Any] = []
    ex = make_executor(make_wipe(runs), clock=Clock())
    rec = Recorder()
    ex.subscribe(rec)
    cid = await held(ex)
    r = await ex.approve(cid, U1)
    assert r.status == "ok" and runs == [("u1", "t1")]
    assert resolved(rec) == [("c1", "wipe", "tr1", "u1", cid, "approved")]


async def test_an_approval_that_no_longer_matches_on_approve_is_a_mismatch(make_executor: Any) -> None:
    runs: list[Any] = []
    ex = make_executor(make_wipe(runs), clock=Clock(), confirmations=TamperingStore())
    rec = Recorder()
    ex.subscribe(rec)
    cid = await held(ex)
    r = await ex.approve(cid, U1)
    assert_mismatch(r, "c1")
    assert runs == [] and resolved(rec) == [("c1", "wipe", "tr1", "u1", cid, "mismatch")]


def internal_message(r: Any, what: str) -> bool:
    import re

    assert r.error is not None
    return (
        re.fullmatch(rf"The tool 'wipe' {what} with an internal error \(error id [^)]+\)\.", r.error.message)
        is not None
    )


async def test_store_failures_name_what_could_not_be_done(make_executor: Any) -> None:
    class Full(RacingStore):
        async def add(self, pending: Any) -> None:
            raise ConnectionError("store down")

    ex = make_executor(make_wipe([]), clock=Clock(), confirmations=Full())
    r = await ex.execute(call("wipe", {"target": "t1"}, id="h1"), U1)
    assert internal_message(r, "could not be held for confirmation")


async def test_the_request_event_names_the_call_the_user_and_the_expiry(make_executor: Any) -> None:
    from toolrun.runtime import ConfirmationRequested

    clock = Clock()
    ex = make_executor(make_wipe([]), clock=clock, confirmation_ttl=60)
    rec = Recorder()
    ex.subscribe(rec)
    cid = await held(ex)
    [event] = rec.of(ConfirmationRequested)
    assert (event.call_id, event.tool_name, event.trace_id, event.user_id, event.confirmation_id) == (
        "c1",
        "wipe",
        "tr1",
        "u1",
        cid,
    )
    assert event.expires_at == clock.now + 60


async def test_the_held_call_is_stored_as_json_data(make_executor: Any) -> None:
    from toolrun import ToolCall, tool

    @tool(destructive=True)
    def pick(x: Any) -> str:
        """Pick."""
        return "picked"

    ex = make_executor(pick, clock=Clock())
    r = await ex.execute(ToolCall(id="s1", name="pick", arguments={"x": (1, 2)}), U1)  # a mapping, in process
    assert r.confirmation_id is not None
    pending = await ex.confirmation.store.get(r.confirmation_id)
    assert pending.call == {"id": "s1", "name": "pick", "arguments": {"x": [1, 2]}}
    assert pending.metadata == {"arguments": {"x": [1, 2]}}
