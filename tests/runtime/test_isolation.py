"""Nothing one call does leaks into another: caches per user, access edges, state per call, pool limits."""

from __future__ import annotations

import asyncio
import copy
import math
import threading
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolrun import ErrorCode, ToolCall, ToolContext, ToolError, tool
from toolrun.exceptions import ToolDefinitionError
from toolrun.runtime._stages import CacheStage

from .conftest import call

# ---------------------------------------------------------------------------------------------------------
# Item 3: cached tools that read the user are cached per user


async def test_a_cached_tool_that_reads_the_user_never_serves_one_user_to_another(make_executor: Any) -> None:
    runs: list[str | None] = []

    @tool(read_only=True, cache_ttl=60)
    async def my_orders(ctx: ToolContext) -> str:
        """The caller's orders."""
        runs.append(ctx.user_id)
        return f"orders of {ctx.user_id}"

    ex = make_executor(my_orders)
    alice, bob = ToolContext(user_id="alice"), ToolContext(user_id="bob")
    assert (await ex.execute(call("my_orders"), alice)).value == "orders of alice"
    bobs = await ex.execute(call("my_orders"), bob)
    assert (bobs.value, bobs.cached) == ("orders of bob", False)
    again = await ex.execute(call("my_orders"), alice)
    assert (again.value, again.cached) == ("orders of alice", True)
    # Without a user id nothing is cached (there is nobody to key it on).
    assert not (await ex.execute(call("my_orders"), ToolContext())).cached
    assert not (await ex.execute(call("my_orders"), ToolContext())).cached
    assert runs == ["alice", "bob", None, None]


async def test_cache_scope_shared_is_an_explicit_opt_in_for_context_tools(make_executor: Any) -> None:
    runs: list[str | None] = []

    @tool(read_only=True, cache_ttl=60, cache_scope="shared")
    async def exchange_rate(currency: str, ctx: ToolContext) -> float:
        """A public rate (reads the context only for its deadline)."""
        runs.append(ctx.user_id)
        return 1.5

    @tool(read_only=True, cache_ttl=60, cache_scope="user")
    async def quota(plan: str) -> int:
        """Per-user without reading the context."""
        runs.append(plan)
        return 3

    ex = make_executor(exchange_rate, quota)
    assert not (await ex.execute(call("exchange_rate", {"currency": "EUR"}), ToolContext(user_id="a"))).cached
    assert (await ex.execute(call("exchange_rate", {"currency": "EUR"}), ToolContext(user_id="b"))).cached
    assert not (await ex.execute(call("quota", {"plan": "x"}), ToolContext(user_id="a"))).cached
    assert not (await ex.execute(call("quota", {"plan": "x"}), ToolContext(user_id="b"))).cached
    assert (await ex.execute(call("quota", {"plan": "x"}), ToolContext(user_id="a"))).cached
    assert runs == ["a", "x", "x"]
    assert CacheStage.per_user(quota) and not CacheStage.per_user(exchange_rate)


def test_a_plain_tool_without_context_keeps_one_shared_cache() -> None:
    @tool(read_only=True, cache_ttl=60)
    def weather(city: str) -> str:
        """Weather."""
        return city

    @tool(read_only=True, cache_ttl=60, private=True)
    def inbox() -> str:
        """Mine."""
        return ""

    assert not CacheStage.per_user(weather)
    assert CacheStage.per_user(inbox)


@pytest.mark.parametrize("ttl", [0, -1, math.inf, -math.inf, math.nan, True, "60"])
def test_a_cache_ttl_that_is_not_positive_and_finite_is_refused(ttl: Any) -> None:
    with pytest.raises(ToolDefinitionError, match="cache_ttl must be a positive, finite number"):

        @tool(read_only=True, cache_ttl=ttl)
        def f() -> int:
            """F."""
            return 1


def test_cache_scope_is_checked() -> None:
    with pytest.raises(ToolDefinitionError, match="never shared"):

        @tool(read_only=True, cache_ttl=5, private=True, cache_scope="shared")
        def a() -> int:
            """A."""
            return 1

    with pytest.raises(ToolDefinitionError, match="'user' or 'shared'"):

        @tool(read_only=True, cache_ttl=5, cache_scope="everyone")  # type: ignore[arg-type]
        def b() -> int:
            """B."""
            return 1

    with pytest.raises(ToolDefinitionError, match="needs a cache_ttl"):

        @tool(read_only=True, cache_scope="user")
        def c() -> int:
            """C."""
            return 1


