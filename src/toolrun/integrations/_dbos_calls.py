"""`StepCalls`: the tool calls and decisions of a durable run's loop, as DBOS steps.

A call is two steps, a `begin` marker and the call, so that recovery can tell a call that never started
from one its process died in (run again only when its tool is idempotent); a call of a background tool
starts a job instead. Internal: import from `toolrun.integrations.dbos`.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, cast

from dbos import DBOS, SetWorkflowID

from toolrun.integrations._dbos_job_workflow import job_payload, job_workflow
from toolrun.integrations._dbos_jobs import JobLimitError, JobStore
from toolrun.integrations._dbos_steps import idempotency_key, in_workflow, interrupted, step
from toolrun.results import ErrorCode, ToolResult
from toolrun.runtime import ToolExecutor, _errors
from toolrun.runtime._chain import in_call_order
from toolrun.tools import Tool, ToolCall, ToolContext

__all__ = ["StepCalls"]

Start = Callable[[], Awaitable[None]]
"""A job's start, run after its batch of calls (starting a workflow takes the next step id)."""


class StepCalls:
    """What the agent loop asks of its executor (`execute_many`, `approve`, `preview_edit`, `deny`), each
    call and decision a DBOS step when made from workflow code; outside a workflow, the executor's own.

    Args:
        executor: The executor that runs the calls.
        agent: The `DurableAgent`'s name (its jobs' workflow finds it by that name).
        jobs: Where background jobs are kept; without it, a background tool's call runs inline.
    """

    def __init__(self, executor: ToolExecutor, *, agent: str, jobs: JobStore | None) -> None:
        self.executor = executor
        self.agent = agent
        self.jobs = jobs

    async def execute_many(
        self,
        calls: Iterable[ToolCall],
        context: ToolContext[Any] | None = None,
        *,
        max_concurrency: int | None = None,
        context_for: Callable[[ToolCall], ToolContext[Any]] | None = None,
    ) -> list[ToolResult]:
        """`ToolExecutor.execute_many`, with the calls as steps (see the module docstring)."""
        if not in_workflow():
            return await self.executor.execute_many(
                calls, context, max_concurrency=max_concurrency, context_for=context_for
            )
        items = list(calls)
        ctx = context if context is not None else ToolContext()
        # Step ids are drawn now, in the model's call order: concurrent calls finish in any order, and a
        # replay must find each call's record at the same id.
        reserved = [(DBOS.reserve_step(), DBOS.reserve_step()) for _ in items]
        results: list[ToolResult | None] = [None] * len(items)
        starts: list[list[Start]] = [[] for _ in items]

        async def run(index: int) -> None:
            own = ctx if context_for is None else context_for(items[index])  # its progress reporter
            results[index] = await self._once(items[index], own, reserved[index], starts[index])

        await in_call_order(self.executor, [c.name for c in items], run, max_concurrency)
        # Jobs start after the batch, in call order: starting a workflow takes the next step id.
        for pending in starts:
            for start in pending:
                await start()
        return [r for r in results if r is not None]

    async def approve(
        self, confirmation_id: str, context: ToolContext[Any], *, arguments: Mapping[str, Any] | None = None
    ) -> ToolResult:
        """`ToolExecutor.approve`, the approved call run as steps like any other call."""
        if not in_workflow():
            return await self.executor.approve(confirmation_id, context, arguments=arguments)

        async def lookup() -> dict[str, str]:
            record = await self.executor.confirmations.record(confirmation_id)
            if record is None:
                return {"id": "", "name": ""}
            return {"id": str(record.call.get("id", "")), "name": record.tool_name}

        stored = await step(None, "toolrun.confirmation.lookup", lookup)
        call = ToolCall(id=stored["id"], name=stored["name"])
        ctx = context.evolve(idempotency_key=idempotency_key(context.run_id or "", call.id))
        return await self.twice(
            call, lambda: self.executor.approve(confirmation_id, ctx, arguments=arguments), None
        )

    async def preview_edit(
        self, confirmation_id: str, context: ToolContext[Any], arguments: Mapping[str, Any]
    ) -> ToolResult:
        """`ToolExecutor.preview_edit`, as a step: a replay takes the path the first run took."""
        if not in_workflow():
            return await self.executor.preview_edit(confirmation_id, context, arguments)

        async def preview() -> ToolResult:
            return await self.executor.preview_edit(confirmation_id, context, arguments)

        return cast(ToolResult, await step(None, "toolrun.confirmation.preview_edit", preview))

    async def deny(
        self, confirmation_id: str, context: ToolContext[Any], reason: str | None = None
    ) -> ToolResult:
        """`ToolExecutor.deny`, as a step."""
        if not in_workflow():
            return await self.executor.deny(confirmation_id, context, reason)

        async def deny() -> ToolResult:
            return await self.executor.deny(confirmation_id, context, reason)

        return cast(ToolResult, await step(None, "toolrun.confirmation.deny", deny))

    async def twice(
        self, call: ToolCall, run: Callable[[], Awaitable[ToolResult]], reserved: tuple[Any, Any] | None
    ) -> ToolResult:
        """`run` as two steps, `begin` and the call: a call that began in a process that stopped before
        it ended is run again only for an idempotent tool."""
        token = secrets.token_hex(8)

        async def begin() -> str:
            return token

        # The marker's recorded token is this execution's own unless the step ran before, in a process
        # that stopped: then the call step after it may have started there.
        began = await step(reserved and reserved[0], f"toolrun.tool.begin:{call.name}", begin)
        fresh = began == token
        tool = self.executor.registry.find(call.name)
        retry_safe = tool is not None and tool.options.effective_idempotent

        async def execute() -> ToolResult:
            if not fresh and not retry_safe:
                return interrupted(call.id, tool.name if tool is not None else call.name)
            return await run()

        return cast(ToolResult, await step(reserved and reserved[1], f"toolrun.tool:{call.name}", execute))

    async def _once(
        self, call: ToolCall, context: ToolContext[Any], reserved: tuple[Any, Any] | None, starts: list[Start]
    ) -> ToolResult:
        ctx = context.evolve(idempotency_key=idempotency_key(context.run_id or "", call.id))
        tool = self.executor.registry.find(call.name)
        if tool is not None and tool.options.background and self.jobs is not None:
            return await self._job(call, ctx, tool, self.jobs, reserved, starts)
        return await self.twice(call, lambda: self.executor.execute(call, ctx), reserved)

    async def _job(
        self,
        call: ToolCall,
        ctx: ToolContext[Any],
        tool: Tool,
        jobs: JobStore,
        reserved: tuple[Any, Any] | None,
        starts: list[Start],
    ) -> ToolResult:
        """Start a background job for `call` (once the executor's front gates would let it run): the job
        is recorded now, its workflow started after the batch (`starts`)."""
        if not _may_start(tool, call, ctx):
            # not allowed, or arguments it cannot take: the executor answers as for any call
            return await self.twice(call, lambda: self.executor.execute(call, ctx), reserved)
        job_id = "job_" + idempotency_key(ctx.run_id or "", call.id)[5:29]

        async def create() -> bool:
            try:
                await jobs.create(
                    job_id,
                    user_id=ctx.user_id or "",
                    tool=tool.name,
                    conversation_id=ctx.conversation_id,
                    run_id=ctx.run_id,
                )
            except JobLimitError:
                return False
            return True

        if not await step(reserved and reserved[0], f"toolrun.job.create:{tool.name}", create):
            return _errors.fail(
                call.id,
                tool.name,
                ErrorCode.RATE_LIMITED,
                f"Too many background jobs are running for this user (at most {jobs.max_running_per_user}).",
                retryable=True,
                recover_action="Tell the user; start it again once a job has finished.",
            )
        payload = job_payload(self.agent, job_id, call, ctx, ctx.run_id)

        async def start() -> None:
            with SetWorkflowID(job_id):
                await DBOS.start_workflow_async(job_workflow(), payload)

        starts.append(start)
        return ToolResult.ok(
            {"job_id": job_id, "status": "running"},
            message=(
                f"Started background job {job_id} ({tool.name}). It runs on its own; its result will be "
                "given to you in a later turn. Tell the user it has started."
            ),
            call_id=call.id,
            tool_name=tool.name,
        )


def _may_start(tool: Tool, call: ToolCall, ctx: ToolContext[Any]) -> bool:
    """Whether the executor's front gates (access, arguments) would let the call run."""
    if ctx.allowed_tools is not None and tool.name not in ctx.allowed_tools:
        return False
    if tool.options.roles is not None and not tool.options.roles & set(ctx.roles):
        return False
    try:
        tool.validate(call.arguments)
    except Exception:
        return False
    return True
