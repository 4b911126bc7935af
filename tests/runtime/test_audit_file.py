"""JSONLinesAuditSink: one JSON line per call, written in batches, never any content."""

from __future__ import annotations

import asyncio
import io
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from toolrun import ToolCall, ToolContext, ToolError, ToolExecutor, ToolRegistry, tool
from toolrun.runtime import AuditRecord, JSONLinesAuditSink, _audit_file
from waiting import wait_for

CANARY = "canary-7f3a9c-secret"


def make_executor(sink: JSONLinesAuditSink) -> ToolExecutor:
    @tool
    def echo(text: str) -> str:
        """Echo text."""
        if text.startswith("fail"):
            raise ToolError("BAD_TEXT", f"cannot echo {text}")
        return text

    @tool(destructive=True)
    def wipe(target: str) -> str:
        """Wipe a target."""
        return target

    return ToolExecutor(ToolRegistry([echo, wipe]), audit=sink, audit_logger=None)


async def test_one_line_per_call_and_no_content(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = JSONLinesAuditSink(path, batch=3)
    executor = make_executor(sink)
    ctx = ToolContext(user_id="u1", trace_id="trace-1")
    calls = [
        ToolCall(id="c1", name="echo", arguments=json.dumps({"text": CANARY})),
        ToolCall(id="c2", name="echo", arguments=json.dumps({"text": "fail " + CANARY})),
        ToolCall(id="c3", name="echo", arguments=json.dumps({"text": 1, "x": CANARY})),
        ToolCall(id="c4", name="wipe", arguments=json.dumps({"target": CANARY})),
        ToolCall(id="c5", name="nope", arguments=CANARY),
    ]
    for call in calls:
        await executor.execute(call, ctx)
    await executor.aclose()  # flushes the executor's sinks
    assert len(path.read_text().splitlines()) == 5
    sink.close()

    text = path.read_text()
    assert CANARY not in text
    records = [json.loads(line) for line in text.splitlines()]
    assert [r["call_id"] for r in records] == ["c1", "c2", "c3", "c4", "c5"]
    assert [r["outcome"] for r in records] == ["ok", "error", "error", "confirmation_required", "error"]
    assert [r["code"] for r in records] == [None, "BAD_TEXT", "INVALID_ARGUMENTS", None, "NOT_FOUND"]
    assert {r["principal"] for r in records} == {"u1"}
    assert {r["trace_id"] for r in records} == {"trace-1"}
    assert all(r["arguments_hash"] for r in records[:4])


def test_the_defaults_are_the_documented_ones() -> None:
    with JSONLinesAuditSink(io.BytesIO()) as sink:  # docs/runtime-isolation.md: 256 records, 1 second
        assert (sink._batch, sink._interval) == (256, 1.0)
    assert sink.closed is True


def test_stream_target_batch_one_and_close_is_idempotent() -> None:
    stream = io.StringIO()
    sink = JSONLinesAuditSink(stream, batch=1)
    record = AuditRecord(
        "execute", "echo", "c1", None, None, "u", "h", "ok", None, 1.23456, 1, False, None, None, 0.0
    )
    sink.write(record)
    assert json.loads(stream.getvalue())["duration_ms"] == 1.23456
    binary = io.BytesIO()
    with JSONLinesAuditSink(binary, batch=1) as to_bytes:
        to_bytes.write(record)
    assert json.loads(binary.getvalue())["tool"] == "echo"
    sink.close()
    sink.close()
    assert not stream.closed  # a stream given to the sink stays the caller's
    with pytest.raises(ValueError, match="batch"):
        JSONLinesAuditSink(stream, batch=0)


# ---------------------------------------------------------------------------------------------------------
# Off the call path: a writer thread, batches, the interval, close, nothing lost


def _record(call_id: str, **changes: object) -> AuditRecord:
    values: dict[str, object] = {
        "action": "execute",
        "tool": "echo",
        "call_id": call_id,
        "trace_id": "t",
        "conversation_id": "conv",
        "principal": "u",
        "arguments_hash": "h",
        "outcome": "ok",
        "code": None,
        "duration_ms": 1.5,
        "attempts": 1,
        "cached": False,
        "error_id": None,
        "confirmation_id": None,
        "timestamp": 1.0,
    }
    values.update(changes)
    return AuditRecord(**values)  # type: ignore[arg-type]


async def test_write_only_queues_and_the_writer_thread_writes_full_batches(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    with JSONLinesAuditSink(path, batch=4, flush_interval=60) as sink:
        for i in range(3):
            sink.write(_record(f"c{i}"))
        assert path.read_bytes() == b""  # nothing on the call path, and the batch is not full
        sink.write(_record("c3"))
        await wait_for(lambda: sink.written == 4)
        assert [json.loads(x)["call_id"] for x in path.read_text().splitlines()] == ["c0", "c1", "c2", "c3"]
        sink.write(_record("c4"))
    assert len(path.read_text().splitlines()) == 5 and sink.failed == 0  # close wrote the rest


def test_the_writer_is_woken_once_per_batch_not_on_every_write_after_it(tmp_path: Path) -> None:
    # Before, every write after a full batch woke the thread again until it got the GIL, each Event.set()
    # costing more than the record (bench/executor.py: 8,040 wake-ups for 20,000 calls).
    with JSONLinesAuditSink(tmp_path / "a.jsonl", batch=4, flush_interval=60) as sink:
        sets: list[int] = []

        class Wake:
            def set(self) -> None:
                sets.append(len(sink._chunks))

        real, sink._wake = sink._wake, Wake()  # type: ignore[assignment]  # the thread waits on `real`
        for i in range(10):
            sink.write(_record(f"c{i}"))
        sink._wake = real
        assert sets == [1, 2]  # one wake-up per full batch, each with its batch already encoded
        assert len(sink._queue) == 2  # the rest waits for the next batch, the interval or flush()
        sink.flush()
        assert sink.written == 10


async def test_a_full_batch_is_encoded_by_the_caller_and_written_by_the_thread() -> None:
    class Recording(io.BytesIO):
        write_threads: list[str] = []

        def write(self, data: Any) -> int:
            self.write_threads.append(threading.current_thread().name)
            return super().write(data)

    stream = Recording()
    with JSONLinesAuditSink(stream, batch=3, flush_interval=60) as sink:
        encoded_in: list[str] = []
        real_encode = _audit_file._encode

        def spy(records: list[AuditRecord]) -> bytes:
            encoded_in.append(threading.current_thread().name)
            return real_encode(records)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(_audit_file, "_encode", spy)
            for i in range(2):
                sink.write(_record(f"c{i}"))
            assert len(sink._queue) == 2 and encoded_in == []  # nothing but queueing until a batch is full
            sink.write(_record("c2"))  # fills the batch: encoded at once, here, even if the loop never runs
            assert not sink._queue and encoded_in == [threading.current_thread().name]
            await wait_for(lambda: sink.written == 3)
        lines = stream.getvalue().splitlines()
    assert [json.loads(x)["call_id"] for x in lines] == ["c0", "c1", "c2"]
    assert stream.write_threads == ["toolrun-audit-writer"]  # the caller never waits for the disk


async def test_records_that_cannot_be_encoded_are_counted_and_logged_and_the_sink_keeps_working(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "a.jsonl"
    with JSONLinesAuditSink(path, batch=2, flush_interval=60) as sink:

        def broken(records: list[AuditRecord]) -> bytes:
            raise RecursionError("no way to encode these")

        with monkeypatch.context() as patch:
            patch.setattr(_audit_file, "_encode", broken)
            sink.write(_record("c0"))
            sink.write(_record("c1"))  # a full batch: encoded by this write, where it fails
            assert sink.failed == 2 and not sink._queue
            sink.write(_record("c2"))
            sink.flush()  # the writer path fails the same way, and does not raise
            assert sink.failed == 3
        sink.write(_record("c3"))
        sink.flush()
    assert sink.written == 1 and [json.loads(x)["call_id"] for x in path.read_text().splitlines()] == ["c3"]
    assert [r.getMessage() for r in caplog.records if "audit records" in r.getMessage()] == [
        "Encoding 2 audit records failed",
        "Encoding 1 audit records failed",
    ]


async def test_the_interval_writes_a_batch_that_never_fills(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    with JSONLinesAuditSink(path, batch=1000, flush_interval=0.02) as sink:
        sink.write(_record("lonely"))
        await wait_for(lambda: sink.written == 1)
        assert json.loads(path.read_text())["call_id"] == "lonely"


def test_hostile_ids_cannot_split_or_forge_lines() -> None:
    stream = io.BytesIO()
    forged = '"},{"action":"approve","tool":"wipe'
    with JSONLinesAuditSink(stream, batch=100) as sink:
        sink.write(_record(forged, principal="}\n{"))
        sink.write(_record("lone \ud800 surrogate"))  # not UTF-8: the batch falls back, nothing is lost
        sink.write(_record("c3", code="X" * 3, error_id="err_1"))
    lines = stream.getvalue().splitlines()
    assert len(lines) == 3
    records = [json.loads(line) for line in lines]
    assert records[0]["call_id"] == forged and records[0]["principal"] == "}\n{"
    assert records[0]["action"] == "execute"
    assert records[1]["call_id"] == "lone \ud800 surrogate"
    assert (records[2]["code"], records[2]["error_id"]) == ("XXX", "err_1")


def test_a_record_after_close_is_written_at_once_or_counted_as_failed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stream = io.StringIO()
    sink = JSONLinesAuditSink(stream, batch=50)
    sink.close()
    sink.write(_record("late"))  # a call that finished after close: written in its caller's thread
    assert json.loads(stream.getvalue())["call_id"] == "late"
    owned = JSONLinesAuditSink(tmp_path / "b.jsonl", batch=50)
    owned.close()
    owned.write(_record("too late"))  # the sink's own file is closed: counted and logged, never raised
    assert (owned.written, owned.failed) == (0, 1)
    assert [r.getMessage() for r in caplog.records if "audit records" in r.getMessage()] == [
        "Writing 1 audit records failed"
    ]
    with pytest.raises(ValueError, match="flush_interval"):
        JSONLinesAuditSink(stream, flush_interval=0)


async def test_closing_the_executor_under_load_loses_no_record(tmp_path: Path) -> None:
    """Many calls in flight (async and in threads, ok and failing); the executor is closed in the middle.
    When `aclose()` returns, every call that had finished has its line on disk; once the rest finish and
    the sink is closed, there is exactly one line per call."""
    path = tmp_path / "audit.jsonl"
    sink = JSONLinesAuditSink(path, batch=16, flush_interval=60)  # only full batches and flush() write

    @tool
    async def slow(n: int) -> int:
        """Sleeps a little."""
        await asyncio.sleep(0.001 * (n % 7))
        if n % 5 == 0:
            raise ToolError("FIVE", "multiple of five")
        return n

    @tool
    def in_thread(n: int) -> int:
        """Sync work."""
        time.sleep(0.0005)
        return n

    executor = ToolExecutor(ToolRegistry([slow, in_thread]), audit=sink, audit_logger=None)
    finished: set[str] = set()

    async def one(i: int) -> None:
        name = ("slow", "in_thread", "missing")[i % 3]
        result = await executor.execute(ToolCall(id=f"c{i}", name=name, arguments={"n": i}))
        finished.add(result.call_id)

    tasks = [asyncio.ensure_future(one(i)) for i in range(300)]
    await wait_for(lambda: len(finished) >= 100)
    await executor.aclose()
    done_before_close = set(finished)
    on_disk = [json.loads(line)["call_id"] for line in path.read_text().splitlines()]
    assert done_before_close <= set(on_disk)
    await asyncio.gather(*tasks)
    sink.close()
    on_disk = [json.loads(line)["call_id"] for line in path.read_text().splitlines()]
    assert sorted(on_disk) == sorted(f"c{i}" for i in range(300))  # one each: none lost, none twice
    assert sink.failed == 0


class _AsyncFlushSink:
    """A sink whose writes go out in an async `flush` (like a database-backed sink)."""

    def __init__(self) -> None:
        self.queued: list[AuditRecord] = []
        self.written: list[AuditRecord] = []

    def write(self, record: AuditRecord) -> None:
        self.queued.append(record)

    async def flush(self) -> None:
        self.written += self.queued
        self.queued = []


async def test_aclose_awaits_an_async_flush_and_close_leaves_no_coroutine_behind() -> None:
    @tool
    def echo(text: str) -> str:
        """Echo text."""
        return text

    sink = _AsyncFlushSink()
    executor = ToolExecutor(ToolRegistry([echo]), audit=sink)
    await executor.execute(ToolCall(id="c1", name="echo", arguments={"text": "x"}))
    executor.close()  # cannot await: the async flush is not started (no "never awaited" warning either)
    assert sink.written == [] and len(sink.queued) == 1
    await executor.aclose()
    assert [r.call_id for r in sink.written] == ["c1"] and sink.queued == []


def test_a_stream_with_only_write_and_flush_is_written_to() -> None:
    # No `closed`, no `mode`: a minimal file-like object of an application's is a working target.
    class Minimal:
        def __init__(self) -> None:
            self.parts: list[str] = []

        def write(self, text: str) -> int:
            self.parts.append(text)
            return len(text)

        def flush(self) -> None:
            pass

    stream = Minimal()
    with JSONLinesAuditSink(stream, batch=2) as sink:  # type: ignore[arg-type]
        sink.write(_record("m1"))
        sink.write(_record("m2"))
    assert sink.failed == 0 and sink.written == 2
    assert [json.loads(line)["call_id"] for line in "".join(stream.parts).splitlines()] == ["m1", "m2"]


def test_the_exit_handler_is_registered_by_the_first_sink_not_at_import(tmp_path: Path) -> None:
    """Importing toolrun registers nothing at interpreter exit; the first sink does (once), and a sink
    still open at exit is closed then, its records written."""
    import subprocess
    import sys

    path = tmp_path / "audit.jsonl"
    script = f"""
import atexit
hooks = []
register = atexit.register
def record(fn, *args, **kwargs):
    hooks.append(fn.__module__ + "." + fn.__qualname__)
    return register(fn, *args, **kwargs)
atexit.register = record
import toolrun, toolrun.runtime
from toolrun.runtime import AuditRecord, JSONLinesAuditSink
mine = [h for h in hooks if h.startswith("toolrun.")]
assert mine == [], mine
sink = JSONLinesAuditSink({str(path)!r}, batch=100, flush_interval=60)
JSONLinesAuditSink({str(tmp_path / "other.jsonl")!r}).close()
mine = [h for h in hooks if h.startswith("toolrun.")]
assert mine == ["toolrun.runtime._audit_file._close_open_sinks"], mine
sink.write(AuditRecord(**{_record("c1").to_dict()!r}))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = path.read_text().splitlines()
    assert [json.loads(line)["call_id"] for line in lines] == ["c1"]
