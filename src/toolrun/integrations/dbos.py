"""Durable agent runs on DBOS Transact: `DurableAgent`, an `Agent` whose runs are DBOS workflows.

Every model request and every tool call is a step checkpointed in the DBOS system database, so a run cut
short by a deploy or a crash is recovered on restart, or by another process, without paying for a model
request twice or running a side effect twice; approvals are durable waits inside the workflow. How, and
what to mind (create agents before `DBOS.launch()`, native tool calling only): docs/durable.md.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, cast, overload

from dbos import DBOS, DBOSConfig, SetWorkflowID

from toolrun.agent import (
    Agent,
    AgentEvent,
    AgentRun,
    Approve,
    DecisionRefusedError,
    Deny,
    PendingCall,
    RunErrorCode,
)
from toolrun.approvals._decisions import Decision, check_decisions, decode_decision, encode_decision
from toolrun.exceptions import ToolrunError
from toolrun.integrations._dbos_calls import StepCalls
from toolrun.integrations._dbos_job_workflow import deliver_finished, job_workflow
from toolrun.integrations._dbos_jobs import JobStore
from toolrun.integrations._dbos_lease import ExecutorLease
from toolrun.integrations._dbos_steps import (
    ModelStepFailed,
    StepModel,
    idempotency_key,
    in_workflow,
    interrupted,
    step,
    sync_url,
)
from toolrun.integrations._dbos_tasks import DurableTasks
from toolrun.integrations._dbos_workflow import (
    DECISION,
    STATE,
    agent_workflow,
    claim,
    context_data,
    listening,
    release,
    run_workflow,
    running_task,
    until_finished,
)
from toolrun.models import Message, Model, ModelRequest, ModelResponse
from toolrun.results import ToolResult
from toolrun.store import NO_USER
from toolrun.tools import ToolCall, ToolContext

__all__ = [
    "DurableAgent",
    "DurableAgentExistsError",
    "DurableTasks",
    "ExecutorLease",
    "JobStore",
    "ModelStepFailed",
    "dbos_config",
    "idempotency_key",
    "interrupted",
    "sync_url",
]

_WAIT_SLICE = 30.0
"""Seconds one `get_event` waits before checking that the workflow still exists."""


class DurableAgentExistsError(ToolrunError, ValueError):
    """A `DurableAgent` of the same name is alive in this process: its runs would go to the wrong agent.

    Attributes:
        name: The name that is taken.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(
            f"A DurableAgent named {name!r} already exists in this process; each name must be unique (it "
            "names the DBOS workflow that recovers the agent's runs). Choose another name, or drop the "
            "first agent before making another of that name."
        )


def dbos_config(
    database_url: str,
    *,
    name: str = "toolrun",
    executor_id: str | None = None,
    application_version: str = "toolrun-1",
    schema: str | None = None,
    polling_interval: float | None = None,
    log_level: str = "WARNING",
) -> DBOSConfig:
    """A DBOS configuration for toolrun's durable runs.

    Args:
        database_url: The system database: `sqlite:///path` or `postgresql://...` (SQLAlchemy async URLs
            such as `postgresql+asyncpg://` or `sqlite+aiosqlite://` are accepted and converted).
        name: The DBOS application name.
        executor_id: This process's id in DBOS (its pending runs are recovered by a process with the same
            id at launch, or by any process through `ExecutorLease`). Default: DBOS's own (`"local"`).
        application_version: Runs are recovered only by processes of the same version; fixed here so
            that processes registering different workflows still share runs. Change it when a change
            of code would replay old runs differently.
        schema: The PostgreSQL schema of DBOS's tables (default `"dbos"`).
        polling_interval: Seconds between checks for messages and events (SQLite has no notifications).
        log_level: DBOS's own log level.
    """
    config: DBOSConfig = {
        "name": name,
        "system_database_url": sync_url(database_url),
        "application_version": application_version,
        "log_level": log_level,
    }
    if executor_id is not None:
        config["executor_id"] = executor_id
    if schema is not None:
        config["dbos_system_schema"] = schema
    if polling_interval is not None:
        config["notification_listener_polling_interval_sec"] = polling_interval
    return config


