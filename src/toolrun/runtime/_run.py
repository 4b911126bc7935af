"""The run stage: the last checks before a handler starts, the handler itself, retries, the result.

In order, for every call that reaches it: the deadline (`DEADLINE_EXCEEDED`, nothing starts) and the budget
(`BUDGET_EXCEEDED`; one call counted however many attempts it takes); the session state, which a call works
on as its own deep copy and commits only when it ends `ok` (`commit`), so one call's failure never undoes
another's success; the handler, time-boxed by the tool's `timeout` shortened to the deadline (async ones
on the loop, under a box only once they suspend; sync ones in the executor's thread pool, or a job's own
pool under `worker_threads`); retries with backoff and jitter, only where safe (a `ToolError` with
`retryable=True`, or a timeout or transient error of an idempotent tool), never past the deadline; and the
result, checked against the output type, made JSON-safe and cut to `max_result_chars`.

The caller's cancellation propagates; a tool's own `CancelledError` is a result. A tool that does not stop
within `cancel_grace` after its time box cancelled it is abandoned (closed, `TIMEOUT` with
`details["abandoned"]`). The whole contract, with the reasons: docs/executor.md, "Timeouts and
cancellation".
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import copy
import inspect
import random
import time
import types
from collections.abc import Generator, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from toolrun._json import ResultNotJSON, json_safe
from toolrun.content import CONTENT_TYPES, ContentError, ToolOutput, as_content
from toolrun.results import ToolError, ToolResult
from toolrun.runtime import _errors
from toolrun.runtime._budget import apply_budget
from toolrun.runtime._convert import fast_output_types, ok_result, truncate
from toolrun.runtime._events import ToolRetrying
from toolrun.runtime._generators import drain
from toolrun.runtime._invocation import Invocation
from toolrun.runtime._watchdog import Box, watchdog
from toolrun.tools import Tool, ToolBudget, ToolContext

if TYPE_CHECKING:
    from toolrun.runtime._executor import ToolExecutor

__all__ = ["RunStage", "commit", "worker_threads"]

_Coroutine = types.CoroutineType
_monotonic = time.monotonic
_time = time.time
_current_task = asyncio.current_task
_NO_SNAPSHOT: Any = object()
_THREADS: contextvars.ContextVar[set[concurrent.futures.Future[Any]] | None] = contextvars.ContextVar(
    "toolrun_worker_threads", default=None
)
_POOL: contextvars.ContextVar[concurrent.futures.Executor | None] = contextvars.ContextVar(
    "toolrun_worker_pool", default=None
)


@contextlib.contextmanager
def worker_threads(
    pool: concurrent.futures.Executor | None = None,
) -> Iterator[set[concurrent.futures.Future[Any]]]:
    """A set that collects the worker-thread work of the sync handlers that calls started from inside
    the block (and from tasks created there, which copy the context) run. A thread cannot be stopped: a
    call that timed out or was cancelled has returned while its handler may still run. Whoever must know
    when the tool's code has really stopped (a background job holding its user's place) waits for these.

    With `pool`, those sync handlers run in `pool` instead of the executor's `thread_pool`: background
    jobs run in a pool of their own, so however many of them block, the threads of the calls a chat
    turn makes stay free. A call waits for a thread of `pool` as long as it takes (a job queues behind
    the others); its time box starts when its handler starts.
    """
    threads: set[concurrent.futures.Future[Any]] = set()
    token = _THREADS.set(threads)
    pool_token = _POOL.set(pool)
    try:
        yield threads
    finally:
        _POOL.reset(pool_token)
        _THREADS.reset(token)


def _started(began: asyncio.Future[None]) -> None:
    if not began.done():
        began.set_result(None)


def _announced(
    loop: asyncio.AbstractEventLoop, began: asyncio.Future[None], run: Any, fn: Any, *args: Any
) -> Any:
    """Run `fn` in a worker thread, first telling the loop it has started (`began`)."""
    with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits any more
        loop.call_soon_threadsafe(_started, began)
    return run(fn, *args)


_CONTENT_ITEMS = frozenset(CONTENT_TYPES)
_CONTENT_RETURNS = frozenset((*CONTENT_TYPES, ToolOutput))


class _TimedOut(Exception):
    def __init__(self, seconds: float, by_deadline: bool) -> None:
        self.seconds = seconds
        self.by_deadline = by_deadline


class _NotStarted(_TimedOut):
    """A sync tool's time box ran out while it still waited for a worker thread: it never ran."""


