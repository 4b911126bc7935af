"""Structured JSON logs and Prometheus metrics, both content-free.

One log line per request, per run and per tool call, with request/conversation/run/call/user ids, the
outcome and the duration (a tool call's line names its tool by its metric label, below, and its call id as
the audit does) — never message text, tool arguments or results (a canary test holds us to it).
Metrics live in a `CollectorRegistry` of their own per app (no process globals): requests, runs and tool
calls by outcome, latency histograms, and audit records dropped. Every label value comes from a closed set
the server defines: routes are templates (`unmatched` for the rest), and a tool label is a registered
tool's name or `unregistered` — a model chooses the names it calls, and a name it invented (or copied from
a task title) must not become a series.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Container
from typing import Any

import msgspec
from prometheus_client import CollectorRegistry, Counter, Histogram

from toolrun.agent import AgentRun
from toolrun.results import ToolResult
from toolrun.runtime._audit import audit_call_id
from toolrun.tools import ToolCall

__all__ = ["UNREGISTERED", "JSONFormatter", "Observer", "configure_logging"]

logger = logging.getLogger("toolrun.server")

_encode_line = msgspec.json.Encoder(enc_hook=str).encode  # as `json.dumps(default=str)`, several times faster

# Attributes every LogRecord has: anything else a caller passed in `extra` is a field of the JSON line.
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime", "taskName"}
_STANDARD.add("color_message")  # uvicorn's terminal copy of the message


def _content_free(record: logging.LogRecord) -> bool:
    """Libraries log SQL parameters, request bodies and stream chunks at DEBUG/INFO (aiosqlite, sqlalchemy,
    sse_starlette, httpx, ...): user content. Only toolrun's and uvicorn's own records pass below WARNING."""
    return record.levelno >= logging.WARNING or record.name.startswith(("toolrun", "uvicorn"))


class JSONFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and the fields passed in `extra`.

    Exception tracebacks are reduced to the exception's type name: their text may hold user data.
    """

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                data[key] = value
        if record.exc_info and record.exc_info[0] is not None:
            data["exception"] = record.exc_info[0].__name__
        try:
            return _encode_line(data).decode()
        except (UnicodeEncodeError, TypeError, ValueError, OverflowError):
            return json.dumps(data, default=str, ensure_ascii=False)


