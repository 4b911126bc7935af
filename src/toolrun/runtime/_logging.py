"""Logging without content: exceptions are logged with their type and traceback, their message redacted.

Exception messages routinely carry argument values and user data (`KeyError('alice@example.com')`), and
logs travel far. By default toolrun logs an unexpected exception as its type, its traceback (file, line,
function, source line) and its chain, with every message replaced by a marker. `ToolExecutor(
log_exception_messages=True)` logs the real exception instead, for development.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["REDACTED", "RedactedException", "log_exception", "redacted_exc_info"]

REDACTED = "[message redacted by toolrun]"

_MAX_CHAIN = 8


class RedactedException(Exception):
    """Stands in for an exception in a log record: same traceback and chain, no message.

    Tracebacks are formatted from the exception *value's* type, so each stand-in is an instance of a
    subclass carrying the original type's module and name: the log shows `KeyError: [message redacted
    by toolrun]` with the original stack.
    """


_stand_ins: dict[type[BaseException], type[RedactedException]] = {}


def _stand_in(kind: type[BaseException]) -> type[RedactedException]:
    cls = _stand_ins.get(kind)
    if cls is None:
        name = getattr(kind, "__name__", "Exception")
        namespace = {"__module__": kind.__module__, "__qualname__": kind.__qualname__}
        cls = type(name, (RedactedException,), namespace)
        if len(_stand_ins) > 512:
            _stand_ins.clear()
        _stand_ins[kind] = cls
    return cls


def _redact(exc: BaseException, depth: int) -> RedactedException:
    red = _stand_in(type(exc))(REDACTED)
    red.__traceback__ = exc.__traceback__
    if depth < _MAX_CHAIN:
        if exc.__cause__ is not None:
            red.__cause__ = _redact(exc.__cause__, depth + 1)
        elif exc.__context__ is not None and not exc.__suppress_context__:
            red.__context__ = _redact(exc.__context__, depth + 1)
    red.__suppress_context__ = exc.__suppress_context__
    return red


def redacted_exc_info(exc: BaseException) -> tuple[type[BaseException], BaseException, Any]:
    """An `exc_info` triple that formats as `exc` would, with every message (and note) removed."""
    red = _redact(exc, 0)
    return type(red), red, exc.__traceback__


def log_exception(
    logger: logging.Logger,
    message: str,
    exc: BaseException,
    *args: Any,
    level: int = logging.ERROR,
    redact: bool = True,
    one_line: bool = False,
) -> None:
    """Log `message % args` with `exc`'s traceback; its message is redacted unless `redact=False`.

    `one_line=True` is for failures the caller turns into a result and goes on (a tool that raised, a
    model that failed a run): the record at `level` is the line alone (it names the error id), and the
    traceback goes in a second record at DEBUG (with `redact=False` the line also carries the exception's
    message), so a working application's stderr is not a wall of
    stacks for failures it already handles.
    """
    if one_line:
        if logger.isEnabledFor(level):
            if redact:
                logger.log(level, message, *args)
            else:  # the developer asked for messages: the line carries it
                logger.log(level, message + ": %s", *args, exc)
        level = logging.DEBUG
        message = "Traceback of: " + message
    if not logger.isEnabledFor(level):
        return
    exc_info: Any = redacted_exc_info(exc) if redact else (type(exc), exc, exc.__traceback__)
    logger.log(level, message, *args, exc_info=exc_info)