class _Abandoned(Exception):
    """The tool swallowed its cancellation and did not stop within the grace period: it was closed.
    `_boxed` fills in the time box it overran."""

    def __init__(self, seconds: float = 0.0, by_deadline: bool = False) -> None:
        self.seconds = seconds
        self.by_deadline = by_deadline


class _Resume:
    """Awaits the rest of a coroutine whose first step already ran (what `yield from` would do).

    One addition: a coroutine that swallows the `CancelledError` the executor's own time box threw into
    it and keeps waiting (or awaits a long cleanup) gets `grace` seconds; then it is closed (see
    `_close`: its `finally` blocks and `__aexit__`s run, for one more `grace` at most) and `_Abandoned`
    is raised, so that even such a tool cannot hold the call forever. Only the time box's cancellation
    counts (`box`, set by `_boxed`): a tool's own `asyncio.timeout`, anyio cancel scope or task group
    (httpx connects through one) cancels the same task and goes on working after it, as it should; and
    the caller's cancellation alone does not either (a request still standing on the task cannot be
    told from one a library left behind: Python 3.11's `TaskGroup` never withdraws its own when a child
    fails while it waits in `__aexit__`). Nothing of this runs unless the box expired.
    """

    __slots__ = ("_abandon", "_coro", "_first", "_grace", "box")

    def __init__(self, coro: types.CoroutineType[Any, Any, Any], first: Any, grace: float) -> None:
        self._coro = coro
        self._first = first
        self._grace = grace
        self._abandon = False
        self.box: Box | None = None

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self._coro
        value = self._first
        self._first = None
        handle: asyncio.TimerHandle | None = None
        try:
            while True:
                try:
                    sent = yield value
                except GeneratorExit:
                    coro.close()
                    raise
                except BaseException as exc:
                    if self._abandon and isinstance(exc, asyncio.CancelledError):
                        task = _current_task()
                        if task is not None:
                            task.uncancel()  # our own cancel, not the caller's
                        yield from self._close(coro)
                        raise _Abandoned from None
                    try:
                        value = coro.throw(exc)
                    except StopIteration as stop:
                        return stop.value
                    box = self.box
                    if (
                        handle is None
                        and box is not None
                        and box.expired()
                        and isinstance(exc, asyncio.CancelledError)
                    ):
                        handle = asyncio.get_running_loop().call_later(
                            self._grace, self._give_up, _current_task()
                        )
                else:
                    try:
                        value = coro.send(sent)
                    except StopIteration as stop:
                        return stop.value
        finally:
            if handle is not None:
                handle.cancel()

    def _close(self, coro: types.CoroutineType[Any, Any, Any]) -> Generator[Any, Any, None]:
        """Close an abandoned coroutine: `GeneratorExit` at its suspension point, so its `finally` blocks
        and `__aexit__`s run. Cleanup that awaits (an `async with` HTTP client or database connection
        closing) cannot run inside `coroutine.close()`, which would leave it half-closed with its anyio
        cancel scopes still open on this task; it is driven here, in this task (scopes must exit in the
        task that entered them), for one more `grace` at most, and then closed for good."""
        try:
            value = coro.throw(GeneratorExit)
        except BaseException:  # closed (GeneratorExit came back), or its cleanup raised: done either way
            return
        self._abandon = False
        task = _current_task()
        handle = asyncio.get_running_loop().call_later(self._grace, self._give_up, task)
        try:
            while True:
                try:
                    sent = yield value
                except BaseException as exc:
                    if self._abandon and isinstance(exc, asyncio.CancelledError):
                        if task is not None:
                            task.uncancel()
                        try:
                            coro.close()
                        except BaseException:  # it ignored GeneratorExit again: it is dropped
                            pass
                        return
                    try:
                        value = coro.throw(exc)
                    except BaseException:
                        return
                else:
                    try:
                        value = coro.send(sent)
                    except BaseException:
                        return
        finally:
            handle.cancel()

    def _give_up(self, task: asyncio.Task[Any] | None) -> None:
        self._abandon = True
        if task is not None:
            task.cancel()


