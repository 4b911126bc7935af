"""Nothing one call does leaks into another: caches per user, access edges, state per call, pool limits."""

from __future__ import annotations

import math
from typing import Any

import pytest

from toolrun import ErrorCode, ToolContext, tool
from toolrun.exceptions import ToolDefinitionError
from toolrun.runtime import CacheStage

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
