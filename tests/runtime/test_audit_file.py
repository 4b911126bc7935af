"""JSONLinesAuditSink: one JSON line per call, written in batches, never any content."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from toolrun import ToolCall, ToolContext, ToolError, ToolExecutor, ToolRegistry, tool
from toolrun.runtime import JSONLinesAuditSink

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
    assert len(path.read_text().splitlines()) == 3  # one full batch written, two lines waiting
    sink.close()
    await executor.aclose()

    text = path.read_text()
    assert CANARY not in text
    records = [json.loads(line) for line in text.splitlines()]
    assert [r["call_id"] for r in records] == ["c1", "c2", "c3", "c4", "c5"]
    assert [r["outcome"] for r in records] == ["ok", "error", "error", "confirmation_required", "error"]
    assert [r["code"] for r in records] == [None, "BAD_TEXT", "INVALID_ARGUMENTS", None, "NOT_FOUND"]
    assert {r["principal"] for r in records} == {"u1"}
    assert {r["trace_id"] for r in records} == {"trace-1"}
    assert all(r["arguments_hash"] for r in records[:4])


def test_stream_target_batch_one_and_close_is_idempotent() -> None:
    stream = io.StringIO()
    sink = JSONLinesAuditSink(stream, batch=1)
    from toolrun.runtime import AuditRecord

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