class DurableAgent(Agent):
    """An `Agent` whose runs are DBOS workflows: they survive the process (docs/durable.md).

    ```python
    agent = DurableAgent(model, registry, name="tasks")   # before DBOS.launch()
    run = await agent.run("Delete task t1", context=ToolContext(user_id="u1"))
    if run.status == "awaiting_confirmation":             # the workflow waits, durably
        cid = run.pending[0].confirmation_id
        run = await agent.resume(run, {cid: True}, context=ToolContext(user_id="u1"))
    ```

    Args:
        model: As for `Agent`.
        tools: As for `Agent`.
        name: A unique, stable name: it names the DBOS workflow that recovers this agent's runs, in every
            process. Another `DurableAgent` of the name still in use in the process raises
            `DurableAgentExistsError`.
        deps: `ToolContext.deps` for the tools of runs this process recovers (a context's own `deps` do
            not travel with the run).
        decision_timeout: Seconds a run waits for a decision on its pending confirmations (default: the
            executor's confirmation TTL); then it ends `failed`.
        on_state: Called with the run and its context each time a run that nobody in this process follows
            (a run recovered after a crash) pauses or ends: where a service stores what the run did. Called
            once per state (a step), in the process that runs the workflow.
        jobs: Where background jobs are kept: with it, a call of a `@tool(background=True)` tool starts a
            job (a DBOS workflow of its own) and returns its id at once; the result joins the conversation
            before the next model request of the same conversation. Without it such tools run inline.
        **kwargs: Everything else `Agent` takes (native mode only).
    """

    def __init__(
        self,
        model: Model | str,
        tools: Any = None,
        *,
        name: str,
        deps: Any = None,
        decision_timeout: float | None = None,
        on_state: Callable[[AgentRun, ToolContext[Any]], Awaitable[None]] | None = None,
        jobs: JobStore | None = None,
        **kwargs: Any,
    ) -> None:
        if kwargs.get("mode", "native") != "native":
            raise ValueError(
                "DurableAgent runs native tool calling only: planner mode draws call ids at random, which a "
                "replayed run cannot repeat."
            )
        if not name or not isinstance(name, str):
            raise ValueError("A DurableAgent needs a unique, stable name (it names its DBOS workflow).")
        super().__init__(model, tools, **kwargs)
        self.name = name
        self.deps = deps
        self.on_state = on_state
        self.jobs = jobs
        self.model = StepModel(self.model)
        self._steps = StepCalls(self.executor, agent=name, jobs=jobs)
        self.decision_timeout = (
            decision_timeout if decision_timeout is not None else self.executor.confirmation.ttl
        )
        if not claim(name, self):
            raise DurableAgentExistsError(name)
        self._workflow_fn = agent_workflow(name)
        job_workflow()  # registered before DBOS.launch(), to recover the jobs of this process

    # ----------------------------------------------------------------------------------------------------
    # Public API

    async def start(
        self,
        message: str | Sequence[Message],
        *,
        context: ToolContext[Any] | None = None,
        run_id: str | None = None,
        streaming: bool = False,
    ) -> str:
        """Start a run as a workflow and return its id at once (`wait(run_id)` for its state).

        Starting again with the `run_id` of a run that exists starts nothing: it is the same run.
        """
        run = self._start(message)
        if run_id is not None:
            run.run_id = run_id
        payload = {"run": run.to_dict(), "context": context_data(context), "streaming": streaming}
        with SetWorkflowID(run.run_id):
            await DBOS.start_workflow_async(self._workflow_fn, payload)
        return run.run_id

    async def wait(self, run_id: str, *, after: int = 0) -> AgentRun:
        """The run's state when it next pauses or ends: its `after + 1`-th published state (bound the wait
        with `asyncio.timeout`).

        Raises:
            KeyError: no run with that id.
        """
        return (await self._next_state(run_id, after))[0]

    async def _next_state(self, run_id: str, after: int) -> tuple[AgentRun, str | None]:
        """`wait`'s run, and the nonce of the decision its state answers (None: none, or not known)."""
        key = f"{STATE}{after + 1}"
        while True:
            value = await DBOS.get_event_async(run_id, key, timeout_seconds=_WAIT_SLICE)
            if value is not None:
                return AgentRun.from_dict(value["run"]), value.get("decided_by")
            status = await DBOS.get_workflow_status_async(run_id)
            if status is None:
                raise KeyError(f"No durable run {run_id!r}.")
            if status.status in ("ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"):
                latest = await self.state(run_id)
                run = latest[1] if latest is not None else AgentRun(run_id=run_id)
                run.status, run.error = "failed", f"The run's workflow ended with {status.status}."
                return run, None

    async def state(self, run_id: str) -> tuple[int, AgentRun, str | None] | None:
        """The latest published state of a run: `(sequence number, run, user id)`, or None before any."""
        events = await DBOS.get_all_events_async(run_id)
        numbers = [int(k[len(STATE) :]) for k in events if k.startswith(STATE) and k[len(STATE) :].isdigit()]
        if not numbers:
            return None
        latest = max(numbers)
        value = events[f"{STATE}{latest}"]
        return latest, AgentRun.from_dict(value["run"]), value.get("user_id")

    @overload
    async def decide(
        self, target: str, decision: Decision, *, context: ToolContext[Any] | None = None
    ) -> AgentRun: ...

    @overload
    async def decide(
        self, target: str, decision: Mapping[str, Decision], *, context: ToolContext[Any] | None = None
    ) -> int: ...

    async def decide(
        self,
        target: str,
        decision: Decision | Mapping[str, Decision],
        *,
        context: ToolContext[Any] | None = None,
    ) -> AgentRun | int:
        """Decide a held call of a durable run, from any process sharing the database.

        `decide(confirmation_id, decision, context=ctx)`, as `Agent.decide`: the run is the one the
        confirmation's record names; returns the run when it next pauses or ends. Refused with
        `DecisionRefusedError`: `confirmation_unknown` for an unknown or decided confirmation, or another
        user's; `decided_elsewhere` when another decision on the same pause reached the run first (two
        sent at once: the workflow takes one, and each state names the decision it answers).

        `decide(run_id, {confirmation_id: decision, ...}, context=ctx)`: sends the decisions to the run and
        returns the sequence number of the state they answer (`wait(run_id, after=n)` gives the state after
        them) without waiting.
        """
        if isinstance(decision, Mapping):
            return await self._send(target, decision, context)
        record = await self.executor.confirmations.record(target)
        user = context.user_id if context is not None else None
        if record is None or record.run_id is None or record.user_id != (user or NO_USER):
            raise DecisionRefusedError(
                RunErrorCode.CONFIRMATION_UNKNOWN,
                target,
                f"No pending confirmation {target!r} for this user (unknown, already decided, or another "
                "user's); nothing was run.",
            )
        nonce = secrets.token_hex(16)
        seq = await self._send(record.run_id, {target: decision}, context, nonce=nonce)
        run, decided_by = await self._next_state(record.run_id, seq)
        if decided_by is not None and decided_by != nonce:  # another decision on this pause came first
            raise DecisionRefusedError(
                RunErrorCode.DECIDED_ELSEWHERE,
                target,
                f"Another decision on confirmation {target!r} reached the run first; that one carries it "
                "on. Nothing of this one ran.",
            )
        return run

    async def _send(
        self,
        run_id: str,
        approvals: Mapping[str, Decision],
        context: ToolContext[Any] | None,
        *,
        nonce: str | None = None,
    ) -> int:
        """Send decisions to a run waiting for them; the sequence number of the state they answer.

        Decisions are those of `Agent.resume`: `True`/`False`, `Approve(arguments=...)` (the person's edited
        arguments: validated and previewed again here, before anything is sent, then bound to the
        confirmation and run once by the workflow) and `Deny(reason=...)` (the model receives the reason).

        Raises:
            ValueError: the run is not waiting for a decision, `approvals` names an id that is not pending
                in it, `context` is not the run's user, a decision is not one of the above, or an edit's
                arguments are refused by its tool (nothing was sent).
        """
        check_decisions(approvals)
        latest = await self.state(run_id)
        if latest is None or latest[1].status != "awaiting_confirmation":
            raise ValueError(f"Run {run_id!r} is not waiting for a decision.")
        seq, run, owner = latest
        user = context.user_id if context is not None else None
        if user != owner:
            raise ValueError(f"Run {run_id!r} is not waiting for a decision of this user.")
        unknown = set(approvals) - {p.confirmation_id for p in run.pending}
        if unknown:
            raise ValueError(f"No pending confirmation with id(s) {sorted(unknown)} in run {run_id}.")
        wire = {k: encode_decision(k, v) for k, v in approvals.items()}
        for confirmation_id, value in approvals.items():  # every edit is checked before anything is sent
            if isinstance(value, Approve) and value.arguments is not None:
                asker = (context or ToolContext()).evolve(run_id=run_id)
                checked = await self.executor.preview_edit(confirmation_id, asker, value.arguments)
                if checked.error is not None:
                    name = next(
                        (p.call.name for p in run.pending if p.confirmation_id == confirmation_id), ""
                    )
                    raise ValueError(
                        f"The edited arguments for {name!r} ({confirmation_id}) were refused, nothing was "
                        f"sent: {checked.error.render()}"
                    )
        decision = {
            "approvals": wire,
            "user_id": user,
            "seq": seq,
            "deadline": context.deadline if context is not None else None,
            "nonce": nonce,
        }
        await DBOS.send_async(run_id, decision, DECISION)
        return seq

    async def stop(self, run_id: str) -> bool:
        """Stop a run: DBOS cancels its workflow, so no step of it starts again (here, in another process,
        or on recovery), and when this process runs it the step in flight is cancelled too (a tool call
        under the executor's rules for a cancelled call, a model request closed). `run_id` is the run's
        id, or the trace id (`ToolContext.trace_id`) it was started with. Returns whether it was running
        in this process.
        """
        here = running_task(run_id)
        if here is None:
            if await DBOS.get_workflow_status_async(run_id) is None:
                raise KeyError(f"No durable run {run_id!r}.")
            await DBOS.cancel_workflow_async(run_id)
            return False
        await DBOS.cancel_workflow_async(here[0])
        here[1].cancel()
        return True

    def release(self) -> None:
        """Give up this agent's name in the process (its runs are no longer recovered here), so that a new
        `DurableAgent` may take it; the service calls it when its app shuts down. Idempotent."""
        release(self.name, self)

    async def run(
        self, message: str | Sequence[Message], *, context: ToolContext[Any] | None = None
    ) -> AgentRun:
        """Run as a workflow until an answer, a pause or a limit (see `Agent.run`)."""
        return await self.wait(await self.start(message, context=context))

    async def stream(
        self, message: str | Sequence[Message], *, context: ToolContext[Any] | None = None
    ) -> AsyncIterator[AgentEvent]:
        """Like `run`, yielding events as they happen (from this process); the last is `RunFinished`."""
        run = self._start(message)
        async with listening(run.run_id) as queue:
            await self.start(run.messages, context=context, run_id=run.run_id, streaming=True)
            async for event in until_finished(queue):
                yield event

    async def resume(
        self,
        run: AgentRun,
        approvals: Mapping[str, bool | Approve | Deny],
        *,
        context: ToolContext[Any] | None = None,
    ) -> AgentRun:
        """Send the decisions to the waiting workflow and return the run's next state."""
        seq = await self.decide(run.run_id, approvals, context=context)
        return await self.wait(run.run_id, after=seq)

    async def stream_resume(
        self,
        run: AgentRun,
        approvals: Mapping[str, bool | Approve | Deny],
        *,
        context: ToolContext[Any] | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """Like `resume`, yielding the events of the continued run (from this process)."""
        async with listening(run.run_id) as queue:
            await self.decide(run.run_id, approvals, context=context)
            async for event in until_finished(queue):
                yield event

    # ----------------------------------------------------------------------------------------------------
    # The workflow

    async def _workflow(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The body of this agent's DBOS workflow, the decisions read as `decide` sends them."""
        return await run_workflow(self, payload, _approvals)

    @property
    def _calls(self) -> StepCalls:
        """The loop's calls and decisions, as steps in workflow code."""
        return self._steps

    async def _ask(
        self, run: AgentRun, ctx: ToolContext[Any], request: ModelRequest, *, streaming: bool
    ) -> AsyncIterator[AgentEvent | ModelResponse]:
        if self.jobs is not None and ctx.conversation_id is not None and in_workflow():
            # Jobs of this conversation that finished since the last request: their results join it.
            request = await deliver_finished(self.jobs, run, ctx, request)
        async for item in super()._ask(run, ctx, request, streaming=streaming):
            yield item

    # Store reads that decide what the loop does are steps too: a replay must take the same path even
    # when the store has changed since (a confirmation consumed by the approval that followed).

    async def _bind_pending(self, run: AgentRun, ctx: ToolContext[Any]) -> str | None:
        if not in_workflow():
            return await super()._bind_pending(run, ctx)

        async def bind() -> dict[str, Any]:
            problem = await Agent._bind_pending(self, run, ctx)
            return {"problem": problem, "pending": [p.to_dict() for p in run.pending]}

        data = await step(None, "toolrun.confirmation.bind", bind)
        run.pending = [PendingCall.from_dict(p) for p in data["pending"]]
        return cast("str | None", data["problem"])

    async def _pending_entry(self, run: AgentRun, call: ToolCall, result: ToolResult) -> PendingCall:
        if not in_workflow():
            return await super()._pending_entry(run, call, result)

        async def entry() -> dict[str, Any]:
            return (await Agent._pending_entry(self, run, call, result)).to_dict()

        return PendingCall.from_dict(await step(None, "toolrun.confirmation.entry", entry))


def _approvals(
    decision: Any, run: AgentRun, ctx: ToolContext[Any]
) -> dict[str, bool | Approve | Deny] | None:
    """The decisions of a decision message, or None when it is not for this run as it stands."""
    if not isinstance(decision, Mapping) or decision.get("user_id") != ctx.user_id:
        return None
    approvals = decision.get("approvals")
    if not isinstance(approvals, Mapping) or not approvals:
        return None
    pending = {p.confirmation_id for p in run.pending}
    if not set(approvals) <= pending:
        return None
    read = {str(k): decode_decision(v) for k, v in approvals.items()}
    if any(v is None for v in read.values()):
        return None
    return cast("dict[str, bool | Approve | Deny]", read)
