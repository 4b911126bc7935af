"""Events, audit records and OpenTelemetry spans."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolrun import ErrorCode, ToolContext, ToolError, tool
from toolrun._json import canonical_json
from toolrun.runtime import AuditRecord, InMemoryAuditSink, ToolEvent, ToolFinished, ToolStarted
from toolrun.runtime._audit import emit_log_record
from toolrun.runtime._events import EventBus

from .conftest import Recorder, call


@tool
async def add(a: int, b: int) -> int:
    """Add."""
    return a + b


@tool
async def boom() -> int:
    """Fails."""
    raise RuntimeError("internal")


@tool
async def refuse() -> int:
    """Refuses."""
    raise ToolError("NOPE", "no")


@tool(destructive=True)
async def drop(name: str) -> str:
    """Drop."""
    return name


# ---------------------------------------------------------------------------------------------------------
# Events


async def test_every_call_emits_started_and_finished(make_executor: Any) -> None:
    rec = Recorder()
    ex = make_executor(add, boom, refuse, drop)
    ex.subscribe(rec)
    ctx = ToolContext(user_id="u1", trace_id="tr-1")
    await ex.execute(call("add", {"a": 1, "b": 2}, id="c1"), ctx)
    await ex.execute(call("boom", id="c2"), ctx)
    await ex.execute(call("refuse", id="c3"), ctx)
    await ex.execute(call("drop", {"name": "x"}, id="c4"), ctx)
    await ex.execute(call("nope", id="c5"), ctx)
    await ex.execute(call("add", {"a": "x"}, id="c6"), ctx)
    started = rec.of(ToolStarted)
    finished = rec.of(ToolFinished)
    assert (
        [e.call_id for e in started] == [e.call_id for e in finished] == ["c1", "c2", "c3", "c4", "c5", "c6"]
    )
    summary = [(e.tool_name, e.outcome, e.code, e.attempts) for e in finished]
    assert summary == [
        ("add", "ok", None, 1),
        ("boom", "error", "EXECUTION_FAILED", 1),
        ("refuse", "error", "NOPE", 1),
        ("drop", "confirmation_required", None, 0),
        (None, "error", "NOT_FOUND", 0),
        ("add", "error", "INVALID_ARGUMENTS", 0),
    ]
    assert all(e.trace_id == "tr-1" and e.user_id == "u1" and e.duration > 0 for e in finished)
    failed = finished[1]
    assert isinstance(failed.exception, RuntimeError) and failed.error_id is not None
    assert "internal" not in repr(failed) and "exception" not in failed.to_dict()
    assert failed.to_dict()["event"] == "ToolFinished"


async def test_subscribers_filter_by_type_unsubscribe_and_may_be_async(make_executor: Any) -> None:
    ex = make_executor(add)
    only_finished = Recorder()
    unsubscribe = ex.subscribe(only_finished, ToolFinished)
    seen: list[ToolEvent] = []

    async def shipper(event: ToolEvent) -> None:
        await asyncio.sleep(0)
        seen.append(event)

    ex.subscribe(shipper)
    await ex.execute(call("add", {"a": 1, "b": 2}))
    await ex.events.drain()
    assert [type(e) for e in only_finished.events] == [ToolFinished]
    assert [type(e) for e in seen] == [ToolStarted, ToolFinished]
    unsubscribe()
    unsubscribe()
    await ex.execute(call("add", {"a": 1, "b": 2}))
    await ex.aclose()
    assert len(only_finished.events) == 1 and len(seen) == 4


async def test_a_failing_subscriber_never_breaks_the_call(
    make_executor: Any, caplog: pytest.LogCaptureFixture
) -> None:
    detail = "-".join(["subscriber", "bug"])  # not a literal: tracebacks show source lines

    def bad(event: ToolEvent) -> None:
        raise ValueError(detail)

    async def bad_async(event: ToolEvent) -> None:
        raise ValueError(detail)

    ex = make_executor(add)
    ex.subscribe(bad)
    ex.subscribe(bad_async)
    with caplog.at_level(logging.WARNING, logger="toolrun"):
        r = await ex.execute(call("add", {"a": 1, "b": 2}))
        await ex.events.drain()
    assert r.value == 3
    assert sum("subscriber" in rec.getMessage().lower() for rec in caplog.records) >= 3
    assert detail not in caplog.text


async def test_a_lone_sync_subscriber_is_called_directly_and_still_never_breaks_the_call(
    make_executor: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """One sync subscriber of every event is called by the executor itself (`EventBus.only`), without
    `emit`: it gets both events in order, and its failures are logged (redacted) like any subscriber's."""
    detail = "-".join(["lone", "bug"])
    got: list[ToolEvent] = []

    def lone(event: ToolEvent) -> None:
        got.append(event)
        if len(got) > 2:
            raise ValueError(detail)

    ex = make_executor(add)
    assert ex.events.only is None
    unsubscribe = ex.subscribe(lone)
    assert ex.events.only is lone
    await ex.execute(call("add", {"a": 1, "b": 2}, id="c1"))
    assert [(type(e), e.call_id) for e in got] == [(ToolStarted, "c1"), (ToolFinished, "c1")]
    with caplog.at_level(logging.WARNING, logger="toolrun"):
        r = await ex.execute(call("add", {"a": 1, "b": 2}, id="c2"))
    assert r.value == 3 and len(got) == 4  # both events delivered though the first one raised
    assert sum("subscriber" in rec.getMessage().lower() for rec in caplog.records) == 2
    assert detail not in caplog.text
    typed = ex.subscribe(Recorder(), ToolFinished)  # two subscribers, one typed: through `emit`
    assert ex.events.only is None
    typed()
    assert ex.events.only is lone
    unsubscribe()
    assert ex.events.only is None and not ex.events.active

    async def shipper(event: ToolEvent) -> None:
        pass

    ex.subscribe(shipper)  # async: through `emit`, as a task
    assert ex.events.only is None
    typed_only = make_executor(add)
    finished = Recorder()
    typed_only.subscribe(finished, ToolFinished)  # the lone subscriber, but of one type: through `emit`
    assert typed_only.events.only is None
    await typed_only.execute(call("add", {"a": 1, "b": 2}))
    assert [type(e) for e in finished.events] == [ToolFinished]


