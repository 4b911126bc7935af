"""`JSONLinesAuditSink`: a durable audit trail, one JSON object per call, without the cost of `logging`.

The stdlib logging path builds a `LogRecord` and runs handlers and formatters for every call, which costs
more than the whole rest of the executor. This sink encodes each record (content-free by construction:
see `AuditRecord`) to one line and keeps the lines in memory until `batch` of them are waiting (or
`flush()`/`close()` is called), then writes them with one `write`. A crash loses at most the lines not yet
flushed: choose `batch=1` when every record must reach the file before the call returns.
"""

from __future__ import annotations

import os
import threading
from typing import IO, Any

from pydantic_core import to_json

from toolrun.runtime._audit import AuditRecord

__all__ = ["JSONLinesAuditSink"]


class JSONLinesAuditSink:
    """Appends audit records as JSON Lines to a file (or any text stream).

    Args:
        target: A path (opened for appending in binary, created if missing), or an open stream: binary
            streams get UTF-8 bytes, text streams get text.
        batch: Write once this many lines are waiting (1: write every record at once).
    """

    def __init__(self, target: str | os.PathLike[str] | IO[str] | IO[bytes], *, batch: int = 64) -> None:
        if batch < 1:
            raise ValueError("batch must be at least 1.")
        if isinstance(target, str | os.PathLike):
            self._stream: IO[Any] = open(target, "ab")  # noqa: SIM115 - closed in close()
            self._owns = True
        else:
            self._stream = target
            self._owns = False
        self._text = not self._owns and not _is_binary(self._stream)
        self._batch = batch
        self._lines: list[bytes] = []
        self._lock = threading.Lock()  # the executor calls from the loop; flush() may come from elsewhere
        self.closed = False

    def write(self, record: AuditRecord) -> None:
        """Queue one record; write the batch when it is full."""
        # pydantic-core encodes this record about four times faster than the stdlib encoder.
        line = to_json(
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
                "duration_ms": record.duration_ms,
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
            data = b"\n".join(self._lines) + b"\n"
            self._lines.clear()
            self._stream.write(data.decode("utf-8") if self._text else data)
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


def _is_binary(stream: IO[Any]) -> bool:
    mode = getattr(stream, "mode", "")
    if isinstance(mode, str) and "b" in mode:
        return True
    import io

    return isinstance(stream, io.BufferedIOBase | io.RawIOBase)
