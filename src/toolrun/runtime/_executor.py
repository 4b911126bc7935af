"""`ToolExecutor`: turns a `ToolCall` and a `ToolContext` into a `ToolResult`, and never raises.

```
execute(call, context)
  lookup      unknown name                    → NOT_FOUND (+ details["suggestions"])
  access      tool roles, context allowlist   → PERMISSION_DENIED
  validate    JSON + schema                   → INVALID_ARGUMENTS (+ details["problems"])
  ── the tool's chain, built once per tool and registry version ──
  your middleware, in order
  confirmation   (tools that require it)      → confirmation_required / CONFIRMATION_DENIED / _EXPIRED
  rate limit     (tools with a rate_limit)    → RATE_LIMITED (+ details["retry_after"])
  cache          (tools with a cache_ttl)     → cached result
  run            deadline, budget, snapshot, handler + timeout + retries, result  (see `_run`)
  ── observe ── events, one audit record (`_audit`), one OpenTelemetry span
```

The decisions on held calls (`approve`, `deny`, `preview_edit`) live in `executor.confirmations`
(`_confirm`); the executor's methods of those names delegate to it.
"""

from __future__ import annotations

import asyncio
import difflib
import functools
import logging
import os
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from toolrun.content import MAX_ITEM_BYTES, MAX_ITEMS, Content
from toolrun.exceptions import ArgumentsError
from toolrun.registry import ToolSet
from toolrun.results import ErrorCode, ToolError, ToolResult
from toolrun.runtime import _errors
from toolrun.runtime._audit import ArgumentHasher, AuditSink, AuditTrail
from toolrun.runtime._budget import READ_RESULT, ArtifactStore, InMemoryArtifactStore, read_result_tool
from toolrun.runtime._chain import ChainStep, run_chain, run_many
from toolrun.runtime._confirm import Confirmations
from toolrun.runtime._events import (
    EventBus,
    Subscriber,
    ToolEvent,
    ToolFinished,
    ToolStarted,
)
from toolrun.runtime._invocation import Invocation, Middleware
from toolrun.runtime._logging import log_exception
from toolrun.runtime._otel import Tracing
from toolrun.runtime._run import RunStage, backoff_delay
from toolrun.runtime._stages import (
    DEFAULT_CONFIRMATION_TTL,
    CacheStage,
    ConfirmationStage,
    QuotaStage,
    RateLimitStage,
)
from toolrun.store import (
    ApprovalRuleStore,
    CacheStore,
    ConfirmationStore,
    InMemoryApprovalRuleStore,
    InMemoryCache,
    InMemoryConfirmationStore,
    InMemoryRateLimitStore,
    PendingConfirmation,
    RateLimitStore,
)
from toolrun.tools import RateLimit, Tool, ToolBudget, ToolCall, ToolContext
from toolrun.tools._options import OutputBudget, parse_rate_limit

__all__ = ["ToolExecutor"]

_logger = logging.getLogger("toolrun")
_perf = time.perf_counter
_INFO = logging.INFO


@dataclass(slots=True)
class _Plan:
    """What the executor precomputes per tool: its access rule and its chain of stages."""

    tool: Tool
    roles: frozenset[str] | None
    entry: Callable[[Invocation], Awaitable[ToolResult]]
    stages: tuple[Middleware, ...]
    validate: Callable[[Any], dict[str, Any]]
    """`tool.validate`, or the validator's own `validate` when the tool does not override it (the same
    call, one frame less)."""


def _validate_of(tool: Tool) -> Callable[[Any], dict[str, Any]]:
    """What `_front` calls to validate a call's arguments for `tool` (see `_Plan.validate`)."""
    if not tool._overrides("validate"):
        try:
            validator = tool._arguments_validator()
        except Exception:  # a broken schema: `tool.validate` raises it again, per call, where it is reported
            return tool.validate
        return validator.validate
    return tool.validate


