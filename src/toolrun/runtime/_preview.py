"""A tool's preview, run: the text the person approves, made by the application's own code under a time box.

What a preview is (the tool's function, how its text is cleaned and bounded) is
`toolrun.approvals`'; running it is the executor's, as running a tool is: a read-only copy of the
arguments, the executor's worker threads for a sync preview, and the tools' abandonment for an async one.
The confirmation stage and `ToolExecutor.approve` / `preview_edit` call `make_preview`.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import inspect
import logging
import types
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from toolrun.approvals._review import clean_preview, preview_function
from toolrun.runtime import _errors
from toolrun.runtime._logging import log_exception
from toolrun.runtime._run import _Abandoned, _boxed, _outer_cancelled, _Resume
from toolrun.tools import Tool, ToolContext

if TYPE_CHECKING:
    from toolrun.runtime._executor import ToolExecutor

__all__ = ["PREVIEW_TIMEOUT", "make_preview"]

_logger = logging.getLogger("toolrun")

PREVIEW_TIMEOUT = 5.0
"""Seconds a preview may take before the person is shown the plain summary instead."""


def _read_only(arguments: Mapping[str, Any]) -> Mapping[str, Any]:
    """A view of the validated arguments a preview cannot change the call through."""
    try:
        return types.MappingProxyType(copy.deepcopy(dict(arguments)))
    except Exception:  # values that cannot be copied: the view still keeps the mapping itself intact
        return types.MappingProxyType(dict(arguments))


async def make_preview(
    executor: ToolExecutor, tool: Tool, arguments: Mapping[str, Any], ctx: ToolContext[Any], summary: str
) -> str | None:
    """The text the person approves for this call, or None when the tool has no preview.

    The preview gets a read-only copy of the arguments and the call's context, and `PREVIEW_TIMEOUT`
    seconds (a sync preview runs in the executor's worker threads). An async preview is abandoned as a
    tool is: one that catches its cancellation and goes on gets the executor's `cancel_grace`, then is
    closed, so no preview holds the call (and the request waiting on it) much past its time. When it
    raises, times out or returns something other than text, the person gets `summary` under a line
    saying so; the error is logged with an error id, never its message unless the executor logs
    exception messages.
    """
    fn = preview_function(tool)
    if fn is None:
        return None
    view = _read_only(arguments)
    try:
        if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__):
            text = await _async_preview(fn(view, ctx), executor.cancel_grace)
        else:
            async with asyncio.timeout(PREVIEW_TIMEOUT):
                loop = asyncio.get_running_loop()
                text = await loop.run_in_executor(executor.thread_pool, functools.partial(fn, view, ctx))
            if inspect.isawaitable(text):
                text = await _async_preview(text, executor.cancel_grace)
        if not isinstance(text, str) or not text.strip():
            raise TypeError(f"a preview must return non-empty text, not {type(text).__name__}")
        return clean_preview(text)
    except Exception as exc:
        error_id = _errors.new_error_id()
        log_exception(
            _logger,
            "The preview of tool %r failed: %s (error_id=%s); the summary is shown instead",
            exc,
            tool.name,
            type(exc).__qualname__,
            error_id,
            level=logging.WARNING,
            redact=not executor.log_exception_messages,
        )
        return (
            f"(The preview of this action could not be made, error id {error_id}; here is the call.)\n"
            + summary
        )


async def _async_preview(awaitable: Any, grace: float) -> Any:
    """An async preview's text under `PREVIEW_TIMEOUT`, with the tools' abandonment (`_run._Resume`)."""
    if type(awaitable) is not types.CoroutineType:  # an awaitable object: the plain time box
        async with asyncio.timeout(PREVIEW_TIMEOUT):
            return await awaitable
    try:
        first = awaitable.send(None)
    except StopIteration as stop:
        return stop.value
    try:
        return await _boxed(_Resume(awaitable, first, grace), PREVIEW_TIMEOUT, PREVIEW_TIMEOUT, False)
    except _Abandoned:
        if _outer_cancelled():  # the caller was cancelled meanwhile: that goes on up
            raise asyncio.CancelledError from None
        raise
