"""`JSONLinesAuditSink`: a durable audit trail, one JSON object per call, off the call path.

The stdlib logging path builds a `LogRecord` and runs handlers and formatters for every call, which costs
more than the whole rest of the executor. This sink does almost nothing on the call path: `write()`
appends the record (content-free by construction: see `AuditRecord`) to a queue. What is queued is
encoded in one go (one msgspec call) and appended to the file with one `write` by a writer thread:

* as soon as `batch` records are waiting (the `write()` that fills a batch encodes it in the caller's
  thread, in one C call, while the records are still in that CPU's cache; the writer thread is woken once
  and only makes the system call, since encoding there costs more CPU in GIL hand-overs and cross-core
  traffic: bench/README.md, "msgspec records, batches encoded by the call that fills them"),
* every `flush_interval` seconds (so a quiet service still writes within that time),
* on `flush()` and `close()` (both return once everything queued before them is written),
* at interpreter exit, for sinks still open (the exit handler is registered when the first sink opens,
  not at import).

So the event loop never waits for the disk. A crash of the process (not an exception: those are handled)
loses at most the records of the last `flush_interval`; choose `batch=1` when every record must reach the
file before the call returns (then `write()` writes at once, in the caller's thread).
"""

from __future__ import annotations

import atexit
import collections
import io
import json
import logging
import os
import threading
import weakref
from typing import IO, Any

import msgspec
from pydantic_core import to_json

from toolrun.runtime._audit import AuditRecord

__all__ = ["JSONLinesAuditSink"]

_logger = logging.getLogger("toolrun")

_open_sinks: weakref.WeakSet[JSONLinesAuditSink] = weakref.WeakSet()
_exit_hook = threading.Lock()
_exit_hooked = False

_encode_lines = msgspec.json.Encoder().encode_lines


def _encode(records: list[AuditRecord]) -> bytes:
    """JSON Lines for `records` (each line ends with a newline), in one C call for the batch."""
    try:
        return _encode_lines(records)
    except Exception:  # e.g. a lone surrogate in an id, an odd value: record by record, with fallbacks
        return b"".join(_encode_one(record) + b"\n" for record in records)


def _encode_one(record: AuditRecord) -> bytes:
    values = record.to_dict()
    try:
        return to_json(values, fallback=str)
    except Exception:  # e.g. a lone surrogate in an id: the stdlib escapes it
        return json.dumps(values, default=str, ensure_ascii=True).encode("ascii")


class JSONLinesAuditSink:
    """Appends audit records as JSON Lines to a file (or any stream), from a writer thread of its own.

    Args:
        target: A path (opened for appending in binary, created if missing), or an open stream: binary
            streams get UTF-8 bytes, text streams get text.
        batch: Write as soon as this many records are waiting. 1: write each record at once, in the
            caller's thread, before `write()` returns (no writer thread).
        flush_interval: Seconds between writes of whatever is waiting, however few.

    Use it as a context manager, or call `close()`: it writes what is left and stops the thread.
    `ToolExecutor.close()`/`aclose()` call `flush()` on their sinks.
    """

    def __init__(
        self,
        target: str | os.PathLike[str] | IO[str] | IO[bytes],
        *,
        batch: int = 256,
        flush_interval: float = 1.0,
    ) -> None:
        if batch < 1:
            raise ValueError("batch must be at least 1.")
        if not 0 < flush_interval < float("inf"):
            raise ValueError("flush_interval must be a positive, finite number of seconds.")
        if isinstance(target, str | os.PathLike):
            self._stream: IO[Any] = open(target, "ab")  # noqa: SIM115 - closed in close()
            self._owns = True
        else:
            self._stream = target
            self._owns = False
        self._text = not self._owns and not _is_binary(self._stream)
        self._batch = batch
        self._interval = flush_interval
        self._queue: collections.deque[AuditRecord] = collections.deque()
        self._chunks: collections.deque[tuple[int, bytes]] = collections.deque()  # encoded, not yet written
        self._encode_lock = threading.Lock()  # records leave the queue and become a chunk in their order
        self._io_lock = threading.Lock()  # one writer of the stream at a time, chunks in order
        self._wake = threading.Event()
        self.closed = False
        self.written = 0
        """Records written so far."""
        self.failed = 0
        """Records that could not be encoded or written (the stream raised); each failure is logged."""
        self._thread: threading.Thread | None = None
        if batch > 1:
            self._thread = threading.Thread(target=self._run, name="toolrun-audit-writer", daemon=True)
            self._thread.start()
        _open_sinks.add(self)
        _hook_exit()

    def write(self, record: AuditRecord) -> None:
        """Queue one record (written by the writer thread; at once with `batch=1`)."""
        queue = self._queue
        queue.append(record)
        waiting = len(queue)
        if waiting >= self._batch:
            if self._thread is None:
                self._write_out()
            else:  # encode here (one C call, ≈0.3 µs a record), write in the writer thread
                self._encode_waiting()
                self._wake.set()

    def flush(self) -> None:
        """Write every record queued so far, and flush the stream; returns when they are written."""
        self._write_out()

    def close(self) -> None:
        """Write what is left, stop the writer thread, and close the file if this sink opened it."""
        if self.closed:
            return
        self.closed = True
        self._batch = 1  # a late record (a call still finishing) is written at once, in its caller
        thread, self._thread = self._thread, None
        if thread is not None:
            self._wake.set()
            if thread is not threading.current_thread():
                thread.join()
        self._write_out()
        with self._io_lock:
            if self._owns:
                self._stream.close()
        _open_sinks.discard(self)

    def __enter__(self) -> JSONLinesAuditSink:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------------

    def _run(self) -> None:
        wake, interval = self._wake, self._interval
        while not self.closed:
            wake.wait(interval)
            wake.clear()
            self._write_out()

    def _encode_waiting(self) -> None:
        """Move every queued record into one encoded chunk (in queue order)."""
        with self._encode_lock:
            queue = self._queue
            n = len(queue)
            if not n:
                return
            records = [queue.popleft() for _ in range(n)]  # appends meanwhile stay queued, in order
            try:
                self._chunks.append((n, _encode(records)))
            except Exception as exc:  # not even record by record: count and log them, keep going
                self.failed += n
                from toolrun.runtime._logging import log_exception

                log_exception(_logger, "Encoding %d audit records failed", exc, n)

    def _write_out(self) -> None:
        with self._io_lock:
            self._encode_waiting()
            chunks = self._chunks
            while chunks:
                n, data = chunks.popleft()
                try:  # a closed file raises here too
                    self._stream.write(data.decode("utf-8") if self._text else data)
                    self._stream.flush()
                except Exception as exc:
                    self.failed += n
                    from toolrun.runtime._logging import log_exception

                    log_exception(_logger, "Writing %d audit records failed", exc, n)
                else:
                    self.written += n


def _hook_exit() -> None:
    """Register `_close_open_sinks` at interpreter exit, once, when the first sink opens."""
    global _exit_hooked
    if _exit_hooked:
        return
    with _exit_hook:
        if not _exit_hooked:
            atexit.register(_close_open_sinks)
            _exit_hooked = True


def _close_open_sinks() -> None:
    for sink in list(_open_sinks):
        try:
            sink.close()
        except Exception:  # exiting anyway; the log may already be gone
            pass


def _is_binary(stream: IO[Any]) -> bool:
    mode = getattr(stream, "mode", "")
    if isinstance(mode, str) and "b" in mode:
        return True
    return isinstance(stream, io.BufferedIOBase | io.RawIOBase)
