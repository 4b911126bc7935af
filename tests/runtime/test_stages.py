"""Rate limits, the result cache, and middleware (user stages, per-tool chains)."""

from __future__ import annotations

import asyncio
from typing import Any

from toolrun import ErrorCode, Tool, ToolContext, ToolRegistry, ToolResult, tool
from toolrun.runtime import ToolExecutor
from toolrun.runtime._invocation import CallNext, Invocation, Middleware
from toolrun.runtime._stages import CacheStage, ConfirmationStage, RateLimitStage
from toolrun.store import InMemoryCache, InMemoryRateLimitStore

from .conftest import call


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


# ---------------------------------------------------------------------------------------------------------
# Rate limits


async def test_rate_limits_are_per_principal_and_report_retry_after(make_executor: Any) -> None:
    @tool(rate_limit="2/minute")
    async def search(q: str) -> str:
        """Search."""
        return q

    clock = Clock()
    ex = make_executor(search, rate_limits=InMemoryRateLimitStore(clock=clock))
    u1, u2 = ToolContext(user_id="u1"), ToolContext(user_id="u2")
    assert [(await ex.execute(call("search", {"q": "x"}), u1)).status for _ in range(2)] == ["ok", "ok"]
    r = await ex.execute(call("search", {"q": "x"}), u1)
    assert r.error is not None and r.error.code == ErrorCode.RATE_LIMITED and r.error.retryable
    assert r.error.details == {"retry_after": 30.0} and r.attempts == 0
    assert (await ex.execute(call("search", {"q": "x"}), u2)).status == "ok"
    clock.now = 30.0
    assert (await ex.execute(call("search", {"q": "x"}), u1)).status == "ok"


async def test_tools_sharing_a_rate_limit_key_share_the_bucket(make_executor: Any) -> None:
    from toolrun.tools import RateLimit

    shared = RateLimit(limit=1, period=60, key="github")

    @tool(rate_limit=shared)
    async def issues() -> str:
        """Issues."""
        return "i"

    @tool(rate_limit=shared)
    async def pulls() -> str:
        """Pulls."""
        return "p"

    ex = make_executor(issues, pulls, rate_limits=InMemoryRateLimitStore(clock=Clock()))
    assert (await ex.execute(call("issues"))).status == "ok"
    r = await ex.execute(call("pulls"))
    assert r.error is not None and r.error.code == ErrorCode.RATE_LIMITED


async def test_rate_limited_calls_do_not_run(make_executor: Any) -> None:
    runs: list[int] = []

    @tool(rate_limit="1/hour")
    async def send() -> int:
        """Send."""
        runs.append(1)
        return 1

    ex = make_executor(send)
    results = await asyncio.gather(*[ex.execute(call("send")) for _ in range(5)])
    assert sum(r.status == "ok" for r in results) == 1 and runs == [1]


class BrokenBuckets(InMemoryRateLimitStore):
    async def acquire(self, key: str, *, limit: int, period: float, cost: float = 1.0) -> Any:
        raise ConnectionError("redis down")


async def test_a_failing_rate_limit_store_fails_closed(make_executor: Any) -> None:
    @tool(rate_limit="5/second")
    async def ping() -> str:
        """Ping."""
        return "pong"

    ex = make_executor(ping, rate_limits=BrokenBuckets())
    r = await ex.execute(call("ping"))
    assert r.error is not None and r.error.code == ErrorCode.EXECUTION_FAILED and r.error.retryable


# ---------------------------------------------------------------------------------------------------------
# Cache


