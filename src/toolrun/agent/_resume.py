"""Pause and resume: a paused run's held calls bound to their confirmation records, decided, and the loop
carried on (`Agent.resume`, `stream_resume`, `abandon`; `Agent.decide` resumes through here too).

A paused run comes back from outside (a browser, a queue, another process), so its JSON never decides what
runs: every pending entry must be the confirmation store's own record for this run, user and conversation
before anything is decided, and a decision another resume took first ends this one refused. The functions
take the agent, as `_decide` does; `Agent._resume`, `_bind_pending` and `_pending_entry` stay the agent's
hooks (`DurableAgent` makes the store reads steps).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import TYPE_CHECKING, Any

from toolrun._json import canonical_json
from toolrun.agent._events import AgentEvent, RunFinished, ToolCallFinished
from toolrun.agent._run import AgentRun, PendingCall, RunErrorCode
from toolrun.agent._turn import ContextFor, with_progress
from toolrun.approvals._decisions import Approve, Decision, check_decision, check_decisions
from toolrun.models import ToolResultMessage
from toolrun.results import ErrorCode, ToolResult
from toolrun.runtime import _errors
from toolrun.runtime._errors import new_error_id
from toolrun.runtime._logging import log_exception
from toolrun.store import NO_USER, PendingConfirmation
from toolrun.tools import ToolCall, ToolContext

if TYPE_CHECKING:
    from toolrun.agent._agent import Agent

__all__ = ["abandon_run", "bind_pending", "close_interrupted", "pending_entry", "resume_events"]

logger = logging.getLogger("toolrun.agent")


class _Problem(str):
    """Internal: why a resume is refused, in words, with its code."""

    code: RunErrorCode

    def __new__(cls, text: str, code: RunErrorCode) -> _Problem:
        made = super().__new__(cls, text)
        made.code = code
        return made


async def resume_events(
    agent: Agent,
    run: AgentRun,
    approvals: Mapping[str, Decision],
    context: ToolContext[Any] | None,
    *,
    streaming: bool,
) -> AsyncIterator[AgentEvent]:
    """The events of `Agent.resume` / `stream_resume`: bind the pending entries to their records, check every
    edit, decide, and carry the loop on once nothing waits; a refusal ends the run before anything runs."""
    if run.status != "awaiting_confirmation":
        raise ValueError(f"Only a run awaiting confirmation can resume; this one is {run.status!r}.")
    check_decisions(approvals)
    unknown = set(approvals) - {p.confirmation_id for p in run.pending}
    if unknown:
        raise ValueError(f"No pending confirmation with id(s) {sorted(unknown)} in run {run.run_id}.")
    ctx = agent._context(run, context)
    # The confirmation store decides what runs, never the run's JSON: every pending entry must be the
    # store's own record for this run, user and conversation, or nothing of this resume runs.
    problem = await agent._bind_pending(run, ctx)
    if problem is not None:
        run.status, run.error = "failed", str(problem)
        # every other refusal: the run does not match its records
        run.error_code = getattr(problem, "code", RunErrorCode.RUN_MISMATCH)
        yield RunFinished(run=run)
        return
    for pending in run.pending:  # every edit is checked before anything is decided
        decision = approvals.get(pending.confirmation_id)
        if isinstance(decision, Approve) and decision.arguments is not None:
            checked = await agent._calls.preview_edit(pending.confirmation_id, ctx, decision.arguments)
            if _lost_to_another_decision(checked):  # decided since the run was bound: see below
                _refuse_lost(run, pending.confirmation_id)
                yield RunFinished(run=run)
                return
            if checked.error is not None:
                raise ValueError(
                    f"The edited arguments for {pending.call.name!r} ({pending.confirmation_id}) were "
                    f"refused, nothing ran: {checked.error.render()}"
                )
    still_pending: list[PendingCall] = []
    for pending in run.pending:
        decision = approvals.get(pending.confirmation_id)
        if decision is None:
            still_pending.append(pending)
            continue
        decided = check_decision(pending.confirmation_id, decision)
        if isinstance(decided, Approve):
            approved: list[ToolResult] = []

            def approve(
                context_for: ContextFor, p: PendingCall = pending, a: Approve = decided
            ) -> Awaitable[ToolResult]:
                return agent._calls.approve(p.confirmation_id, context_for(p.call), arguments=a.arguments)

            async for progress in with_progress(agent, ctx, run.steps, approve, approved):
                yield progress  # the approved call's own reports, as a turn's calls' are
            result = approved[0]
        else:
            result = await agent._calls.deny(pending.confirmation_id, ctx, decided.reason)
        if _lost_to_another_decision(result):
            # The record was there when the run was bound and gone when it was consumed: another resume
            # (a double click reaching two processes) decided it in between and owns the run from here.
            _refuse_lost(run, pending.confirmation_id)
            yield RunFinished(run=run)
            return
        result.call_id = pending.call.id
        _replace_result(run, pending.call.id, result)
        yield ToolCallFinished(call=pending.call, result=result, step=run.steps)
    run.pending = still_pending
    if still_pending:
        yield RunFinished(run=run)
        return
    results = {r.call.id: r.result for r in run.tool_calls if r.step == run.steps}
    batch, run.batch = run.batch, []
    run.status = "running"
    agent._after_results(run, batch, [results[c.id] for c in batch])
    async for event in agent._loop(run, ctx, streaming=streaming):
        yield event


async def bind_pending(agent: Agent, run: AgentRun, ctx: ToolContext[Any]) -> str | None:
    """Check every pending entry of `run` against the confirmation store and replace it with what the
    store holds (call, summary, arguments); the reason for refusing the resume, or None."""
    principal = ctx.user_id or NO_USER
    records: list[PendingConfirmation] = []
    for entry in run.pending:
        cid = entry.confirmation_id
        try:
            record = await agent.executor.confirmations.record(cid)
        except Exception as exc:
            error_id = new_error_id()
            log_exception(
                logger,
                "agent run %s: the confirmation store failed (error_id=%s)",
                exc,
                run.run_id,
                error_id,
                redact=not agent.executor.log_exception_messages,
            )
            return _Problem(
                f"The confirmation store could not be read (error id {error_id}); nothing was run.",
                RunErrorCode.STORE_UNAVAILABLE,
            )
        if record is None or record.user_id != principal:
            return _Problem(
                f"Confirmation {cid!r} is unknown to this executor's confirmation store: it was already "
                "decided, or expired and was purged, or belongs to another user, or this process does "
                "not share the store of the process that paused the run (give every process the same "
                "confirmation store and hash_key). Nothing was run.",
                RunErrorCode.CONFIRMATION_UNKNOWN,
            )
        problem = _record_mismatch(agent, entry, record, run, ctx)
        if problem is not None:
            return f"Confirmation {cid!r} {problem}. Nothing of this resume was run."
        records.append(record)
    in_step = {r.call.id for r in run.tool_calls if r.step == run.steps}
    batch = {c.id for c in run.batch}
    ids = [p.confirmation_id for p in run.pending]
    if (
        not run.pending
        or len(set(ids)) != len(ids)
        or len({p.call.id for p in run.pending}) != len(ids)
        or not batch <= in_step
        or any(p.call.id not in batch for p in run.pending)
    ):
        return (
            "The run's pending confirmations, its paused batch and its tool calls do not agree (the run "
            "was changed after it paused). Nothing was run."
        )
    for entry, record in zip(run.pending, records, strict=True):
        arguments = record.metadata.get("arguments")
        entry.call = ToolCall(
            id=str(record.call.get("id", "")),
            name=str(record.call.get("name", "")),
            arguments=record.call.get("arguments"),
        )
        entry.summary = record.summary
        entry.arguments = dict(arguments) if isinstance(arguments, Mapping) else None
        entry.preview = record.preview
    return None


def _record_mismatch(
    agent: Agent, entry: PendingCall, record: PendingConfirmation, run: AgentRun, ctx: ToolContext[Any]
) -> str | None:
    """How `record` disagrees with the run's entry for it, in words, or None when it is the same call."""
    if record.run_id != run.run_id:
        return "was not issued for this run"
    if record.conversation_id is not None and record.conversation_id != ctx.conversation_id:
        return "was issued in another conversation"
    stored = record.call
    shown = record.metadata.get("arguments")
    if (
        entry.call.id != stored.get("id")
        or entry.call.name != stored.get("name")
        or not _same_arguments(entry.call.arguments, stored.get("arguments"))
        # What the person was shown counts too: a changed summary means they approved something else.
        or entry.summary != record.summary
        or entry.preview != record.preview
        or (entry.arguments is not None and not _same_arguments(entry.arguments, shown))
    ):
        return "does not match the call in this run (the run was changed after it paused)"
    tool = agent.executor.registry.find(record.tool_name)
    if tool is not None:
        try:
            digest = agent.executor.hasher.arguments(tool.validate(stored.get("arguments")))
        except Exception:  # the tool changed: approve() reports it to the model as the call's result
            return None
        if digest != record.arguments_hash:
            return (
                "was bound to its arguments with another hash key, or the tool's parameters changed "
                "since it was issued (every process must share the executor's hash_key)"
            )
    return None