# ---------------------------------------------------------------------------------------------------------
# Item 4: access edges


def _access_tools() -> list[Any]:
    @tool
    async def search_notes(q: str) -> str:
        """Search notes."""
        return q

    @tool(roles=("admin",))
    async def search_users(q: str) -> str:
        """Search every user (admins only)."""
        return q

    @tool
    async def search_logs(q: str) -> str:
        """Search logs."""
        return q

    return [search_notes, search_users, search_logs]


async def test_an_allowlist_given_as_a_string_is_one_name_not_a_substring(make_executor: Any) -> None:
    ex = make_executor(*_access_tools())
    ctx = ToolContext(allowed_tools="search_notes_and_more")  # type: ignore[arg-type]
    assert ctx.allowed_tools == frozenset({"search_notes_and_more"})
    r = await ex.execute(call("search_notes", {"q": "x"}), ctx)
    assert r.error is not None and r.error.code == ErrorCode.PERMISSION_DENIED
    one = ToolContext(allowed_tools="search_notes")  # type: ignore[arg-type]
    assert (await ex.execute(call("search_notes", {"q": "x"}), one)).status == "ok"
    assert ToolContext(allowed_tools=["a", "b"]).allowed_tools == frozenset({"a", "b"})  # type: ignore[arg-type]


async def test_roles_given_as_a_string_are_one_role(make_executor: Any) -> None:
    @tool(roles=("a",))
    async def letters() -> str:
        """Only for role 'a'."""
        return "x"

    ex = make_executor(letters)
    ctx = ToolContext(roles="admin")  # type: ignore[arg-type]
    assert ctx.roles == ("admin",)
    r = await ex.execute(call("letters"), ctx)  # "admin" is not the role "a" (nor its letters)
    assert r.error is not None and r.error.code == ErrorCode.PERMISSION_DENIED
    assert ToolContext(roles=["a", "b"]).roles == ("a", "b")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value"), [("allowed_tools", 5), ("allowed_tools", [1]), ("roles", None), ("roles", {"a": 1})]
)
def test_a_context_refuses_allowlists_and_roles_that_are_not_strings(field: str, value: Any) -> None:
    with pytest.raises(TypeError, match=f"ToolContext.{field}"):
        ToolContext(**{field: value})


async def test_not_found_suggests_only_tools_the_caller_may_use(make_executor: Any) -> None:
    ex = make_executor(*_access_tools())
    member = await ex.execute(call("search_user", {"q": "x"}), ToolContext(roles=("member",)))
    assert member.error is not None and member.error.code == ErrorCode.NOT_FOUND
    assert "search_users" not in member.error.details["suggestions"]
    assert "search_users" not in member.error.message
    assert set(member.error.details["suggestions"]) <= {"search_notes", "search_logs"}
    assert member.error.details["suggestions"]  # the visible neighbours are still suggested
    admin = await ex.execute(call("search_user", {"q": "x"}), ToolContext(roles=("admin",)))
    assert admin.error is not None and admin.error.details["suggestions"][0] == "search_users"
    listed = ToolContext(roles=("admin",), allowed_tools=frozenset({"search_logs"}))
    only = await ex.execute(call("search_user", {"q": "x"}), listed)
    assert only.error is not None and only.error.details["suggestions"] == ["search_logs"]


# ---------------------------------------------------------------------------------------------------------
# Item 6: each call's rollback undoes only its own changes


def _shop_tools() -> list[Any]:
    @tool
    async def add_item(item: str, ctx: ToolContext) -> str:
        """Add an item to the cart."""
        assert ctx.state is not None
        await asyncio.sleep(0.005)
        ctx.state.setdefault("cart", []).append(item)
        return "added"  # done before its sibling fails

    @tool
    async def charge(amount: int, ctx: ToolContext) -> str:
        """Charge the card (fails)."""
        assert ctx.state is not None
        ctx.state["charged"] = amount
        ctx.state["cart"] = []
        await asyncio.sleep(0.03)
        raise ToolError("CARD_DECLINED", "declined")

    return [add_item, charge]


async def test_a_failing_sibling_does_not_erase_a_successful_call_s_state(make_executor: Any) -> None:
    ex = make_executor(*_shop_tools())
    state: dict[str, Any] = {"cart": ["book"]}
    results = await ex.execute_many(
        [call("add_item", {"item": "pen"}), call("charge", {"amount": 5})], ToolContext(state=state)
    )
    assert [r.status for r in results] == ["ok", "error"]
    assert state == {"cart": ["book", "pen"]}


