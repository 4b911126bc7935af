"""Async generator tools: each yield is a partial result reported as progress (throttled, never audited),
the last one is the result (checked against the output type); timeouts and cancellation close the
generator at once, wherever it waits."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel

from toolrun import Agent, ToolContext, ToolRegistry, tool
from toolrun.agent import ToolCallProgress
from toolrun.content import Image, Text, ToolOutput
from toolrun.models import FunctionModel, ModelResponse
from toolrun.runtime import AuditRecord
from toolrun.runtime._generators import PARTIAL_TEXT_CHARS, PARTIAL_VALUE_CHARS, partial_text, partial_value
from toolrun.tools._context import ProgressThrottle

from .conftest import call
from .test_content_results import png

Report = tuple[float, "float | None", "str | None"]


class StepClock:
    """A clock for the throttle that moves `step` seconds at each read, however fast the machine runs."""

    def __init__(self, step: float) -> None:
        self.step = step
        self.now = 0.0
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        self.now += self.step
        return self.now


def recorder() -> tuple[list[Report], Any]:
    seen: list[Report] = []

    async def report(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    return seen, report


class Page(BaseModel):
    hits: list[str]
    done: bool


@tool(read_only=True)
async def search(query: str, pages: int = 3) -> AsyncIterator[Page]:
    """Search page by page. Use when the user asks to search."""
    hits: list[str] = []
    for n in range(pages):
        await asyncio.sleep(0)
        hits.append(f"{query}-{n}")
        yield Page(hits=list(hits), done=n == pages - 1)


async def test_the_last_yield_is_the_result_and_each_yield_is_reported(make_executor) -> None:  # type: ignore[no-untyped-def]
    seen, report = recorder()
    ex = make_executor(search)
    result = await ex.execute(
        call("search", {"query": "q"}), ToolContext(progress=ProgressThrottle(report, interval=0))
    )
    assert result.status == "ok", result.error
    assert result.value == {"hits": ["q-0", "q-1", "q-2"], "done": True}
    assert [(p, t) for p, t, _ in seen] == [(1, None), (2, None), (3, None)]
    assert seen[0][2] == '{"hits":["q-0"],"done":false}'
    assert search.is_generator and search.output_schema is not None
    assert search.output_schema["properties"]["done"] == {"type": "boolean"}


async def test_the_final_value_is_checked_against_the_yield_type(make_executor) -> None:  # type: ignore[no-untyped-def]
    @tool
    async def drifting() -> AsyncIterator[int]:
        """Partial results may be anything; the result must be an int."""
        yield 1
        yield "two"  # type: ignore[misc]

    @tool
    async def settling() -> AsyncIterator[int]:
        """Only the last value is checked."""
        yield "warming up"  # type: ignore[misc]
        yield 2

    ex = make_executor(drifting, settling)
    bad = await ex.execute(call("drifting"))
    assert bad.status == "error" and bad.error is not None and bad.error.code == "RESULT_INVALID"
    good = await ex.execute(call("settling"))
    assert good.status == "ok" and good.value == 2


async def test_a_generator_that_yields_nothing_or_fails_ends_in_an_error(make_executor) -> None:  # type: ignore[no-untyped-def]
    from toolrun import ToolError

    @tool
    async def nothing() -> AsyncIterator[int]:
        """Yields nothing."""
        if False:
            yield 0

    @tool
    async def broken() -> AsyncIterator[int]:
        """Fails after a partial result."""
        yield 1
        raise ToolError("UPSTREAM", "the backend went away")

    ex = make_executor(nothing, broken)
    empty = await ex.execute(call("nothing"))
    assert empty.error is not None and empty.error.code == "RESULT_INVALID"
    assert "yielded no value" in empty.error.message
    failed = await ex.execute(call("broken"))
    assert failed.error is not None and failed.error.code == "UPSTREAM"


async def test_content_as_the_last_yield_is_a_rich_result(make_executor) -> None:  # type: ignore[no-untyped-def]
    @tool
    async def render() -> AsyncIterator[str | ToolOutput[dict[str, int]]]:
        """Render a picture, saying how far it is."""
        yield "drawing"
        yield ToolOutput(value={"w": 2}, content=[Text("a 2x2 picture"), Image(data=png(2, 2))])

    seen, report = recorder()
    result = await make_executor(render).execute(
        call("render"), ToolContext(progress=ProgressThrottle(report, interval=0))
    )
    assert result.status == "ok" and result.value == {"w": 2}
    assert [type(item).__name__ for item in result.content] == ["Text", "Image"]
    assert [m for _, _, m in seen] == ["drawing", '{"w":2}']


def test_partial_text() -> None:
    assert partial_text("as is") == "as is"
    assert partial_text({"a": [1, 2]}) == '{"a":[1,2]}'
    assert partial_text(Image(data=png(1, 1))) == "[image]"
    assert partial_text(object()) is None
    long = partial_text("x" * 10_000)
    assert long is not None and len(long) == PARTIAL_TEXT_CHARS and long.endswith("…")


def test_partial_value() -> None:
    assert partial_value("as is") == "as is"
    assert partial_value(Page(hits=["a"], done=False)) == {"hits": ["a"], "done": False}
    assert partial_value(ToolOutput(value={"w": 2}, content=[Text("t")])) == {"w": 2}
    assert partial_value(Image(data=png(1, 1))) is None  # bytes never travel as a partial value
    assert partial_value(object()) is None
    assert partial_value("x" * (PARTIAL_VALUE_CHARS - 2)) == "x" * (PARTIAL_VALUE_CHARS - 2)  # with quotes
    assert partial_value("x" * (PARTIAL_VALUE_CHARS - 1)) is None  # too big: its text still goes


async def test_a_reporter_that_takes_values_gets_each_partial_as_data_and_text(make_executor) -> None:  # type: ignore[no-untyped-def]
    seen, report = recorder()
    partials: list[tuple[float, str | None, Any]] = []

    async def partial(progress: float, message: str | None, value: Any) -> None:
        partials.append((progress, message, value))

    @tool
    async def sized() -> AsyncIterator[Any]:
        """A small partial, one too big to send as a value, then one with no JSON form, then the result."""
        yield {"n": 1}
        yield "y" * PARTIAL_VALUE_CHARS
        yield object()
        yield {"n": 4}

    throttle = ProgressThrottle(report, interval=0, partial=partial)
    assert throttle.takes_partials and not ProgressThrottle(report).takes_partials
    result = await make_executor(search, sized).execute(
        call("search", {"query": "q", "pages": 2}), ToolContext(progress=throttle)
    )
    assert result.status == "ok" and seen == []  # partials went to `partial`, not to `forward`
    assert partials == [
        (1, '{"hits":["q-0"],"done":false}', {"hits": ["q-0"], "done": False}),
        (2, '{"hits":["q-0","q-1"],"done":true}', {"hits": ["q-0", "q-1"], "done": True}),
    ]
    partials.clear()
    sized_result = await make_executor(sized).execute(
        call("sized"), ToolContext(progress=ProgressThrottle(report, interval=0, partial=partial))
    )
    assert sized_result.value == {"n": 4}
    assert [(p, v) for p, _, v in partials] == [(1, {"n": 1}), (2, None), (3, None), (4, {"n": 4})]
    assert partials[1][1] is not None and partials[1][1].endswith("…")  # the text, cut, still goes


async def test_a_closed_or_throttled_reporter_drops_partials_and_a_failing_one_never_fails_the_tool(
    make_executor,
) -> None:  # type: ignore[no-untyped-def]
    seen, report = recorder()
    calls = 0

    async def failing(progress: float, message: str | None, value: Any) -> None:
        nonlocal calls
        calls += 1
        raise ConnectionResetError("the client left")

    result = await make_executor(search).execute(
        call("search", {"query": "q"}),
        ToolContext(progress=ProgressThrottle(report, interval=0, partial=failing)),
    )
    assert (
        result.status == "ok" and result.value == {"hits": ["q-0", "q-1", "q-2"], "done": True} and calls == 3
    )
    closed = ProgressThrottle(report, interval=0, partial=failing)
    closed.close()
    await closed.report_partial(1, "1", 1)
    slow = ProgressThrottle(report, interval=60, partial=failing, burst=1)
    await slow(1, None, "first")
    await slow.report_partial(2, "2", 2)  # too soon: it waits for the rate...
    slow.close()  # ...and is dropped when the reporter is closed without `aclose`
    assert calls == 3 and closed.dropped == 1 and slow.dropped == 1 and seen == [(1, None, "first")]


async def test_a_flood_of_yields_is_throttled_before_any_text_is_made(  # type: ignore[no-untyped-def]
    make_executor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """10,000 yields cost a clock read each, and a handful of reports (the only partials made into text)."""
    rendered = 0

    @tool
    async def flood(n: int) -> AsyncIterator[int]:
        """Yield n times."""
        for i in range(1, n + 1):
            yield i
            if i % 100 == 0:
                await asyncio.sleep(0)

    import toolrun.runtime._generators as generators

    original = generators.partial_text

    def counting(value: Any) -> str | None:
        nonlocal rendered
        rendered += 1
        return original(value)

    seen, report = recorder()
    ex = make_executor(flood)
    clock = StepClock(0.001)  # 10,000 yields span 10 s of the throttle's clock
    monkeypatch.setattr(generators, "_monotonic", clock)
    monkeypatch.setattr(generators, "partial_text", counting)
    result = await ex.execute(call("flood", {"n": 10_000}), ToolContext(progress=report))
    assert result.value == 10_000
    assert clock.reads == 10_000, "one clock read per yield"
    assert 1 <= len(seen) <= clock.now / 0.1 + 2 and rendered == len(seen)
    assert seen[0] == (1, None, "1")


async def test_a_flood_reaches_the_agent_stream_as_a_few_progress_events(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    @tool(read_only=True)
    async def flood(n: int) -> AsyncIterator[dict[str, int]]:
        """Yield n partial counts. Use when asked to count."""
        for i in range(1, n + 1):
            yield {"counted": i}
            await asyncio.sleep(0)

    def reply(messages: Any, tools: Any) -> ModelResponse:
        if messages[-1].role == "user":
            return ModelResponse.from_tool_calls(("flood", {"n": 10_000}))
        return ModelResponse.from_text("Counted.")

    import toolrun.runtime._generators as generators

    agent = Agent(FunctionModel(reply), ToolRegistry([flood]), progress_interval=0.05)
    clock = StepClock(0.001)  # 10,000 yields span 10 s of the throttle's clock
    monkeypatch.setattr(generators, "_monotonic", clock)
    events = [event async for event in agent.stream("count")]
    progress = [e for e in events if isinstance(e, ToolCallProgress)]
    finished = [e for e in events if getattr(e, "kind", "") == "tool_call_finished"]
    assert finished[0].result.value == {"counted": 10_000}
    assert 1 <= len(progress) <= clock.now / 0.05 + 2
    assert progress[0].message == '{"counted":1}' and progress[0].total is None
    assert progress[0].partial == {"counted": 1}  # the value itself, beside its text
    assert all(e.partial == {"counted": int(e.progress)} for e in progress)
    assert all(a.progress < b.progress for a, b in itertools.pairwise(progress))


async def test_partial_results_never_reach_the_audit(make_executor) -> None:  # type: ignore[no-untyped-def]
    records: list[AuditRecord] = []

    class Sink:
        def write(self, record: AuditRecord) -> None:
            records.append(record)

    seen, report = recorder()
    ex = make_executor(search, audit=Sink())
    result = await ex.execute(call("search", {"query": "secret-term"}), ToolContext(progress=report))
    assert result.status == "ok" and seen
    assert records and all("secret-term" not in repr(r.to_dict()) for r in records)


class Lifecycle:
    """What a generator tool went through: its partial results, and whether its `finally` ran."""

    def __init__(self) -> None:
        self.yielded = asyncio.Event()
        self.closed = asyncio.Event()

    def close(self) -> None:
        self.closed.set()


async def test_a_timeout_closes_a_generator_waiting_in_an_await(make_executor) -> None:  # type: ignore[no-untyped-def]
    life = Lifecycle()

    @tool(timeout=0.2)
    async def stuck() -> AsyncIterator[int]:
        """Yields once, then waits forever."""
        try:
            yield 1
            life.yielded.set()
            await asyncio.Event().wait()
            yield 2
        finally:
            life.close()

    result = await make_executor(stuck).execute(call("stuck"))  # returns at all: it waits forever
    assert result.error is not None and result.error.code == "TIMEOUT"
    assert life.yielded.is_set() and life.closed.is_set()  # closed before the result came back


async def test_a_timeout_closes_a_generator_suspended_at_a_yield(make_executor) -> None:  # type: ignore[no-untyped-def]
    """The time box runs out while the partial result is being reported (a slow client): the generator,
    suspended at its `yield`, gets `GeneratorExit` there and its cleanup (which may await) runs."""
    life = Lifecycle()
    cleaned = asyncio.Event()

    @tool(timeout=0.2)
    async def producer() -> AsyncIterator[int]:
        """Yields into a reporter that never returns."""
        try:
            yield 1
            yield 2  # never reached
        finally:
            await asyncio.sleep(0)  # async cleanup (closing a connection) runs too
            cleaned.set()
            life.close()

    async def hanging(progress: float, total: float | None, message: str | None) -> None:
        await asyncio.Event().wait()

    result = await make_executor(producer).execute(call("producer"), ToolContext(progress=hanging))
    assert result.error is not None and result.error.code == "TIMEOUT"
    assert cleaned.is_set() and life.closed.is_set()  # its async cleanup ran before the result came back


async def test_cancelling_the_caller_closes_the_generator(make_executor) -> None:  # type: ignore[no-untyped-def]
    life = Lifecycle()

    @tool
    async def endless() -> AsyncIterator[int]:
        """Yields forever."""
        n = 0
        try:
            while True:
                n += 1
                yield n
                life.yielded.set()
                await asyncio.sleep(0.01)
        finally:
            life.close()

    ex = make_executor(endless)
    task = asyncio.ensure_future(ex.execute(call("endless")))
    await life.yielded.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert life.closed.is_set()


async def test_a_generator_that_swallows_cancellation_is_abandoned(make_executor) -> None:  # type: ignore[no-untyped-def]
    life = Lifecycle()

    @tool(timeout=0.2)
    async def stubborn() -> AsyncIterator[int]:
        """Ignores being cancelled."""
        try:
            n = 0
            while True:
                try:
                    await asyncio.sleep(0.01)
                except asyncio.CancelledError:
                    pass
                n += 1
                yield n
        finally:
            life.close()

    result = await make_executor(stubborn, cancel_grace=0.2).execute(call("stubborn"))  # endless: dropped
    assert result.error is not None and result.error.code == "TIMEOUT"
    assert result.error.details.get("abandoned") is True
    assert life.closed.is_set()
