"""Fault injection: whatever the tool, the model or the caller throws at the executor, every call ends
in a `ToolResult` within bounded time, and nothing escapes."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolrun import ErrorCode, Tool, ToolCall, ToolContext, ToolError, ToolResult, tool
from toolrun.runtime import ToolExecutor

from .conftest import call

BOUND = 15.0  # seconds any single call may take here (tool timeouts are 0.05 s, grace 0.1 s; room for load)


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


class BadStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str for you")

    def __repr__(self) -> str:
        raise RuntimeError("no repr either")


class Unpicklable:
    def __reduce__(self) -> Any:
        raise TypeError("nope")


def fault_tools(gate: threading.Event) -> list[Tool]:
    @tool(timeout=0.05)
    async def raises(kind: str) -> Any:
        """Raise something."""
        if kind == "value":
            raise ValueError("v")
        if kind == "tool":
            raise ToolError("CUSTOM", "custom")
        if kind == "badstr":
            raise BadStr
        if kind == "recursion":

            def down(n: int) -> int:
                return down(n + 1)

            return down(0)
        if kind == "memory":
            raise MemoryError
        if kind == "exit":
            raise SystemExit(1)
        if kind == "group":
            raise ExceptionGroup("g", [ValueError("a"), TypeError("b")])
        if kind == "stopiteration":
            raise StopIteration
        if kind == "generatorexit":
            raise GeneratorExit
        return None

    @tool(timeout=0.05)
    async def hang_async() -> None:
        """Hang."""
        await asyncio.Event().wait()

    @tool(timeout=0.05)
    async def hang_stubborn() -> None:
        """Hang and swallow every cancellation."""
        while True:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                continue

    @tool(timeout=0.05)
    async def hang_stubborn_close() -> None:
        """Swallow cancellations and even GeneratorExit."""
        while True:
            try:
                await asyncio.sleep(10)
            except BaseException:
                continue

    @tool(timeout=0.05)
    def hang_sync() -> None:
        """Hang in a thread."""
        gate.wait(30)

    @tool
    async def returns(kind: str) -> Any:
        """Return something odd."""
        values: dict[str, Any] = {
            "object": object(),
            "huge_str": "x" * 5_000_000,
            "huge_list": list(range(1_000_000)),
            "deep": _deep(100_000),
            "surrogate": "\ud800 lone",
            "bytes": b"\xff\xfe",
            "unpicklable": Unpicklable(),
            "set_of_objects": {object()},
            "inf": float("inf"),
            "tool_result_bad": ToolResult(status="confirmation_required"),
            "coroutine_result": None,
        }
        return values[kind]

    @tool
    async def self_cancel() -> None:
        """Cancelled from inside."""
        raise asyncio.CancelledError

    @tool
    def sync_raises() -> None:
        """Raise in a thread."""
        raise RuntimeError("thread")

    @tool
    async def echo(text: str) -> str:
        """Echo."""
        return text

    return [
        raises,
        hang_async,
        hang_stubborn,
        hang_stubborn_close,
        hang_sync,
        returns,
        self_cancel,
        sync_raises,
        echo,
    ]


def _deep(levels: int) -> Any:
    value: Any = []
    for _ in range(levels):
        value = [value]
    return value


async def bounded(ex: ToolExecutor, c: ToolCall, ctx: ToolContext | None = None) -> ToolResult:
    async with asyncio.timeout(BOUND):
        result = await ex.execute(c, ctx)
    assert isinstance(result, ToolResult)
    assert result.call_id == c.id
    assert result.status in ("ok", "error", "confirmation_required")
    assert isinstance(result.render(), str)
    json.dumps(result.to_dict(), default=str)  # the whole result is plain data
    return result


TOOL_FAULTS: list[Any] = [
    *[
        ("raises", {"kind": k}, code)
        for k, code in [
            ("value", "EXECUTION_FAILED"),
            ("tool", "CUSTOM"),
            ("badstr", "EXECUTION_FAILED"),
            ("recursion", "EXECUTION_FAILED"),
            ("memory", "EXECUTION_FAILED"),
            ("exit", "EXECUTION_FAILED"),
            ("group", "EXECUTION_FAILED"),
            ("stopiteration", "EXECUTION_FAILED"),
            ("generatorexit", "EXECUTION_FAILED"),
        ]
    ],
    ("hang_async", None, "TIMEOUT"),
    ("hang_stubborn", None, "TIMEOUT"),
    pytest.param(
        "hang_stubborn_close",
        None,
        "TIMEOUT",
        # Python itself reports a coroutine that ignores GeneratorExit when it is garbage collected.
        marks=pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
    ),
    ("hang_sync", None, "TIMEOUT"),
    ("returns", {"kind": "object"}, "RESULT_INVALID"),
    ("returns", {"kind": "huge_str"}, "ok"),
    ("returns", {"kind": "huge_list"}, "ok"),
    ("returns", {"kind": "deep"}, "RESULT_INVALID"),
    ("returns", {"kind": "surrogate"}, "ok"),
    ("returns", {"kind": "bytes"}, "ok"),
    ("returns", {"kind": "unpicklable"}, "RESULT_INVALID"),
    ("returns", {"kind": "set_of_objects"}, "RESULT_INVALID"),
    ("returns", {"kind": "inf"}, "ok"),
    ("returns", {"kind": "tool_result_bad"}, "RESULT_INVALID"),
    ("self_cancel", None, "EXECUTION_FAILED"),
    ("sync_raises", None, "EXECUTION_FAILED"),
]


@pytest.mark.parametrize(("name", "arguments", "expected"), TOOL_FAULTS, ids=lambda v: str(v)[:40])
async def test_faulty_tools_end_in_results(
    gate: threading.Event, name: str, arguments: Any, expected: str
) -> None:
    ex = ToolExecutor(_registry(gate), cancel_grace=0.1, max_result_chars=10_000)
    try:
        r = await bounded(ex, call(name, arguments))
    finally:
        ex.close()
    if expected == "ok":
        assert r.status == "ok"
        assert r.value is None or len(json.dumps(r.value)) < 11_000
    else:
        assert r.error is not None and r.error.code == expected


def _registry(gate: threading.Event) -> Any:
    from toolrun import ToolRegistry

    return ToolRegistry(fault_tools(gate))


def _nested_json(levels: int) -> str:
    return '{"text": ' + "[" * levels + "]" * levels + "}"


ARGUMENT_FAULTS: list[tuple[str, Any]] = [
    ("malformed", '{"text": "x"'),
    ("trailing", '{"text": "x"} trailing'),
    ("single quotes", "{'text': 'x'}"),
    ("not an object", '["text"]'),
    ("a number", "42"),
    ("null", "null"),
    ("bare string", '"text"'),
    ("nan", '{"text": NaN}'),
    ("nested 100k", _nested_json(100_000)),
    ("nested objects 100k", '{"text": ' + '{"a":' * 100_000 + "1" + "}" * 100_000 + "}"),
    ("megabytes", json.dumps({"text": "x" * 3_000_000})),
    ("megabytes of keys", json.dumps({f"k{i}": i for i in range(100_000)})),
    ("lone surrogate escaped", '{"text": "\\ud800"}'),
    ("lone low surrogate", '{"text": "a\\udfff b"}'),
    ("odd unicode", json.dumps({"text": "\u202e\u0000\ufeff\U0001f600\u200b\uffff"})),
    ("raw lone surrogate", '{"text": "\ud800"}'),
    ("invalid escape", '{"text": "\\x41"}'),
    ("bytes", b'{"text": "x"}'),
    ("int", 5),
    ("list", ["text"]),
    ("mapping with object", {"text": object()}),
    ("deep mapping", {"text": _deep(50_000)}),
    ("whitespace", "   \n\t "),
    ("bom", '\ufeff{"text": "x"}'),
    ("duplicate keys", '{"text": "a", "text": "b"}'),
    ("extra field", '{"text": "a", "other": 1}'),
]


@pytest.mark.parametrize(("label", "arguments"), ARGUMENT_FAULTS, ids=[a[0] for a in ARGUMENT_FAULTS])
async def test_malformed_arguments_end_in_results(gate: threading.Event, label: str, arguments: Any) -> None:
    ex = ToolExecutor(_registry(gate))
    try:
        r = await bounded(ex, ToolCall(id="c", name="echo", arguments=arguments))
    finally:
        ex.close()
    if r.status == "ok":
        assert isinstance(r.value, str)
    else:
        assert r.error is not None and r.error.code == ErrorCode.INVALID_ARGUMENTS, label
        assert len(r.error.message) < 20_000


UNKNOWN_NAMES: list[Any] = ["", "x" * 2_000_000, "\ud800", "echo ", "ECHO", "../echo", "\x00", None, 5]


@pytest.mark.parametrize("name", UNKNOWN_NAMES, ids=lambda v: repr(v)[:20])
async def test_unknown_tools_end_in_results(gate: threading.Event, name: Any) -> None:
    ex = ToolExecutor(_registry(gate))
    try:
        r = await bounded(ex, ToolCall(id="c", name=name, arguments="{}"))
    finally:
        ex.close()
    assert r.error is not None and r.error.code == ErrorCode.NOT_FOUND
    assert len(r.error.message) < 1_000


async def test_many_faults_at_once_in_one_batch(gate: threading.Event) -> None:
    ex = ToolExecutor(_registry(gate), cancel_grace=0.1, max_result_chars=10_000)
    plain = [f for f in TOOL_FAULTS if isinstance(f, tuple)]
    calls = [call(n, a) for n, a, _ in plain] + [
        ToolCall(id=f"a{i}", name="echo", arguments=a) for i, (_, a) in enumerate(ARGUMENT_FAULTS)
    ]
    try:
        # A hang detector, not a speed check (speed lives in bench/): the batch is CPU-bound (megabytes of
        # JSON, 100k-deep nesting) and takes ~4 s alone but over 10 s on a loaded 2-core machine.
        async with asyncio.timeout(BOUND * 5):
            results = await ex.execute_many(calls)
    finally:
        ex.close()
    assert [r.call_id for r in results] == [c.id for c in calls]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    arguments=st.one_of(
        st.text(),
        st.binary().map(lambda b: b.decode("latin-1")),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
            lambda children: st.lists(children) | st.dictionaries(st.text(), children),
            max_leaves=20,
        ).map(json.dumps),
    )
)
def test_any_argument_text_ends_in_a_result(gate: threading.Event, arguments: str) -> None:
    async def main() -> ToolResult:
        ex = ToolExecutor(_registry(gate))
        try:
            return await bounded(ex, ToolCall(id="c", name="echo", arguments=arguments))
        finally:
            ex.close()

    r = asyncio.run(main())
    assert r.status == "ok" or (r.error is not None and r.error.code == ErrorCode.INVALID_ARGUMENTS)


async def test_a_tool_swallowing_the_callers_cancellation_is_dropped_and_the_cancel_propagates(
    gate: threading.Event,
) -> None:
    ex = ToolExecutor(_registry(gate), cancel_grace=0.1, default_timeout=None)
    task = asyncio.ensure_future(ex.execute(call("hang_stubborn")))
    await asyncio.sleep(0)  # let it start (this sleep only yields)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(BOUND):  # dropped, not waited for: the tool never ends
            await task
    ex.close()


# ---------------------------------------------------------------------------------------------------------
# Faults around the tool: the registry, the context, tracing, logging.


async def test_a_broken_registry_or_context_still_ends_in_results(gate: threading.Event) -> None:
    from toolrun import ToolRegistry

    class BrokenView(ToolRegistry):
        def find(self, name: str) -> Any:
            raise RuntimeError("view bug")

    ex = ToolExecutor(BrokenView(fault_tools(gate)))
    r = await bounded(ex, call("echo", {"text": "x"}))
    assert r.error is not None and r.error.code == ErrorCode.EXECUTION_FAILED
    assert "could not be looked up" in r.error.message
    assert "view bug" not in r.error.message
    ex = ToolExecutor(_registry(gate))
    # A context refuses such values when built; one changed afterwards still cannot break a call.
    bad: Any = ToolContext()
    bad.allowed_tools = 5
    r = await bounded(ex, call("echo", {"text": "x"}), bad)
    assert r.error is not None and r.error.code == ErrorCode.EXECUTION_FAILED
    assert "could not be started" in r.error.message
    bad = ToolContext()
    bad.roles = None
    r = await bounded(ex, call("echo", {"text": "x"}), bad)
    assert r.status == "ok"  # the tool has no roles: the context's roles are not read


async def test_broken_tracing_and_logging_never_break_a_call(gate: threading.Event) -> None:
    import logging

    class BadTracer:
        def start_span(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("otel bug")

    class BadProvider:
        def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
            return BadTracer()

    class BadFilter(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            raise RuntimeError("filter bug")

    audit = logging.getLogger("toolrun.test.badaudit")
    audit.setLevel(logging.INFO)
    audit.propagate = False
    bad = BadFilter()
    audit.addFilter(bad)
    try:
        ex = ToolExecutor(_registry(gate), tracer_provider=BadProvider(), audit_logger=audit)
        r = await bounded(ex, call("echo", {"text": "x"}))
        assert r.value == "x"
    finally:
        audit.removeFilter(bad)
