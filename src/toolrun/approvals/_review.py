"""What the person sees and what decides for them: previews written from the application's own records,
standing approval rules, and what an edit changed. The confirmation stage and `ToolExecutor.approve` share
them.

```
held call ─► the user's rules for this tool (unexpired, constraints equal)
    │           ├─ deny  ─► CONFIRMATION_DENIED (reason "rule"; audited with rule_id)
    │           └─ allow ─► runs (audited with rule_id)
    └─ no rule ─► preview(arguments, ctx) ─► pending confirmation {summary, preview} ─► person decides
                     └─ fails / times out ─► the summary, under a line saying the preview failed
```
"""

from __future__ import annotations

import asyncio
import copy
import functools
import inspect
import logging
import types
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from toolrun.store import ApprovalRule, ApprovalRuleStore
from toolrun.tools import Tool, ToolContext

if TYPE_CHECKING:
    from toolrun.runtime._executor import ToolExecutor

# `toolrun.runtime` imports this package, so its helpers are imported where they are used, never at
# import time (`import toolrun.approvals` alone must work).

__all__ = ["PREVIEW_TIMEOUT", "describe_changes", "make_preview", "matching_rule", "preview_function"]

_logger = logging.getLogger("toolrun")

PREVIEW_TIMEOUT = 5.0
"""Seconds a preview may take before the person is shown the plain summary instead."""
MAX_PREVIEW_CHARS = 2_000
"""A longer preview is cut here, with a visible marker (the full arguments stay one click away)."""


def preview_function(tool: Tool) -> Any:
    """The tool's preview: the `preview` option, or a `preview(arguments, ctx)` method of a `Tool`
    subclass; None without one."""
    fn = tool.options.preview
    if fn is not None:
        return fn
    method = getattr(tool, "preview", None)
    return method if callable(method) else None


def _clean(text: str) -> str:
    """The preview as shown: every invisible or control character except newlines escaped (a right-to-left
    override or a zero-width space could otherwise hide part of the action), cut to a bounded length."""
    text = text.strip()
    if len(text) > MAX_PREVIEW_CHARS:
        text = text[:MAX_PREVIEW_CHARS] + " … (preview cut)"
    if all(ch.isprintable() or ch == "\n" for ch in text):
        return text
    return "".join(
        ch
        if ch.isprintable() or ch == "\n"
        else (f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
        for ch in text
    )


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
        return _clean(text)
    except Exception as exc:
        from toolrun.runtime import _errors
        from toolrun.runtime._logging import log_exception

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
    from toolrun.runtime._run import _Abandoned, _boxed, _outer_cancelled, _Resume

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


def _same(a: Any, b: Any) -> bool:
    from toolrun.runtime._audit import canonical_json
    from toolrun.runtime._convert import json_safe

    try:
        return canonical_json(json_safe(a)) == canonical_json(json_safe(b))
    except Exception:  # no JSON form (`ResultNotJSON`) or no canonical one: not the same
        return False


def matching_rule(
    rules: Sequence[ApprovalRule], tool: str, arguments: Mapping[str, Any], now: float
) -> ApprovalRule | None:
    """The rule that decides this call: a matching `deny` rule first, else a matching `allow` rule, else
    None. A rule matches when it is for `tool`, unexpired, and every constrained argument is equal."""
    allow: ApprovalRule | None = None
    for rule in rules:
        if rule.tool != tool or rule.expired(now):
            continue
        constraints = rule.arguments or {}
        if any(
            name not in arguments or not _same(arguments[name], value) for name, value in constraints.items()
        ):
            continue
        if rule.decision == "deny":
            return rule
        if allow is None:
            allow = rule
    return allow


async def find_rule(
    store: ApprovalRuleStore | None, user_id: str | None, tool: str, arguments: Mapping[str, Any], now: float
) -> ApprovalRule | None:
    """`matching_rule` over `user_id`'s rules in `store` (no user, no store, or an empty store: None)."""
    if store is None or not user_id or store.empty() is True:
        return None
    return matching_rule(await store.list_rules(user_id, tool=tool), tool, arguments, now)


def describe_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """One line per argument the person changed: `name: old → new` (added and removed ones too)."""
    from toolrun.runtime._audit import canonical_json
    from toolrun.runtime._convert import json_safe

    def show(value: Any) -> str:
        try:
            text = canonical_json(json_safe(value)).decode("utf-8", "replace")
        except Exception:
            text = f"<{type(value).__name__}>"
        return text if len(text) <= 200 else text[:200] + "…"

    lines: list[str] = []
    for name in dict.fromkeys([*before, *after]):
        if name not in after:
            lines.append(f"{name}: {show(before[name])} → (removed)")
        elif name not in before:
            lines.append(f"{name}: (not set) → {show(after[name])}")
        elif not _same(before[name], after[name]):
            lines.append(f"{name}: {show(before[name])} → {show(after[name])}")
    return lines