async def test_through_the_agent_what_the_model_was_told_was_added_is_kept() -> None:
    from toolrun import Agent, ToolRegistry
    from toolrun.models import ScriptedModel

    calls = [
        ToolCall(id="c1", name="add_item", arguments={"item": "pen"}),
        ToolCall(id="c2", name="charge", arguments={"amount": 5}),
    ]
    agent = Agent(
        ScriptedModel([calls, "Added the pen; the card was declined."]), ToolRegistry(_shop_tools())
    )
    state: dict[str, Any] = {}
    run = await agent.run("buy a pen", context=ToolContext(user_id="u1", state=state))
    assert run.status == "completed"
    assert state == {"cart": ["pen"]}


async def test_concurrent_appends_and_nested_writes_of_siblings_are_all_kept(make_executor: Any) -> None:
    @tool
    async def note(key: str, ctx: ToolContext) -> str:
        """Note something."""
        assert ctx.state is not None
        await asyncio.sleep(0)
        ctx.state["log"].append(key)
        ctx.state["by_key"][key] = True
        ctx.state.pop("obsolete", None)
        return key

    ex = make_executor(note)
    state: dict[str, Any] = {"log": ["start"], "by_key": {}, "obsolete": 1, "other": {"x": 1}}
    await ex.execute_many([call("note", {"key": k}) for k in "abc"], ToolContext(state=state))
    assert state["log"][0] == "start" and sorted(state["log"][1:]) == ["a", "b", "c"]
    assert state["by_key"] == {"a": True, "b": True, "c": True}
    assert "obsolete" not in state and state["other"] == {"x": 1}


async def test_a_timed_out_sync_tool_can_no_longer_change_the_live_state(make_executor: Any) -> None:
    woke, finished = threading.Event(), threading.Event()

    @tool(timeout=0.05)
    def slow_writer(ctx: ToolContext) -> str:
        """Writes, sleeps past its timeout, writes again."""
        assert ctx.state is not None
        ctx.state["before"] = True
        woke.wait(5)
        ctx.state["after"] = True
        ctx.state.clear()
        finished.set()
        return "late"

    ex = make_executor(slow_writer)
    state: dict[str, Any] = {"kept": 1}
    r = await ex.execute(call("slow_writer"), ToolContext(state=state))
    assert r.error is not None and r.error.code == ErrorCode.TIMEOUT
    woke.set()
    assert await asyncio.to_thread(finished.wait, 5)
    assert state == {"kept": 1}


_BEHAVIOURS = st.sampled_from(
    ["ok", "tool_error", "crash", "timeout", "sync_ok", "sync_crash", "sync_timeout"]
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(_BEHAVIOURS, min_size=1, max_size=6), initial=st.integers(0, 3))
async def test_property_the_final_state_is_the_successful_calls_own_writes(
    make_executor: Any, batch: list[str], initial: int
) -> None:
    release = threading.Event()
    waiting: list[int] = []  # the timed-out sync writers waiting to write late
    late_writes = threading.Semaphore(0)  # one release per late write made

    def write(ctx: ToolContext, i: int) -> None:
        assert ctx.state is not None
        ctx.state[f"k{i}"] = i
        ctx.state["log"].append(i)
        ctx.state["nested"][f"n{i}"] = i
        ctx.state.pop("drop_me", None)

    @tool(timeout=0.05)
    async def writer(i: int, how: str, ctx: ToolContext) -> int:
        """Writes its own keys, then succeeds, fails or hangs."""
        write(ctx, i)
        await asyncio.sleep(0)
        if how == "tool_error":
            raise ToolError("NOPE", "no")
        if how == "crash":
            raise RuntimeError("boom")
        if how == "timeout":
            await asyncio.sleep(10)
        return i

    @tool(timeout=0.05)
    def sync_writer(i: int, how: str, ctx: ToolContext) -> int:
        """The same in a worker thread; a timed-out one writes again after its timeout."""
        write(ctx, i)
        if how == "sync_crash":
            raise RuntimeError("boom")
        if how == "sync_timeout":
            waiting.append(i)
            release.wait(5)
            write(ctx, i + 100)
            late_writes.release()
        return i

    ex = make_executor(writer, sync_writer, thread_pool_size=8)
    start: dict[str, Any] = {"log": list(range(-initial, 0)), "nested": {"n-1": -1}, "keep": "x"}
    start["drop_me"] = 1
    state = copy.deepcopy(start)
    calls = [
        call("sync_writer" if how.startswith("sync") else "writer", {"i": i, "how": how})
        for i, how in enumerate(batch)
    ]
    results = await ex.execute_many(calls, ToolContext(state=state))
    late = len(waiting)
    release.set()
    for _ in range(late):  # every late write has been made (and went nowhere)
        assert await asyncio.to_thread(late_writes.acquire, True, 10)
    ex.close()
    winners = [i for i, r in enumerate(results) if r.status == "ok"]
    assert winners == [i for i, how in enumerate(batch) if how in ("ok", "sync_ok")]
    expected = copy.deepcopy(start)
    if winners:
        expected.pop("drop_me")
    for i in winners:
        expected[f"k{i}"] = i
        expected["nested"][f"n{i}"] = i
    assert sorted(state.pop("log")) == sorted(expected.pop("log") + winners)
    assert state == expected