def configure_logging(level: str = "INFO") -> None:
    """Send every log record to stderr as JSON lines (the CLI calls this; tests install their own)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JSONFormatter())
    handler.addFilter(_content_free)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    # Records the filter would drop are not even made: libraries (httpx logs every request at INFO) stay at
    # WARNING, toolrun's and uvicorn's loggers take `level` (a LogRecord costs microseconds per request).
    for name in ("toolrun", "uvicorn"):
        logging.getLogger(name).setLevel(level.upper())
    root.setLevel(max(logging.WARNING, logging.getLogger("toolrun").level))
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        log = logging.getLogger(name)
        log.handlers[:] = []
        log.propagate = True
    logging.getLogger("uvicorn.access").disabled = True  # we log each request ourselves, with its ids


def _log(level: int, message: str, fields: dict[str, Any]) -> None:
    """`logger.log(level, message, extra=fields)` without `findCaller` (a walk up the stack per line: the
    JSON lines carry no source location) — a few of these every turn."""
    if logger.isEnabledFor(level):
        logger.handle(logger.makeRecord(logger.name, level, __file__, 0, message, (), None, extra=fields))


UNREGISTERED = "unregistered"
"""The tool label of every call whose tool is not registered."""


class Observer:
    """Logs and metrics of one app.

    Args:
        registry: The Prometheus registry (default: a new one).
        tools: The registered tool names (anything with `in`: a `ToolRegistry`); a call of any other
            name is counted under the label `unregistered`. None: every call is `unregistered`.
    """

    def __init__(
        self, registry: CollectorRegistry | None = None, *, tools: Container[str] | None = None
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.tools = tools
        r = self.registry
        self.requests = Counter(
            "toolrun_http_requests",
            "HTTP requests by route and status.",
            ["method", "route", "status"],
            registry=r,
        )
        self.request_seconds = Histogram(
            "toolrun_http_request_duration_seconds",
            "HTTP request latency (to the end of the response body).",
            ["method", "route"],
            registry=r,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.runs = Counter("toolrun_runs", "Agent runs by final status.", ["status"], registry=r)
        self.purged_rows = Counter(
            "toolrun_purged_rows",
            "Expired rows the periodic purge deleted, by store (confirmations: the never-decided ones).",
            ["store"],
            registry=r,
        )
        self.run_seconds = Histogram(
            "toolrun_run_duration_seconds",
            "Run latency.",
            registry=r,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
        )
        self.tool_calls = Counter(
            "toolrun_tool_calls", "Tool calls by tool and outcome.", ["tool", "outcome"], registry=r
        )
        self.tool_seconds = Histogram(
            "toolrun_tool_call_duration_seconds",
            "Tool call latency.",
            ["tool"],
            registry=r,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 15),
        )
        # The labelled child of each label tuple, kept: `labels()` validates and locks on every call, and each
        # label value comes from a closed set (see the module docstring), as the registry's own children do.
        self._children: dict[tuple[Any, ...], Any] = {}
        self.audit_dropped = Counter(
            "toolrun_audit_records_dropped",
            "Audit records that could not be written, by reason (queue_full, invalid, database).",
            ["reason"],
            registry=r,
        )

    def _child(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def tool_label(self, name: str) -> str:
        """The metric label of a call of `name`: the name when it is registered, else `unregistered`."""
        tools = self.tools
        try:
            return name if tools is not None and isinstance(name, str) and name in tools else UNREGISTERED
        except Exception:  # a container that cannot answer: the safe label
            return UNREGISTERED

    def audit_records_dropped(self, reason: str, count: int) -> None:
        """Count audit records the sink dropped (`SQLAuditSink(on_drop=...)`)."""
        self.audit_dropped.labels(reason).inc(count)

    def request(
        self, *, method: str, route: str, status: int, seconds: float, request_id: str, user_id: str | None
    ) -> None:
        self._child(self.requests, method, route, str(status)).inc()
        self._child(self.request_seconds, method, route).observe(seconds)
        _log(
            logging.INFO,
            "request",
            {
                "event": "request",
                "request_id": request_id,
                "method": method,
                "route": route,
                "status": status,
                "duration_ms": round(seconds * 1000, 3),
                "user_id": user_id,
            },
        )

    def tool_call(
        self, user_id: str, conversation_id: str, run_id: str, call: ToolCall, result: ToolResult
    ) -> None:
        code = result.error.code if result.error is not None else None
        label = self.tool_label(call.name)
        self._child(self.tool_calls, label, result.status).inc()
        self._child(self.tool_seconds, label).observe(result.duration)
        _log(
            logging.INFO,
            "tool_call",
            {
                "event": "tool_call",
                "user_id": user_id,
                "conversation_id": conversation_id,
                "run_id": run_id,
                "call_id": audit_call_id(call.id),
                "tool": label,  # as in the metrics: a name the model made up is no log field either
                "outcome": result.status,
                "code": code,
                "duration_ms": round(result.duration * 1000, 3),
            },
        )

    def run_finished(
        self, user_id: str, conversation_id: str, run_id: str, run: AgentRun, seconds: float, resumed: bool
    ) -> None:
        self._child(self.runs, run.status).inc()
        self.run_seconds.observe(seconds)
        _log(
            logging.INFO,
            "run",
            {
                "event": "run",
                "user_id": user_id,
                "conversation_id": conversation_id,
                "run_id": run_id,
                "status": run.status,
                "resumed": resumed,
                "steps": run.steps,
                "tool_calls": len(run.tool_calls),
                "pending": len(run.pending),
                "duration_ms": round(seconds * 1000, 3),
            },
        )

    def run_error(
        self, user_id: str, conversation_id: str, run_id: str, exc: BaseException, error_id: str
    ) -> None:
        self.runs.labels("error").inc()
        logger.error(
            "run_error",
            extra={
                "event": "run_error",
                "user_id": user_id,
                "conversation_id": conversation_id,
                "run_id": run_id,
                "error": type(exc).__name__,
                "error_id": error_id,
            },
        )
