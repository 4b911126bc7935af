"""The cache and rate-limit stages, field by field (pinned by mutation testing, docs/mutation.md)."""

from __future__ import annotations

from typing import Any

from toolrun import ErrorCode, ToolContext, ToolResult, tool
from toolrun.runtime._stages import CacheStage
from toolrun.store import InMemoryCache, InMemoryRateLimitStore

from .conftest import call


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_a_cache_hit_gives_back_every_field_of_the_stored_result(make_executor: Any) -> None:
    runs: list[str] = []

    @tool(read_only=True, cache_ttl=60)
    def lookup(q: str) -> ToolResult:
        """Look up."""
        runs.append(q)
        return ToolResult.ok(
            {"n": 1}, message="found one", metadata={"source": "db"}, exclude_value_from_context=True
        )

    ex = make_executor(lookup, cache=InMemoryCache())
    first = await ex.execute(call("lookup", {"q": "x"}, id="a"))
    hit = await ex.execute(call("lookup", {"q": "x"}, id="b"))
    assert runs == ["x"] and not first.cached and hit.cached
    assert (hit.call_id, hit.tool_name, hit.status, hit.value, hit.attempts) == (
        "b",
        "lookup",
        "ok",
        {"n": 1},
        0,
    )
    assert hit.message == "found one" and hit.metadata == {"source": "db"}
    assert hit.exclude_value_from_context is True


async def test_per_user_caching_follows_private_scope_and_context(make_executor: Any) -> None:
    @tool(read_only=True, cache_ttl=60, cache_scope="user")
    def mine() -> str:
        """Mine."""
        return "m"

    @tool(read_only=True, cache_ttl=60)
    def shared() -> str:
        """Shared."""
        return "s"

    @tool(read_only=True, cache_ttl=60, cache_scope="shared")
    def with_ctx(ctx: ToolContext) -> str:
        """With a context, but shared on purpose."""
        return "c"

    @tool(read_only=True, cache_ttl=60)
    def ctx_default(ctx: ToolContext) -> str:
        """With a context: per user by default."""
        return "d"

    assert CacheStage.per_user(mine) and not CacheStage.per_user(shared)
    assert not CacheStage.per_user(with_ctx) and CacheStage.per_user(ctx_default)
    cache = InMemoryCache()
    ex = make_executor(mine, cache=cache)
    u1, u2 = ToolContext(user_id="u1"), ToolContext(user_id="\ud800odd")  # any user id string works
    await ex.execute(call("mine"), u1)
    assert (await ex.execute(call("mine"), u1)).cached
    assert not (await ex.execute(call("mine"), u2)).cached
    assert (await ex.execute(call("mine"), u2)).cached
    keys = list(cache._items)
    assert len(keys) == 2 and all(k.startswith("toolrun:mine:p:") for k in keys)
    assert not (await ex.execute(call("mine"), ToolContext())).cached  # no user: never cached
    assert len(cache) == 2


async def test_the_per_user_key_separates_user_and_arguments(make_executor: Any) -> None:
    @tool(read_only=True, cache_ttl=60, cache_scope="user")
    def echo(a: str) -> str:
        """Echo."""
        return a

    ex = make_executor(echo, cache=InMemoryCache())
    # "u" + "1x" and "u1" + "x" must not collide: the principal and the arguments hash are separated.
    await ex.execute(call("echo", {"a": "x"}), ToolContext(user_id="u1"))
    assert not (await ex.execute(call("echo", {"a": "x"}), ToolContext(user_id="u"))).cached
    assert (await ex.execute(call("echo", {"a": "x"}), ToolContext(user_id="u1"))).cached


async def test_calls_without_a_user_share_one_bucket_apart_from_each_users(make_executor: Any) -> None:
    @tool(rate_limit="1/minute")
    def ping() -> str:
        """Ping."""
        return "p"

    store = InMemoryRateLimitStore(clock=Clock())
    ex = make_executor(ping, rate_limits=store)
    assert (await ex.execute(call("ping"))).status == "ok"
    limited = await ex.execute(call("ping", id="c9"))
    assert limited.error is not None and limited.error.code == ErrorCode.RATE_LIMITED
    assert (limited.call_id, limited.tool_name) == ("c9", "ping")
    assert "Too many calls to 'ping'" in (limited.error.message or "")
    assert sorted(store._buckets) == ["ping\x1f"]
    assert (await ex.execute(call("ping"), ToolContext(user_id="u1"))).status == "ok"
    assert sorted(store._buckets) == ["ping\x1f", "ping\x1fu1"]


