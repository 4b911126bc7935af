"""Every field of the audit record, on every path that writes one, in memory and on disk."""

from __future__ import annotations

import io
import json
import time
from typing import Any

import pytest

from toolrun import ErrorCode, ToolCall, ToolContext, ToolError, ToolExecutor, ToolRegistry, tool
from toolrun.runtime import AuditRecord, InMemoryAuditSink, JSONLinesAuditSink

from .conftest import call


@tool(read_only=True, cache_ttl=60)
async def lookup(key: str) -> str:
    """Look up a key (cached)."""
    return key.upper()


@tool
async def crash(n: int) -> int:
    """Always crashes."""
    raise RuntimeError("internal detail")


_flaky_runs: list[int] = []


@tool(retries=1)
async def flaky() -> str:
    """Fails once, retryably."""
    _flaky_runs.append(1)
    if len(_flaky_runs) % 2:
        raise ToolError("BUSY", "try again", retryable=True)
    return "ok"


@tool(destructive=True)
async def wipe(target: str) -> str:
    """Wipe a target."""
    return target


def _fields(record: AuditRecord) -> dict[str, Any]:
    out = record.to_dict()
    assert set(out) == {
        "action",
        "tool",
        "call_id",
        "trace_id",
        "conversation_id",
        "principal",
        "arguments_hash",
        "outcome",
        "code",
        "duration_ms",
        "attempts",
        "cached",
        "error_id",
        "confirmation_id",
        "timestamp",
        "rule_id",
    }
    return out


async def test_every_field_of_every_kind_of_record(make_executor: Any) -> None:
    memory = InMemoryAuditSink()
    stream = io.BytesIO()
    disk = JSONLinesAuditSink(stream, batch=1000, flush_interval=60)
    ex = make_executor(lookup, crash, flaky, wipe, audit=[memory, disk], audit_logger=None)
    ctx = ToolContext(user_id="u1", trace_id="trace-9", conversation_id="conv-3")
    other = ToolContext(user_id="u2", trace_id="trace-2", conversation_id="conv-2")
    before = time.time()

    results = [
        await ex.execute(call("lookup", {"key": "a"}, id="c1"), ctx),
        await ex.execute(call("lookup", {"key": "a"}, id="c2"), ctx),  # a cache hit
        await ex.execute(call("crash", {"n": 1}, id="c3"), ctx),
        await ex.execute(call("flaky", id="c4"), ctx),  # ok on the second attempt
        await ex.execute(call("lookp", {"key": "a"}, id="c5"), ctx),
        held := await ex.execute(call("wipe", {"target": "t"}, id="c6"), ctx),
    ]
    assert held.confirmation_id is not None
    results.append(await ex.approve(held.confirmation_id, ctx))
    denied = await ex.execute(call("wipe", {"target": "u"}, id="c7"), other)
    assert denied.confirmation_id is not None
    results += [denied, await ex.deny(denied.confirmation_id, other)]
    ex.close()
    after = time.time()

    records = [_fields(r) for r in memory.records]
    assert len(records) == len(results) == 9
    for record, result in zip(records, results, strict=True):
        assert record["call_id"] == result.call_id
        assert record["outcome"] == result.status
        assert record["code"] == (result.error.code if result.error else None)
        assert record["attempts"] == result.attempts and record["cached"] is result.cached
        assert record["duration_ms"] == result.duration * 1000.0
        assert before <= record["timestamp"] <= after
        assert record["error_id"] == (result.error.details.get("error_id") if result.error else None)
    c1, c2, c3, c4, c5, c6, approve, c7, deny = records
    hasher = ex.hasher
    assert c1 == {
        "action": "execute",
        "tool": "lookup",
        "call_id": "c1",
        "trace_id": "trace-9",
        "conversation_id": "conv-3",
        "principal": "u1",
        "arguments_hash": hasher.arguments({"key": "a"}),
        "outcome": "ok",
        "code": None,
        "duration_ms": c1["duration_ms"],
        "attempts": 1,
        "cached": False,
        "error_id": None,
        "confirmation_id": None,
        "timestamp": c1["timestamp"],
        "rule_id": None,
    }
    assert (c2["cached"], c2["attempts"], c2["arguments_hash"]) == (True, 0, c1["arguments_hash"])
    assert c3["code"] == ErrorCode.EXECUTION_FAILED and str(c3["error_id"]).startswith("err_")
    assert c3["error_id"] == results[2].error.details["error_id"]  # type: ignore[union-attr]
    assert (c4["code"], c4["attempts"], c4["outcome"]) == (None, 2, "ok")
    assert (c5["tool"], c5["code"]) == (None, ErrorCode.NOT_FOUND)
    assert c5["arguments_hash"] == hasher.raw('{"key": "a"}')
    assert (c6["outcome"], c6["confirmation_id"]) == ("confirmation_required", held.confirmation_id)
    assert approve["action"] == "approve" and approve["confirmation_id"] == held.confirmation_id
    assert approve["arguments_hash"] == c6["arguments_hash"] == hasher.arguments({"target": "t"})
    assert (approve["trace_id"], approve["conversation_id"], approve["outcome"]) == (
        "trace-9",
        "conv-3",
        "ok",
    )
    assert (c7["principal"], c7["trace_id"], c7["conversation_id"]) == ("u2", "trace-2", "conv-2")
    assert deny["action"] == "deny" and deny["confirmation_id"] == denied.confirmation_id
    assert (deny["code"], deny["principal"], deny["trace_id"]) == (
        ErrorCode.CONFIRMATION_DENIED,
        "u2",
        "trace-2",
    )
    assert {r["trace_id"] for r in records} == {"trace-9", "trace-2"}

    # The file holds the same records, field for field (ex.close() flushed it).
    on_disk = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert on_disk == records
    disk.close()


