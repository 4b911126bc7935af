"""The workflow of a `DurableAgent`'s runs: the process's agents by name, the DBOS workflow that runs each
one's runs, the states a run publishes, and the live events of the runs this process follows.

A run's states are DBOS events (`toolrun.run.1`, `.2`, ...), read from any process; its live events reach
only listeners in the process that runs it. Internal: import from `toolrun.integrations.dbos`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import json
import weakref
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any

from dbos import DBOS

from toolrun.agent import AgentEvent, AgentRun, Approve, Deny, RunFinished
from toolrun.integrations._dbos_steps import step
from toolrun.tools import ToolContext

if TYPE_CHECKING:
    from toolrun.integrations.dbos import DurableAgent

__all__ = [
    "DECISION",
    "STATE",
    "agent_named",
    "agent_workflow",
    "claim",
    "context_data",
    "listening",
    "release",
    "restore_context",
    "run_workflow",
    "running_task",
    "until_finished",
]

STATE = "toolrun.run."
"""Event keys `toolrun.run.1`, `.2`, ...: the run's state each time it pauses, and at its end."""
DECISION = "toolrun.decision"
"""The topic decisions on pending confirmations are sent on."""

Workflow = Callable[[dict[str, Any]], Coroutine[Any, Any, dict[str, Any]]]
ReadDecisions = Callable[[Any, AgentRun, ToolContext[Any]], Mapping[str, bool | Approve | Deny] | None]

_AGENTS: dict[str, DurableAgent] = {}
"""The agents of this process by name: the workflow named after one runs its runs (see `claim`)."""
_LISTENERS: dict[str, list[asyncio.Queue[AgentEvent]]] = {}
"""The queues of this process's listeners, by run id."""
_RUNNING: dict[str, tuple[str, asyncio.Task[Any]]] = {}
"""The tasks of the workflows this process runs now, by run id and by the trace id they were started with
(`stop` cancels the one in flight)."""


# --------------------------------------------------------------------------------------------------------
# The agents of this process


def claim(name: str, agent: DurableAgent) -> bool:
    """Make `agent` the one that runs the workflow of `name`; False (nothing changed) while the agent that
    has the name is still referenced elsewhere (by a live app, a caller). One that only this registry keeps
    (its app is gone; it only waited for recoveries) hands its name over."""
    held = _AGENTS.pop(name, None)
    if held is not None:
        alive = weakref.ref(held)
        del held
        gc.collect()  # a closed app's agent is often kept by reference cycles only
        held = alive()
        if held is not None:
            _AGENTS[name] = held
            return False
    _AGENTS[name] = agent
    return True


def release(name: str, agent: DurableAgent) -> None:
    """Give up `name` if `agent` holds it (its runs are no longer recovered in this process)."""
    if _AGENTS.get(name) is agent:
        del _AGENTS[name]


def agent_named(name: str) -> DurableAgent:
    """The agent that runs the workflow of `name` in this process."""
    return _AGENTS[name]


@functools.cache
def agent_workflow(name: str) -> Workflow:
    """The DBOS workflow of the agent named `name` (registered once per process)."""

    async def workflow(payload: dict[str, Any]) -> dict[str, Any]:
        return await _AGENTS[name]._workflow(payload)

    workflow.__qualname__ = workflow.__name__ = f"durable_agent_{name}"
    registered: Workflow = DBOS.workflow(name=f"toolrun.agent.{name}")(workflow)
    return registered


# --------------------------------------------------------------------------------------------------------
# The context that travels with a run


def context_data(context: ToolContext[Any] | None) -> dict[str, Any]:
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


def restore_context(data: Mapping[str, Any], deps: Any) -> ToolContext[Any]:
    """The context `context_data` kept, with the agent's `deps`."""
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
        deps=deps,
    )


# --------------------------------------------------------------------------------------------------------
# The workflow


