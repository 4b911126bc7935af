"""The workflow of a background job: one call of a `@tool(background=True)` tool, started by a durable run
(or an MCP task) and run on its own, its progress and result kept in the agent's `JobStore`; and the
delivery of finished jobs' results into their conversation. Internal: import from
`toolrun.integrations.dbos`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from dbos import DBOS

from toolrun.agent import AgentRun
from toolrun.integrations._dbos_jobs import JobStore
from toolrun.integrations._dbos_steps import idempotency_key, step
from toolrun.integrations._dbos_workflow import agent_named, context_data, restore_context
from toolrun.models import ModelRequest, UserMessage
from toolrun.results import ErrorCode, ToolResult
from toolrun.runtime import _errors
from toolrun.runtime._run import worker_threads
from toolrun.tools import ToolCall, ToolContext
from toolrun.tools._context import ProgressThrottle

__all__ = ["deliver_finished", "job_payload", "job_workflow"]

_PROGRESS_INTERVAL = 0.25
"""Seconds per stored progress report of a job at the steady rate (a short burst goes at once)."""

Workflow = Callable[[dict[str, Any]], Coroutine[Any, Any, dict[str, Any]]]


def job_payload(
    agent: str, job_id: str, call: ToolCall, context: ToolContext[Any], run_id: str | None
) -> dict[str, Any]:
    """What the job workflow is started with: the agent's name, the job, the call and its context."""
    return {
        "agent": agent,
        "job_id": job_id,
        "call": call.to_dict(),
        "context": context_data(context),
        "run_id": run_id,
    }


@functools.cache
def job_workflow() -> Workflow:
    """The DBOS workflow of background jobs (registered once per process)."""

    async def background_job(payload: dict[str, Any]) -> dict[str, Any]:
        return await _run_job(payload)

    registered: Workflow = DBOS.workflow(name="toolrun.job")(background_job)
    return registered


async def _run_job(payload: dict[str, Any]) -> dict[str, Any]:
    """One background job: the call as a step (interrupted: run again only if idempotent), its result
    stored; a cancel in the store stops the tool within a quarter of a second.

    The job ends in the store only once its tool's code has really stopped: a sync tool's thread cannot
    be stopped, so after a cancel or a timeout the job waits for it (`cancelling`, or `running`, in the
    meantime: it keeps its place in its user's `max_running_per_user`). Its progress goes to the store
    through a `ProgressThrottle` (a database write per report would be one per report). A blocking tool
    runs in the job store's own `thread_pool`, never in the threads of the agent's other calls."""
    agent = agent_named(payload["agent"])
    jobs = agent.jobs
    if jobs is None:
        raise RuntimeError(f"DurableAgent {agent.name!r} has no job store in this process.")
    job_id = payload["job_id"]
    call = ToolCall.from_dict(payload["call"])

    async def report(progress: float, total: float | None, message: str | None) -> None:
        with contextlib.suppress(Exception):
            await jobs.progress(job_id, progress, total, message)

    throttle = ProgressThrottle(report, interval=_PROGRESS_INTERVAL)
    ctx = restore_context(payload["context"], agent.deps).evolve(
        run_id=payload.get("run_id"),
        deadline=None,  # the run's deadline is not the job's: the tool's own timeout bounds it
        idempotency_key=idempotency_key(job_id, call.id),
        progress=throttle,
    )

    async def watch(task: asyncio.Future[ToolResult]) -> ToolResult:
        """The call's result, or the cancel's once the user asked the job to stop."""
        while not task.done():
            await asyncio.wait({task}, timeout=0.25)
            if not task.done() and await jobs.status(job_id) in ("cancelling", "cancelled"):
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
                finished = not task.cancelled() and task.exception() is None
                if finished and not _was_cancelled(task.result()):
                    return task.result()  # it finished as the cancel landed: it stays as it finished
                return _errors.fail(
                    call.id,
                    call.name,
                    ErrorCode.EXECUTION_FAILED,
                    "The user cancelled the job before it finished; it may have done part of its work.",
                    details={"cancelled": True},
                )
        return task.result()

    async def run() -> ToolResult:
        with worker_threads(jobs.thread_pool) as threads:  # a pool of the jobs' own
            task = asyncio.ensure_future(agent._steps.executor.execute(call, ctx))
        result = await watch(task)
        # A cancelled or timed-out sync tool runs on in its thread: the job has not stopped until it has.
        running = [asyncio.wrap_future(work) for work in threads if not work.done()]
        if running:
            await asyncio.gather(*running, return_exceptions=True)
        await throttle.aclose()  # its last report, then nothing more
        return result

    result = await agent._steps.twice(call, run, None)

    async def finish() -> bool:
        await jobs.finish(job_id, result)
        return True

    await step(None, "toolrun.job.finish", finish)
    return result.to_dict()


def _was_cancelled(result: ToolResult) -> bool:
    error = result.error
    return error is not None and (error.details or {}).get("cancelled") is True


async def deliver_finished(
    jobs: JobStore, run: AgentRun, ctx: ToolContext[Any], request: ModelRequest
) -> ModelRequest:
    """`request` with the results of the conversation's jobs that finished since the last request joined to
    the run's messages (taken in a step: a replay delivers the same ones)."""
    user, conversation = ctx.user_id or "", ctx.conversation_id or ""

    async def take() -> list[dict[str, Any]]:
        return await jobs.take_finished(user, conversation)

    finished = await step(None, "toolrun.jobs.deliver", take)
    if not finished:
        return request
    run.messages.extend(UserMessage(content=_job_note(job)) for job in finished)
    return ModelRequest(run.messages, tools=request.tools, settings=request.settings)


def _job_note(job: Mapping[str, Any]) -> str:
    """A finished job's result, as the message the model reads."""
    data = job.get("result")
    text = ToolResult.from_dict(data).render() if isinstance(data, dict) else "(no result)"
    return f"[Background job {job['id']} ({job['tool']}) {job['status']}] {text}"
