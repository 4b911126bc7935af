"""One turn of tool calls: checked at the model boundary, run together, recorded, and fed back.

The loop hands each response's calls here (`checked_calls`, then `run_calls`): refused calls get their result
without reaching the executor, the rest run through `Agent._calls` with their progress streamed as it comes,
and every call gets exactly one result in the model's order. Held calls pause the run (their entries read
through `Agent._pending_entry`); otherwise `after_results` feeds the results back and ends the run on a spent
budget or a tool that keeps failing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from toolrun.agent._boundary import CheckedCalls, audit_refused, check_calls, refused_unrun, used_call_ids
from toolrun.agent._events import (
    AgentEvent,
    ConfirmationRequired,
    ToolCallFinished,
    ToolCallProgress,
    ToolCallStarted,
)
from toolrun.agent._run import AgentRun, PendingCall, RunErrorCode, ToolCallRecord
from toolrun.models import ToolResultMessage
from toolrun.results import ErrorCode, ToolResult
from toolrun.tools import ToolCall, ToolContext
from toolrun.tools._context import ProgressThrottle

if TYPE_CHECKING:
    from toolrun.agent._agent import Agent

__all__ = ["ContextFor", "after_results", "checked_calls", "run_calls", "with_progress"]

T = TypeVar("T")

logger = logging.getLogger("toolrun.agent")


ContextFor = Callable[[ToolCall], ToolContext[Any]]
"""Each call's own context: the caller's, with a progress callback that reports for that call."""


async def with_progress(
    agent: Agent,
    ctx: ToolContext[Any],
    step: int,
    work: Callable[[ContextFor], Awaitable[T]],
    done: list[T],
) -> AsyncIterator[ToolCallProgress]:
    """Run `work(context_for)` (calls, each with the context `context_for` gives it) and yield their
    progress as it comes, each report also heard by `ctx.progress`; `work`'s result is appended to `done`.
    Throttled to `agent.progress_interval`; a call's last report is not lost, and nothing more comes once
    the work ended (timeouts, cancellation)."""
    progress: asyncio.Queue[ToolCallProgress] = asyncio.Queue()
    throttles: list[ProgressThrottle] = []

    def context_for(call: ToolCall) -> ToolContext[Any]:
        outer = ctx.progress

        async def report(done: float, total: float | None, message: str | None, value: Any = None) -> None:
            progress.put_nowait(
                ToolCallProgress(
                    call=call, progress=done, total=total, message=message, step=step, partial=value
                )
            )
            if outer is not None:  # a transport above the agent listens too
                await outer(done, total, message)

        async def report_partial(done: float, message: str | None, value: Any) -> None:
            await report(done, None, message, value)

        throttle = ProgressThrottle(report, interval=agent.progress_interval, partial=report_partial)
        throttles.append(throttle)
        return ctx.evolve(progress=throttle)

    running = asyncio.ensure_future(work(context_for))
    try:
        while not running.done():
            waiter = asyncio.ensure_future(progress.get())
            await asyncio.wait({running, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if waiter.done():
                yield waiter.result()
            else:
                waiter.cancel()
        for throttle in throttles:  # each call's last report, if it still waited for the rate
            await throttle.aclose()
        while not progress.empty():  # reported before the calls ended
            yield progress.get_nowait()
        done.append(running.result())
    finally:
        for throttle in throttles:  # nothing more once the calls ended (timeouts, cancellation)
            throttle.close()
        if not running.done():
            running.cancel()
            await asyncio.wait({running})


def checked_calls(agent: Agent, run: AgentRun, calls: Sequence[ToolCall]) -> CheckedCalls:
    """The model boundary for calls: unique safe ids, safe names, bounded arguments (`_boundary`)."""
    tools, registry = agent.tools, agent.executor.registry
    checked = check_calls(
        calls,
        used_ids=used_call_ids(run.messages),
        known=lambda name: tools.find(name) is not None or registry.find(name) is not None,
        suggest=tools.suggest,
        limits=agent.output_limits,
    )
    if checked.renamed:
        logger.debug("agent run %s: call ids replaced: %s", run.run_id, checked.renamed)
    return checked


async def run_calls(
    agent: Agent, run: AgentRun, ctx: ToolContext[Any], checked: CheckedCalls
) -> AsyncIterator[AgentEvent]:
    """One turn's calls: started, run together (their progress as it comes), finished in the model's order;
    the run pauses on held calls, or the results go back (`Agent._after_results`)."""
    step = run.steps
    calls, refused = checked.calls, checked.refused
    audit_refused(agent.executor, checked, ctx)  # each refusal leaves its record, as the executor's do
    for call in calls:
        yield ToolCallStarted(call=call, step=step)
    runnable = [c for c in calls if c.id not in refused]
    done: list[list[ToolResult]] = []

    def work(context_for: ContextFor) -> Awaitable[list[ToolResult]]:
        return agent._calls.execute_many(
            runnable, ctx, max_concurrency=agent.max_concurrency, context_for=context_for
        )

    async for event in with_progress(agent, ctx, step, work, done):
        yield event
    ran = iter(done[0])
    results = [refused[c.id] if c.id in refused else next(ran) for c in calls]
    pending: list[PendingCall] = []
    for call, result in zip(calls, results, strict=True):
        run.tool_calls.append(ToolCallRecord(call=call, result=result, step=step))
        yield ToolCallFinished(call=call, result=result, step=step)
        if result.status == "confirmation_required" and result.confirmation_id is not None:
            entry = await agent._pending_entry(run, call, result)
            pending.append(entry)
            yield ConfirmationRequired(
                confirmation_id=entry.confirmation_id,
                call=call,
                summary=entry.summary,
                preview=entry.preview,
            )
    if pending:
        run.pending, run.batch = pending, list(calls)
        run.status = "awaiting_confirmation"
        return
    agent._after_results(run, calls, results)


def after_results(
    agent: Agent, run: AgentRun, calls: Sequence[ToolCall], results: Sequence[ToolResult]
) -> None:
    """Feed a turn's results back (native mode) and stop on a spent budget or a hopeless tool."""
    if run.mode == "native":
        run.messages.extend(ToolResultMessage.from_result(r) for r in results)
    if any(
        r.error is not None
        and r.error.code == ErrorCode.BUDGET_EXCEEDED
        and r.error.details.get("limit") != "tool"  # one tool's limit: the run goes on without it
        for r in results
    ):
        run.status, run.error = "budget_exceeded", "The run's budget of tool calls is spent."
        run.error_code = RunErrorCode.LIMIT_REACHED
        return
    for call in calls:
        streak = 0
        for record in reversed(run.tool_calls):
            if record.call.name != call.name or refused_unrun(record.result):
                continue
            if record.result.status != "error":
                break
            streak += 1
        if streak >= agent.max_tool_errors:
            last = next(
                r
                for r in reversed(run.tool_calls)
                if r.call.name == call.name and not refused_unrun(r.result)
            ).result
            code = last.error.code if last.error is not None else "?"
            run.status = "failed"
            run.error = (
                f"Tool {call.name!r} failed {streak} times in a row (last error {code}); "
                "stopping instead of retrying the same failing call."
            )
            run.error_code = RunErrorCode.TOOL_FAILING
            return