# ---------------------------------------------------------------------------------------------------------
# Item 13: a call that waited for a worker and never started says so


async def test_a_sync_call_that_never_got_a_worker_says_it_did_not_run(make_executor: Any) -> None:
    gate, busy = threading.Event(), threading.Event()
    runs: list[str] = []

    @tool(timeout=5)
    def hog() -> str:
        """Holds the only worker."""
        busy.set()
        gate.wait(5)
        return "done"

    @tool(timeout=0.05)
    def send_mail(to: str) -> str:
        """Not idempotent: a retry would send twice."""
        runs.append(to)
        return "sent"

    ex = make_executor(hog, send_mail, thread_pool_size=1)
    hogging = asyncio.ensure_future(ex.execute(call("hog")))
    assert await asyncio.to_thread(busy.wait, 5)
    r = await ex.execute(call("send_mail", {"to": "bob"}))
    assert r.error is not None and r.error.code == ErrorCode.TIMEOUT
    assert r.error.retryable and r.error.details["started"] is False
    assert r.error.details["reason"] == "no_free_worker"
    assert "did not start" in r.error.message and "did not run" in r.error.message
    assert "may or may not" not in r.error.message
    gate.set()
    assert (await hogging).value == "done"
    assert (await ex.execute(call("send_mail", {"to": "eve"}))).value == "sent"
    assert runs == ["eve"]  # the queued call was withdrawn: it never ran late


async def test_a_sync_call_that_started_and_timed_out_may_have_taken_effect(make_executor: Any) -> None:
    gate = threading.Event()

    @tool(timeout=0.05)
    def send_mail() -> str:
        """Not idempotent."""
        gate.wait(5)
        return "sent"

    ex = make_executor(send_mail)
    r = await ex.execute(call("send_mail"))
    gate.set()
    assert r.error is not None and r.error.code == ErrorCode.TIMEOUT and not r.error.retryable
    assert "may or may not" in r.error.message and "started" not in r.error.details


def test_commit_applies_only_the_call_s_own_difference() -> None:
    from toolrun.runtime._run import commit

    base: dict[str, Any] = {"d": {"x": 1, "y": 2}, "log": [1], "n": 1, "gone": 0, "same": [5]}
    mine = copy.deepcopy(base)
    mine["d"].pop("y")  # removed in a nested dict
    mine["d"]["w"] = 9  # added in a nested dict
    mine["log"].append(2)  # appended
    mine["n"] = 2  # changed
    del mine["gone"]  # removed
    mine["new"] = {"k": 1}  # added
    live: dict[str, Any] = copy.deepcopy(base)
    live["d"]["z"] = 3  # a sibling's commits meanwhile
    live["log"].append(7)
    live["other"] = True
    live["same"] = [6]
    commit(live, base, mine)
    assert live == {
        "d": {"x": 1, "z": 3, "w": 9},
        "log": [1, 7, 2],
        "n": 2,
        "new": {"k": 1},
        "other": True,
        "same": [6],  # untouched by the call: the sibling's value stays
    }
    # A list the call did more than append to is replaced; a dict replaced by another type too.
    live2: dict[str, Any] = {"log": [1, 2, 3], "d": {"a": 1}}
    commit(live2, {"log": [1, 2], "d": {"a": 1}}, {"log": [2], "d": "flat"})
    assert live2 == {"log": [2], "d": "flat"}
