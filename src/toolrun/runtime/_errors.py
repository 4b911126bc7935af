"""The error results the executor builds: one function per code, each with words a model can act on.

Messages name the tool (a registered name, never the model's raw text beyond a bounded echo) and say
what to do next. Internal details (exception text, stack traces) never appear here.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Sequence
from typing import Any

from toolrun.exceptions import ArgumentsError
from toolrun.results import ErrorCode, ToolError, ToolResult
from toolrun.tools._validation import short_repr

__all__ = [
    "budget_exceeded",
    "cancelled_by_tool",
    "confirmation_denied",
    "confirmation_expired",
    "content_invalid",
    "deadline_exceeded",
    "execution_failed",
    "fail",
    "invalid_arguments",
    "new_error_id",
    "not_found",
    "not_started",
    "permission_denied",
    "quota_exceeded",
    "rate_limited",
    "result_invalid",
    "timeout",
    "tool_budget_exceeded",
]

_MAX_NAME_ECHO = 64


def new_error_id() -> str:
    """A short random id tying an error result to the log line about it."""
    return "err_" + secrets.token_hex(8)


def fail(
    call_id: str,
    tool_name: str,
    code: str,
    message: str,
    *,
    retryable: bool = False,
    recover_action: str | None = None,
    details: dict[str, Any] | None = None,
) -> ToolResult:
    return ToolResult.fail(
        ToolError(code, message, retryable=retryable, recover_action=recover_action, details=details),
        call_id=call_id,
        tool_name=tool_name,
    )


def not_found(call_id: str, name: str, suggestions: Sequence[str]) -> ToolResult:
    shown = short_repr(name[: _MAX_NAME_ECHO * 2]) if isinstance(name, str) else "(not a string)"
    message = f"There is no tool named {shown}."
    if suggestions:
        message += " Did you mean " + " or ".join(repr(s) for s in suggestions) + "?"
    return fail(
        call_id,
        name if isinstance(name, str) else "",
        ErrorCode.NOT_FOUND,
        message,
        recover_action="Call one of the available tools, using its exact name.",
        details={"suggestions": list(suggestions)},
    )


def permission_denied(call_id: str, tool_name: str) -> ToolResult:
    return fail(
        call_id,
        tool_name,
        ErrorCode.PERMISSION_DENIED,
        f"You are not allowed to use the tool {tool_name!r}.",
        recover_action="Do not call this tool again; tell the user it is not available to them.",
    )


def invalid_arguments(call_id: str, tool_name: str, exc: ArgumentsError) -> ToolResult:
    problems = [
        {"path": p.path, "message": p.message, "expected": p.expected, "given": p.given} for p in exc.problems
    ]
    return fail(
        call_id,
        tool_name,
        ErrorCode.INVALID_ARGUMENTS,
        exc.render(),
        recover_action="Fix the arguments listed above and call the tool again.",
        details={"problems": problems},
    )


def confirmation_denied(
    call_id: str, tool_name: str, message: str, *, reason: str, recover_action: str | None = None
) -> ToolResult:
    return fail(
        call_id,
        tool_name,
        ErrorCode.CONFIRMATION_DENIED,
        message,
        recover_action=recover_action,
        details={"reason": reason},
    )


def confirmation_expired(call_id: str, tool_name: str) -> ToolResult:
    """The approval came too late: `CONFIRMATION_EXPIRED` (reason `expired`)."""
    return fail(
        call_id,
        tool_name,
        ErrorCode.CONFIRMATION_EXPIRED,
        "The approval for this action has expired; the action did not run.",
        recover_action="Call the tool again to ask the user for a new confirmation.",
        details={"reason": "expired"},
    )


def confirmation_not_found(call_id: str, tool_name: str) -> ToolResult:
    """No pending approval of this id is the caller's: `CONFIRMATION_NOT_FOUND` (reason `unknown_or_used`),
    the same answer for an unknown id, one already used or decided, and another user's or run's, so
    nothing about others leaks."""
    return fail(
        call_id,
        tool_name,
        ErrorCode.CONFIRMATION_NOT_FOUND,
        "No pending approval with this id is yours to use: it is unknown, was already used or decided, "
        "or is not yours. The action did not run.",
        recover_action="Call the tool again to ask the user for a new confirmation.",
        details={"reason": "unknown_or_used"},
    )


def rate_limited(call_id: str, tool_name: str, retry_after: float) -> ToolResult:
    wait = math.ceil(retry_after * 100) / 100 if math.isfinite(retry_after) else 60.0
    return fail(
        call_id,
        tool_name,
        ErrorCode.RATE_LIMITED,
        f"Too many calls to {tool_name!r}; try again in {wait:g} seconds.",
        retryable=True,
        recover_action=f"Wait {wait:g} seconds before calling this tool again, or do something else first.",
        details={"retry_after": wait},
    )


def deadline_exceeded(call_id: str, tool_name: str) -> ToolResult:
    return fail(
        call_id,
        tool_name,
        ErrorCode.DEADLINE_EXCEEDED,
        "The time allowed for this request is over; the tool did not run.",
        recover_action="Stop calling tools and answer with what you have.",
    )


def budget_exceeded(call_id: str, tool_name: str, max_calls: int) -> ToolResult:
    return fail(
        call_id,
        tool_name,
        ErrorCode.BUDGET_EXCEEDED,
        f"The budget of {max_calls} tool calls for this request is spent; the tool did not run.",
        recover_action="Stop calling tools and answer with what you have.",
        details={"max_calls": max_calls},
    )


def tool_budget_exceeded(call_id: str, tool_name: str, max_calls: int) -> ToolResult:
    """A tool's own per-run limit (`max_calls`) is reached: the run may go on without it."""
    return fail(
        call_id,
        tool_name,
        ErrorCode.BUDGET_EXCEEDED,
        f"The tool {tool_name!r} may be called at most {max_calls} time(s) in this request, and that many "
        "calls were made; this one did not run.",
        recover_action="Do not call this tool again in this request: go on without it, or tell the user.",
        details={"max_calls": max_calls, "limit": "tool"},
    )