async def test_a_failing_rate_limit_store_fails_closed(make_executor: Any) -> None:
    class Broken:
        async def acquire(self, key: str, *, limit: int, period: float, cost: float = 1.0) -> Any:
            raise ConnectionError("down")

        async def reset(self, key: str | None = None) -> None:
            pass

    runs: list[int] = []

    @tool(rate_limit="5/minute")
    def ping() -> str:
        """Ping."""
        runs.append(1)
        return "p"

    ex = make_executor(ping, rate_limits=Broken())
    result = await ex.execute(call("ping"))
    assert runs == [] and result.error is not None and result.error.retryable
    assert "could not check its rate limit" in result.error.message


async def test_without_a_user_a_server_that_requires_one_refuses_with_the_whole_explanation(
    make_executor: Any,
) -> None:
    runs: list[int] = []

    @tool(destructive=True)
    def wipe() -> str:
        """Wipe."""
        runs.append(1)
        return "w"

    ex = make_executor(wipe, require_user_for_confirmation=True)
    result = await ex.execute(call("wipe", id="w1"))
    assert runs == [] and (result.call_id, result.tool_name) == ("w1", "wipe")
    assert result.error is not None and result.error.code == ErrorCode.CONFIRMATION_DENIED
    assert result.error.message == (
        "The tool 'wipe' needs the approval of a signed-in user, and this call has no user id; "
        "it did not run."
    )
    assert result.error.recover_action == "Tell the user this action needs them to be signed in."
    assert result.error.details.get("reason") == "no_user"


def test_folding_never_splits_an_escape_and_fills_each_line() -> None:
    from toolrun.runtime._stages import _fold

    assert _fold("a" * 20, 3, 5) == ["a" * 8, "a" * 8, "a" * 4]  # at least 8 characters a line
    assert _fold("a" * 20, 10, 9) == ["a" * 10, "a" * 9, "a"]
    for escape in ("\\u202e", "\\U0001f600", "\\n", "\\\\"):
        for k in range(12):
            text = "a" * k + escape + "b" * 12
            pieces = _fold(text, 9, 9)
            assert "".join(pieces) == text
            start = text.index("\\")
            ends, at = [], 0
            for piece in pieces:
                at += len(piece)
                ends.append(at)
            assert not any(start < end < start + len(escape) for end in ends), (escape, k, pieces)
            assert all(len(p) <= 9 for p in pieces if "\\" not in p)
    assert _fold("ab\\", 8, 8) == ["ab\\"]  # a lone backslash at the end is kept


async def test_the_rate_limit_store_failure_message_is_exact(make_executor: Any) -> None:
    import re

    class Broken:
        async def acquire(self, key: str, *, limit: int, period: float, cost: float = 1.0) -> Any:
            raise ConnectionError("down")

        async def reset(self, key: str | None = None) -> None:
            pass

    @tool(rate_limit="5/minute")
    def ping() -> str:
        """Ping."""
        return "p"

    ex = make_executor(ping, rate_limits=Broken())
    result = await ex.execute(call("ping"))
    assert result.error is not None
    assert re.fullmatch(
        r"The tool 'ping' could not check its rate limit with an internal error \(error id [^)]+\)\.",
        result.error.message,
    )


async def test_a_failing_cache_read_is_logged_once_as_a_warning_and_the_call_runs(
    make_executor: Any, caplog: Any
) -> None:
    import logging

    class DownOnRead(InMemoryCache):
        async def get(self, key: str) -> bytes | None:
            raise ConnectionError("cache down")

    runs: list[str] = []

    @tool(read_only=True, cache_ttl=60)
    def lookup(q: str) -> str:
        """Look up."""
        runs.append(q)
        return q

    ex = make_executor(lookup, cache=DownOnRead())
    with caplog.at_level(logging.DEBUG, logger="toolrun"):
        result = await ex.execute(call("lookup", {"q": "x"}))
    assert result.status == "ok" and runs == ["x"]
    cache_records = [r for r in caplog.records if "cache" in r.getMessage().lower()]
    assert len(cache_records) == 1
    [record] = cache_records
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith("Result cache failed; the call runs uncached")


def test_only_idempotent_tools_without_confirmation_are_cached() -> None:
    @tool(idempotent=True, requires_confirmation=True, cache_ttl=60)
    def confirmed(q: str) -> str:
        """Idempotent, but each call needs an approval: a cached result would skip it."""
        return q

    @tool(read_only=True, cache_ttl=60)
    def reader(q: str) -> str:
        """Read."""
        return q

    stage = CacheStage(InMemoryCache())
    assert stage.applies_to(reader) and not stage.applies_to(confirmed)


def test_a_confirmation_stage_takes_short_ttls_and_does_not_require_a_user_by_default() -> None:
    from toolrun.runtime._stages import ConfirmationStage
    from toolrun.store import InMemoryConfirmationStore

    stage = ConfirmationStage(InMemoryConfirmationStore(), ttl=0.5)
    assert stage.ttl == 0.5 and stage.require_user is False
