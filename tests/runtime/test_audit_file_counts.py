"""`JSONLinesAuditSink` bookkeeping: counts across batches, closed streams, text and binary targets, the
writer thread (pinned by mutation testing, docs/mutation.md)."""

from __future__ import annotations

import io
import json
import logging
import threading
from pathlib import Path

import pytest

from toolrun.runtime._audit_file import JSONLinesAuditSink, _is_binary

from .test_audit_record import record


def test_written_counts_add_up_over_batches_and_failures_too(caplog: pytest.LogCaptureFixture) -> None:
    stream = io.StringIO()
    sink = JSONLinesAuditSink(stream, batch=1)
    sink.write(record(call_id="a"))
    sink.write(record(call_id="b"))
    assert sink.written == 2 and sink.failed == 0
    assert [json.loads(line)["call_id"] for line in stream.getvalue().splitlines()] == ["a", "b"]
    stream.close()
    with caplog.at_level(logging.ERROR, logger="toolrun"):
        sink.write(record(call_id="c"))
        sink.write(record(call_id="d"))
    assert sink.written == 2 and sink.failed == 2
    assert caplog.text.count("Writing 1 audit records failed") == 2
    sink.close()


def test_a_binary_stream_gets_bytes_and_a_text_stream_text() -> None:
    raw = io.BytesIO()
    with JSONLinesAuditSink(raw, batch=1) as sink:
        sink.write(record())
    assert raw.getvalue().endswith(b"\n") and json.loads(raw.getvalue())["call_id"] == "c1"

    class ModeB(io.StringIO):
        mode = "wb"

    assert _is_binary(raw) and _is_binary(ModeB()) and not _is_binary(io.StringIO())
    with io.FileIO(__file__, "r") as unbuffered:  # a raw binary stream
        assert _is_binary(unbuffered) is True

    class NoMode:
        pass

    assert _is_binary(NoMode()) is False  # type: ignore[arg-type]


def test_the_writer_thread_is_a_named_daemon_and_close_is_idempotent(tmp_path: Path) -> None:
    sink = JSONLinesAuditSink(tmp_path / "audit.jsonl", batch=2, flush_interval=0.05)
    [thread] = [t for t in threading.enumerate() if t.name == "toolrun-audit-writer" and t.is_alive()][-1:]
    assert thread.daemon and sink.closed is False
    sink.write(record(call_id="x"))
    sink.flush()
    assert sink.written == 1
    sink.close()
    sink.close()
    assert sink.closed is True and not thread.is_alive()
    assert (tmp_path / "audit.jsonl").read_text().count("\n") == 1


@pytest.mark.parametrize("interval", [0, -1.0, float("inf"), float("nan")])
def test_a_flush_interval_must_be_positive_and_finite(interval: float) -> None:
    with pytest.raises(ValueError, match=r"^flush_interval must be a positive, finite number of seconds\.$"):
        JSONLinesAuditSink(io.BytesIO(), flush_interval=interval)
    with pytest.raises(ValueError, match=r"^batch must be at least 1\.$"):
        JSONLinesAuditSink(io.BytesIO(), batch=0)


def test_a_batch_of_one_writes_in_the_callers_thread() -> None:
    stream = io.BytesIO()
    sink = JSONLinesAuditSink(stream, batch=1)
    assert sink._thread is None
    sink.write(record())
    assert sink.written == 1 and stream.getvalue().count(b"\n") == 1
    sink.close()
    two = JSONLinesAuditSink(io.BytesIO(), batch=2)
    assert two._thread is not None
    two.close()
