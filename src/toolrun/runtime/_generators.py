"""Async generator tools: partial results while they run, the last one as the result.

The rule, like the AI SDK's preliminary tool results: every yield is the whole result so far (not a delta),
and the last one is the result, checked against the output type like any return value; a generator that
yields nothing ends `RESULT_INVALID`. Each yield is reported as progress (`ToolContext.report_progress`,
its value as text, and as JSON data to a reporter that takes values), so partial results reach every door
progress reaches and never the audit; reports are throttled here, before any text is made, so a generator
that yields 10,000 times a second costs a clock read per yield. The generator runs inside the executor's
time box like any coroutine and is closed (`aclose`) when the call times out or is cancelled. Usage and
what each door shows: docs/rich-results.md, "Tools that yield partial results".
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Generator
from typing import Any

from toolrun._json import ResultNotJSON, json_safe
from toolrun.content import CONTENT_TYPES, ToolOutput
from toolrun.results import ErrorCode, ToolError
from toolrun.tools import ToolContext
from toolrun.tools._context import ProgressThrottle

__all__ = ["PARTIAL_TEXT_CHARS", "PARTIAL_VALUE_CHARS", "drain", "partial_text", "partial_value"]

PARTIAL_TEXT_CHARS = 2000
"""The longest text of a partial result sent as a progress message (longer ones are cut, with `…`)."""

PARTIAL_VALUE_CHARS = 32_000
"""The largest partial result (compact JSON characters) sent as a value too; a larger one goes as text."""

_DEFAULT_INTERVAL = 0.1
_NOTHING: Any = object()
_monotonic = time.monotonic


async def drain(generator: AsyncIterator[Any], context: ToolContext[Any]) -> Any:
    """Run an async generator tool to its end: report its partial results, return its last value."""
    reporter = context.progress
    interval = reporter.interval if isinstance(reporter, ProgressThrottle) else _DEFAULT_INTERVAL
    # a reporter that takes values gets each partial result as a value too; any other, as text
    values = reporter if isinstance(reporter, ProgressThrottle) and reporter.takes_partials else None
    last: Any = _NOTHING
    count = 0
    next_report = 0.0  # the first partial is reported at once
    step_of: Any = generator.__anext__
    try:
        while True:
            # The step runs right here; most steps finish without suspending (no frame, no await).
            step = step_of()
            try:
                try:
                    pending = step.send(None)
                except StopIteration as stop:
                    value = stop.value
                else:
                    value = await _Rest(step, pending)
            except StopAsyncIteration:
                break
            last = value
            count += 1
            if reporter is not None:
                now = _monotonic()
                if now >= next_report:
                    next_report = now + interval
                    if values is None:
                        await context.report_progress(count, None, partial_text(value))
                    else:
                        await _report_value(values, count, value)
    finally:
        # The generator stops here if the call ended early (timeout, cancellation, a failing report):
        # a no-op when it ran to its end or raised.
        aclose = getattr(generator, "aclose", None)
        if aclose is not None:
            await aclose()
    if last is _NOTHING:
        raise ToolError(
            ErrorCode.RESULT_INVALID,
            "The tool ended without a result (it yielded no value).",
            recover_action="Report this to the tool's developer; calling it again will not help.",
        )
    return last


async def _report_value(reporter: ProgressThrottle, count: int, value: Any) -> None:
    """One partial result, as its value and its text, to a reporter that takes values."""
    try:
        await reporter.report_partial(count, partial_text(value), partial_value(value))
    except Exception:  # progress is advisory, as in `ToolContext.report_progress`
        return


class _Rest:
    """The rest of one step of the generator (`generator.__anext__()`) whose first part suspended on
    `pending`; like `await`, except that a `GeneratorExit` thrown in while it waits (the executor closing
    an abandoned call, see `_run._Resume`) reaches the generator where it waits, so its `finally` blocks
    run. A plain `await` would only close the `asend` object (Python 3.11), leaving the generator marked
    running: it could then be neither closed nor finalised."""

    __slots__ = ("_pending", "_step")

    def __init__(self, step: Any, pending: Any) -> None:
        self._step = step
        self._pending = pending

    def __await__(self) -> Generator[Any, Any, Any]:
        step = self._step
        value = self._pending
        self._pending = None
        closing = False
        while True:
            try:
                sent = yield value
            except BaseException as exc:
                closing = closing or isinstance(exc, GeneratorExit)
                try:
                    value = step.throw(exc)
                except StopIteration as stop:
                    if closing:  # it yielded again instead of stopping
                        raise RuntimeError("async generator ignored GeneratorExit") from None
                    return stop.value
                except StopAsyncIteration:
                    if closing:
                        raise GeneratorExit from None
                    raise
            else:
                try:
                    value = step.send(sent)
                except StopIteration as stop:
                    if closing:
                        raise RuntimeError("async generator ignored GeneratorExit") from None
                    return stop.value
                except StopAsyncIteration:
                    if closing:  # its cleanup awaited, and is done now
                        raise GeneratorExit from None
                    raise


def partial_value(value: Any) -> Any:
    """A partial result as JSON data for a transport that shows it as a value (content items by their kind
    and size, as in `partial_text`); None when it has no JSON form or its JSON is over
    `PARTIAL_VALUE_CHARS` characters (its text still goes)."""
    if isinstance(value, ToolOutput):
        value = value.value
    elif isinstance(value, CONTENT_TYPES):
        return None
    try:
        data = json_safe(value)
        size = len(json.dumps(data, ensure_ascii=False, separators=(",", ":")))
    except (ResultNotJSON, TypeError, ValueError):
        return None
    return data if size <= PARTIAL_VALUE_CHARS else None


def partial_text(value: Any) -> str | None:
    """A partial result as a progress message: a string as it is, anything else as compact JSON (content
    items by their kind and size), cut to `PARTIAL_TEXT_CHARS`; None when it has no JSON form."""
    if isinstance(value, str):
        text = value
    else:
        if isinstance(value, ToolOutput):
            value = value.value
        elif isinstance(value, CONTENT_TYPES):
            return f"[{type(value).__name__.lower()}]"
        try:
            text = json.dumps(json_safe(value), ensure_ascii=False, separators=(",", ":"))
        except (ResultNotJSON, TypeError, ValueError):
            return None
    if len(text) > PARTIAL_TEXT_CHARS:
        text = text[: PARTIAL_TEXT_CHARS - 1] + "…"
    return text