async def abandon_run(agent: Agent, run: AgentRun, reason: str, context: ToolContext[Any] | None) -> AgentRun:
    """`Agent.abandon`: withdraw every held call, give each a `CONFIRMATION_EXPIRED` result, end `failed`."""
    if run.status != "awaiting_confirmation":
        raise ValueError(f"Only a run awaiting confirmation can be abandoned; this one is {run.status!r}.")
    ctx = agent._context(run, context)
    for pending in run.pending:
        try:  # only a confirmation held in this run (the run's JSON could name any)
            await agent.executor.confirmations.withdraw(pending.confirmation_id, ctx)
        except Exception as exc:  # it expires by itself; the run ends all the same
            log_exception(logger, "agent run %s: could not withdraw a confirmation", exc, run.run_id)
        name = pending.call.name
        said = f"The run ended before the user decided on {name!r} ({reason}); it did not run."
        _replace_result(run, pending.call.id, _did_not_run(pending, said, "run_ended"))
    _close(run, reason, RunErrorCode.ABANDONED)
    return run


async def close_interrupted(agent: Agent, run: AgentRun, context: ToolContext[Any] | None) -> AgentRun:
    """Close a paused run whose last decider stopped mid-decision (`Agent.decide` after its claim lapsed):
    a held call whose confirmation is gone may have run (`RESULT_UNKNOWN`: it was consumed before the call
    started); the others are withdrawn and did not run. Ends `failed`, `DECISION_INTERRUPTED`.

    Raises:
        Exception: the confirmation store failed. A held call withdrawn before it stays withdrawn, and the
            run stays stored, so a later decision on it is refused.
    """
    ctx = agent._context(run, context)
    for pending in run.pending:
        name = pending.call.name
        if await agent.executor.confirmations.withdraw(pending.confirmation_id, ctx) is not None:
            said = (
                f"The run was closed before the user's decision on {name!r} was carried out; it did not run."
            )
            result = _did_not_run(pending, said, "run_closed")
        else:
            result = _errors.fail(
                pending.call.id,
                name,
                ErrorCode.RESULT_UNKNOWN,
                f"The user's decision on {name!r} was being carried out when the process doing it stopped: "
                "it may or may not have taken effect.",
                recover_action="Check whether it took effect before calling the tool again.",
                details={"reason": "decider_stopped"},
            )
        _replace_result(run, pending.call.id, result)
    _close(
        run,
        "The process deciding this run stopped mid-decision; the run was closed, and each held call's "
        "result says whether it may have run. Nothing of this decision ran.",
        RunErrorCode.DECISION_INTERRUPTED,
    )
    return run


