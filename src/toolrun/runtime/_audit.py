"""One audit record per call: who ran what, when, with which outcome; never what was said.

A record holds the tool name, call id, trace and conversation ids, the principal, a keyed hash of the
canonical arguments (so identical calls can be correlated without storing their values), the outcome,
the error code, the duration and the attempts. Never argument values, results, messages or user text.

Records go to the `toolrun.audit` logger at INFO (the record object is the log message, rendered as one
`key=value` line by `str()`, and is also attached as `LogRecord.audit` for structured handlers) and to any
`AuditSink` given to the executor. Nothing is built when the logger is not enabled for INFO and no sink
is configured.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import msgspec

from toolrun._json import canonical_json

if TYPE_CHECKING:
    from toolrun.results import ToolResult
    from toolrun.tools import ToolContext

__all__ = [
    "ArgumentHasher",
    "AuditRecord",
    "AuditSink",
    "AuditTrail",
    "InMemoryAuditSink",
    "audit_call_id",
    "emit_log_record",
    "log_audit_record",
]

AuditAction = Literal["execute", "approve", "deny"]


def audit_call_id(call_id: Any) -> str:
    """The call id an audit record (and a log line) carries: the id itself when it has the form every
    provider gives ids (1-64 of `[A-Za-z0-9_-]`, which the agent's model boundary ensures), else `~` and
    16 hex digits of a BLAKE2b hash of it.

    A call id is written by whoever calls the executor (a model through MCP or LangGraph, a client): a
    short one is no less their text than a long one. In its hashed form it cannot carry content or break
    the `key=value` line (`x outcome=ok`, a newline) or a column, and two records of one call still
    correlate. An empty id (a decision on a confirmation that names no call) stays empty.
    """
    if call_id == "":
        return ""
    if type(call_id) is str and len(call_id) <= 64 and call_id.isascii():  # the common case, fast
        rest = call_id.replace("_", "").replace("-", "")
        if not rest or rest.isalnum():
            return call_id
    raw = str(call_id).encode("utf-8", "surrogatepass")
    return "~" + hashlib.blake2b(raw, digest_size=8).hexdigest()


class AuditRecord(msgspec.Struct, frozen=True, gc=False):
    """What the audit trail keeps about one call. Content-free by construction, and immutable.

    A `msgspec.Struct`: the executor builds one per call on its hot path, where its C `__init__` costs
    less than a dataclass's (≈1.6k instructions a call), and `JSONLinesAuditSink` encodes a batch of them
    in one C call. Use keywords in your own code; `to_dict()` gives the fields by name.
    """

    action: AuditAction
    """`execute` (a call), `approve` (an approved call ran), `deny` (a pending call was refused)."""
    tool: str | None
    """The registered tool name; None when the model named no known tool."""
    call_id: str
    trace_id: str | None
    conversation_id: str | None
    principal: str | None
    """The context's `user_id`."""
    arguments_hash: str | None
    """Keyed BLAKE2b of the canonical JSON of the validated arguments (of the raw text when they did not
    validate); comparable only between records hashed with the same key."""
    outcome: str
    """`ok`, `error`, `confirmation_required` or `cancelled`."""
    code: str | None
    """The error code, when there is one."""
    duration_ms: float
    attempts: int
    cached: bool
    error_id: str | None
    confirmation_id: str | None
    timestamp: float
    """`time.time()` when the call ended."""
    rule_id: str | None = None
    """The standing approval rule (`ApprovalRule.id`) that approved or refused the call instead of a
    person, if one did."""

    def to_dict(self) -> dict[str, Any]:
        """The fields by name, in declaration order."""
        return msgspec.structs.asdict(self)

    def __str__(self) -> str:
        line = (
            f"audit action={self.action} tool={self.tool or '-'} call_id={self.call_id} "
            f"outcome={self.outcome} code={self.code or '-'} duration_ms={self.duration_ms:.3f} "
            f"attempts={self.attempts} principal={self.principal or '-'} args={self.arguments_hash or '-'}"
        )
        if self.trace_id:
            line += f" trace_id={self.trace_id}"
        if self.conversation_id:
            line += f" conversation_id={self.conversation_id}"
        if self.cached:
            line += " cached=true"
        if self.error_id:
            line += f" error_id={self.error_id}"
        if self.confirmation_id:
            line += f" confirmation_id={self.confirmation_id}"
        if self.rule_id:
            line += f" rule_id={self.rule_id}"
        return line


@runtime_checkable
class AuditSink(Protocol):
    """Receives every audit record. Called on the event loop: it must be quick and must not block
    (a durable sink queues records and writes them from its own task or thread)."""

    def write(self, record: AuditRecord) -> None: ...


class InMemoryAuditSink:
    """Keeps records in a list (tests, small tools)."""

    def __init__(self) -> None:
        self.records: list[AuditRecord] = []

    def write(self, record: AuditRecord) -> None:
        self.records.append(record)


# ------------------------------------------------------------------------------------------------------
# Canonical JSON and keyed hashes


class ArgumentHasher:
    """Keyed BLAKE2b-128 of canonical JSON, with one secret key per executor.

    The key makes the hashes useless for guessing argument values by brute force (a user id or a short
    number hashes to something only the key holder can reproduce). Deployments with several processes
    sharing confirmations or audit correlation must give every process the same key.
    """

    __slots__ = ("_base",)

    def __init__(self, key: bytes) -> None:
        if not 16 <= len(key) <= 64:
            raise ValueError("The hash key must be 16 to 64 bytes long.")
        self._base = hashlib.blake2b(key=key, digest_size=16)

    def digest(self, data: bytes) -> str:
        h = self._base.copy()
        h.update(data)
        return h.hexdigest()

    def arguments(self, arguments: Any) -> str:
        """Hash of validated arguments (canonical JSON)."""
        h = self._base.copy()
        h.update(canonical_json(arguments))
        return h.hexdigest()

    def raw(self, arguments: Any) -> str:
        """Hash of arguments as the model sent them (used when they did not validate)."""
        if arguments is None:
            return self.digest(b"")
        if isinstance(arguments, str):
            return self.digest(arguments.encode("utf-8", "surrogatepass"))
        return self.digest(canonical_json(arguments))


# ------------------------------------------------------------------------------------------------------
# Log records, quickly

_LogRecord = logging.LogRecord
_new_record = _LogRecord.__new__
_record_factory = logging.getLogRecordFactory
_now = time.time
_local = threading.local()  # per thread: {(logger name, level): the constant fields of a record}


def _forget_templates() -> None:
    _local.__dict__.clear()


os.register_at_fork(after_in_child=_forget_templates)  # the process id is part of every template


def _template(logger_name: str, level: int) -> dict[str, Any]:
    try:
        templates: dict[tuple[str, int], dict[str, Any]] = _local.templates
    except AttributeError:
        templates = _local.templates = {}
    key = (logger_name, level)
    template = templates.get(key)
    if template is None:
        rec = _LogRecord(logger_name, level, "(toolrun)", 0, "", None, None, func="audit")
        template = dict(rec.__dict__)
        if len(templates) > 64:
            templates.clear()
        templates[key] = template
    return template


def log_audit_record(logger: logging.Logger, record: AuditRecord) -> None:
    """Log `record` at INFO on `logger`, as its message and as the `audit` attribute of the log record.

    Never raises: logging's handlers report their own errors, and a filter that raises is reported to the
    `toolrun` logger (its message redacted).
    """
    try:
        emit_log_record(logger, logging.INFO, record, {"audit": record}, created=record.timestamp)
    except Exception as exc:
        from toolrun.runtime._logging import log_exception

        try:
            log_exception(logging.getLogger("toolrun"), "Writing an audit record failed", exc)
        except Exception:  # the logging setup itself is broken; the call must still complete
            pass


def emit_log_record(
    logger: logging.Logger,
    level: int,
    message: Any,
    extra: dict[str, Any] | None = None,
    *,
    created: float | None = None,
) -> None:
    """Log `message` (any object; `str()` is applied only when a handler formats it) at `level`, with
    the `extra` attributes on the record.

    Same record as `logger.log(level, message, extra=extra)` would make, built faster: the stack is not
    walked to find the caller (the record names `(toolrun)` as its file), and the per-thread constant
    fields are copied from a template. When an application installed its own `LogRecord` factory, the
    factory is used as usual.
    """
    if _record_factory() is not _LogRecord:
        record = logger.makeRecord(logger.name, level, "(toolrun)", 0, message, (), None, "audit", extra)
    else:
        now = _now() if created is None else created
        record = _new_record(_LogRecord)
        values = record.__dict__
        values.update(_template(logger.name, level))
        values["created"] = now
        values["msecs"] = int((now - int(now)) * 1000) + 0.0
        values["relativeCreated"] = (now - _START) * 1000
        values["msg"] = message
        if extra:
            values.update(extra)
    logger.handle(record)


_START: float = getattr(logging, "_startTime", time.time())


class AuditTrail:
    """Where an executor's audit records go (its sinks and its logger), and the one place a record of a
    call, an approval or a denial is built (`write`).

    Args:
        audit: The sinks (one, several or None).
        logger: The logger records go to at INFO (a name or a logger; None for none).
    """

    __slots__ = ("logger", "sinks")

    def __init__(
        self, audit: AuditSink | Sequence[AuditSink] | None, logger: logging.Logger | str | None
    ) -> None:
        if audit is None:
            self.sinks: tuple[AuditSink, ...] = ()
        elif isinstance(audit, AuditSink):
            self.sinks = (audit,)
        else:
            self.sinks = tuple(audit)
        self.logger = logging.getLogger(logger) if isinstance(logger, str) else logger

    def enabled(self) -> bool:
        """Whether a record would go anywhere (a sink, or the logger enabled for INFO)."""
        logger = self.logger
        return bool(self.sinks) or (logger is not None and logger.isEnabledFor(logging.INFO))

    def write(
        self,
        action: Any,
        result: ToolResult,
        tool_name: str | None,
        ctx: ToolContext[Any],
        arguments_hash: str | None,
        confirmation_id: str | None = None,
        outcome: str | None = None,
        rule_id: str | None = None,
    ) -> None:
        """Build the record of `result` (its status, or `outcome`) and write it to every sink and the
        logger; a failing sink is logged and never stops the others."""
        error = result.error
        record = AuditRecord(  # positional: one C call
            action,
            tool_name,
            audit_call_id(result.call_id),
            ctx.trace_id,
            ctx.conversation_id,
            ctx.user_id,
            arguments_hash,
            outcome or result.status,
            error.code if error is not None else None,
            result.duration * 1000.0,
            result.attempts,
            result.cached,
            error.details.get("error_id") if error is not None else None,
            confirmation_id,
            time.time(),
            rule_id,
        )
        for sink in self.sinks:
            try:
                sink.write(record)
            except Exception as exc:
                from toolrun.runtime._logging import log_exception

                log_exception(logging.getLogger("toolrun"), "Audit sink %r failed", exc, sink)
        logger = self.logger
        if logger is not None and logger.isEnabledFor(logging.INFO):
            log_audit_record(logger, record)

    def flush(self) -> list[Coroutine[Any, Any, Any]]:
        """Flush the sinks with a synchronous `flush`; return the coroutines of those with an async one."""
        import inspect

        from toolrun.runtime._logging import log_exception

        pending: list[Coroutine[Any, Any, Any]] = []
        for sink in self.sinks:
            flush = getattr(sink, "flush", None)
            if callable(flush):
                try:
                    result = flush()
                except Exception as exc:
                    log_exception(logging.getLogger("toolrun"), "Audit sink %r failed to flush", exc, sink)
                    continue
                if inspect.iscoroutine(result):
                    pending.append(result)
        return pending