def counting_tools(runs: dict[str, int]) -> list[Tool]:
    @tool(read_only=True, cache_ttl=60)
    async def weather(city: str) -> dict[str, Any]:
        """Weather."""
        runs["weather"] = runs.get("weather", 0) + 1
        return {"city": city, "temp": runs["weather"]}

    @tool(read_only=True, private=True, cache_ttl=60)
    async def inbox(ctx: ToolContext) -> str:
        """My inbox."""
        runs["inbox"] = runs.get("inbox", 0) + 1
        return f"mail of {ctx.user_id}"

    @tool(idempotent=True, cache_ttl=60)
    async def fails(n: int) -> int:
        """Fails."""
        runs["fails"] = runs.get("fails", 0) + 1
        raise ValueError("no")

    return [weather, inbox, fails]


async def test_cached_results_skip_the_handler_and_are_marked(make_executor: Any) -> None:
    runs: dict[str, int] = {}
    clock = Clock()
    ex = make_executor(*counting_tools(runs), cache=InMemoryCache(clock=clock))
    first = await ex.execute(call("weather", {"city": "Oslo"}, id="a"))
    second = await ex.execute(call("weather", '{"city":"Oslo"}', id="b"))
    assert first.value == second.value == {"city": "Oslo", "temp": 1}
    assert (first.cached, second.cached, second.attempts, second.call_id) == (False, True, 0, "b")
    second.value["temp"] = 99  # a caller changing its copy does not change the cache
    assert (await ex.execute(call("weather", {"city": "Oslo"}))).value["temp"] == 1
    assert (await ex.execute(call("weather", {"city": "Rome"}))).value["temp"] == 2
    clock.now = 60.0
    assert (await ex.execute(call("weather", {"city": "Oslo"}))).value["temp"] == 3
    assert runs == {"weather": 3}


async def test_private_results_are_cached_per_principal_only(make_executor: Any) -> None:
    runs: dict[str, int] = {}
    ex = make_executor(*counting_tools(runs))
    u1, u2 = ToolContext(user_id="u1"), ToolContext(user_id="u2")
    assert (await ex.execute(call("inbox"), u1)).value == "mail of u1"
    assert (await ex.execute(call("inbox"), u2)).value == "mail of u2"
    assert (await ex.execute(call("inbox"), u1)).cached
    assert not (await ex.execute(call("inbox"))).cached
    assert not (await ex.execute(call("inbox"))).cached  # anonymous: never cached
    assert runs == {"inbox": 4}


async def test_errors_are_not_cached(make_executor: Any) -> None:
    runs: dict[str, int] = {}
    ex = make_executor(*counting_tools(runs))
    for _ in range(2):
        assert (await ex.execute(call("fails", {"n": 1}))).status == "error"
    assert runs == {"fails": 2}


class BrokenCache(InMemoryCache):
    async def get(self, key: str) -> bytes | None:
        raise ConnectionError("down")

    async def set(self, key: str, value: bytes, *, ttl: float) -> None:
        raise ConnectionError("down")


class GarbageCache(InMemoryCache):
    async def get(self, key: str) -> bytes | None:
        return b"not json"


async def test_cache_failures_fail_open(make_executor: Any) -> None:
    for store in (BrokenCache(), GarbageCache()):
        runs: dict[str, int] = {}
        ex = make_executor(*counting_tools(runs), cache=store)
        assert (await ex.execute(call("weather", {"city": "x"}))).status == "ok"
        assert (await ex.execute(call("weather", {"city": "x"}))).status == "ok"
        assert runs == {"weather": 2}


# ---------------------------------------------------------------------------------------------------------
# Middleware and chains


class Recording:
    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log

    async def __call__(self, invocation: Invocation, call_next: CallNext) -> ToolResult:
        self.log.append(f"{self.name}>")
        result = await call_next(invocation)
        self.log.append(f"<{self.name}")
        return result


async def test_middleware_wraps_the_call_in_order(make_executor: Any) -> None:
    @tool
    async def ping() -> str:
        """Ping."""
        return "pong"

    log: list[str] = []
    ex = make_executor(ping, middleware=[Recording("a", log), Recording("b", log)])
    assert isinstance(Recording("x", log), Middleware)
    assert (await ex.execute(call("ping"))).value == "pong"
    assert log == ["a>", "b>", "<b", "<a"]


