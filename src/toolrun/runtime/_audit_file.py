"""`JSONLinesAuditSink`: a durable audit trail, one JSON object per call, without the cost of `logging`.

The stdlib logging path builds a `LogRecord` and runs handlers and formatters for every call, which costs
more than the whole rest of the executor. This sink encodes each record (content-free by construction:
see `AuditRecord`) to one line and keeps the lines in memory until `batch` of them are waiting (or
`flush()`/`close()` is called), then writes them with one `write`. A crash loses at most the lines not yet
flushed: choose `batch=1` when every record must reach the file before the call returns.
"""

from __future__ import annotations

import json
import os
import threading
from typing import IO, Any

from toolrun.runtime._audit import AuditRecord

__all__ = ["JSONLinesAuditSink"]

_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class JSONLinesAuditSink:
    """Appends audit records as JSON Lines to a file (or any text stream).

    Args:
        target: A path (opened for appending, created if missing) or an open text stream.
        batch: Write once this many lines are waiting (1: write every record at once).
    """

    def __init__(self, target: str | os.PathLike[str] | IO[str], *, batch: int = 64) -> None:
        if batch < 1:
            raise ValueError("batch must be at least 1.")
        if isinstance(target, str | os.PathLike):
            self._stream: IO[str] = open(target, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
            self._owns = True
        else:
            self._stream = target
            self._owns = False
        self._batch = batch
        self._lines: list[str] = []
        self._lock = threading.Lock()  # the executor calls from the loop; flush() may come from elsewhere
        self.closed = False

    def write(self, record: AuditRecord) -> None:
        """Queue one record; write the batch when it is full."""
        line = _ENCODE(
            {
                "action": record.action,
                "tool": record.tool,
                "call_id": record.call_id,
                "trace_id": record.trace_id,
                "conversation_id": record.conversation_id,
                "principal": record.principal,
                "arguments_hash": record.arguments_hash,
                "outcome": record.outcome,
                "code": record.code,
                "duration_ms": round(record.duration_ms, 3),
                "attempts": record.attempts,
                "cached": record.cached,
                "error_id": record.error_id,
                "confirmation_id": record.confirmation_id,
                "timestamp": record.timestamp,
            }
        )
        lines = self._lines
        lines.append(line)
        if len(lines) >= self._batch:
            self.flush()

    def flush(self) -> None:
        """Write every waiting line and flush the stream."""
        with self._lock:
            if not self._lines or self.closed:
                return
            text = "\n".join(self._lines) + "\n"
            self._lines.clear()
            self._stream.write(text)
            self._stream.flush()

    def close(self) -> None:
        """Flush, and close the file if this sink opened it."""
        self.flush()
        with self._lock:
            if self.closed:
                return
            self.closed = True
            if self._owns:
                self._stream.close()

    def __enter__(self) -> JSONLinesAuditSink:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()
