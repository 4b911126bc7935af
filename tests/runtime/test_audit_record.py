"""The audit record's text line and the log record it travels in (pinned by mutation testing)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

from toolrun.runtime._audit import AuditRecord, emit_log_record, log_audit_record


def record(**changes: Any) -> AuditRecord:
    values: dict[str, Any] = {
        "action": "execute",
        "tool": "add",
        "call_id": "c1",
        "trace_id": None,
        "conversation_id": None,
        "principal": None,
        "arguments_hash": None,
        "outcome": "ok",
        "code": None,
        "duration_ms": 1.23456,
        "attempts": 1,
        "cached": False,
        "error_id": None,
        "confirmation_id": None,
        "timestamp": 1_700_000_000.25,
    }
    values.update(changes)
    return AuditRecord(**values)


def test_the_line_shows_dashes_for_missing_values_and_no_optional_parts() -> None:
    assert str(record(tool=None)) == (
        "audit action=execute tool=- call_id=c1 outcome=ok code=- duration_ms=1.235 attempts=1 "
        "principal=- args=-"
    )


def test_the_line_shows_every_field_that_is_set_in_order() -> None:
    full = record(
        action="approve",
        trace_id="t1",
        conversation_id="conv",
        principal="u1",
        arguments_hash="abc",
        outcome="error",
        code="timeout",
        attempts=2,
        cached=True,
        error_id="err_1",
        confirmation_id="conf_1",
    )
    assert str(full) == (
        "audit action=approve tool=add call_id=c1 outcome=error code=timeout duration_ms=1.235 attempts=2 "
        "principal=u1 args=abc trace_id=t1 conversation_id=conv cached=true error_id=err_1 "
        "confirmation_id=conf_1"
    )
    assert full.to_dict()["confirmation_id"] == "conf_1" and len(full.to_dict()) == 16


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, rec: logging.LogRecord) -> None:
        self.records.append(rec)


@pytest.fixture
def logger() -> Iterator[tuple[logging.Logger, Collect]]:
    log = logging.getLogger(f"toolrun.test.audit_record.{time.monotonic_ns()}")
    handler = Collect()
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    log.propagate = False
    yield log, handler
    log.removeHandler(handler)


def test_the_fast_log_record_matches_what_logging_would_build(logger: tuple[logging.Logger, Collect]) -> None:
    log, handler = logger
    audit = record()
    log_audit_record(log, audit)
    [rec] = handler.records
    reference = log.makeRecord(
        log.name, logging.INFO, "(toolrun)", 0, audit, (), None, "audit", {"audit": audit}
    )
    assert rec.name == log.name and rec.levelno == logging.INFO and rec.levelname == "INFO"
    assert rec.msg is audit and rec.audit is audit and rec.getMessage() == str(audit)  # type: ignore[attr-defined]
    assert rec.created == audit.timestamp and rec.msecs == 250.0
    assert rec.relativeCreated == pytest.approx(
        reference.relativeCreated + (audit.timestamp - reference.created) * 1000
    )
    assert (rec.pathname, rec.lineno, rec.funcName, rec.args) == ("(toolrun)", 0, "audit", None)
    assert (rec.process, rec.thread, rec.threadName) == (
        reference.process,
        reference.thread,
        reference.threadName,
    )
    # `message` is added by whichever handler formatted the record first (pytest's own, here).
    assert set(vars(rec)) - {"message"} == set(vars(reference)) - {"message"}


def test_emit_uses_the_clock_without_created_and_each_level_its_own_template(
    logger: tuple[logging.Logger, Collect],
) -> None:
    log, handler = logger
    before = time.time()
    emit_log_record(log, logging.WARNING, "w", {"k": 1})
    emit_log_record(log, logging.INFO, "i")
    emit_log_record(log, logging.WARNING, "w2", None, created=5.5)
    first, second, third = handler.records
    assert before <= first.created <= time.time() and first.k == 1  # type: ignore[attr-defined]
    assert (first.levelname, second.levelname, third.levelname) == ("WARNING", "INFO", "WARNING")
    assert third.created == 5.5 and third.msecs == 500.0 and not hasattr(second, "k")


def test_a_custom_record_factory_is_used(logger: tuple[logging.Logger, Collect]) -> None:
    log, handler = logger
    made: list[str] = []
    old = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        rec = old(*args, **kwargs)
        made.append(rec.name)
        return rec

    logging.setLogRecordFactory(factory)
    try:
        emit_log_record(log, logging.INFO, "m", {"x": 2})
    finally:
        logging.setLogRecordFactory(old)
    [rec] = handler.records
    assert made == [log.name] and rec.x == 2 and rec.funcName == "audit"  # type: ignore[attr-defined]


def test_a_failing_filter_does_not_escape_and_is_reported_to_the_toolrun_logger(
    logger: tuple[logging.Logger, Collect],
) -> None:
    log, _ = logger

    def boom(rec: logging.LogRecord) -> bool:
        raise RuntimeError("secret detail")

    log.addFilter(boom)
    toolrun_log = logging.getLogger("toolrun")
    seen = Collect()
    toolrun_log.addHandler(seen)
    try:
        log_audit_record(log, record())  # must not raise
    finally:
        toolrun_log.removeHandler(seen)
        log.removeFilter(boom)
    assert [r.getMessage() for r in seen.records] == ["Writing an audit record failed"]


def test_a_batch_is_encoded_in_one_pass_to_the_same_lines_as_record_by_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import json

    from toolrun.runtime import _audit_file

    records = [record(call_id="c1", cached=True), record(call_id="c2", code="boom", outcome="error")]
    expected = b"".join(_audit_file._encode_one(r) + b"\n" for r in records)
    assert [json.loads(line) for line in expected.splitlines()] == [r.to_dict() for r in records]

    def slow_path(record: AuditRecord) -> bytes:
        raise AssertionError("ordinary records take the one-pass path")

    monkeypatch.setattr(_audit_file, "_encode_one", slow_path)
    assert _audit_file._encode(records) == expected


def test_a_record_with_a_lone_surrogate_is_still_one_json_line() -> None:
    import json

    from toolrun.runtime import _audit_file

    odd = record(call_id="c\ud800", principal="u1")
    [line] = _audit_file._encode(
        [
            odd,
        ]
    ).splitlines()
    assert line.isascii() and json.loads(line)["call_id"] == "c\ud800"
    assert _audit_file._encode_one(odd) == line


def test_the_one_pass_batch_holds_its_record_count_of_lines_with_odd_ids() -> None:
    import json

    from toolrun.runtime import _audit_file

    # a call id that looks like a boundary, commas, quotes and newlines: still one line per record
    ids = ['x},{"action":"deny"', "a,b", 'q"uote', "new\nline", "é"]
    data = _audit_file._encode([record(call_id=i) for i in ids])
    assert data.endswith(b"\n")
    assert [json.loads(line)["call_id"] for line in data.splitlines()] == ids


def test_a_record_is_immutable_and_its_dict_keeps_the_declared_field_order() -> None:
    r = record()
    with pytest.raises(AttributeError):
        r.outcome = "ok"  # type: ignore[misc]
    assert list(r.to_dict()) == [
        "action", "tool", "call_id", "trace_id", "conversation_id", "principal", "arguments_hash",
        "outcome", "code", "duration_ms", "attempts", "cached", "error_id", "confirmation_id", "timestamp",
        "rule_id",
    ]  # fmt: skip
