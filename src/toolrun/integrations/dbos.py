"""Durable agent runs on DBOS Transact: `DurableAgent`.

A `DurableAgent` is an `Agent` whose runs are DBOS workflows. Every model request and every tool call is a
DBOS step, checkpointed in the DBOS system database (SQLite for one host, PostgreSQL for several): a run
interrupted at any point (a deploy, an OOM kill, a crash) is recovered on restart, or by another process,
and replays its completed steps from the database instead of running them again. No model request that
completed is paid twice; no tool call that completed runs twice.

```
run() ─► workflow(run_id) ─► model step ─► tool steps (begin ─► call) ─► model step ─► ... ─► state event
                                              │ confirmation required
                                              ▼
                                  state event (awaiting) ─► recv(decision) ─► approve/deny steps ─► ...
```

Side effects exactly once. A tool call is two steps: `begin` (a marker) then the call. When a process dies
while a call runs, recovery finds `begin` recorded and the call not: the call was interrupted. An
idempotent tool (`idempotent=True` or `read_only=True`) runs again, with the same `ctx.idempotency_key`
(derived from run id and call id) so the outside system can drop the repeat; any other tool is *not* run
again: its result is a `TIMEOUT` error saying that it may or may not have taken effect, and the model is
told to check before calling it again.

Approvals are durable waits. A run that needs a person's decision publishes its state and waits inside the
workflow (`DBOS.recv`) — across restarts, for up to the confirmation TTL. `resume()` (from any process
sharing the database) sends the decision; the workflow goes on through the executor's confirmation store,
so approvals stay single-use, bound to the user, the run and the exact arguments.

Create every `DurableAgent` before `DBOS.launch()` (each process registers the workflows it can recover),
and launch DBOS from inside the running event loop, so recovered runs run on it:

```python
from dbos import DBOS
from toolrun.integrations.dbos import DurableAgent, dbos_config

agent = DurableAgent(model, registry, name="tasks")
DBOS(config=dbos_config("sqlite:///runs.sqlite"))
DBOS.launch()
run = await agent.run("Archive task t1", context=ToolContext(user_id="u1"))
```

Limits: native tool calling only (planner mode draws call ids at random, which a replay cannot repeat);
`ToolContext.deps` and `progress` do not travel with a run (a recovered run gets the agent's `deps`);
`metadata` must be JSON-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import json
import secrets
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any, cast

from dbos import DBOS, DBOSConfig, SetWorkflowID

from toolrun.agent import Agent, AgentEvent, AgentRun, Approve, Deny, PendingConfirmation, RunFinished
from toolrun.agent._run import check_decisions
from toolrun.exceptions import ToolrunError
from toolrun.integrations._dbos_jobs import JobLimitError, JobStore
from toolrun.integrations._dbos_lease import ExecutorLease
from toolrun.integrations._dbos_steps import ModelStepFailed, StepModel, interrupted, sync_url
from toolrun.integrations._dbos_steps import in_workflow as _in_workflow
from toolrun.integrations._dbos_steps import step as _step
from toolrun.integrations._dbos_tasks import DurableTasks
from toolrun.models import (
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    UserMessage,
)
from toolrun.results import ErrorCode, ToolResult
from toolrun.runtime import ToolExecutor, _errors
from toolrun.runtime._run import worker_threads
from toolrun.tools import ProgressThrottle, ToolCall, ToolContext

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

_STATE = "toolrun.run."
"""Event keys `toolrun.run.1`, `.2`, ...: the run's state each time it pauses, and at its end."""
_DECISION = "toolrun.decision"
"""The topic decisions on pending confirmations are sent on."""
_WAIT_SLICE = 30.0
"""Seconds one `get_event` waits before checking that the workflow still exists."""
_JOB_PROGRESS_INTERVAL = 0.25
"""Seconds per stored progress report of a job at the steady rate (a short burst goes at once)."""

_AGENTS: dict[str, DurableAgent] = {}
"""The agents of this process by name: the workflow named after one runs its runs (see `_claim`)."""
_WORKFLOWS: dict[str, Callable[[dict[str, Any]], Coroutine[Any, Any, dict[str, Any]]]] = {}
_LISTENERS: dict[str, list[asyncio.Queue[AgentEvent]]] = {}


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