async def _boxed(pending: Any, seconds: float, limit: float, by_deadline: bool) -> Any:
    """`await pending` under a time box of `seconds` (like `asyncio.timeout`; see `_watchdog`)."""
    task = _current_task()
    if task is None:  # pragma: no cover - a coroutine under a running loop always has a task
        async with asyncio.timeout(seconds):
            return await pending
    box = watchdog(asyncio.get_running_loop()).box(seconds, task)
    if type(pending) is _Resume:
        pending.box = box
    try:
        value = await pending
    except BaseException as exc:
        if box.close(exc):
            raise _TimedOut(limit, by_deadline) from None
        if type(exc) is _Abandoned:
            raise _Abandoned(limit, by_deadline) from None
        raise
    box.close(None)
    return value


async def _and_then(future: Any) -> Any:
    """The thread's result, awaited too when the sync handler returned an awaitable."""
    value = await future
    return await value if inspect.isawaitable(value) else value


def _outer_cancelled() -> bool:
    task = _current_task()
    return task is not None and task.cancelling() > 0


class RunStage:
    """The end of every tool's chain (see the module docstring). One instance per tool, built with its
    options read once."""

    __slots__ = (
        "_budget",
        "_check_output",
        "_direct",
        "_executor",
        "_fast_types",
        "_generator",
        "_idempotent",
        "_is_async",
        "_isolates",
        "_max_calls",
        "_max_chars",
        "_retries",
        "_timeout",
        "tool",
    )

    def __init__(self, executor: ToolExecutor, tool: Tool) -> None:
        opts = tool.options
        self._executor = executor
        self.tool = tool
        self._timeout = opts.timeout if opts.timeout is not None else executor.default_timeout
        self._retries = opts.retries
        self._idempotent = opts.effective_idempotent
        self._isolates = tool.takes_context and not opts.read_only
        self._is_async = tool.is_async
        self._generator = tool.is_generator
        # A generator tool's handler gives an async iterator, run by `drain` (never called directly).
        self._direct = None if self._generator else tool.direct_handler()
        self._check_output, self._fast_types = fast_output_types(tool)
        builtin = tool is executor.builtin_tool(tool.name)  # read_result's pages are never cut again
        self._budget = None if builtin else opts.output_budget or executor.output_budget
        self._max_chars = None if self._budget is not None else executor.max_result_chars
        self._max_calls = opts.max_calls

    def _count_tool(self, inv: Invocation, budget: ToolBudget) -> ToolResult | None:
        """Count this call against its tool's limit in `budget` (the smaller of the tool's `max_calls`
        and the budget's `tool_limits`); the refusal when the limit is reached."""
        name = self.tool.name
        limit = self._max_calls
        extra = budget.tool_limits.get(name)
        if extra is not None:
            limit = extra if limit is None else min(limit, extra)
        if limit is None:
            return None
        used = budget.tool_calls.get(name, 0)
        if used >= limit:
            return _errors.tool_budget_exceeded(inv.call.id, name, limit)
        budget.tool_calls[name] = used + 1
        return None

    async def __call__(self, invocation: Invocation) -> ToolResult:
        inv = invocation
        ctx = inv.context
        deadline = ctx.deadline
        if deadline is not None and _time() >= deadline:
            return _errors.deadline_exceeded(inv.call.id, self.tool.name)
        budget = ctx.budget
        if budget is not None:
            if budget.max_calls is not None and budget.calls_used >= budget.max_calls:
                return _errors.budget_exceeded(inv.call.id, self.tool.name, budget.max_calls)
            if self._max_calls is not None or budget.tool_limits:
                refused = self._count_tool(inv, budget)
                if refused is not None:
                    return refused
            budget.calls_used += 1
        elif self._max_calls is not None:
            refused = self._count_tool(inv, self._executor.run_budget(ctx.run_id))
            if refused is not None:
                return refused
        state = ctx.state
        base: Any = _NO_SNAPSHOT
        call_ctx = ctx
        if state is not None and self._isolates:
            try:
                base = copy.deepcopy(state)
            except Exception as exc:
                return self._executor.internal_error(
                    inv, exc, "could not start (its session state cannot be copied)"
                )
        attempt = 0
        while True:
            attempt += 1
            inv.attempts = attempt
            if base is not _NO_SNAPSHOT:  # each attempt starts from the state as the call found it
                call_ctx = replace(ctx, state=copy.deepcopy(base))
            try:
                if self._is_async:
                    # The coroutine's first step runs right here; most quick tools finish in it, and
                    # then no timer, task or extra frame is needed (see the module docstring).
                    started = _monotonic()
                    direct = self._direct
                    awaitable = (
                        direct(**inv.arguments)
                        if direct is not None
                        else self.tool.invoke(inv.arguments, call_ctx)
                    )
                    if self._generator:
                        awaitable = drain(awaitable, call_ctx)
                    if type(awaitable) is _Coroutine:
                        try:
                            first = awaitable.send(None)
                        except StopIteration as stop:
                            value = stop.value
                        else:
                            value = await self._rest(
                                _Resume(awaitable, first, self._executor.cancel_grace), started, deadline
                            )
                    elif inspect.isawaitable(awaitable):
                        value = await self._rest(awaitable, started, deadline)
                    else:
                        value = awaitable
                else:
                    value = await self._in_thread(inv, call_ctx, deadline)
            except ToolError as err:
                result = ToolResult.fail(_clean_error(err), call_id=inv.call.id, tool_name=self.tool.name)
                retry = err.retryable
            except _Abandoned as exc:
                if _outer_cancelled():
                    raise asyncio.CancelledError from None
                result = _errors.timeout(
                    inv.call.id,
                    self.tool.name,
                    exc.seconds,
                    idempotent=False,  # it did not stop when asked: nobody knows what it did
                    by_deadline=exc.by_deadline,
                )
                result.error.details["abandoned"] = True  # type: ignore[union-attr]
                retry = False
            except _NotStarted as exc:
                result = _errors.not_started(
                    inv.call.id, self.tool.name, exc.seconds, by_deadline=exc.by_deadline
                )
                retry = True  # it never ran: trying again cannot repeat an effect
            except _TimedOut as exc:
                result = _errors.timeout(
                    inv.call.id,
                    self.tool.name,
                    exc.seconds,
                    idempotent=self._idempotent,
                    by_deadline=exc.by_deadline,
                )
                retry = self._idempotent
            except asyncio.CancelledError as exc:
                if _outer_cancelled():
                    raise
                result = self._executor.internal_error(inv, exc, "was cancelled", cancelled=True)
                retry = False
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                transient = self._idempotent and isinstance(exc, self._executor.transient_errors)
                result = self._executor.internal_error(inv, exc, "failed", retryable=transient)
                retry = transient
            else:
                kind = type(value)
                if (kind is int or kind is bool or value is None) and (
                    not self._check_output or kind in self._fast_types
                ):  # JSON as they are, never cut: what `_result` would return, without its frame
                    result = ok_result(inv.call.id, self.tool.name, value, attempt)
                else:
                    result = self._result(inv, value)
                    if self._budget is not None and result.status == "ok":
                        result = await self._within_budget(result, call_ctx)
                if result.status != "error":
                    if call_ctx is not ctx:
                        try:
                            commit(state, base, call_ctx.state)
                        except Exception as exc:
                            return self._executor.internal_error(
                                inv, exc, "ran, but its session state changes could not be kept"
                            )
                    return result
                retry = False
            if not retry or attempt > self._retries:
                result.attempts = attempt
                return result
            delay = self._executor.backoff(attempt, result.error)
            if deadline is not None and _time() + delay >= deadline:
                result.attempts = attempt
                return result
            bus = self._executor.events
            if bus.active:
                bus.emit(
                    ToolRetrying(
                        call_id=inv.call.id,
                        tool_name=self.tool.name,
                        trace_id=ctx.trace_id,
                        user_id=ctx.user_id,
                        attempt=attempt,
                        delay=delay,
                        code=result.error.code if result.error is not None else "",
                    )
                )
            await asyncio.sleep(delay)

    def _limit(self, deadline: float | None) -> tuple[float | None, bool]:
        """The time box: the tool's timeout, shortened to the context's deadline (and whether it was)."""
        limit = self._timeout
        if deadline is not None:
            left = deadline - _time()
            if limit is None or left < limit:
                return max(left, 0.0), True
        return limit, False

    async def _rest(self, pending: Any, started: float, deadline: float | None) -> Any:
        """Await a handler that suspended, under what remains of its time box."""
        limit, by_deadline = self._limit(deadline)
        if limit is None:
            return await pending
        return await _boxed(pending, limit - (_monotonic() - started), limit, by_deadline)

    async def _in_thread(self, inv: Invocation, context: ToolContext[Any], deadline: float | None) -> Any:
        run = contextvars.copy_context().run
        pool = _POOL.get()
        began: asyncio.Future[None] | None = None
        if pool is None:
            work = self._executor.thread_pool.submit(run, self.tool.invoke, inv.arguments, context)
        else:  # a pool of its own (`worker_threads(pool)`): the time box starts with the handler
            loop = asyncio.get_running_loop()
            began = loop.create_future()
            work = pool.submit(_announced, loop, began, run, self.tool.invoke, inv.arguments, context)
        tracked = _THREADS.get()
        if tracked is not None:
            tracked.add(work)
        future = asyncio.wrap_future(work)
        if began is not None:
            try:  # however long the pool's queue is: a job waits its turn
                await asyncio.wait((began, future), return_when=asyncio.FIRST_COMPLETED)
            except BaseException:
                work.cancel()  # withdrawn while it still waits: it never runs
                raise
        limit, by_deadline = self._limit(deadline)
        if limit is None:
            value = await future
            return await value if inspect.isawaitable(value) else value
        try:
            return await _boxed(_and_then(future), limit, limit, by_deadline)
        except _TimedOut as exc:
            # `cancel()` succeeds only while the work item still waits in the pool's queue (the pool
            # marks it running under the same lock): then it never runs, and the call can say so.
            if work.cancel():
                raise _NotStarted(exc.seconds, exc.by_deadline) from None
            raise

    def _result(self, inv: Invocation, value: Any) -> ToolResult:
        """The result of a handler's return value (ints, bools and None are handled by the caller)."""
        executor = self._executor
        if isinstance(value, ToolResult):
            return self._own_result(inv, value)
        kind = type(value)
        if kind in _CONTENT_RETURNS or (kind is list and value and type(value[0]) in _CONTENT_ITEMS):
            return self._content_result(inv, value)
        if self._check_output and type(value) not in self._fast_types:
            try:
                problems = self.tool.output_problems(value)
            except Exception as exc:
                return executor.internal_error(inv, exc, "returned a result that could not be checked")
            if problems:
                return executor.invalid_result(inv, value, problems)
        try:
            safe = json_safe(value)
        except ResultNotJSON:
            return executor.invalid_result(inv, value)
        safe, total = truncate(safe, self._max_chars)
        result = ok_result(inv.call.id, self.tool.name, safe, inv.attempts)
        if total is not None:
            result.metadata["truncated"] = True
            result.metadata["original_chars"] = total
        return result

    def _content_result(self, inv: Invocation, returned: Any) -> ToolResult:
        """A handler returned content (an item, a list of items, a `ToolOutput`): the value is checked
        and made JSON-safe as any other; the items are checked against the executor's size limits."""
        try:
            split = as_content(returned)
        except ContentError as exc:
            return self._executor.content_invalid(inv, [str(exc)])
        value, items = split if split is not None else (None, ())
        problems = self._executor.content_problems(items)
        if problems:
            return self._executor.content_invalid(inv, problems)
        result = (
            self._result(inv, value)
            if value is not None
            else ok_result(inv.call.id, self.tool.name, None, inv.attempts)
        )
        if result.status == "ok":
            result.content = items
        return result

    async def _within_budget(self, result: ToolResult, context: ToolContext[Any]) -> ToolResult:
        """The result cut to the output budget (and kept whole as an artifact) when it is over it."""
        executor = self._executor
        assert self._budget is not None  # only called with a budget
        out = await apply_budget(
            result,
            self.tool,
            self._budget,
            context,
            executor.artifacts,
            executor.artifact_ttl,
            check_output=self._check_output,
        )
        if out is not result:
            executor.artifacts_made = True
        return out

    def _own_result(self, inv: Invocation, result: ToolResult) -> ToolResult:
        """A handler returned a whole `ToolResult` (to set a message, metadata, or hide the value)."""
        if result.status not in ("ok", "error"):
            return self._executor.invalid_result(inv, result)
        try:
            safe = json_safe(result.value)
            metadata = json_safe(result.metadata)
        except ResultNotJSON:
            return self._executor.invalid_result(inv, result.value)
        safe, total = truncate(safe, self._max_chars)
        out = ToolResult(
            call_id=inv.call.id,
            tool_name=self.tool.name,
            status=result.status,
            value=safe,
            message=result.message,
            error=_clean_error(result.error) if result.error is not None else None,
            attempts=inv.attempts,
            exclude_value_from_context=result.exclude_value_from_context,
            metadata=dict(metadata) if isinstance(metadata, dict) else {},
        )
        if out.status == "error" and out.error is None:
            return self._executor.invalid_result(inv, result)
        if result.content:
            items = tuple(result.content)
            problems = [
                f"content[{i}] is a {type(item).__name__}, not a content item"
                for i, item in enumerate(items)
                if type(item) not in _CONTENT_ITEMS
            ] or self._executor.content_problems(items)
            if problems:
                return self._executor.content_invalid(inv, problems)
            out.content = items
        if total is not None:
            out.metadata["truncated"] = True
            out.metadata["original_chars"] = total
        return out