def quota_exceeded(call_id: str, tool_name: str, retry_after: float) -> ToolResult:
    """The user's quota of calls (across tools, over a window) is spent."""
    wait = math.ceil(retry_after * 100) / 100 if math.isfinite(retry_after) else 60.0
    return fail(
        call_id,
        tool_name,
        ErrorCode.RATE_LIMITED,
        f"The user's quota of tool calls is spent for now; more are allowed in {wait:g} seconds. The tool "
        "did not run.",
        retryable=True,
        recover_action="Stop calling tools, answer with what you have, and tell the user about the quota.",
        details={"retry_after": wait, "quota": True},
    )


def timeout(
    call_id: str, tool_name: str, seconds: float, *, idempotent: bool, by_deadline: bool
) -> ToolResult:
    if idempotent:
        message = f"The tool {tool_name!r} did not finish within {seconds:.3g} seconds."
        action = "Try again once, perhaps with a smaller request; if it fails again, tell the user."
    else:
        message = (
            f"The tool {tool_name!r} did not finish within {seconds:.3g} seconds. It may or may not "
            "have taken effect."
        )
        action = "Do not call it again blindly: check whether it took effect first, or ask the user."
    details: dict[str, Any] = {"timeout": seconds}
    if by_deadline:
        details["deadline"] = True
    return fail(
        call_id,
        tool_name,
        ErrorCode.TIMEOUT,
        message,
        retryable=idempotent,
        recover_action=action,
        details=details,
    )


def not_started(call_id: str, tool_name: str, seconds: float, *, by_deadline: bool) -> ToolResult:
    """A sync tool whose time box ran out while it waited for a worker thread: it never ran."""
    details: dict[str, Any] = {"timeout": seconds, "started": False, "reason": "no_free_worker"}
    if by_deadline:
        details["deadline"] = True
    return fail(
        call_id,
        tool_name,
        ErrorCode.TIMEOUT,
        f"The tool {tool_name!r} did not start within {seconds:.3g} seconds: every worker was busy. It did "
        "not run, so nothing of it took effect.",
        retryable=True,
        recover_action="It is safe to call it again, a little later.",
        details=details,
    )


def execution_failed(
    call_id: str, tool_name: str, error_id: str, *, retryable: bool = False, what: str = "failed"
) -> ToolResult:
    return fail(
        call_id,
        tool_name,
        ErrorCode.EXECUTION_FAILED,
        f"The tool {tool_name!r} {what} with an internal error (error id {error_id}).",
        retryable=retryable,
        recover_action=(
            "Try again once." if retryable else "Do not retry the same call; tell the user what failed."
        ),
        details={"error_id": error_id},
    )


def cancelled_by_tool(call_id: str, tool_name: str, error_id: str) -> ToolResult:
    return fail(
        call_id,
        tool_name,
        ErrorCode.EXECUTION_FAILED,
        f"The tool {tool_name!r} was cancelled before it finished (error id {error_id}).",
        recover_action="Do not retry the same call; tell the user what failed.",
        details={"error_id": error_id, "cancelled": True},
    )


def content_invalid(call_id: str, tool_name: str, error_id: str, problems: Sequence[str]) -> ToolResult:
    return fail(
        call_id,
        tool_name,
        ErrorCode.RESULT_INVALID,
        f"The tool {tool_name!r} returned content that cannot be sent: {'; '.join(problems)[:500]} "
        f"(error id {error_id})",
        recover_action="Do not retry the same call; tell the user the tool's output could not be sent.",
        details={"error_id": error_id, "problems": list(problems)},
    )


def result_invalid(call_id: str, tool_name: str, error_id: str, problems: Sequence[str] = ()) -> ToolResult:
    details: dict[str, Any] = {"error_id": error_id}
    if problems:
        details["problems"] = list(problems)
        message = f"The tool {tool_name!r} returned a result that does not match its declared output type."
    else:
        message = f"The tool {tool_name!r} returned a result that cannot be represented as JSON."
    return fail(
        call_id,
        tool_name,
        ErrorCode.RESULT_INVALID,
        message + f" (error id {error_id})",
        recover_action="Do not retry the same call; tell the user the tool is not working.",
        details=details,
    )