class ToolExecutor:
    """Runs tool calls from a model: validated, gated, time-boxed, observed. `execute` never raises.

    Args:
        registry: The tools (a `ToolRegistry` or any view of one).
        middleware: Your own stages, run in order after validation and before the built-in gates
            (objects with `async __call__(inv, call_next)`; the protocol is `toolrun.runtime._invocation`'s
            `Middleware`, not public while its `Invocation` is not).
        confirmations: Where pending confirmations wait (default: in memory).
        rate_limits: Token buckets for tools with a `rate_limit` (default: in memory).
        cache: Result cache for tools with a `cache_ttl` (default: in memory, 1024 entries).
        default_timeout: Seconds a handler may run when its tool sets no `timeout`; None for no limit.
        max_result_chars: Results whose JSON is longer are cut to this many characters, with a marker.
        audit: Sinks receiving one `AuditRecord` per call (in addition to the `toolrun.audit` logger).
        audit_logger: The logger audit records go to at INFO (a name or a logger; None for none).
        events: The event bus (default: a new one; see `executor.events.subscribe`).
        thread_pool_size: Worker threads for sync tools (default: `min(32, cpu_count + 4)`).
        confirmation_ttl: Seconds a pending confirmation can be approved (default 10 minutes; finite and
            positive).
        require_user_for_confirmation: Refuse calls of tools that need confirmation when the context has
            no user id (`CONFIRMATION_DENIED`, reason `no_user`), for servers where every user signs in.
            By default such a call is held like any other, bound to "no user" (`toolrun.store.NO_USER`)
            and to its run: only a caller without a user id can decide it, never a signed-in one.
        hash_key: Secret key for argument hashes (audit, approvals, cache keys); 16-64 bytes. Default:
            random per executor. Processes that share a confirmation store or cache must share it.
        retry_backoff: First retry delay in seconds (then doubling, with jitter).
        retry_backoff_max: Longest retry delay.
        transient_errors: Exception types worth retrying for idempotent tools.
        tracer_provider: OpenTelemetry tracer provider (default: the global one, if the SDK set one).
        log_exception_messages: Log tools' exception messages (off by default: they carry user data).
        clock: Wall-clock time (`time.time`) for confirmation expiry; replaceable in tests.
        cancel_grace: Seconds an async tool may keep running after its time box expired and cancelled
            it (it swallowed the cancellation, or cleans up slowly) before it is closed and the call
            returns `TIMEOUT` with `details["abandoned"]`; its cleanup then gets as long again. A
            cancellation the tool's own libraries make (`asyncio.timeout`, anyio scopes) never counts.
        approval_rules: Where standing approvals (`toolrun.store.ApprovalRule`) are kept (default: in
            memory, empty: every call that needs confirmation is asked). Add one with
            `await executor.approval_rules.add(ApprovalRule(...))`.
        quota: Calls allowed per user over a window, across every tool (`"1000/day"`, a `RateLimit`):
            kept in `rate_limits` (so Redis or SQL shares it between processes). Past it a call does not
            start: `RATE_LIMITED` with `details["quota"]` and `retry_after`. None: no quota.
        max_content_bytes: Most bytes one content item (image, file, audio) of a result may hold.
        max_content_items: Most content items one result may carry. A result past either limit is
            `RESULT_INVALID`, its message naming the limit.
        output_budget: How much of a result the model is shown, for tools without their own
            `output_budget` (characters, or an `OutputBudget` with another counter). A result over it is
            cut where its structure allows and kept whole in `artifacts`; the built-in `read_result` tool
            (answered by this executor when the registry has none of that name) pages it. Tools with a
            budget are not cut by `max_result_chars`.
        artifacts: Where whole results over budget are kept (default: in memory, 1024 entries).
        artifact_ttl: Seconds a kept result can be read.
    """

    def __init__(
        self,
        registry: ToolSet,
        *,
        middleware: Sequence[Middleware] = (),
        confirmations: ConfirmationStore | None = None,
        rate_limits: RateLimitStore | None = None,
        cache: CacheStore | None = None,
        default_timeout: float | None = 30.0,
        max_result_chars: int | None = 20_000,
        audit: AuditSink | Sequence[AuditSink] | None = None,
        audit_logger: logging.Logger | str | None = "toolrun.audit",
        events: EventBus | None = None,
        thread_pool_size: int | None = None,
        confirmation_ttl: float = DEFAULT_CONFIRMATION_TTL,
        require_user_for_confirmation: bool = False,
        hash_key: bytes | None = None,
        retry_backoff: float = 0.1,
        retry_backoff_max: float = 5.0,
        transient_errors: tuple[type[BaseException], ...] = (ConnectionError, TimeoutError),
        tracer_provider: Any = None,
        log_exception_messages: bool = False,
        clock: Callable[[], float] = time.time,
        cancel_grace: float = 1.0,
        approval_rules: ApprovalRuleStore | None = None,
        quota: str | RateLimit | None = None,
        max_content_bytes: int = MAX_ITEM_BYTES,
        max_content_items: int = MAX_ITEMS,
        output_budget: int | OutputBudget | None = None,
        artifacts: ArtifactStore | None = None,
        artifact_ttl: float = 3600.0,
    ) -> None:
        if default_timeout is not None and not default_timeout > 0:
            raise ValueError("default_timeout must be a positive number of seconds, or None.")
        if max_result_chars is not None and max_result_chars < 1:
            raise ValueError("max_result_chars must be positive, or None.")
        if thread_pool_size is not None and thread_pool_size < 1:
            raise ValueError("thread_pool_size must be at least 1.")
        self.registry = registry
        self.middleware: tuple[Middleware, ...] = tuple(middleware)
        self.default_timeout = default_timeout
        self.max_result_chars = max_result_chars
        self.events = events if events is not None else EventBus()
        self.hasher = ArgumentHasher(hash_key if hash_key is not None else os.urandom(32))
        self.transient_errors = tuple(transient_errors)
        self.log_exception_messages = log_exception_messages
        self.cancel_grace = cancel_grace
        self.max_content_bytes = max_content_bytes
        self.max_content_items = max_content_items
        self.output_budget = OutputBudget.coerce(output_budget) if output_budget is not None else None
        self.artifacts: ArtifactStore = artifacts if artifacts is not None else InMemoryArtifactStore()
        self.artifact_ttl = artifact_ttl
        self.artifacts_made = False
        """Set once a result was cut to a budget (the agent then shows the model `read_result`)."""
        self._builtins: dict[str, Tool] = {}
        self.retry_backoff = retry_backoff
        self.retry_backoff_max = retry_backoff_max
        self.approval_rules: ApprovalRuleStore = (
            approval_rules if approval_rules is not None else InMemoryApprovalRuleStore()
        )
        """Standing approvals: `await executor.approval_rules.add(ApprovalRule(...))`, `list_rules`,
        `remove`."""
        self.confirmation = ConfirmationStage(
            confirmations if confirmations is not None else InMemoryConfirmationStore(),
            ttl=confirmation_ttl,
            clock=clock,
            require_user=require_user_for_confirmation,
            rules=self.approval_rules,
        )
        self._clock = clock
        self.confirmations = Confirmations(self)
        """The decisions on held calls (`approve`, `deny`, `preview_edit`, `pending`), and a held record's
        reading (`record`) and withdrawal (`withdraw`) for the doors."""
        self.rate_limit = RateLimitStage(rate_limits if rate_limits is not None else InMemoryRateLimitStore())
        self.quota = QuotaStage(self.rate_limit.store, parse_rate_limit(quota)) if quota is not None else None
        self.cache = CacheStage(cache if cache is not None else InMemoryCache())
        self._trail = AuditTrail(audit, audit_logger)
        self._tracing = Tracing(tracer_provider)
        self._pool_size = thread_pool_size
        self._pool: ThreadPoolExecutor | None = None
        self._plans: dict[str, _Plan] = {}
        self._plans_version = -1
        self._run_budgets: dict[str, ToolBudget] = {}

    # --------------------------------------------------------------------------------------------------
    # Public API

    def execute(
        self, call: ToolCall, context: ToolContext[Any] | None = None
    ) -> Coroutine[Any, Any, ToolResult]:
        """Run one call through the pipeline and return its result. Never raises for anything the call,
        the model or the tool does. `await` it (it returns the pipeline's coroutine itself: one coroutine
        less per call than an `async def` wrapper).

        Args:
            call: The call as the model made it.
            context: Who is calling and under what limits (default: an anonymous context).

        Raises:
            asyncio.CancelledError: only when the caller's own task is cancelled (as asyncio requires);
                the call is then recorded with outcome `cancelled`.
        """
        return self._execute(call, context if context is not None else ToolContext(), None, "execute")

    async def approve(
        self,
        confirmation_id: str,
        context: ToolContext[Any],
        *,
        arguments: Mapping[str, Any] | None = None,
    ) -> ToolResult:
        """Approve a pending confirmation and run its call; returns the call's result (same call id).

        The confirmation is consumed atomically (single use) and only by its own user
        (`context.user_id`; a confirmation requested without a user id only by a caller without one), and
        one issued in an agent run only in that run (`context.run_id`); the stored call is validated again
        and must hash to the approved arguments. It runs through the stages after confirmation (rate
        limit, deadline, budget, timeout, ...) under `context`. Unknown, used, someone else's or another
        run's → `CONFIRMATION_NOT_FOUND` (reason `unknown_or_used`); expired → `CONFIRMATION_EXPIRED`
        (reason `expired`); no user id with `require_user_for_confirmation` → `CONFIRMATION_DENIED`.
        Of two concurrent approvals of one id, one runs the call and the other gets an error.

        Edit, then approve: with `arguments`, the person's own arguments replace the stored ones. They are
        validated first (`INVALID_ARGUMENTS`, and the confirmation stays pending so the person can fix
        them), previewed again, and the approval is bound to them: the call runs once, with exactly these
        arguments, under the original call id. The result tells the model what the person changed
        (`metadata["edited"]`, and a line in its text). Use `preview_edit` to show the new preview before
        the person approves.
        """
        return await self.confirmations.approve(confirmation_id, context, arguments=arguments)

    async def preview_edit(
        self, confirmation_id: str, context: ToolContext[Any], arguments: Mapping[str, Any]
    ) -> ToolResult:
        """What approving with edited `arguments` would do, without deciding anything.

        Returns an `ok` result whose value is `{"preview", "summary", "arguments", "changes"}` (the text
        the person would approve, the plain summary, the validated arguments as JSON data, one line per
        changed argument), or the error a later `approve(..., arguments=...)` would give
        (`INVALID_ARGUMENTS`, `CONFIRMATION_EXPIRED`). The confirmation stays pending.
        """
        return await self.confirmations.preview_edit(confirmation_id, context, arguments)

    async def deny(
        self, confirmation_id: str, context: ToolContext[Any], reason: str | None = None
    ) -> ToolResult:
        """Refuse a pending confirmation: it is consumed, the tool never runs, and the result (with the
        original call id) is `CONFIRMATION_DENIED`, for the model. `reason` is the user's own words; it is
        put in the result's message for the model and never logged."""
        return await self.confirmations.deny(confirmation_id, context, reason)

    async def pending_confirmations(self, context: ToolContext[Any]) -> list[PendingConfirmation]:
        """The confirmations waiting for `context.user_id`.

        Without a user id, the calls held for "no user" (`NO_USER`) are shared by every anonymous caller,
        so only those of the caller's own run (`context.run_id`) or, failing that, conversation
        (`context.conversation_id`) are listed; with neither, none.
        """
        return await self.confirmations.pending(context)

    async def execute_many(
        self,
        calls: Iterable[ToolCall],
        context: ToolContext[Any] | None = None,
        *,
        max_concurrency: int | None = None,
        context_for: Callable[[ToolCall], ToolContext[Any]] | None = None,
    ) -> list[ToolResult]:
        """Run calls concurrently (at most `max_concurrency` at a time); results in call order.

        A call of a `sequential` tool runs alone: after every call before it has finished, and before
        any call after it starts. `context_for(call)`, when given, is each call's own context (e.g. with
        a progress reporter naming the call) instead of `context`.
        """
        return await run_many(self, calls, context, max_concurrency, context_for)

    async def chain(
        self, steps: Sequence[ChainStep | Mapping[str, Any]], context: ToolContext[Any] | None = None
    ) -> list[ToolResult]:
        """Run steps in order, each argument string `"$step"` or `"$step.field.0.name"` replaced by that
        part of an earlier step's value (`"$$..."` for a literal `$`). Stops at the first step that does
        not end `ok`; returns the results of the steps that ran (the last one says why it stopped)."""
        return await run_chain(self, steps, context if context is not None else ToolContext())

    def subscribe(self, fn: Subscriber, *event_types: type[ToolEvent]) -> Callable[[], None]:
        """Shortcut for `executor.events.subscribe`."""
        return self.events.subscribe(fn, *event_types)

    @property
    def thread_pool(self) -> ThreadPoolExecutor:
        """The bounded pool sync tools run in (created on first use)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self._pool_size, thread_name_prefix="toolrun-tool")
        return self._pool

    def run_budget(self, run_id: str | None) -> ToolBudget:
        """The per-tool call counts of run `run_id`, for contexts without a `ToolBudget` (`max_calls`);
        the last 1024 runs are kept. A context without a run id is a run of its own per call."""
        if run_id is None:
            return ToolBudget()
        budget = self._run_budgets.get(run_id)
        if budget is None:
            budget = self._run_budgets[run_id] = ToolBudget()
            while len(self._run_budgets) > 1024:
                del self._run_budgets[next(iter(self._run_budgets))]
        return budget

    def stages_for(self, tool: Tool) -> tuple[Middleware, ...]:
        """The stages a call of `tool` goes through before the run stage, in order."""
        candidates: list[Any] = [*self.middleware, self.confirmation, self.rate_limit, self.cache]
        if self.quota is not None:
            candidates.insert(len(self.middleware) + 1, self.quota)
        return tuple(s for s in candidates if getattr(s, "applies_to", None) is None or s.applies_to(tool))

    def close(self) -> None:
        """Release the worker threads (running sync handlers are not waited for), and write out what
        the audit sinks hold (`flush()` of each sink that has a synchronous one; the sinks stay open: they
        are yours). A sink whose `flush` is async is flushed by `aclose()` only."""
        self._release_pool()
        for pending in self._trail.flush():
            pending.close()  # sync close cannot await an async flush: never started, nothing half-written

    async def aclose(self) -> None:
        """Wait for async event deliveries, release the workers and flush every audit sink (async ones
        too). When it returns, the audit record of every call that has finished is written."""
        await self.events.drain()
        self._release_pool()
        for pending in self._trail.flush():
            try:
                await pending
            except Exception as exc:
                log_exception(_logger, "Audit sink failed to flush", exc)

    def _release_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    async def __aenter__(self) -> ToolExecutor:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # --------------------------------------------------------------------------------------------------
    # Used by the stages

    def internal_error(
        self,
        inv: Invocation,
        exc: BaseException,
        what: str,
        *,
        retryable: bool = False,
        cancelled: bool = False,
    ) -> ToolResult:
        """`EXECUTION_FAILED` with a fresh error id; the exception goes to the log and the events only."""
        error_id = _errors.new_error_id()
        inv.exception = exc
        log_exception(
            _logger,
            "Tool %r %s: %s (error_id=%s, call_id=%s)",
            exc,
            inv.tool.name,
            what,
            type(exc).__qualname__,
            error_id,
            inv.call.id,
            redact=not self.log_exception_messages,
            one_line=True,
        )
        if cancelled:
            return _errors.cancelled_by_tool(inv.call.id, inv.tool.name, error_id)
        return _errors.execution_failed(inv.call.id, inv.tool.name, error_id, retryable=retryable, what=what)

    def invalid_result(self, inv: Invocation, value: Any, problems: Sequence[str] = ()) -> ToolResult:
        """`RESULT_INVALID` with an error id; the log names the value's type, never its content."""
        error_id = _errors.new_error_id()
        _logger.warning(
            "Tool %r returned an invalid result of type %s (%s; error_id=%s, call_id=%s)",
            inv.tool.name,
            type(value).__qualname__,
            "does not match its output type" if problems else "no JSON form",
            error_id,
            inv.call.id,
        )
        return _errors.result_invalid(inv.call.id, inv.tool.name, error_id, problems)

    def builtin_tool(self, name: str) -> Tool | None:
        """The executor's own tool of that name (`read_result`), or None."""
        if name != READ_RESULT:
            return None
        tool = self._builtins.get(name)
        if tool is None:
            tool = self._builtins[name] = read_result_tool(self.artifacts)
        return tool

    def content_problems(self, items: Sequence[Content]) -> list[str]:
        """What breaks this executor's content limits (items per result, bytes per item)."""
        problems = []
        if len(items) > self.max_content_items:
            problems.append(f"{len(items)} content items, more than the limit of {self.max_content_items}")
        for index, item in enumerate(items):
            if item.size > self.max_content_bytes:
                problems.append(
                    f"content[{index}] ({item.kind}) holds {item.size:,} bytes, "
                    f"more than the limit of {self.max_content_bytes:,}"
                )
        return problems

    def content_invalid(self, inv: Invocation, problems: Sequence[str]) -> ToolResult:
        """`RESULT_INVALID` for content that breaks a limit or is malformed; the message names the limit."""
        error_id = _errors.new_error_id()
        _logger.warning(
            "Tool %r returned content that cannot be sent (error_id=%s, call_id=%s)",
            inv.tool.name,
            error_id,
            inv.call.id,
        )
        return _errors.content_invalid(inv.call.id, inv.tool.name, error_id, problems)

    def backoff(self, attempt: int, error: ToolError | None) -> float:
        return backoff_delay(attempt, self.retry_backoff, self.retry_backoff_max, error)

    # --------------------------------------------------------------------------------------------------
    # The pipeline

    def _plan(self, name: str) -> _Plan | None:
        version = self.registry.version
        if version != self._plans_version:
            self._plans = {}
            self._plans_version = version
        plan = self._plans.get(name)
        if plan is None:
            tool = self.registry.find(name) if isinstance(name, str) else None
            if tool is None:
                tool = self.builtin_tool(name)
            if tool is None:
                return None
            stages = self.stages_for(tool)
            entry: Callable[[Invocation], Awaitable[ToolResult]] = RunStage(self, tool)
            for stage in reversed(stages):
                entry = functools.partial(stage, call_next=entry)
            plan = _Plan(
                tool=tool, roles=tool.options.roles, entry=entry, stages=stages, validate=_validate_of(tool)
            )
            self._plans[name] = plan
        return plan

    def _is_sequential(self, name: str) -> bool:
        try:
            plan = self._plan(name)
        except Exception:  # execute() reports the broken lookup; here it only decides the grouping
            return False
        return plan is not None and plan.tool.options.sequential

    async def _execute(
        self,
        call: ToolCall,
        ctx: ToolContext[Any],
        approval: PendingConfirmation | None,
        action: Any,
    ) -> ToolResult:
        # One function on purpose: every await and call here is paid on every tool call.
        start = _perf()
        try:
            # The plan cache hit inline (`_plan` builds a missing plan; a new version resets the cache).
            plan = self._plans.get(call.name) if self.registry.version == self._plans_version else None
            if plan is None:
                plan = self._plan(call.name)
        except Exception as exc:  # a broken registry or view: no call gets through, none raises
            plan = None
            broken: BaseException | None = exc
        else:
            broken = None
        bus = self.events
        emitting = bus.active
        trail = self._trail
        logger = trail.logger
        auditing = bool(trail.sinks) or (logger is not None and logger.isEnabledFor(_INFO))
        tracing = self._tracing
        tracer = tracing.tracer()
        observing = emitting or auditing or tracer is not None
        tool_name = plan.tool.name if plan is not None else None
        span = token = None
        if observing:
            if emitting:
                event: ToolEvent = ToolStarted(call.id, tool_name, ctx.trace_id, ctx.user_id)  # one C call
                try:  # a lone subscriber called right here: one frame less than `emit` (which never raises)
                    (bus.only or bus.emit)(event)
                except Exception as exc:
                    bus.failed(event, exc)
            if tracer is not None:
                span, token = tracing.start(tracer, tool_name, call.id)
        inv: Invocation | None = None
        try:
            try:
                front = (
                    self._front(plan, call, ctx, approval)
                    if broken is None
                    else self._unexpected(call, None, broken, "could not be looked up")
                )
            except Exception as exc:  # a bad context (roles that are not strings, ...) or view
                front = self._unexpected(call, tool_name, exc, "could not be started")
            if type(front) is Invocation and plan is not None:
                inv = front
                try:
                    result = await plan.entry(front)
                except asyncio.CancelledError as exc:
                    task = asyncio.current_task()
                    if task is not None and task.cancelling() > 0:
                        raise
                    result = self.internal_error(front, exc, "was cancelled", cancelled=True)
                except KeyboardInterrupt:
                    raise
                except BaseException as exc:  # a middleware that raised
                    result = self.internal_error(front, exc, "failed in a middleware")
            elif type(front) is ToolResult:
                result = front
            else:  # pragma: no cover - _front returns one of the two
                raise TypeError(type(front))
        except BaseException:  # the caller was cancelled (or the process is being interrupted)
            if observing:
                self._cancelled(
                    action, call, ctx, inv, tool_name, _perf() - start, emitting, auditing, span, token
                )
            raise
        duration = result.duration = _perf() - start
        if not observing:
            return result
        error = result.error
        if error is None:
            code = error_id = None
        else:
            code = error.code
            error_id = error.details.get("error_id")
        if emitting:
            event = ToolFinished(  # positional: one C call (see _events)
                call.id,
                tool_name,
                ctx.trace_id,
                ctx.user_id,
                result.status,
                code,
                duration,
                result.attempts,
                result.cached,
                error_id,
                inv.exception if inv is not None else None,
            )
            try:  # as for ToolStarted
                (bus.only or bus.emit)(event)
            except Exception as exc:
                bus.failed(event, exc)
        if span is not None:
            self._tracing.finish(
                span, token, outcome=result.status, code=code, attempts=result.attempts, cached=result.cached
            )
        if auditing:
            arguments_hash: str | None
            try:
                if inv is None:
                    arguments_hash = self.hasher.raw(call.arguments)
                elif inv._hashed is inv.arguments:  # a stage hashed them already (confirmation, cache)
                    arguments_hash = inv._hash
                else:  # the hash is not needed again: no need to keep it on the invocation
                    arguments_hash = self.hasher.arguments(inv.arguments)
            except Exception:  # arguments that cannot even be rendered: audit without a hash
                arguments_hash = None
            self._trail.write(
                action,
                result,
                tool_name,
                ctx,
                arguments_hash,
                approval.id if approval is not None else result.confirmation_id,
                None,
                inv.rule_id if inv is not None else None,
            )
        return result

    def _cancelled(
        self,
        action: Any,
        call: ToolCall,
        ctx: ToolContext[Any],
        inv: Invocation | None,
        tool_name: str | None,
        duration: float,
        emitting: bool,
        auditing: bool,
        span: Any,
        token: Any,
    ) -> None:
        if emitting:
            self.events.emit(
                ToolFinished(call.id, tool_name, ctx.trace_id, ctx.user_id, "cancelled", None, duration)
            )
        if span is not None:
            self._tracing.finish(span, token, outcome="cancelled", code="CANCELLED", attempts=0, cached=False)
        if auditing:
            cancelled = ToolResult(call_id=call.id, tool_name=tool_name or "", duration=duration)
            self._trail.write(action, cancelled, tool_name, ctx, self._hash_of(inv, call), None, "cancelled")

    def _unexpected(self, call: ToolCall, tool_name: str | None, exc: BaseException, what: str) -> ToolResult:
        error_id = _errors.new_error_id()
        log_exception(
            _logger,
            "Call %s %s: %s (error_id=%s)",
            exc,
            call.id,
            what,
            type(exc).__qualname__,
            error_id,
            redact=not self.log_exception_messages,
        )
        name = tool_name or "(unknown)"
        return _errors.execution_failed(call.id, name, error_id, what=what)

    def _front(
        self,
        plan: _Plan | None,
        call: ToolCall,
        ctx: ToolContext[Any],
        approval: PendingConfirmation | None,
    ) -> ToolResult | Invocation:
        """Lookup, access and validation: an error result, or the invocation to run through the chain."""
        if plan is None:
            return _errors.not_found(call.id, call.name, self._suggest(call.name, ctx))
        tool = plan.tool
        if plan.roles is not None and plan.roles.isdisjoint(ctx.roles):
            return _errors.permission_denied(call.id, tool.name)
        allowed = ctx.allowed_tools
        if allowed is not None and tool.name not in allowed:
            return _errors.permission_denied(call.id, tool.name)
        if approval is not None and approval.tool_name != tool.name:
            return _errors.confirmation_denied(
                call.id,
                tool.name,
                "The approved action no longer matches a registered tool; it did not run.",
                reason="mismatch",
            )
        try:
            arguments = plan.validate(call.arguments)
        except ArgumentsError as exc:
            return _errors.invalid_arguments(call.id, tool.name, exc)
        except Exception as exc:  # a validator bug must not escape either
            error_id = _errors.new_error_id()
            log_exception(
                _logger,
                "Validating arguments for tool %r failed (error_id=%s, call_id=%s)",
                exc,
                tool.name,
                error_id,
                call.id,
                redact=not self.log_exception_messages,
            )
            return _errors.fail(
                call.id,
                tool.name,
                ErrorCode.INVALID_ARGUMENTS,
                f"The arguments could not be checked (error id {error_id}).",
                recover_action="Call the tool again with simple, well-formed JSON arguments.",
                details={"problems": [], "error_id": error_id},
            )
        return Invocation(self, tool, call, ctx, arguments, approval)

    def _suggest(self, name: Any, ctx: ToolContext[Any]) -> list[str]:
        """The names closest to an unknown `name` among the tools this caller may use (a "did you mean"
        must not reveal tools hidden from the caller by roles or an allowlist)."""
        if not isinstance(name, str) or len(name) > 256:
            return []
        allowed = ctx.allowed_tools
        lowered: dict[str, str] = {}
        for candidate in self.registry.tools():
            roles = candidate.options.roles
            if roles is not None and roles.isdisjoint(ctx.roles):
                continue
            if allowed is not None and candidate.name not in allowed:
                continue
            lowered[candidate.name.lower()] = candidate.name
        return [lowered[c] for c in difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.5)]

    # --------------------------------------------------------------------------------------------------
    # Audit

    def audit_refusals(self, refused: Iterable[ToolResult], context: ToolContext[Any]) -> None:
        """Write the content-free audit records of calls refused before they reached `execute` (an agent's
        model boundary does this), as for the executor's own refusals: action `execute`, the error code,
        no argument hash. A result names its tool only when that name is registered here (an unknown name is
        what the model wrote, and stays out of the trail)."""
        if not self._trail.enabled():
            return
        for result in refused:
            name = result.tool_name
            tool = name if name and self.registry.find(name) is not None else None
            self._trail.write("execute", result, tool, context, None)

    def _hash_of(self, inv: Invocation | None, call: ToolCall) -> str | None:
        try:
            if inv is not None:
                return inv.arguments_hash
            return self.hasher.raw(call.arguments)
        except Exception:  # arguments that cannot even be rendered: audit without a hash
            return None