def _clean_error(err: ToolError) -> ToolError:
    """A fresh copy of a tool's error with JSON-safe details (a tool may reuse one error instance)."""
    try:
        details = json_safe(err.details) if err.details else {}
    except ResultNotJSON:
        details = {}
    return ToolError(
        str(err.code),
        str(err.message),
        retryable=bool(err.retryable),
        recover_action=str(err.recover_action) if err.recover_action is not None else None,
        details=details if isinstance(details, dict) else {},
    )


def commit(live: Any, base: Any, mine: Any, depth: int = 0) -> None:
    """Apply to `live` the changes one call made: the difference between `base` (the state as the call
    found it) and `mine` (the call's own copy when it ended), and nothing else.

    A key the call added or changed is set to its value, a key it removed is removed, keys it left alone
    keep whatever other calls committed meanwhile. Dicts the call changed are merged key by key in the
    same way; a list the call only appended to gets the appended items appended (so two calls that each
    add an item both keep theirs); any other change replaces the value.
    """
    for key in base.keys() - mine.keys():
        live.pop(key, None)
    for key, value in mine.items():
        if key in base:
            old = base[key]
            if old is value or _same(old, value):
                continue
            current = live.get(key, _NO_SNAPSHOT)
            if type(old) is dict and type(value) is dict and type(current) is dict and depth < 32:
                commit(current, old, value, depth + 1)
                continue
            if type(old) is list and type(value) is list and type(current) is list:
                n = len(old)
                if len(value) > n and _same(value[:n], old):
                    current.extend(value[n:])
                    continue
        live[key] = value


def _same(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # an odd __eq__: treat it as changed, the call's value wins
        return False


def backoff_delay(attempt: int, base: float, cap: float, error: ToolError | None) -> float:
    """Exponential backoff with jitter: between half and all of `min(cap, base * 2**(attempt-1))`,
    and at least a `retry_after` the error asks for (still capped)."""
    delay: float = min(cap, base * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
    if error is not None:
        hint = error.details.get("retry_after")
        if isinstance(hint, int | float) and not isinstance(hint, bool) and hint > delay:
            delay = min(cap, float(hint))
    return delay