def _claim(name: str, agent: DurableAgent) -> None:
    """Make `agent` the one that runs the workflow of `name`, or raise `DurableAgentExistsError` while the
    agent that has the name is still referenced elsewhere (by a live app, a caller). One that only this
    registry keeps (its app is gone; it only waited for recoveries) hands its name over."""
    held = _AGENTS.pop(name, None)
    if held is not None:
        alive = weakref.ref(held)
        del held
        gc.collect()  # a closed app's agent is often kept by reference cycles only
        held = alive()
        if held is not None:
            _AGENTS[name] = held
            raise DurableAgentExistsError(name)
    _AGENTS[name] = agent


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


def idempotency_key(run_id: str, call_id: str) -> str:
    """The idempotency key of one tool call of one run: the same on every retry of that call."""
    digest = hashlib.sha256(f"{run_id}\x00{call_id}".encode("utf-8", "surrogatepass")).hexdigest()
    return f"idem_{digest[:40]}"


# --------------------------------------------------------------------------------------------------------
# The executor: each call two steps


class _StepExecutor(ToolExecutor):
    """The agent's executor, with calls, approvals and denials as DBOS steps when made from workflow code.

    Outside a workflow every method is the wrapped executor's own; attributes are the wrapped executor's
    (`registry`, `confirmation`, `events`, ...).
    """

    def __init__(self, inner: ToolExecutor, agent: DurableAgent | None = None) -> None:
        self._inner = inner
        self._agent = agent

    def __getattr__(self, name: str) -> Any:
        if name == "_inner":
            raise AttributeError(name)
        return getattr(self._inner, name)

    @property
    def inner(self) -> ToolExecutor:
        """The executor that runs the calls."""
        return self._inner

    def execute(
        self, call: ToolCall, context: ToolContext[Any] | None = None
    ) -> Coroutine[Any, Any, ToolResult]:
        if not _in_workflow():
            return self._inner.execute(call, context)
        return self._call(call, context or ToolContext(), None)

    async def _call(self, call: ToolCall, ctx: ToolContext[Any], approval: str | None) -> ToolResult:
        starts: list[Callable[[], Awaitable[None]]] = []
        result = await self._once(call, ctx, approval, None, starts)
        for start in starts:
            await start()
        return result

    async def execute_many(
        self,
        calls: Iterable[ToolCall],
        context: ToolContext[Any] | None = None,
        *,
        max_concurrency: int | None = None,
        context_for: Callable[[ToolCall], ToolContext[Any]] | None = None,
    ) -> list[ToolResult]:
        if not _in_workflow():
            return await self._inner.execute_many(
                calls, context, max_concurrency=max_concurrency, context_for=context_for
            )
        items = list(calls)
        ctx = context if context is not None else ToolContext()
        # Step ids are drawn now, in the model's call order: concurrent calls finish in any order, and a
        # replay must find each call's record at the same id.
        reserved = [(DBOS.reserve_step(), DBOS.reserve_step()) for _ in items]
        results: list[ToolResult | None] = [None] * len(items)
        starts: list[list[Callable[[], Awaitable[None]]]] = [[] for _ in items]
        limiter = asyncio.Semaphore(max_concurrency) if max_concurrency else None

        async def run(index: int) -> None:
            async with limiter if limiter is not None else contextlib.nullcontext():
                own = ctx if context_for is None else context_for(items[index])  # its progress reporter
                results[index] = await self._once(items[index], own, None, reserved[index], starts[index])

        group: list[int] = []

        async def flush() -> None:
            if group:
                async with asyncio.TaskGroup() as tg:
                    for index in group:
                        tg.create_task(run(index))
                group.clear()

        for index, call in enumerate(items):
            if self._inner._is_sequential(call.name):
                await flush()
                await run(index)
            else:
                group.append(index)
        await flush()
        # Jobs start after the batch, in call order: starting a workflow takes the next step id.
        for pending in starts:
            for start in pending:
                await start()
        return [r for r in results if r is not None]

    async def approve(
        self, confirmation_id: str, context: ToolContext[Any], *, arguments: Mapping[str, Any] | None = None
    ) -> ToolResult:
        if not _in_workflow():
            return await self._inner.approve(confirmation_id, context, arguments=arguments)

        async def lookup() -> dict[str, str]:
            record = await self._inner.confirmation.store.get(confirmation_id)
            if record is None:
                return {"id": "", "name": ""}
            return {"id": str(record.call.get("id", "")), "name": record.tool_name}

        stored = await _step(None, "toolrun.confirmation.lookup", lookup)
        call = ToolCall(id=stored["id"], name=stored["name"])
        ctx = context.evolve(idempotency_key=idempotency_key(context.run_id or "", call.id))
        return await self._twice(
            call, lambda: self._inner.approve(confirmation_id, ctx, arguments=arguments), None
        )

    async def preview_edit(
        self, confirmation_id: str, context: ToolContext[Any], arguments: Mapping[str, Any]
    ) -> ToolResult:
        if not _in_workflow():
            return await self._inner.preview_edit(confirmation_id, context, arguments)

        async def preview() -> ToolResult:  # a step: a replay takes the path the first run took
            return await self._inner.preview_edit(confirmation_id, context, arguments)

        return cast(ToolResult, await _step(None, "toolrun.confirmation.preview_edit", preview))

    async def deny(
        self, confirmation_id: str, context: ToolContext[Any], reason: str | None = None
    ) -> ToolResult:
        if not _in_workflow():
            return await self._inner.deny(confirmation_id, context, reason)

        async def deny() -> ToolResult:
            return await self._inner.deny(confirmation_id, context, reason)

        return cast(ToolResult, await _step(None, "toolrun.confirmation.deny", deny))

    async def _once(
        self,
        call: ToolCall,
        context: ToolContext[Any],
        approval: str | None,
        reserved: tuple[Any, Any] | None,
        starts: list[Callable[[], Awaitable[None]]],
    ) -> ToolResult:
        ctx = context.evolve(idempotency_key=idempotency_key(context.run_id or "", call.id))
        tool = self._inner.registry.find(call.name)
        agent = self._agent
        if tool is not None and tool.options.background and agent is not None and agent.jobs is not None:
            return await agent._job(call, ctx, tool.name, reserved, starts)
        return await self._twice(call, lambda: self._inner.execute(call, ctx), reserved)

    async def _twice(
        self,
        call: ToolCall,
        run: Callable[[], Awaitable[ToolResult]],
        reserved: tuple[Any, Any] | None,
    ) -> ToolResult:
        """`run` as two steps, `begin` and the call: a call that began in a process that stopped before
        it ended is run again only for an idempotent tool."""
        token = secrets.token_hex(8)

        async def begin() -> str:
            return token

        # The marker's recorded token is this execution's own unless the step ran before, in a process
        # that stopped: then the call step after it may have started there.
        began = await _step(reserved and reserved[0], f"toolrun.tool.begin:{call.name}", begin)
        fresh = began == token
        tool = self._inner.registry.find(call.name)
        retry_safe = tool is not None and tool.options.effective_idempotent

        async def execute() -> ToolResult:
            if not fresh and not retry_safe:
                return interrupted(call.id, tool.name if tool is not None else call.name)
            return await run()

        return cast(ToolResult, await _step(reserved and reserved[1], f"toolrun.tool:{call.name}", execute))


