"""Canaries: unique strings planted in arguments, results, exception messages and user text must never
show up in logs (any logger, DEBUG and up, including tracebacks), events, audit records or spans; and
the text of unexpected exceptions must not reach the model either."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolrun import ToolCall, ToolContext, ToolError, ToolRegistry, ToolResult, tool
from toolrun.runtime import InMemoryAuditSink, ToolEvent, ToolExecutor


def canary(kind: str) -> str:
    return f"CANARY{kind}{uuid.uuid4().hex}"


class Everything(logging.Handler):
    """Keeps every record, formatted every way a handler might."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []
        self.formatter_ = logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s %(pathname)s")

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(self.formatter_.format(record))  # includes the formatted traceback
        self.texts.append(repr(vars(record)))
        audit = getattr(record, "audit", None)
        if audit is not None:
            self.texts.append(json.dumps(audit.to_dict(), default=str))


@pytest.fixture
def everything() -> Iterator[Everything]:
    handler = Everything()
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    for name in ("toolrun", "toolrun.audit", "asyncio"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    yield handler
    root.removeHandler(handler)
    root.setLevel(old_level)
    for name in ("toolrun", "toolrun.audit", "asyncio"):
        logging.getLogger(name).setLevel(logging.NOTSET)


async def test_canaries_never_leak(everything: Everything, caplog: pytest.LogCaptureFixture) -> None:
    arg = canary("ARG")
    res = canary("RESULT")
    exc = canary("EXCEPTION")
    tool_msg = canary("TOOLERROR")
    reason = canary("REASON")
    state_value = canary("STATE")
    name = canary("NAME")

    @tool
    async def store_note(text: str, ctx: ToolContext) -> dict[str, str]:
        """Store a note."""
        assert ctx.state is not None
        ctx.state["last"] = text
        return {"stored": text, "receipt": res}

    @tool(retries=1)
    async def explode(text: str) -> str:
        """Fail unexpectedly, mentioning the input."""
        raise ValueError(f"{exc} while handling {text}")

    @tool
    def explode_sync(text: str) -> str:
        """Fail unexpectedly in a thread, with a chained cause and a note."""
        try:
            raise KeyError(exc + text)
        except KeyError as inner:
            err = RuntimeError(exc)
            err.add_note(exc)
            raise err from inner

    @tool(retries=2)
    async def refuse(text: str) -> str:
        """Fail with a message for the model."""
        raise ToolError("REFUSED", f"{tool_msg}: {text}", retryable=True, details={"echo": text})

    @tool(destructive=True)
    async def delete_note(text: str) -> str:
        """Delete a note."""
        return f"deleted {text} {res}"

    @tool(timeout=0.01)
    async def slow(text: str) -> str:
        """Too slow."""
        await asyncio.Event().wait()
        return text

    @tool
    async def bad_result(text: str) -> Any:
        """Returns junk."""
        return {text: object()}

    @tool
    async def wrong_type(text: str) -> int:
        """Returns the wrong type."""
        return text  # type: ignore[return-value]

    @tool(read_only=True, cache_ttl=60, rate_limit="100/minute")
    async def lookup(text: str) -> str:
        """Cached lookup."""
        return res + text

    registry = ToolRegistry(
        [store_note, explode, explode_sync, refuse, delete_note, slow, bad_result, wrong_type, lookup]
    )
    sink = InMemoryAuditSink()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    events: list[ToolEvent] = []
    ex = ToolExecutor(registry, audit=sink, tracer_provider=provider, retry_backoff=0.001)
    ex.subscribe(events.append)

    async def async_subscriber(event: ToolEvent) -> None:
        events.append(event)

    ex.subscribe(async_subscriber)
    ctx = ToolContext(user_id="u1", trace_id="t1", conversation_id="conv1", state={"seed": state_value})
    args = json.dumps({"text": arg})
    results: list[ToolResult] = []

    async def run(name_: str, arguments: Any = args, **kwargs: Any) -> ToolResult:
        r = await ex.execute(ToolCall(name=name_, arguments=arguments), ctx, **kwargs)
        results.append(r)
        return r

    assert (await run("store_note")).value["receipt"] == res
    await run("explode")
    await run("explode_sync")
    await run("refuse")
    await run("slow")
    await run("bad_result")
    await run("wrong_type")
    await run("lookup")
    assert (await run("lookup")).cached
    await run("store_note", json.dumps({"text": 5, "extra": arg}))
    await run("store_note", '{"text": "' + arg)
    await run(name + arg)
    held = await run("delete_note")
    assert held.confirmation_id is not None and arg in (held.message or "")
    results.append(await ex.approve(held.confirmation_id, ctx))
    held2 = await run("delete_note", json.dumps({"text": arg + "2"}))
    assert held2.confirmation_id is not None
    held3 = await run("delete_note", json.dumps({"text": arg + "3"}))
    assert held3.confirmation_id is not None  # approved as the person edited it
    results.append(await ex.approve(held3.confirmation_id, ctx, arguments={"text": arg + "changed"}))
    results.append(await ex.deny(held2.confirmation_id, ctx, reason=reason))
    results.extend(
        await ex.chain(
            [
                {"id": "a", "tool": "store_note", "arguments": {"text": arg}},
                {"id": "b", "tool": "explode", "arguments": {"text": "$a.receipt"}},
            ],
            ctx,
        )
    )
    results.extend(await ex.execute_many([ToolCall(name="explode", arguments=args)] * 3, ctx))
    await ex.aclose()
    provider.shutdown()

    # What the API returns on purpose: values, confirmation summaries, tool messages, validation echoes.
    assert any(arg in (r.message or "") for r in results if r.status == "confirmation_required")
    assert any(r.error is not None and reason in r.error.message for r in results)
    # ... but never the text of an unexpected exception, not even to the model.
    assert all(exc not in json.dumps(r.to_dict(), default=str) for r in results)

    observed: list[str] = list(everything.texts)
    observed.append(caplog.text)
    observed.extend(repr(e) for e in events)
    observed.extend(json.dumps(e.to_dict(), default=str) for e in events)
    observed.extend(json.dumps(r.to_dict()) for r in sink.records)
    observed.extend(str(r) for r in sink.records)
    for span in exporter.get_finished_spans():
        observed.append(span.to_json())
    observed.extend(repr(p) for p in await ex.pending_confirmations(ctx))
    assert len(events) > 40 and len(sink.records) >= 20 and exporter.get_finished_spans()
    assert any("ValueError" in text for text in observed)  # the failures were logged...
    blob = "\n".join(observed)
    for planted in (arg, res, exc, tool_msg, reason, state_value, name):
        assert planted not in blob, planted  # ... without any planted value
    failed = [e for e in events if getattr(e, "exception", None) is not None]
    assert failed  # the live exception is handed to in-process subscribers on purpose