def _did_not_run(pending: PendingCall, said: str, reason: str) -> ToolResult:
    return _errors.fail(
        pending.call.id,
        pending.call.name,
        ErrorCode.CONFIRMATION_EXPIRED,
        said,
        recover_action="Call the tool again if the user still wants this done.",
        details={"reason": reason},
    )


def _close(run: AgentRun, reason: str, code: RunErrorCode) -> None:
    """End a paused run `failed` with `code`: its batch's results (the held calls' set by the caller) go into
    the history, so the next turn's model request is well formed."""
    results = {r.call.id: r.result for r in run.tool_calls if r.step == run.steps}
    batch, run.batch, run.pending = run.batch, [], []
    if run.mode == "native":
        run.messages.extend(ToolResultMessage.from_result(results[c.id]) for c in batch)
    run.status, run.error, run.error_code = "failed", reason, code


async def pending_entry(agent: Agent, run: AgentRun, call: ToolCall, result: ToolResult) -> PendingCall:
    """The run's entry for a held call: summary and full arguments as the confirmation store has them."""
    cid = result.confirmation_id or ""
    summary = result.message or f"run {call.name}"
    arguments: dict[str, Any] | None = None
    preview: str | None = None
    try:
        record = await agent.executor.confirmations.record(cid)
    except Exception as exc:  # resume() checks the store again, and refuses without it
        log_exception(
            logger,
            "agent run %s: the confirmation store failed",
            exc,
            run.run_id,
            redact=not agent.executor.log_exception_messages,
        )
        record = None
    if record is not None:
        summary = record.summary
        preview = record.preview
        shown = record.metadata.get("arguments")
        arguments = dict(shown) if isinstance(shown, Mapping) else None
    return PendingCall(confirmation_id=cid, call=call, summary=summary, arguments=arguments, preview=preview)


def _replace_result(run: AgentRun, call_id: str, result: ToolResult) -> None:
    for record in reversed(run.tool_calls):
        if record.call.id == call_id:
            record.result = result
            return


def _lost_to_another_decision(result: ToolResult) -> bool:
    """Whether approve/deny found no record of a confirmation that `_bind_pending` had just found: it was
    consumed in between, by a concurrent decision on the same run."""
    error = result.error
    return error is not None and error.code == ErrorCode.CONFIRMATION_NOT_FOUND


def _refuse_lost(run: AgentRun, confirmation_id: str) -> None:
    """End a resume that another one overtook as a later replay ends: refused, with no model request and
    nothing of the other resume's decision written into this run's history."""
    run.status = "failed"
    run.error = (
        f"Confirmation {confirmation_id!r} was decided by another resume of this run at the same moment; "
        "that resume carries the run on. Nothing more of this resume ran."
    )
    run.error_code = RunErrorCode.DECIDED_ELSEWHERE


def _same_arguments(a: Any, b: Any) -> bool:
    """Whether two raw arguments (JSON text or decoded objects) say the same thing, exactly."""

    def decoded(value: Any) -> Any:
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError:
                return value
        return dict(value) if isinstance(value, Mapping) else value

    try:
        return canonical_json(decoded(a)) == canonical_json(decoded(b))
    except Exception:
        return False