async def test_a_cancelled_call_is_audited_as_cancelled(make_executor: Any) -> None:
    import asyncio

    started = asyncio.Event()

    @tool
    async def hang(ctx: ToolContext) -> str:
        """Waits forever."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    memory = InMemoryAuditSink()
    ex = make_executor(hang, audit=memory, audit_logger=None)
    task = asyncio.ensure_future(ex.execute(call("hang", id="h1"), ToolContext(user_id="u", trace_id="t")))
    await started.wait()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    [record] = memory.records
    assert (record.call_id, record.outcome, record.code, record.principal, record.trace_id) == (
        "h1",
        "cancelled",
        None,
        "u",
        "t",
    )
    assert record.arguments_hash == ex.hasher.arguments({}) and record.cached is False


async def test_the_record_hashes_the_arguments_that_ran(make_executor: Any) -> None:
    """A stage may hash the arguments and a later one replace them: the record hashes what the handler
    got, whether a stage hashed that already or not."""
    from toolrun.runtime._invocation import CallNext, Invocation

    @tool
    async def echo(key: str) -> str:
        """Echo a key (no cache, no confirmation: no built-in stage hashes the arguments)."""
        return key

    class HashThenReplace:
        async def __call__(self, inv: Invocation, call_next: CallNext) -> Any:
            seen = inv.arguments_hash  # cached on the invocation for these arguments
            if inv.arguments["key"] == "swap":
                inv.arguments = {"key": "swapped"}
            assert seen
            return await call_next(inv)

    sink = InMemoryAuditSink()
    ex = make_executor(echo, audit=sink, audit_logger=None, middleware=[HashThenReplace()])
    assert (await ex.execute(call("echo", {"key": "keep"}))).value == "keep"
    assert (await ex.execute(call("echo", {"key": "swap"}))).value == "swapped"
    plain = make_executor(echo, audit=(plain_sink := InMemoryAuditSink()), audit_logger=None)
    await plain.execute(call("echo", {"key": "keep"}))
    kept, swapped = sink.records
    assert kept.arguments_hash == ex.hasher.arguments({"key": "keep"})
    assert (
        swapped.arguments_hash
        == ex.hasher.arguments({"key": "swapped"})
        != ex.hasher.arguments({"key": "swap"})
    )
    assert plain_sink.records[0].arguments_hash == plain.hasher.arguments({"key": "keep"})


@pytest.mark.parametrize(
    "call_id",
    [
        "x outcome=ok",
        "c1\naudit action=approve tool=delete_task outcome=ok",
        "Jane Doe's SSN",
        "ü",
        "a" * 65,
    ],
)
async def test_a_call_id_of_another_form_reaches_the_audit_hashed_never_as_written(call_id: str) -> None:
    """Whoever calls the executor writes the call id (MCP, LangGraph, a client): a short one is their
    text as much as a long one, and a space or newline in it would forge fields of the audit line."""
    sink = InMemoryAuditSink()

    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    executor = ToolExecutor(ToolRegistry([ping]), audit=sink)
    for _ in range(2):
        await executor.execute(ToolCall(id=call_id, name="ping", arguments="{}"), ToolContext(user_id="u1"))
    first, second = sink.records
    assert first.call_id == second.call_id  # records of one call still correlate
    assert first.call_id.startswith("~") and len(first.call_id) == 17
    assert call_id not in str(first) or call_id == ""
    line = str(first)
    assert "\n" not in line and line.count("outcome=") == 1 and line.count(" tool=") == 1


async def test_a_call_id_of_the_providers_form_reaches_the_audit_as_written() -> None:
    sink = InMemoryAuditSink()

    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    executor = ToolExecutor(ToolRegistry([ping]), audit=sink)
    for call_id in ("call_Ab3-x_9", "1", "a" * 64):
        await executor.execute(ToolCall(id=call_id, name="ping", arguments="{}"), ToolContext(user_id="u1"))
    assert [r.call_id for r in sink.records] == ["call_Ab3-x_9", "1", "a" * 64]