def test_event_bus_outside_a_loop_logs_instead_of_raising(caplog: pytest.LogCaptureFixture) -> None:
    bus = EventBus()

    async def sub(event: ToolEvent) -> None: ...

    bus.subscribe(sub)
    with caplog.at_level(logging.WARNING):
        bus.emit(ToolStarted(call_id="c", tool_name="t"))
    assert bus.wants(ToolStarted) and "failed" in caplog.text


async def test_nothing_is_built_when_nobody_observes(
    make_executor: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ex = make_executor(add, audit_logger=None)

    def forbidden(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("built an observation record")

    monkeypatch.setattr("toolrun.runtime._audit.AuditRecord", forbidden)  # every record is built there
    monkeypatch.setattr("toolrun.runtime._executor.ToolStarted", forbidden)
    monkeypatch.setattr("toolrun.runtime._executor.ToolFinished", forbidden)
    assert (await ex.execute(call("add", {"a": 1, "b": 2}))).value == 3
    quiet = make_executor(add)
    logging.getLogger("toolrun.audit").setLevel(logging.WARNING)
    try:
        assert (await quiet.execute(call("add", {"a": 1, "b": 2}))).value == 3
    finally:
        logging.getLogger("toolrun.audit").setLevel(logging.NOTSET)


# ---------------------------------------------------------------------------------------------------------
# Audit


async def test_one_content_free_audit_record_per_call(make_executor: Any) -> None:
    sink = InMemoryAuditSink()
    ex = make_executor(add, boom, drop, audit=sink, audit_logger=None)
    ctx = ToolContext(user_id="u1", trace_id="tr", conversation_id="conv")
    await ex.execute(call("add", {"a": 1, "b": 2}, id="c1"), ctx)
    await ex.execute(call("add", '{"b": 2, "a": 1}', id="c2"), ctx)
    await ex.execute(call("boom", id="c3"), ctx)
    held = await ex.execute(call("drop", {"name": "x"}, id="c4"), ctx)
    assert held.confirmation_id is not None
    await ex.approve(held.confirmation_id, ctx)
    await ex.approve(held.confirmation_id, ctx)
    held2 = await ex.execute(call("drop", {"name": "y"}, id="c5"), ctx)
    assert held2.confirmation_id is not None
    await ex.deny(held2.confirmation_id, ctx)
    await ex.execute(call("missing", '{"x": 1', id="c6"), ctx)
    records = sink.records
    assert [(r.action, r.tool, r.call_id, r.outcome, r.code) for r in records] == [
        ("execute", "add", "c1", "ok", None),
        ("execute", "add", "c2", "ok", None),
        ("execute", "boom", "c3", "error", "EXECUTION_FAILED"),
        ("execute", "drop", "c4", "confirmation_required", None),
        ("approve", "drop", "c4", "ok", None),
        ("approve", None, "", "error", "CONFIRMATION_NOT_FOUND"),
        ("execute", "drop", "c5", "confirmation_required", None),
        ("deny", "drop", "c5", "error", "CONFIRMATION_DENIED"),
        ("execute", None, "c6", "error", "NOT_FOUND"),
    ]
    first, second = records[0], records[1]
    assert first.arguments_hash == second.arguments_hash and len(first.arguments_hash or "") == 32
    assert (first.principal, first.trace_id, first.conversation_id, first.attempts) == ("u1", "tr", "conv", 1)
    assert records[2].error_id is not None and records[3].confirmation_id == held.confirmation_id
    assert records[4].confirmation_id == held.confirmation_id
    assert records[3].arguments_hash == records[4].arguments_hash != records[6].arguments_hash
    assert records[6].arguments_hash == records[7].arguments_hash
    assert all(r.duration_ms >= 0 for r in records)


async def test_argument_hashes_are_keyed(make_executor: Any) -> None:
    sinks = [InMemoryAuditSink(), InMemoryAuditSink(), InMemoryAuditSink()]
    keys = [b"k" * 32, b"k" * 32, b"j" * 32]
    for sink, key in zip(sinks, keys, strict=True):
        ex = make_executor(add, audit=[sink], audit_logger=None, hash_key=key)
        await ex.execute(call("add", {"a": 1, "b": 2}))
    hashes = [s.records[0].arguments_hash for s in sinks]
    assert hashes[0] == hashes[1] != hashes[2]


async def test_audit_records_go_to_the_audit_logger(
    make_executor: Any, caplog: pytest.LogCaptureFixture
) -> None:
    ex = make_executor(add)
    with caplog.at_level(logging.INFO, logger="toolrun.audit"):
        await ex.execute(call("add", {"a": 1, "b": 2}, id="c1"), ToolContext(user_id="u1"))
    [record] = [r for r in caplog.records if r.name == "toolrun.audit"]
    assert record.levelno == logging.INFO and isinstance(record.audit, AuditRecord)  # type: ignore[attr-defined]
    text = record.getMessage()
    assert "tool=add" in text and "call_id=c1" in text and "outcome=ok" in text and "principal=u1" in text
    assert record.filename == "(toolrun)" and record.funcName == "audit"
    assert set(record.audit.to_dict()) >= {"tool", "call_id", "arguments_hash", "outcome", "duration_ms"}  # type: ignore[attr-defined]


def test_log_records_follow_a_custom_record_factory() -> None:
    seen: list[logging.LogRecord] = []
    original = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = original(*args, **kwargs)
        record.custom = True  # type: ignore[attr-defined]
        return record

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    logger = logging.getLogger("toolrun.test.factory")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    handler = Keep()
    logger.addHandler(handler)
    try:
        emit_log_record(logger, logging.INFO, "fast")
        logging.setLogRecordFactory(factory)
        emit_log_record(logger, logging.INFO, "slow", {"audit": 1})
    finally:
        logging.setLogRecordFactory(original)
        logger.removeHandler(handler)
    fast, slow = seen
    reference = logging.LogRecord("toolrun.test.factory", logging.INFO, "x", 0, "m", None, None)
    assert set(vars(fast)) == set(vars(reference))
    assert fast.getMessage() == "fast" and fast.created > 0 and fast.levelname == "INFO"
    assert slow.custom and slow.audit == 1  # type: ignore[attr-defined]


async def test_a_failing_audit_sink_never_breaks_the_call(make_executor: Any) -> None:
    class Bad:
        def write(self, record: AuditRecord) -> None:
            raise OSError("disk full")

    ex = make_executor(add, audit=Bad(), audit_logger=None)
    assert (await ex.execute(call("add", {"a": 1, "b": 2}))).value == 3


def test_canonical_json_sorts_keys_everywhere_and_copes_with_anything() -> None:
    assert canonical_json({"b": 1, "a": 2}) == b'{"a":2,"b":1}'
    assert canonical_json({"b": {"y": 1, "x": [{"d": 1, "c": 2}]}, "a": None}) == (
        b'{"a":null,"b":{"x":[{"c":2,"d":1}],"y":1}}'
    )
    assert canonical_json({"s": "\ud800"}) == '{"s":"\ud800"}'.encode("utf-8", "surrogatepass")
    assert canonical_json({1: "a", "b": 2})  # mixed keys: still some stable bytes
    assert canonical_json({"o": object()})


# ---------------------------------------------------------------------------------------------------------
# OpenTelemetry


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


async def test_one_span_per_call_following_genai_conventions(make_executor: Any, spans: Any) -> None:
    provider, exporter = spans
    secret = "value-" + "x" * 8
    tracer = provider.get_tracer("tool-internals")

    @tool
    async def inner(text: str) -> str:
        """Makes its own span."""
        with tracer.start_as_current_span("inner work"):
            return text

    ex = make_executor(add, boom, inner, audit_logger=None, tracer_provider=provider)
    await ex.execute(call("add", {"a": 1, "b": 2}, id="c1"))
    await ex.execute(call("boom", id="c2"))
    await ex.execute(call("inner", {"text": secret}, id="c3"))
    await ex.execute(call("nope", id="c4"))
    by_name = {s.name: s for s in exporter.get_finished_spans()}
    ok = by_name["execute_tool add"]
    assert ok.attributes is not None
    assert ok.attributes["gen_ai.operation.name"] == "execute_tool"
    assert ok.attributes["gen_ai.tool.name"] == "add" and ok.attributes["gen_ai.tool.call.id"] == "c1"
    assert ok.attributes["toolrun.outcome"] == "ok" and "error.type" not in ok.attributes
    failed = by_name["execute_tool boom"]
    assert failed.attributes is not None and failed.attributes["error.type"] == ErrorCode.EXECUTION_FAILED
    assert failed.status.status_code == trace.StatusCode.ERROR
    assert "internal" not in str(failed.status.description)
    child = by_name["inner work"]
    assert child.parent is not None and child.parent.span_id == by_name["execute_tool inner"].context.span_id
    assert "gen_ai.tool.name" not in (by_name["execute_tool"].attributes or {})
    for span in exporter.get_finished_spans():
        assert secret not in str(span.attributes) and secret not in span.name


async def test_no_spans_without_an_sdk_provider(make_executor: Any) -> None:
    ex = make_executor(add)
    assert ex._tracing.tracer() is None  # the API's proxy provider: nothing to record
    assert (await ex.execute(call("add", {"a": 1, "b": 2}))).value == 3


async def test_a_global_provider_set_after_the_executor_is_used_from_then_on(
    make_executor: Any, spans: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A provider installed after the executor's first call, as an app's start-up may do, still gets every
    later call's span."""
    from opentelemetry import trace

    provider, exporter = spans
    ex = make_executor(add, audit_logger=None)
    await ex.execute(call("add", {"a": 1, "b": 2}, id="before"))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)  # what `set_tracer_provider` sets
    await ex.execute(call("add", {"a": 1, "b": 2}, id="after"))
    names = [(s.name, (s.attributes or {}).get("gen_ai.tool.call.id")) for s in exporter.get_finished_spans()]
    assert names == [("execute_tool add", "after")]


async def test_the_global_provider_is_read_through_the_public_api(
    make_executor: Any, spans: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The executor asks `opentelemetry.trace.get_tracer_provider()` (the API's public answer, which also
    covers a provider named by OTEL_PYTHON_TRACER_PROVIDER), never the API module's private global."""
    from opentelemetry import trace

    provider, exporter = spans
    assert trace._TRACER_PROVIDER is None  # the private global says "none set" throughout
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    ex = make_executor(add, audit_logger=None)
    await ex.execute(call("add", {"a": 1, "b": 2}, id="c1"))
    names = [(s.name, (s.attributes or {}).get("gen_ai.tool.call.id")) for s in exporter.get_finished_spans()]
    assert names == [("execute_tool add", "c1")]


async def test_events_built_positionally_have_every_field_in_place(make_executor: Any) -> None:
    """The executor builds ToolStarted/ToolFinished with positional arguments (one C call on the hot
    path): the field order is pinned here, and a field added to either must be added there too."""
    started = ["call_id", "tool_name", "trace_id", "user_id"]
    assert list(ToolStarted.__struct_fields__) == started
    assert list(ToolFinished.__struct_fields__) == [
        "call_id",
        "tool_name",
        "trace_id",
        "user_id",
        "outcome",
        "code",
        "duration",
        "attempts",
        "cached",
        "error_id",
        "exception",
    ]
    rec = Recorder()
    ex = make_executor(add, boom)
    ex.events.subscribe(rec)
    ctx = ToolContext(user_id="u1", trace_id="t1")
    await ex.execute(call("add", {"a": 1, "b": 2}), ctx)
    await ex.execute(call("boom", {}), ctx)
    assert len(rec.events) == 4
    for event in rec.events:
        values = {name: getattr(event, name) for name in event.__struct_fields__}  # all set
        assert type(event)(**values) == event
        assert repr(type(event)(**values)) == repr(event)
    assert [type(e) for e in rec.events] == [ToolStarted, ToolFinished, ToolStarted, ToolFinished]
    ok, failed = rec.events[1], rec.events[3]
    assert isinstance(ok, ToolFinished) and isinstance(failed, ToolFinished)
    assert (ok.outcome, ok.user_id, ok.trace_id, ok.attempts, ok.exception) == ("ok", "u1", "t1", 1, None)
    assert failed.outcome == "error" and isinstance(failed.exception, RuntimeError) and failed.error_id
    assert (ok.call_id, ok.tool_name, ok.code, ok.cached, ok.error_id) == (
        rec.events[0].call_id,
        "add",
        None,
        False,
        None,
    )
    assert (
        ok.duration > 0 and failed.duration > 0 and failed.code == "EXECUTION_FAILED" and failed.attempts == 1
    )
    assert (failed.tool_name, failed.user_id, failed.trace_id, failed.cached) == ("boom", "u1", "t1", False)


def test_events_compare_print_and_match_without_the_exception() -> None:
    """Events are msgspec Structs; they behave as the dataclasses they replaced did."""
    a = ToolFinished("c1", "t", outcome="error", code="X", exception=RuntimeError("secret in here"))
    b = ToolFinished("c1", "t", outcome="error", code="X", exception=None)
    assert a == b and a != ToolFinished("c1", "t", outcome="ok") and a != ToolStarted("c1", "t")
    assert "secret" not in repr(a) and repr(a) == repr(b) and repr(a).startswith("ToolFinished(call_id='c1'")
    assert (
        a.to_dict() == b.to_dict()
        and "exception" not in a.to_dict()
        and a.to_dict()["event"] == "ToolFinished"
    )
    match a:
        case ToolFinished(call_id, tool_name, outcome="error", code=code):
            assert (call_id, tool_name, code) == ("c1", "t", "X")
        case _:  # pragma: no cover
            raise AssertionError("no match")
    a.outcome = "ok"  # mutable, as before
    assert a.outcome == "ok"