async def test_middleware_can_refuse_rewrite_or_replace(make_executor: Any) -> None:
    @tool
    async def echo(text: str) -> str:
        """Echo."""
        return text

    class Upper:
        async def __call__(self, invocation: Invocation, call_next: CallNext) -> ToolResult:
            invocation.arguments = {"text": invocation.arguments["text"].upper()}
            return await call_next(invocation)

    class Blocker:
        async def __call__(self, invocation: Invocation, call_next: CallNext) -> ToolResult:
            if invocation.arguments["text"] == "STOP":
                return ToolResult.error("BLOCKED", "Blocked by policy.", call_id=invocation.call.id)
            return await call_next(invocation)

    ex = make_executor(echo, middleware=[Upper(), Blocker()])
    assert (await ex.execute(call("echo", {"text": "hi"}))).value == "HI"
    r = await ex.execute(call("echo", {"text": "stop"}))
    assert r.error is not None and r.error.code == "BLOCKED"


async def test_a_middleware_that_raises_is_execution_failed(make_executor: Any) -> None:
    @tool
    async def ping() -> str:
        """Ping."""
        return "pong"

    class Broken:
        async def __call__(self, invocation: Invocation, call_next: CallNext) -> ToolResult:
            raise RuntimeError("bug")

    ex = make_executor(ping, middleware=[Broken()])
    r = await ex.execute(call("ping"))
    assert r.error is not None and r.error.code == ErrorCode.EXECUTION_FAILED and r.error.details["error_id"]


async def test_each_tool_gets_only_the_stages_that_apply(make_executor: Any) -> None:
    @tool
    async def plain() -> str:
        """Plain."""
        return "p"

    @tool(destructive=True, rate_limit="5/minute")
    async def drop() -> str:
        """Drop."""
        return "d"

    @tool(read_only=True, cache_ttl=5)
    async def read() -> str:
        """Read."""
        return "r"

    class OnlyFor:
        def __init__(self, name: str) -> None:
            self.name = name

        def applies_to(self, tool: Tool) -> bool:
            return tool.name == self.name

        async def __call__(self, invocation: Invocation, call_next: CallNext) -> ToolResult:
            return await call_next(invocation)

    only_read = OnlyFor("read")
    ex = make_executor(plain, drop, read, middleware=[only_read])
    kinds = {t.name: [type(s) for s in ex.stages_for(t)] for t in (plain, drop, read)}
    assert kinds == {
        "plain": [],
        "drop": [ConfirmationStage, RateLimitStage],
        "read": [OnlyFor, CacheStage],
    }


async def test_the_approved_run_still_passes_the_later_stages(make_executor: Any) -> None:
    @tool(destructive=True, rate_limit="1/hour")
    async def drop(name: str) -> str:
        """Drop."""
        return name

    ex = make_executor(drop)
    ctx = ToolContext(user_id="u1")
    first = await ex.execute(call("drop", {"name": "a"}), ctx)
    second = await ex.execute(call("drop", {"name": "b"}), ctx)
    assert first.confirmation_id is not None and second.confirmation_id is not None
    assert (await ex.approve(first.confirmation_id, ctx)).value == "a"
    r = await ex.approve(second.confirmation_id, ctx)
    assert r.error is not None and r.error.code == ErrorCode.RATE_LIMITED


async def test_chains_are_rebuilt_when_the_registry_changes() -> None:
    registry = ToolRegistry()

    @registry.register
    async def first() -> str:
        """First."""
        return "1"

    log: list[str] = []
    ex = ToolExecutor(registry, middleware=[Recording("m", log)])
    await ex.execute(call("first"))
    plan = ex._plans["first"]
    await ex.execute(call("first"))
    assert ex._plans["first"] is plan  # cached

    @registry.register
    async def second() -> str:
        """Second."""
        return "2"

    await ex.execute(call("first"))
    assert ex._plans["first"] is not plan