# --------------------------------------------------------------------------------------------------------
# The agent


class DurableAgent(Agent):
    """An `Agent` whose runs are DBOS workflows: they survive the process (see the module docstring).

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
        self._steps = _StepExecutor(self.executor, self)
        self.executor = self._steps
        self.decision_timeout = (
            decision_timeout if decision_timeout is not None else self.executor.confirmation.ttl
        )
        _claim(name, self)
        self._workflow_fn = _register(name)
        self._job_fn = _register_jobs()

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
        payload = {"run": run.to_dict(), "context": _context_data(context), "streaming": streaming}
        with SetWorkflowID(run.run_id):
            await DBOS.start_workflow_async(self._workflow_fn, payload)
        return run.run_id

    async def wait(self, run_id: str, *, after: int = 0) -> AgentRun:
        """The run's state when it next pauses or ends: its `after + 1`-th published state (bound the wait
        with `asyncio.timeout`).

        Raises:
            KeyError: no run with that id.
        """
        key = f"{_STATE}{after + 1}"
        while True:
            value = await DBOS.get_event_async(run_id, key, timeout_seconds=_WAIT_SLICE)
            if value is not None:
                return AgentRun.from_dict(value["run"])
            status = await DBOS.get_workflow_status_async(run_id)
            if status is None:
                raise KeyError(f"No durable run {run_id!r}.")
            if status.status in ("ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"):
                latest = await self.state(run_id)
                run = latest[1] if latest is not None else AgentRun(run_id=run_id)
                run.status, run.error = "failed", f"The run's workflow ended with {status.status}."
                return run

    async def state(self, run_id: str) -> tuple[int, AgentRun, str | None] | None:
        """The latest published state of a run: `(sequence number, run, user id)`, or None before any."""
        events = await DBOS.get_all_events_async(run_id)
        numbers = [
            int(k[len(_STATE) :]) for k in events if k.startswith(_STATE) and k[len(_STATE) :].isdigit()
        ]
        if not numbers:
            return None
        latest = max(numbers)
        value = events[f"{_STATE}{latest}"]
        return latest, AgentRun.from_dict(value["run"]), value.get("user_id")

    async def decide(
        self,
        run_id: str,
        approvals: Mapping[str, bool | Approve | Deny],
        *,
        context: ToolContext[Any] | None = None,
    ) -> int:
        """Send decisions to a run waiting for them; returns the sequence number of the state they answer
        (`wait(run_id, after=n)` gives the state after them).

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
        wire = {k: _decision(k, v) for k, v in approvals.items()}
        for confirmation_id, value in approvals.items():  # every edit is checked before anything is sent
            if isinstance(value, Approve) and value.arguments is not None:
                asker = (context or ToolContext()).evolve(run_id=run_id)
                checked = await self._steps.inner.preview_edit(confirmation_id, asker, value.arguments)
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
        }
        await DBOS.send_async(run_id, decision, _DECISION)
        return seq

    def release(self) -> None:
        """Give up this agent's name in the process (its runs are no longer recovered here), so that a new
        `DurableAgent` may take it; the service calls it when its app shuts down. Idempotent."""
        if _AGENTS.get(self.name) is self:
            del _AGENTS[self.name]

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
        async with _listening(run.run_id) as queue:
            await self.start(run.messages, context=context, run_id=run.run_id, streaming=True)
            async for event in _until_finished(queue):
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
        async with _listening(run.run_id) as queue:
            await self.decide(run.run_id, approvals, context=context)
            async for event in _until_finished(queue):
                yield event

    # ----------------------------------------------------------------------------------------------------
    # The workflow

    async def _workflow(self, payload: dict[str, Any]) -> dict[str, Any]:
        run = AgentRun.from_dict(payload["run"])
        run.run_id = DBOS.workflow_id or run.run_id
        ctx = self._restore_context(payload["context"])
        streaming = bool(payload.get("streaming"))
        seq = 1
        await self._publish_state(seq, run, ctx, self._events(run, ctx, streaming=streaming))
        while run.status == "awaiting_confirmation":
            decision = await DBOS.recv_async(_DECISION, timeout_seconds=self.decision_timeout)
            events: AsyncIterator[AgentEvent] | None = None
            if decision is None:
                run.status = "failed"
                run.error = (
                    f"No decision on the pending confirmations arrived within {self.decision_timeout:g} s."
                )
            else:
                approvals = _approvals(decision, run, ctx)
                if approvals is None:
                    continue  # not the run's user, or not what is pending: the run keeps waiting
                deadline = decision.get("deadline")  # the decider's own time limit, as Agent.resume has
                decider = ctx.evolve(deadline=deadline if isinstance(deadline, int | float) else None)
                events = _refused_as_failure(run, self._resume(run, approvals, decider, streaming=streaming))
            seq += 1
            await self._publish_state(seq, run, ctx, events)
        return run.to_dict()

    async def _publish_state(
        self, seq: int, run: AgentRun, ctx: ToolContext[Any], events: AsyncIterator[AgentEvent] | None
    ) -> None:
        """Hand `events` to this process's listeners, then publish the run's state number `seq`; the
        `RunFinished` event last, so a listener that sees it can act on the published state."""
        finished: list[AgentEvent] = []
        if events is not None:
            async for event in events:
                if isinstance(event, RunFinished):
                    finished.append(event)
                else:
                    _publish(run.run_id, event)
        await DBOS.set_event_async(f"{_STATE}{seq}", {"run": run.to_dict(), "user_id": ctx.user_id})
        on_state = self.on_state
        if on_state is not None:

            async def notify() -> bool:
                if _LISTENERS.get(run.run_id):
                    return False  # a caller in this process follows the run, and stores it itself
                await on_state(run, ctx)
                return True

            await _step(None, "toolrun.run.on_state", notify)
        for event in finished or [RunFinished(run=run)]:
            _publish(run.run_id, event)

    def _restore_context(self, data: Mapping[str, Any]) -> ToolContext[Any]:
        allowed = data.get("allowed_tools")
        return ToolContext(
            user_id=data.get("user_id"),
            roles=tuple(data.get("roles") or ()),
            allowed_tools=frozenset(allowed) if allowed is not None else None,
            conversation_id=data.get("conversation_id"),
            trace_id=data.get("trace_id"),
            deadline=data.get("deadline"),
            metadata=dict(data.get("metadata") or {}),
            state=data.get("state"),
            deps=self.deps,
        )

    async def _ask(
        self, run: AgentRun, ctx: ToolContext[Any], request: ModelRequest, *, streaming: bool
    ) -> AsyncIterator[AgentEvent | ModelResponse]:
        jobs, conversation = self.jobs, ctx.conversation_id
        if jobs is not None and conversation is not None and _in_workflow():
            # Jobs of this conversation that finished since the last request: their results join it.
            user = ctx.user_id or ""

            async def take() -> list[dict[str, Any]]:
                return await jobs.take_finished(user, conversation)

            finished = await _step(None, "toolrun.jobs.deliver", take)
            if finished:
                run.messages.extend(UserMessage(content=_job_note(job)) for job in finished)
                request = ModelRequest(run.messages, tools=request.tools, settings=request.settings)
        async for item in super()._ask(run, ctx, request, streaming=streaming):
            yield item

    async def _job(
        self,
        call: ToolCall,
        ctx: ToolContext[Any],
        tool_name: str,
        reserved: tuple[Any, Any] | None,
        starts: list[Callable[[], Awaitable[None]]],
    ) -> ToolResult:
        """Start a background job for `call` (once the executor's front gates would let it run)."""
        jobs = self.jobs
        tool = self._steps.inner.registry.find(tool_name)
        if jobs is None or tool is None or not _may_start(tool, call, ctx):
            # not allowed, or arguments it cannot take: the executor answers as for any call
            return await self._steps._twice(call, lambda: self._steps.inner.execute(call, ctx), reserved)
        job_id = "job_" + idempotency_key(ctx.run_id or "", call.id)[5:29]

        async def create() -> bool:
            try:
                await jobs.create(
                    job_id,
                    user_id=ctx.user_id or "",
                    tool=tool_name,
                    conversation_id=ctx.conversation_id,
                    run_id=ctx.run_id,
                )
            except JobLimitError:
                return False
            return True

        if not await _step(reserved and reserved[0], f"toolrun.job.create:{tool_name}", create):
            return _errors.fail(
                call.id,
                tool_name,
                ErrorCode.RATE_LIMITED,
                f"Too many background jobs are running for this user (at most {jobs.max_running_per_user}).",
                retryable=True,
                recover_action="Tell the user; start it again once a job has finished.",
            )
        payload = {
            "agent": self.name,
            "job_id": job_id,
            "call": call.to_dict(),
            "context": _context_data(ctx),
            "run_id": ctx.run_id,
        }

        async def start() -> None:
            with SetWorkflowID(job_id):
                await DBOS.start_workflow_async(self._job_fn, payload)

        starts.append(start)
        return ToolResult.ok(
            {"job_id": job_id, "status": "running"},
            message=(
                f"Started background job {job_id} ({tool_name}). It runs on its own; its result will be "
                "given to you in a later turn. Tell the user it has started."
            ),
            call_id=call.id,
            tool_name=tool_name,
        )

    # Store reads that decide what the loop does are steps too: a replay must take the same path even
    # when the store has changed since (a confirmation consumed by the approval that followed).

    async def _bind_pending(self, run: AgentRun, ctx: ToolContext[Any]) -> str | None:
        if not _in_workflow():
            return await super()._bind_pending(run, ctx)

        async def bind() -> dict[str, Any]:
            problem = await Agent._bind_pending(self, run, ctx)
            return {"problem": problem, "pending": [p.to_dict() for p in run.pending]}

        data = await _step(None, "toolrun.confirmation.bind", bind)
        run.pending = [PendingConfirmation.from_dict(p) for p in data["pending"]]
        return cast("str | None", data["problem"])

    async def _pending_entry(self, run: AgentRun, call: ToolCall, result: ToolResult) -> PendingConfirmation:
        if not _in_workflow():
            return await super()._pending_entry(run, call, result)

        async def entry() -> dict[str, Any]:
            return (await Agent._pending_entry(self, run, call, result)).to_dict()

        return PendingConfirmation.from_dict(await _step(None, "toolrun.confirmation.entry", entry))


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
    read = {str(k): _read_decision(v) for k, v in approvals.items()}
    if any(v is None for v in read.values()):
        return None
    return cast("dict[str, bool | Approve | Deny]", read)


