"""One tool call, and 10,000 concurrent ones — toolrun's executor beside the floor and the peers.

toolrun's rows (both scenarios), each op building its ``ToolCall`` and awaiting
``ToolExecutor.execute(call, context)``, then ``result.render()`` (the text the model reads):

* ``toolrun``: the full default pipeline, everything on: the default 30 s timeout, an event subscriber
  (a sync function that counts events, so ``ToolStarted`` and ``ToolFinished`` are built and delivered),
  and the audit trail really written: the ``toolrun.audit`` logger at INFO with a ``StreamHandler`` on a
  null stream (the record is built, passed to the handler, formatted into its text line and written;
  only the bytes go nowhere). OpenTelemetry is installed here but no SDK provider is set, as in an app
  that does not trace: one check per call.
* ``toolrun_jsonl``: the same everything-on pipeline, with the audit trail written to a real JSON-Lines
  file by ``JSONLinesAuditSink`` instead of through ``logging``: the call queues its record, the call that
  fills a batch of 256 encodes it, and the sink's writer thread writes it. That thread runs inside the
  timed batches, so its work is counted (under the GIL it takes turns with the loop's thread).
* ``toolrun_quiet``: the same executor with nobody listening (no subscriber, the audit logger not
  enabled): what it costs when observation is off.

Run: ``PYTHONPATH=src python bench/executor.py [--quick]`` (needs the ``bench`` extra for the peers).
"""

from __future__ import annotations

import logging
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _peers_executor
from _harness import Op

from toolrun import Tool, ToolCall, ToolContext, ToolRegistry
from toolrun.runtime import JSONLinesAuditSink, ToolEvent, ToolExecutor


class NullStream:
    """A text stream that drops what it is given (``write`` and ``flush`` do nothing)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def audit_on() -> None:
    """Attach a handler to the audit logger, as a deployment that keeps an audit trail does."""
    logger = logging.getLogger("toolrun.audit")
    if not any(getattr(h, "bench_null", False) for h in logger.handlers):
        handler = logging.StreamHandler(NullStream())
        handler.bench_null = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def make_toolrun(fn: _peers_executor.ToolFn) -> Op:
    audit_on()
    events = [0]

    def count(event: ToolEvent) -> None:
        events[0] += 1

    executor = ToolExecutor(ToolRegistry([Tool.from_function(fn)]))
    executor.subscribe(count)
    return _op(executor, fn.__name__)


def make_toolrun_jsonl(fn: _peers_executor.ToolFn) -> Op:
    """The same pipeline, the audit trail written to a real JSON-Lines file instead of through logging."""
    events = [0]

    def count(event: ToolEvent) -> None:
        events[0] += 1

    path = Path(tempfile.mkdtemp(prefix="toolrun-bench-")) / "audit.jsonl"
    sink = JSONLinesAuditSink(path)
    executor = ToolExecutor(ToolRegistry([Tool.from_function(fn)]), audit=sink, audit_logger=None)
    executor.subscribe(count)
    return _op(executor, fn.__name__)


def make_toolrun_quiet(fn: _peers_executor.ToolFn) -> Op:
    executor = ToolExecutor(ToolRegistry([Tool.from_function(fn)]), audit_logger=None)
    return _op(executor, fn.__name__)


def _op(executor: ToolExecutor, name: str) -> Op:
    context: ToolContext[Any] = ToolContext(user_id="bench-user")
    args = _peers_executor.ARGS_JSON
    call_id = _peers_executor.CALL_ID
    execute = executor.execute

    async def call() -> str:
        result = await execute(ToolCall(id=call_id, name=name, arguments=args), context)
        return result.render()

    return call


if __name__ == "__main__":
    _peers_executor.NOTES["toolrun"] = "ToolExecutor.execute: timeout + event subscriber + audit log record"
    _peers_executor.NOTES["toolrun_jsonl"] = (
        "ToolExecutor.execute: timeout + event subscriber + audit to a JSON-Lines file (JSONLinesAuditSink)"
    )
    _peers_executor.NOTES["toolrun_quiet"] = "ToolExecutor.execute: timeout, nobody observing"
    _peers_executor.run(
        toolrun={
            "toolrun": make_toolrun,
            "toolrun_jsonl": make_toolrun_jsonl,
            "toolrun_quiet": make_toolrun_quiet,
        },
        argv=sys.argv[1:],
    )
