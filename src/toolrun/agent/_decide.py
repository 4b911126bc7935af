"""Paused runs kept in a `RunStore`, and decisions on them from any process (`Agent.decide`).

An agent with a run store saves each run that pauses (signed, with its user, conversation and the
confirmation ids it waits for). A decision later names only a confirmation id: the store finds the run and
lets exactly one decider claim it (`RunStore.claim` is atomic), the agent resumes it as `resume` does, and
the store keeps it again if it pauses again, or forgets it when it ends. What runs is still decided by the
executor's confirmation store; the claim only makes one decider carry the run on and the others refused,
with a code (`DecisionRefusedError.code`).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from toolrun.agent._events import AgentEvent, RunFinished, ToolCallFinished
from toolrun.agent._resume import close_interrupted
from toolrun.agent._run import REFUSALS, AgentRun, DecisionRefusedError, InvalidRunError, RunErrorCode
from toolrun.approvals._decisions import Approve, Deny, check_decisions
from toolrun.runtime._errors import new_error_id
from toolrun.runtime._logging import log_exception
from toolrun.store import NO_USER, PausedRun, RunStore
from toolrun.tools import ToolContext

if TYPE_CHECKING:
    from toolrun.agent._agent import Agent

__all__ = ["decide_events", "keep", "kept"]

logger = logging.getLogger("toolrun.agent")

CLAIM_LEASE = 600.0
"""Seconds a decision holds its run (beyond the agent's `timeout`): a decider that dies lets go then."""


async def kept(
    agent: Agent,
    run: AgentRun,
    context: ToolContext[Any] | None,
    events: AsyncIterator[AgentEvent],
    *,
    resumed: bool = False,
) -> AsyncIterator[AgentEvent]:
    """`events`, with the run saved in the agent's run store (if any) before its `RunFinished` goes out."""
    async for event in events:
        if isinstance(event, RunFinished) and agent.runs is not None:
            await keep(agent, run, context, resumed=resumed)
        yield event


async def keep(agent: Agent, run: AgentRun, context: ToolContext[Any] | None, *, resumed: bool) -> None:
    """Save a paused run in the run store (unclaimed); forget a resumed one that ended. A refused resume
    changes nothing there: it was not this caller's to change."""
    store = agent.runs
    if store is None:
        return
    if run.status == "awaiting_confirmation":
        await store.save(
            PausedRun(
                run_id=run.run_id,
                user_id=(context.user_id if context is not None else None) or NO_USER,
                conversation_id=context.conversation_id if context is not None else None,
                data=agent.dump_run(run),
                confirmation_ids=tuple(p.confirmation_id for p in run.pending),
                expires_at=time.time() + agent.executor.confirmation.ttl,
            )
        )
    elif resumed and run.error_code not in REFUSALS:
        await store.delete(run.run_id)


async def decide_events(
    agent: Agent,
    confirmation_id: str,
    decision: bool | Approve | Deny,
    context: ToolContext[Any] | None,
    *,
    streaming: bool,
) -> AsyncIterator[AgentEvent]:
    """The events of `Agent.decide` / `stream_decide`: claim, resume, keep; refusals raise first."""
    store = agent.runs
    if store is None:
        raise ValueError(
            "Agent.decide needs a run store where paused runs wait: Agent(..., runs=InMemoryRunStore()) "
            "for one process, or create_sql_stores(...).runs for several."
        )
    check_decisions({confirmation_id: decision})
    user = (context.user_id if context is not None else None) or NO_USER
    token = secrets.token_urlsafe(16)
    now = time.time()
    until = now + CLAIM_LEASE + (agent.timeout or 0.0)
    try:
        claimed = await store.claim(confirmation_id, user_id=user, token=token, until=until, now=now)
        seen = None if claimed is not None else await store.find(confirmation_id, user_id=user)
    except Exception as exc:
        raise _unavailable(agent, confirmation_id, "run", exc) from None
    if claimed is None:
        if seen is not None:
            raise DecisionRefusedError(
                RunErrorCode.DECIDED_ELSEWHERE,
                confirmation_id,
                f"Another decision holds the run of confirmation {confirmation_id!r} right now; that one "
                "carries it on. Nothing was run.",
            )
        raise DecisionRefusedError(
            RunErrorCode.CONFIRMATION_UNKNOWN,
            confirmation_id,
            f"No paused run waits for confirmation {confirmation_id!r} for this user: it is unknown, "
            "already decided, or another user's. Nothing was run.",
        )
    finished = False
    try:
        try:
            run = agent.load_run(claimed.data)
        except InvalidRunError:
            raise DecisionRefusedError(
                RunErrorCode.RUN_MISMATCH,
                confirmation_id,
                "The stored run cannot be read with this agent's key (every process must share the "
                "executor's hash_key). Nothing was run.",
            ) from None
        if run.status != "awaiting_confirmation" or confirmation_id not in {
            p.confirmation_id for p in run.pending
        }:
            raise DecisionRefusedError(
                RunErrorCode.CONFIRMATION_UNKNOWN,
                confirmation_id,
                f"The stored run no longer waits for confirmation {confirmation_id!r}. Nothing was run.",
            )
        ctx = context if context is not None else ToolContext()
        if ctx.conversation_id is None and claimed.conversation_id is not None:
            ctx = ctx.evolve(conversation_id=claimed.conversation_id)
        async for event in agent._resume(run, {confirmation_id: decision}, ctx, streaming=streaming):
            if isinstance(event, RunFinished):
                if claimed.taken_over and run.error_code == RunErrorCode.CONFIRMATION_UNKNOWN:
                    # The last decider stopped after consuming a confirmation of this run: close it.
                    async for closing in _close_interrupted(agent, store, claimed, ctx, confirmation_id):
                        yield closing
                    finished = True
                    return
                if run.error_code in REFUSALS:  # nothing of it ran: the stored run stays as it was
                    raise DecisionRefusedError(run.error_code, confirmation_id, run.error or "")
                await keep(agent, run, ctx, resumed=True)  # paused again: saved unclaimed; else gone
                finished = True
            yield event
    finally:
        if not finished:  # refused, failed or cut short: put the run back for another decision
            await store.release(claimed.run_id, token=token)


async def _close_interrupted(
    agent: Agent, store: RunStore, claimed: PausedRun, context: ToolContext[Any], confirmation_id: str
) -> AsyncIterator[AgentEvent]:
    """The events of closing a run whose last decider stopped mid-decision (`close_interrupted`), forgotten
    by the store once closed."""
    run = agent.load_run(claimed.data)  # as it paused: the refused resume changed the loaded copy
    held = [p.call for p in run.pending]
    try:
        await close_interrupted(agent, run, context)
    except Exception as exc:
        raise _unavailable(agent, confirmation_id, "confirmation", exc) from None
    await store.delete(run.run_id)
    results = {r.call.id: r.result for r in run.tool_calls if r.step == run.steps}
    for call in held:
        yield ToolCallFinished(call=call, result=results[call.id], step=run.steps)
    yield RunFinished(run=run)


def _unavailable(agent: Agent, confirmation_id: str, store: str, exc: Exception) -> DecisionRefusedError:
    """The refusal of a decision whose `store` ("run", "confirmation") failed, logged with an error id."""
    error_id = new_error_id()
    log_exception(
        logger,
        "decision on %s: the %s store failed (error_id=%s)",
        exc,
        confirmation_id,
        store,
        error_id,
        redact=not agent.executor.log_exception_messages,
    )
    return DecisionRefusedError(
        RunErrorCode.STORE_UNAVAILABLE,
        confirmation_id,
        f"The {store} store could not be read (error id {error_id}); nothing was run.",
    )
