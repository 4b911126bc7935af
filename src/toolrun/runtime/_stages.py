"""The built-in gates between validation and the run: confirmation, rate limit, cache.

Each is a small middleware object (`async __call__(invocation, call_next)`) with `applies_to(tool)`, so a
tool's chain holds only the stages its options ask for.
"""

from __future__ import annotations

import hmac
import json
import logging
import math
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any

import pydantic_core

from toolrun._json import ResultNotJSON, json_safe
from toolrun.approvals._review import find_rule
from toolrun.results import ToolResult
from toolrun.runtime import _errors
from toolrun.runtime._events import ConfirmationRequested, ConfirmationResolved
from toolrun.runtime._invocation import CallNext, Invocation
from toolrun.runtime._preview import make_preview
from toolrun.store import (
    NO_USER,
    ApprovalRuleStore,
    CacheStore,
    ConfirmationStore,
    PendingConfirmation,
    RateLimitStore,
)
from toolrun.tools import RateLimit, Tool

__all__ = ["CacheStage", "ConfirmationStage", "QuotaStage", "RateLimitStage", "summarize_call"]

_logger = logging.getLogger("toolrun")

DEFAULT_CONFIRMATION_TTL = 600.0
"""Seconds a pending confirmation can be approved: 10 minutes."""

SUMMARY_WIDTH = 100
"""Summary lines are folded at this many characters (a value is never cut, only wrapped)."""
MAX_SHOWN_VALUE = 4_000
"""A value whose text is longer than this is not shown in the summary, which says so plainly."""
MAX_SHOWN_TOTAL = 16_000
"""Past this many characters of values, further long values are not shown either (said plainly)."""
_ONE_LINE = 160
_LONG = 200


