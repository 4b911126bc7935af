"""`Confirmations`: the executor's decisions on held calls — approve, deny, preview an edit, list, read,
withdraw.

The confirmation stage holds a call (`_stages.ConfirmationStage`); everything done with a held call
afterwards goes through here, so every door (the agent, the service, MCP, LangGraph, DBOS) reads and
consumes the confirmation store the same way: single use, only by its own user and in its own run, not
after expiry, store errors failing closed. `ToolExecutor.approve`, `deny`, `preview_edit` and
`pending_confirmations` delegate to it; doors reach it as `executor.confirmations`.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from toolrun._unicode import json_problem
from toolrun.approvals._review import describe_changes
from toolrun.exceptions import ArgumentsError
from toolrun.results import ErrorCode, ToolResult
from toolrun.runtime import _errors
from toolrun.runtime._events import ConfirmationResolved
from toolrun.runtime._logging import log_exception
from toolrun.runtime._preview import make_preview
from toolrun.runtime._stages import _shown_arguments, summarize_call
from toolrun.store import NO_USER, PendingConfirmation
from toolrun.tools import ToolCall, ToolContext

if TYPE_CHECKING:
    from toolrun.runtime._executor import ToolExecutor

__all__ = ["Confirmations"]

_logger = logging.getLogger("toolrun")
_perf = time.perf_counter


class Confirmations:
    """What can be done with the calls an executor holds for confirmation (`executor.confirmations`)."""

    def __init__(self, executor: ToolExecutor) -> None:
        self._executor = executor

    async def approve(
        self, confirmation_id: str, context: ToolContext[Any], *, arguments: Mapping[str, Any] | None = None
    ) -> ToolResult:
        """`ToolExecutor.approve`: consume the confirmation and run its call (with the person's edited
        `arguments`, bound to them, when given)."""
        ex = self._executor
        edited: tuple[dict[str, Any], list[str], str | None] | None = None
        if arguments is not None:
            checked = await self._check_edit(confirmation_id, context, arguments)
            if isinstance(checked, ToolResult):
                return checked
            edited = checked[1], checked[2], checked[3]
        taken = await self._take(confirmation_id, context, "approve")
        if isinstance(taken, ToolResult):
            return taken
        call = ToolCall(
            id=str(taken.call.get("id", "")),
            name=str(taken.call.get("name", "")),
            arguments=taken.call.get("arguments"),
        )
        if edited is None:
            return await ex._execute(call, context, taken, "approve")
        new_arguments, changes, preview = edited
        call = ToolCall(id=call.id, name=call.name, arguments=new_arguments)
        tool = ex.registry.find(taken.tool_name)
        try:
            bound_hash = ex.hasher.arguments(tool.validate(new_arguments)) if tool is not None else ""
        except Exception:  # the tool changed in between: the stage refuses the mismatch
            bound_hash = ""
        rebound = dataclasses.replace(
            taken,
            arguments_hash=bound_hash,
            call=call.to_dict(),
            preview=preview,
            metadata={**taken.metadata, "arguments": new_arguments, "edited": changes},
        )
        result = await ex._execute(call, context, rebound, "approve")
        return _told_about_edit(result, changes)

    async def deny(
        self, confirmation_id: str, context: ToolContext[Any], reason: str | None = None
    ) -> ToolResult:
        """`ToolExecutor.deny`: consume the confirmation; the call never runs (`CONFIRMATION_DENIED`)."""
        start = _perf()
        taken = await self._take(confirmation_id, context, "deny")
        if isinstance(taken, ToolResult):
            return taken
        message = f"The user declined to run {taken.tool_name!r}; it did not run."
        if reason and reason.strip():
            message += f" The user said: {reason.strip()[:2000]}"
        result = _errors.confirmation_denied(
            str(taken.call.get("id", "")),
            taken.tool_name,
            message,
            reason="denied",
            recover_action="Do not try this action again unless the user asks for it.",
        )
        result.duration = _perf() - start
        self._resolved(taken, context, "denied")
        ex = self._executor
        if ex._trail.enabled():
            ex._trail.write("deny", result, taken.tool_name, context, taken.arguments_hash, taken.id)
        return result

    async def preview_edit(
        self, confirmation_id: str, context: ToolContext[Any], arguments: Mapping[str, Any]
    ) -> ToolResult:
        """`ToolExecutor.preview_edit`: what approving with edited `arguments` would do; decides nothing."""
        checked = await self._check_edit(confirmation_id, context, arguments)
        if isinstance(checked, ToolResult):
            return checked
        pending, shown, changes, preview = checked
        tool = self._executor.registry.find(pending.tool_name)
        summary = summarize_call(tool, shown) if tool is not None else ""
        return ToolResult.ok(
            {
                "preview": preview if preview is not None else summary,
                "summary": summary,
                "arguments": shown,
                "changes": changes,
            },
            call_id=str(pending.call.get("id", "")),
            tool_name=pending.tool_name,
        )

    async def pending(self, context: ToolContext[Any]) -> list[PendingConfirmation]:
        """`ToolExecutor.pending_confirmations`: the confirmations waiting for `context.user_id` (without
        one: those of the caller's run, else conversation; with neither, none)."""
        ex = self._executor
        pending = await ex.confirmation.store.list_pending(context.user_id or NO_USER, now=ex._clock())
        if context.user_id:
            return pending
        if context.run_id is not None:
            return [p for p in pending if p.run_id == context.run_id]
        if context.conversation_id is not None:
            return [p for p in pending if p.conversation_id == context.conversation_id]
        return []

    async def record(self, confirmation_id: str) -> PendingConfirmation | None:
        """The stored record of a confirmation (its preview, summary and held arguments), whoever's it is,
        or None; decides nothing. The caller checks whose it is before acting on it.

        Raises:
            Exception: the store failed (a door decides whether to go on without the record).
        """
        return await self._executor.confirmation.store.get(str(confirmation_id))

    async def withdraw(self, confirmation_id: str, context: ToolContext[Any]) -> PendingConfirmation | None:
        """Consume a confirmation without running or denying its call (no result, no event), so no later
        decision can take it: only one `context` holds, its user's and held in its run (`context.run_id`;
        None for a call held outside a run), never another run's. Returns the record taken, or None.

        Raises:
            Exception: the store failed (the confirmation still expires by itself).
        """
        store = self._executor.confirmation.store
        user = context.user_id or NO_USER
        found = await store.get(str(confirmation_id))
        if found is None or found.user_id != user or found.run_id != context.run_id:
            return None
        return await store.consume(str(confirmation_id), user_id=user)

    # --------------------------------------------------------------------------------------------------

    async def _check_edit(
        self, confirmation_id: str, context: ToolContext[Any], arguments: Mapping[str, Any]
    ) -> tuple[PendingConfirmation, dict[str, Any], list[str], str | None] | ToolResult:
        """Look at (never consume) the confirmation and validate the person's arguments for its tool:
        (record, arguments as JSON data, changes, new preview), or the error result."""
        ex = self._executor
        user = context.user_id or NO_USER
        try:
            found = await ex.confirmation.store.get(str(confirmation_id))
        except Exception as exc:
            return self._store_failed(exc)
        if (
            found is None
            or found.user_id != user
            or found.run_id not in (None, context.run_id)
            or (not context.user_id and ex.confirmation.require_user)
        ):
            return _errors.confirmation_not_found("", "")
        call_id = str(found.call.get("id", ""))
        if found.expired(ex._clock()):
            return _errors.confirmation_expired(call_id, found.tool_name)
        tool = ex.registry.find(found.tool_name)
        if tool is None:
            return _errors.not_found(call_id, found.tool_name, [])
        problem = json_problem(arguments)
        if problem is not None:  # a person's text must be valid Unicode: refused, never run
            return _errors.fail(
                call_id,
                tool.name,
                ErrorCode.INVALID_ARGUMENTS,
                f"The edited arguments cannot be taken: {problem}.",
                recover_action="Fix the text of that argument and try again.",
            )
        try:
            validated = tool.validate(dict(arguments) if isinstance(arguments, Mapping) else arguments)
        except ArgumentsError as exc:
            return _errors.invalid_arguments(call_id, tool.name, exc)
        except Exception:
            return _errors.fail(
                call_id, tool.name, ErrorCode.INVALID_ARGUMENTS, "The edited arguments could not be checked."
            )
        shown = _shown_arguments(validated)
        before = found.metadata.get("arguments")
        changes = describe_changes(dict(before) if isinstance(before, Mapping) else {}, shown)
        summary = summarize_call(tool, validated)
        preview = await make_preview(ex, tool, validated, context, summary)
        return found, shown, changes, preview

    def _store_failed(self, exc: BaseException) -> ToolResult:
        error_id = _errors.new_error_id()
        log_exception(
            _logger,
            "Confirmation store failed (error_id=%s)",
            exc,
            error_id,
            redact=not self._executor.log_exception_messages,
        )
        return _errors.fail(
            "",
            "",
            ErrorCode.EXECUTION_FAILED,
            f"The confirmation could not be checked (error id {error_id}).",
            retryable=True,
            details={"error_id": error_id},
        )

    async def _take(
        self, confirmation_id: str, context: ToolContext[Any], action: str
    ) -> PendingConfirmation | ToolResult:
        """Consume a confirmation for approve/deny, or say why not (as an error result, audited)."""
        ex = self._executor
        start = _perf()
        user = context.user_id or NO_USER
        result: ToolResult
        if not context.user_id and ex.confirmation.require_user:
            result = _errors.confirmation_denied(
                "",
                "",
                "Only a signed-in user can decide on a pending action, and this request has no user id.",
                reason="no_user",
            )
        else:
            try:
                taken = await self._consume(str(confirmation_id), user, context)
            except Exception as exc:
                result = self._store_failed(exc)
            else:
                if taken is not None and not taken.expired(ex._clock()):
                    return taken
                if taken is None:
                    result = _errors.confirmation_not_found("", "")
                    if ex.events.active:
                        ex.events.emit(
                            ConfirmationResolved(
                                call_id="",
                                tool_name=None,
                                trace_id=context.trace_id,
                                user_id=user,
                                confirmation_id=str(confirmation_id),
                                decision="unknown",
                            )
                        )
                else:
                    call_id = str(taken.call.get("id", ""))
                    result = _errors.confirmation_expired(call_id, taken.tool_name)
                    self._resolved(taken, context, "expired")
        result.duration = _perf() - start
        if ex._trail.enabled():
            ex._trail.write(action, result, result.tool_name or None, context, None)
        return result

    async def _consume(
        self, confirmation_id: str, user: str, context: ToolContext[Any]
    ) -> PendingConfirmation | None:
        """Take the confirmation if it is `user`'s and was not issued for another run than `context`'s;
        a confirmation of another run is left in place (looked at first, so nobody else can burn it)."""
        store = self._executor.confirmation.store
        found = await store.get(confirmation_id)
        if found is None or found.user_id != user or (found.run_id not in (None, context.run_id)):
            return None
        taken = await store.consume(confirmation_id, user_id=user)
        if taken is not None and taken.run_id not in (None, context.run_id):  # replaced in between
            return None
        return taken

    def _resolved(self, pending: PendingConfirmation, context: ToolContext[Any], decision: Any) -> None:
        events = self._executor.events
        if events.active:
            events.emit(
                ConfirmationResolved(
                    call_id=str(pending.call.get("id", "")),
                    tool_name=pending.tool_name,
                    trace_id=context.trace_id,
                    user_id=context.user_id,
                    confirmation_id=pending.id,
                    decision=decision,
                )
            )


def _told_about_edit(result: ToolResult, changes: list[str]) -> ToolResult:
    """`result` of an edited approval, saying what the person changed (in the text the model reads)."""
    result.metadata = {**result.metadata, "edited": changes}
    note = (
        "The user changed the arguments before approving: " + "; ".join(changes) + "."
        if changes
        else "The user approved the call with the same arguments."
    )
    if result.error is not None:
        result.error.message = f"{note} {result.error.message}"
    elif result.status == "ok":
        result.message = f"{note}\nResult: {result.render()}"
    return result