async def run_workflow(agent: DurableAgent, payload: dict[str, Any], read: ReadDecisions) -> dict[str, Any]:
    """A run, as its workflow: the loop to its first pause or end, then, while it waits, each decision sent
    (`read` from the message; one that is not for the run as it stands is ignored) and the loop on from it.
    Its state is published at each pause and at its end."""
    run = AgentRun.from_dict(payload["run"])
    run.run_id = DBOS.workflow_id or run.run_id
    ctx = restore_context(payload["context"], agent.deps)
    task = asyncio.current_task()
    keys = [k for k in (run.run_id, ctx.trace_id) if k]
    if task is not None:
        _RUNNING.update(dict.fromkeys(keys, (run.run_id, task)))
    try:
        return await _run(agent, run, ctx, payload, read)
    finally:
        for key in keys:
            if _RUNNING.get(key, (None, None))[1] is task:
                del _RUNNING[key]


def running_task(run_id: str) -> tuple[str, asyncio.Task[Any]] | None:
    """The run this process runs now under `run_id` (its workflow id, or the trace id it was started
    with): `(workflow id, task)`, or None."""
    return _RUNNING.get(run_id)


async def _run(
    agent: DurableAgent, run: AgentRun, ctx: ToolContext[Any], payload: dict[str, Any], read: ReadDecisions
) -> dict[str, Any]:
    streaming = bool(payload.get("streaming"))
    seq = 1
    await _publish_state(agent, seq, run, ctx, agent._events(run, ctx, streaming=streaming))
    while run.status == "awaiting_confirmation":
        decision = await DBOS.recv_async(DECISION, timeout_seconds=agent.decision_timeout)
        events: AsyncIterator[AgentEvent] | None = None
        if decision is None:
            run.status = "failed"
            run.error = (
                f"No decision on the pending confirmations arrived within {agent.decision_timeout:g} s."
            )
        else:
            approvals = read(decision, run, ctx)
            if approvals is None:
                continue  # not the run's user, or not what is pending: the run keeps waiting
            deadline = decision.get("deadline")  # the decider's own time limit, as Agent.resume has
            decider = ctx.evolve(deadline=deadline if isinstance(deadline, int | float) else None)
            events = _refused_as_failure(run, agent._resume(run, approvals, decider, streaming=streaming))
        seq += 1
        # Which `decide` call this state answers: another one sent for the same pause is refused by it.
        nonce = decision.get("nonce") if decision is not None else None
        await _publish_state(
            agent, seq, run, ctx, events, decided_by=nonce if isinstance(nonce, str) else None
        )
    return run.to_dict()


async def _publish_state(
    agent: DurableAgent,
    seq: int,
    run: AgentRun,
    ctx: ToolContext[Any],
    events: AsyncIterator[AgentEvent] | None,
    *,
    decided_by: str | None = None,
) -> None:
    """Hand `events` to this process's listeners, then publish the run's state number `seq` (with the
    nonce of the decision it answers); the `RunFinished` event last, so a listener that sees it can act on
    the published state."""
    finished: list[AgentEvent] = []
    if events is not None:
        async for event in events:
            if isinstance(event, RunFinished):
                finished.append(event)
            else:
                _publish(run.run_id, event)
    state = {"run": run.to_dict(), "user_id": ctx.user_id, "decided_by": decided_by}
    await DBOS.set_event_async(f"{STATE}{seq}", state)
    on_state = agent.on_state
    if on_state is not None:

        async def notify() -> bool:
            if _LISTENERS.get(run.run_id):
                return False  # a caller in this process follows the run, and stores it itself
            await on_state(run, ctx)
            return True

        await step(None, "toolrun.run.on_state", notify)
    for event in finished or [RunFinished(run=run)]:
        _publish(run.run_id, event)


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


# --------------------------------------------------------------------------------------------------------
# Live events (this process only; the states are in the database)


def _publish(run_id: str, event: AgentEvent) -> None:
    for queue in _LISTENERS.get(run_id, ()):
        queue.put_nowait(event)


@contextlib.asynccontextmanager
async def listening(run_id: str) -> AsyncIterator[asyncio.Queue[AgentEvent]]:
    """A queue of the run's live events in this process, while the block runs."""
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


async def until_finished(queue: asyncio.Queue[AgentEvent]) -> AsyncIterator[AgentEvent]:
    """The queue's events up to and with `RunFinished`."""
    while True:
        event = await queue.get()
        yield event
        if isinstance(event, RunFinished):
            return