def _show(value: Any) -> str:
    """The value as exact JSON text, with every invisible or control character escaped.

    Nothing is cut: a right-to-left override or a zero-width space could otherwise hide part of the
    action from the person approving it.
    """
    try:
        text = json.dumps(json_safe(value), ensure_ascii=False, allow_nan=False)
    except (ResultNotJSON, TypeError, ValueError, RecursionError):
        return f"<{type(value).__name__}>"
    if text.isprintable():
        return text
    return "".join(
        ch if ch.isprintable() else (f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
        for ch in text
    )


def _fold(text: str, first: int, width: int) -> list[str]:
    """`text` in pieces: the first at most `first` characters, the others at most `width`; never splits
    a backslash escape, and joined they give `text` back exactly."""
    pieces: list[str] = []
    current = ""
    limit = max(first, 8)
    i = 0
    while i < len(text):
        token = text[i]
        if token == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            size = {"u": 6, "U": 10}.get(nxt, 2)
            token = text[i : i + size]
        if current and len(current) + len(token) > limit:
            pieces.append(current)
            current = ""
            limit = max(width, 8)
        current += token
        i += len(token)
    pieces.append(current)
    return pieces


def summarize_call(tool: Tool, arguments: Mapping[str, Any]) -> str:
    """What the call would do, for the person who approves it: the tool, the first sentence of its
    description and EVERY argument value in full.

    A short call reads `tool(arg=value, ...) — description`. Otherwise each argument gets its own line
    and long values are folded over several lines (never cut: joined, the pieces are the exact JSON
    text). A value longer than `MAX_SHOWN_VALUE` characters (or past `MAX_SHOWN_TOTAL` in all) is not
    shown, and the summary says so plainly; the full validated arguments are then in the pending
    confirmation's `metadata["arguments"]` (and `PendingConfirmation.arguments` of an agent run) for a
    UI to show. Holds argument values: never log it.
    """
    shown: list[tuple[str, str | None]] = []
    sizes: dict[str, int] = {}
    total = 0
    for name, value in arguments.items():
        text = _show(value)
        if len(text) > MAX_SHOWN_VALUE or (len(text) > _LONG and total + len(text) > MAX_SHOWN_TOTAL):
            shown.append((name, None))
            sizes[name] = len(text)
            continue
        total += len(text)
        shown.append((name, text))
    first = tool.description.strip().split("\n", 1)[0].split(". ", 1)[0].rstrip(". ")
    about = f" — {first[:160]}" if first else ""
    if all(shown_text is not None for _, shown_text in shown):
        line = f"{tool.name}({', '.join(f'{name}={shown_text}' for name, shown_text in shown)})"
        if len(line) <= _ONE_LINE:
            return line + about
    lines = [tool.name + about]
    hidden = 0
    for name, shown_text in shown:
        head = f"  {name}: "
        if shown_text is None:
            hidden += 1
            lines.append(f"{head}(not shown: {sizes[name]:,} characters, too long to show here)")
            continue
        pieces = _fold(shown_text, SUMMARY_WIDTH - len(head), SUMMARY_WIDTH - 4)
        lines.append(head + pieces[0])
        lines.extend("    " + piece for piece in pieces[1:])
    if hidden:
        lines.append(
            f"{hidden} value(s) are too long to show in this summary: look at the full arguments before "
            "you approve."
        )
    return "\n".join(lines)


class ConfirmationStage:
    """Holds back calls of tools that `requires_confirmation` until their user approves them.

    Without an approval the call is stored as a `PendingConfirmation` (bound to the user — `NO_USER`
    for a call without a user id —, the tool, the keyed hash of the validated arguments and the agent
    run it was made in; expiring after `ttl` seconds; the full validated arguments in
    `metadata["arguments"]`) and the result is `confirmation_required` with its id. With an approval
    (consumed atomically by `ToolExecutor.approve`, so it can never let two runs through) the call passes
    only if user, tool, argument hash and run all match. Everything missing or uncertain fails closed: an
    unknown, used, expired, mismatched or unreadable confirmation, a store error; and, with
    `require_user=True`, a call without a user id.

    Args:
        store: Where pending confirmations wait.
        ttl: Seconds a confirmation can be approved (finite, positive).
        clock: Wall-clock time (`time.time`).
        require_user: Refuse calls without a user id (`CONFIRMATION_DENIED`, reason `no_user`) instead of
            holding them for a caller without a user id to decide: for servers where every user signs in.
        rules: Standing approvals (`ApprovalRule`): a call a rule of its user decides is not held; an
            `allow` rule lets it run (audited with the rule's id), a `deny` rule refuses it
            (`CONFIRMATION_DENIED`, reason `rule`). None: ask every time.

    Before a call is held, the tool's preview (if it has one) writes the text the person approves, from the
    application's own records; it is stored with the confirmation (`PendingConfirmation.preview`).
    """

    def __init__(
        self,
        store: ConfirmationStore,
        *,
        ttl: float = DEFAULT_CONFIRMATION_TTL,
        clock: Callable[[], float] = time.time,
        require_user: bool = False,
        rules: ApprovalRuleStore | None = None,
    ) -> None:
        if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not (math.isfinite(ttl) and ttl > 0):
            raise ValueError(
                f"The confirmation ttl must be a finite positive number of seconds, not {ttl!r}."
            )
        self.store = store
        self.ttl = float(ttl)
        self.require_user = require_user
        self.rules = rules
        self._clock = clock

    def applies_to(self, tool: Tool) -> bool:
        return tool.options.requires_confirmation

    async def __call__(self, invocation: Invocation, call_next: CallNext) -> ToolResult:
        inv = invocation
        approval = inv.approval
        if approval is not None:  # consumed and checked by ToolExecutor.approve: bind it to what runs now
            if self._matches(approval, inv):
                self._resolved(inv, approval.id, "approved")
                return await call_next(inv)
            self._resolved(inv, approval.id, "mismatch")
            return self._mismatch(inv)
        return await self._request(inv, call_next)

    def _no_user(self, inv: Invocation) -> ToolResult:
        return _errors.confirmation_denied(
            inv.call.id,
            inv.tool.name,
            f"The tool {inv.tool.name!r} needs the approval of a signed-in user, and this call has no user "
            "id; it did not run.",
            reason="no_user",
            recover_action="Tell the user this action needs them to be signed in.",
        )

    async def _request(self, inv: Invocation, call_next: CallNext) -> ToolResult:
        call, tool, ctx = inv.call, inv.tool, inv.context
        if not ctx.user_id and self.require_user:
            return self._no_user(inv)
        now = self._clock()
        if ctx.user_id and self.rules is not None:
            try:
                rule = await find_rule(self.rules, ctx.user_id, tool.name, inv.arguments, now)
            except Exception as exc:  # fail closed towards asking: the person still decides
                from toolrun.runtime._logging import log_exception

                log_exception(_logger, "Approval rules could not be read; the call is held", exc)
                rule = None
            if rule is not None:
                inv.rule_id = rule.id
                if rule.decision == "allow":
                    self._resolved(inv, rule.id, "approved")
                    return await call_next(inv)
                self._resolved(inv, rule.id, "denied")
                return _errors.confirmation_denied(
                    call.id,
                    tool.name,
                    f"The user has a standing rule to refuse {tool.name!r} calls like this one; it did not "
                    "run.",
                    reason="rule",
                    recover_action="Do not try this action again; tell the user if they need it.",
                )
        try:
            summary = summarize_call(tool, inv.arguments)
            preview = await make_preview(inv.executor, tool, inv.arguments, ctx, summary)
            pending = PendingConfirmation(
                id="conf_" + secrets.token_urlsafe(18),
                user_id=ctx.user_id or NO_USER,
                tool_name=tool.name,
                arguments_hash=inv.arguments_hash,
                call=_stored_call(inv),
                summary=summary,
                created_at=now,
                expires_at=now + self.ttl,
                conversation_id=ctx.conversation_id,
                run_id=ctx.run_id,
                metadata={"arguments": _shown_arguments(inv.arguments)},
                preview=preview,
            )
            await self.store.add(pending)
        except Exception as exc:
            return inv.executor.internal_error(inv, exc, "could not be held for confirmation", retryable=True)
        bus = inv.executor.events
        if bus.active:
            bus.emit(
                ConfirmationRequested(
                    call_id=call.id,
                    tool_name=tool.name,
                    trace_id=ctx.trace_id,
                    user_id=ctx.user_id,
                    confirmation_id=pending.id,
                    expires_at=pending.expires_at,
                )
            )
        return ToolResult.confirmation_required_result(
            pending.id, pending.summary, call_id=call.id, tool_name=tool.name
        )

    @staticmethod
    def _matches(pending: PendingConfirmation, inv: Invocation) -> bool:
        """Whether `pending` approves exactly this call: same principal, tool, arguments and run."""
        ctx = inv.context
        return (
            pending.user_id == (ctx.user_id or NO_USER)
            and pending.tool_name == inv.tool.name
            and (pending.run_id is None or pending.run_id == ctx.run_id)
            and hmac.compare_digest(pending.arguments_hash, inv.arguments_hash)
        )

    @staticmethod
    def _mismatch(inv: Invocation) -> ToolResult:
        return _errors.confirmation_denied(
            inv.call.id,
            inv.tool.name,
            "The approval presented is for a different action (another tool, other arguments, another "
            "user or another run); this call did not run.",
            reason="mismatch",
            recover_action="Call the tool again without an approval to ask the user to confirm this action.",
        )

    @staticmethod
    def _resolved(inv: Invocation, confirmation_id: str, decision: Any) -> None:
        bus = inv.executor.events
        if bus.active:
            bus.emit(
                ConfirmationResolved(
                    call_id=inv.call.id,
                    tool_name=inv.tool.name,
                    trace_id=inv.context.trace_id,
                    user_id=inv.context.user_id,
                    confirmation_id=confirmation_id,
                    decision=decision,
                )
            )


def _shown_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The validated arguments as JSON data, for the approver's UI (a value with no JSON form: its type)."""
    shown: dict[str, Any] = {}
    for name, value in arguments.items():
        try:
            shown[name] = json_safe(value)
        except ResultNotJSON:
            shown[name] = f"<{type(value).__name__}>"
    return shown


def _stored_call(inv: Invocation) -> dict[str, Any]:
    args = inv.call.arguments
    if args is not None and not isinstance(args, str):
        args = json_safe(dict(args))
    return {"id": inv.call.id, "name": inv.call.name, "arguments": args}


class RateLimitStage:
    """A token bucket per (the rate limit's key, or the tool name) and principal → `RATE_LIMITED`.

    Calls without a user id share one bucket per key. A store error fails closed (the call does not run).
    """

    def __init__(self, store: RateLimitStore) -> None:
        self.store = store

    def applies_to(self, tool: Tool) -> bool:
        return tool.options.rate_limit is not None

    async def __call__(self, invocation: Invocation, call_next: CallNext) -> ToolResult:
        limit = invocation.tool.options.rate_limit
        if limit is None:
            return await call_next(invocation)
        refused = await _take_token(
            self.store,
            limit,
            limit.key or invocation.tool.name,
            invocation,
            "its rate limit",
            _errors.rate_limited,
        )
        return refused if refused is not None else await call_next(invocation)


async def _take_token(
    store: RateLimitStore,
    limit: RateLimit,
    bucket: str,
    invocation: Invocation,
    what: str,
    refuse: Callable[[str, str, float], ToolResult],
) -> ToolResult | None:
    """One token from the principal's bucket: None when granted, else the result to return instead (the
    limit's refusal, or an internal error when the store fails: fail closed, retryable)."""
    key = f"{bucket}\x1f{invocation.context.user_id or ''}"
    try:
        decision = await store.acquire(key, limit=limit.limit, period=limit.period)
    except Exception as exc:
        return invocation.executor.internal_error(invocation, exc, f"could not check {what}", retryable=True)
    if not decision.allowed:
        return refuse(invocation.call.id, invocation.tool.name, decision.retry_after)
    return None


class QuotaStage:
    """A quota of calls per user over a window, across every tool: one token bucket per principal in the
    rate-limit store (`"1000/day"`: up to 1000 at once, then one back every 86.4 seconds). Calls without a
    user id share one bucket. A store error fails closed (the call does not run)."""

    def __init__(self, store: RateLimitStore, limit: RateLimit) -> None:
        self.store = store
        self.limit = limit

    async def __call__(self, invocation: Invocation, call_next: CallNext) -> ToolResult:
        limit = self.limit
        refused = await _take_token(
            self.store, limit, limit.key or "toolrun-quota", invocation, "the quota", _errors.quota_exceeded
        )
        return refused if refused is not None else await call_next(invocation)


class CacheStage:
    """Serves repeated calls of `read_only`/`idempotent` tools with a `cache_ttl` from the cache.

    The key is the tool name and the keyed hash of the canonical arguments, plus the principal
    (`ToolContext.user_id`) when the tool's cache is per user: `private` tools, tools that receive a
    `ToolContext` (their result may depend on who calls) unless they say `cache_scope="shared"`, and tools
    that say `cache_scope="user"`. A per-user tool called without a user id is never cached. Only `ok`
    results are stored; a hit comes back with `cached=True` and `attempts=0`. Cache errors fail open: the
    tool runs.
    """

    def __init__(self, store: CacheStore) -> None:
        self.store = store

    def applies_to(self, tool: Tool) -> bool:
        opts = tool.options
        return opts.cache_ttl is not None and opts.effective_idempotent and not opts.requires_confirmation

    @staticmethod
    def per_user(tool: Tool) -> bool:
        """Whether `tool`'s cached results are kept apart per user (see the class docstring)."""
        opts = tool.options
        if opts.private or opts.cache_scope == "user":
            return True
        return opts.cache_scope is None and tool.takes_context

    async def __call__(self, invocation: Invocation, call_next: CallNext) -> ToolResult:
        inv = invocation
        tool = inv.tool
        ttl = tool.options.cache_ttl
        if ttl is None:
            return await call_next(inv)
        if self.per_user(tool):
            principal = inv.context.user_id
            if not principal:
                return await call_next(inv)
            digest = inv.executor.hasher.digest(
                principal.encode("utf-8", "surrogatepass") + b"\x00" + inv.arguments_hash.encode()
            )
            key = f"toolrun:{tool.name}:p:{digest}"
        else:
            key = f"toolrun:{tool.name}:{inv.arguments_hash}"
        try:
            raw = await self.store.get(key)
        except Exception as exc:
            _log_cache_error(exc)
            raw = None
        if raw is not None:
            hit = _from_cache(raw, inv)
            if hit is not None:
                return hit
        result = await call_next(inv)
        if result.status == "ok" and not result.content:  # content (bytes) is not cached
            payload = {
                "value": result.value,
                "message": result.message,
                "exclude_value_from_context": result.exclude_value_from_context,
                "metadata": result.metadata,
            }
            try:
                await self.store.set(key, pydantic_core.to_json(payload, fallback=str), ttl=ttl)
            except Exception as exc:
                _log_cache_error(exc)
        return result


def _from_cache(raw: bytes, inv: Invocation) -> ToolResult | None:
    try:
        data = pydantic_core.from_json(raw)
        return ToolResult(
            call_id=inv.call.id,
            tool_name=inv.tool.name,
            status="ok",
            value=data["value"],
            message=data.get("message"),
            exclude_value_from_context=bool(data.get("exclude_value_from_context")),
            metadata=dict(data.get("metadata") or {}),
            cached=True,
            attempts=0,
        )
    except Exception as exc:
        _log_cache_error(exc)
        return None


def _log_cache_error(exc: BaseException) -> None:
    from toolrun.runtime._logging import log_exception

    log_exception(_logger, "Result cache failed; the call runs uncached", exc, level=logging.WARNING)