async def _refused_as_failure(run: AgentRun, events: AsyncIterator[AgentEvent]) -> AsyncIterator[AgentEvent]:
    """The resumed run's events; a decision refused inside the workflow (an edit its tool no longer takes,
    checked again there: the confirmation may have expired since `decide` checked it) ends the run
    `failed` with the reason, instead of failing the workflow."""
    try:
        async for event in events:
            yield event
    except ValueError as exc:
        run.status, run.error = "failed", str(exc)
        yield RunFinished(run=run)


def _context_data(context: ToolContext[Any] | None) -> dict[str, Any]:
    """The parts of a context that travel with a durable run (JSON)."""
    if context is None:
        return {}
    data = {
        "user_id": context.user_id,
        "roles": list(context.roles),
        "allowed_tools": sorted(context.allowed_tools) if context.allowed_tools is not None else None,
        "conversation_id": context.conversation_id,
        "trace_id": context.trace_id,
        "deadline": context.deadline,
        "metadata": context.metadata,
        "state": context.state,
    }
    try:
        json.dumps(data)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"A durable run's context must be JSON-safe (metadata and state): {exc}. Keep handles and "
            "clients in DurableAgent(deps=...)."
        ) from None
    return data


def _register(name: str) -> Callable[[dict[str, Any]], Coroutine[Any, Any, dict[str, Any]]]:
    """The DBOS workflow of the agent named `name` (registered once per process)."""
    if name not in _WORKFLOWS:

        async def workflow(payload: dict[str, Any]) -> dict[str, Any]:
            return await _AGENTS[name]._workflow(payload)

        workflow.__qualname__ = workflow.__name__ = f"durable_agent_{name}"
        _WORKFLOWS[name] = DBOS.workflow(name=f"toolrun.agent.{name}")(workflow)
    return _WORKFLOWS[name]


def _register_jobs() -> Callable[[dict[str, Any]], Coroutine[Any, Any, dict[str, Any]]]:
    """The DBOS workflow of background jobs (registered once per process)."""
    key = "\x00jobs"
    if key not in _WORKFLOWS:

        async def background_job(payload: dict[str, Any]) -> dict[str, Any]:
            return await _run_job(payload)

        _WORKFLOWS[key] = DBOS.workflow(name="toolrun.job")(background_job)
    return _WORKFLOWS[key]


async def _run_job(payload: dict[str, Any]) -> dict[str, Any]:
    """One background job: the call as a step (interrupted: run again only if idempotent), its result
    stored; a cancel in the store stops the tool within a quarter of a second.

    The job ends in the store only once its tool's code has really stopped: a sync tool's thread cannot
    be stopped, so after a cancel or a timeout the job waits for it (`cancelling`, or `running`, in the
    meantime: it keeps its place in its user's `max_running_per_user`). Its progress goes to the store
    through a `ProgressThrottle` (a database write per report would be one per report). A blocking tool
    runs in the job store's own `thread_pool`, never in the threads of the agent's other calls."""
    agent = _AGENTS[payload["agent"]]
    jobs = agent.jobs
    if jobs is None:
        raise RuntimeError(f"DurableAgent {agent.name!r} has no job store in this process.")
    job_id = payload["job_id"]
    call = ToolCall.from_dict(payload["call"])

    async def report(progress: float, total: float | None, message: str | None) -> None:
        with contextlib.suppress(Exception):
            await jobs.progress(job_id, progress, total, message)

    throttle = ProgressThrottle(report, interval=_JOB_PROGRESS_INTERVAL)
    ctx = agent._restore_context(payload["context"]).evolve(
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
            task = asyncio.ensure_future(agent._steps.inner.execute(call, ctx))
        result = await watch(task)
        # A cancelled or timed-out sync tool runs on in its thread: the job has not stopped until it has.
        running = [asyncio.wrap_future(work) for work in threads if not work.done()]
        if running:
            await asyncio.gather(*running, return_exceptions=True)
        await throttle.aclose()  # its last report, then nothing more
        return result

    result = await agent._steps._twice(call, run, None)

    async def finish() -> bool:
        await jobs.finish(job_id, result)
        return True

    await _step(None, "toolrun.job.finish", finish)
    return result.to_dict()


def _was_cancelled(result: ToolResult) -> bool:
    error = result.error
    return error is not None and (error.details or {}).get("cancelled") is True


def _may_start(tool: Any, call: ToolCall, ctx: ToolContext[Any]) -> bool:
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


def _job_note(job: Mapping[str, Any]) -> str:
    """A finished job's result, as the message the model reads."""
    data = job.get("result")
    text = ToolResult.from_dict(data).render() if isinstance(data, dict) else "(no result)"
    return f"[Background job {job['id']} ({job['tool']}) {job['status']}] {text}"


# --------------------------------------------------------------------------------------------------------
# Live events (this process only; the states are in the database)


def _publish(run_id: str, event: AgentEvent) -> None:
    for queue in _LISTENERS.get(run_id, ()):
        queue.put_nowait(event)


@contextlib.asynccontextmanager
async def _listening(run_id: str) -> AsyncIterator[asyncio.Queue[AgentEvent]]:
    queue: asyncio.Queue[AgentEvent] = asyncio.Queue()
    _LISTENERS.setdefault(run_id, []).append(queue)
    try:
        yield queue
    finally:
        queues = _LISTENERS.get(run_id, [])
        if queue in queues:
            queues.remove(queue)
        if not queues:
            _LISTENERS.pop(run_id, None)


async def _until_finished(queue: asyncio.Queue[AgentEvent]) -> AsyncIterator[AgentEvent]:
    while True:
        event = await queue.get()
        yield event
        if isinstance(event, RunFinished):
            return


def _decision(confirmation_id: str, value: object) -> bool | dict[str, Any]:
    """A decision as the workflow carries it (JSON): `True`/`Approve()` and `False`/`Deny()` as booleans,
    `Approve(arguments=...)` as `{"approve": true, "arguments": {...}}`, `Deny(reason=...)` as
    `{"approve": false, "reason": "..."}`.

    Anything else (a truthy "no", a dict, a tuple) is refused before anything is sent, as at every other
    door.
    """
    if value is True or value is False:
        return value
    if isinstance(value, Approve):
        if value.arguments is None:
            return True
        if not isinstance(value.arguments, Mapping):
            raise ValueError(f"Decision for {confirmation_id!r}: edited arguments must be a JSON object.")
        arguments = dict(value.arguments)
        try:
            json.dumps(arguments)
        except (TypeError, ValueError):
            raise ValueError(
                f"Decision for {confirmation_id!r}: edited arguments must be JSON data."
            ) from None
        return {"approve": True, "arguments": arguments}
    if isinstance(value, Deny):
        if value.reason is None:
            return False
        if not isinstance(value.reason, str):
            raise ValueError(f"Decision for {confirmation_id!r}: a denial's reason must be text.")
        return {"approve": False, "reason": value.reason}
    raise ValueError(
        f"Decision for {confirmation_id!r} must be True (approve) or False (deny), "
        f"not {type(value).__name__}."
    )


def _read_decision(value: object) -> bool | Approve | Deny | None:
    """A decision as `_decision` wrote it, back as `Agent._resume` takes it; None when it is not one."""
    if value is True or value is False:
        return value
    if not isinstance(value, Mapping):
        return None
    approve = value.get("approve")
    if (
        approve is True
        and isinstance(value.get("arguments"), Mapping)
        and set(value) == {"approve", "arguments"}
    ):
        return Approve(arguments=dict(value["arguments"]))
    if approve is False and isinstance(value.get("reason"), str) and set(value) == {"approve", "reason"}:
        return Deny(reason=value["reason"])
    return None
