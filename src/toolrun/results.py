"""What a tool call comes back as: `ToolResult`, and the `ToolError` a tool raises to explain a failure.

Every call the executor runs ends in a `ToolResult`, never in an exception: the model reads `render()`,
the caller branches on `status` and `error.code`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from toolrun.content import Content

__all__ = ["ErrorCode", "ResultStatus", "ToolError", "ToolResult"]

# One encoder for every render: `json.dumps` with options builds a new encoder per call (hot path).
_RENDER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)

ResultStatus = Literal["ok", "error", "confirmation_required"]


class ErrorCode(StrEnum):
    """Error codes toolrun itself produces. Tools may use their own codes (any upper-case string)."""

    NOT_FOUND = "NOT_FOUND"
    """No tool of that name; `details["suggestions"]` holds the closest names."""
    PERMISSION_DENIED = "PERMISSION_DENIED"
    """The caller's roles or allowlist do not admit the tool."""
    INVALID_ARGUMENTS = "INVALID_ARGUMENTS"
    """Arguments are not JSON or do not fit the schema; `details["problems"]` lists each field problem."""
    CONFIRMATION_DENIED = "CONFIRMATION_DENIED"
    """A person refused the action, or the approval presented does not match this call."""
    CONFIRMATION_EXPIRED = "CONFIRMATION_EXPIRED"
    """The approval was given too long ago, or the run ended before the user decided."""
    CONFIRMATION_NOT_FOUND = "CONFIRMATION_NOT_FOUND"
    """No pending approval with this id is the caller's to use: unknown, already used or decided, or another
    user's or run's (one answer for all, so it never tells whether someone else's record exists)."""
    RATE_LIMITED = "RATE_LIMITED"
    """Too many calls; `details["retry_after"]` says in how many seconds to try again."""
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
    """The context's deadline has passed; the tool did not start."""
    BUDGET_EXCEEDED = "BUDGET_EXCEEDED"
    """The context's budget of tool calls is spent; the tool did not start."""
    TIMEOUT = "TIMEOUT"
    """The tool ran past its timeout; any late result is discarded."""
    EXECUTION_FAILED = "EXECUTION_FAILED"
    """The tool raised an unexpected exception; `details["error_id"]` ties it to the logs."""
    RESULT_INVALID = "RESULT_INVALID"
    """The tool returned a value that breaks its declared output schema, or cannot be made JSON."""
    RESULT_UNKNOWN = "RESULT_UNKNOWN"
    """The call was approved and may have started, but the process running it stopped before its result
    was kept: it may or may not have taken effect."""


class ToolError(Exception):
    """A failure a tool wants the model (and the caller) to understand.

    Raise it from a tool with your own code; toolrun's executor also builds these for its own failures.

    Args:
        code: A short upper-case code, e.g. `"INVALID_TITLE"` or an `ErrorCode`.
        message: What went wrong, in words a model can act on. Never put secrets or stack traces here.
        retryable: Whether the same call may succeed if tried again (transient failure).
        recover_action: What the model should do next, e.g. "Ask the user for a shorter title."
        details: Structured, JSON-safe details (field problems, retry_after, suggestions).
    """

    def __init__(
        self,
        code: str | ErrorCode,
        message: str,
        *,
        retryable: bool = False,
        recover_action: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code: str = str(code)
        self.message = message
        self.retryable = retryable
        self.recover_action = recover_action
        self.details: dict[str, Any] = details if details is not None else {}

    def __repr__(self) -> str:
        return f"ToolError(code={self.code!r}, message={self.message!r}, retryable={self.retryable!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolError):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = Exception.__hash__

    def render(self) -> str:
        """The error as text for the model."""
        text = f"Error {self.code}: {self.message}"
        if self.recover_action:
            text += f"\nWhat to do: {self.recover_action}"
        return text

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe form (for logs, APIs and serialised agent runs)."""
        return {
            "code": self.code,
            "message": self.message,
            "retryable": self.retryable,
            "recover_action": self.recover_action,
            "details": self.details,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolError:
        """Rebuild an error from `to_dict()` output."""
        return cls(
            data["code"],
            data["message"],
            retryable=bool(data.get("retryable", False)),
            recover_action=data.get("recover_action"),
            details=dict(data.get("details") or {}),
        )


@dataclass(kw_only=True)
class ToolResult:
    """The outcome of one tool call.

    Build one with `ToolResult.ok(...)`, `ToolResult.error(...)` or
    `ToolResult.confirmation_required(...)`; the executor fills in timing and attempts.
    """

    call_id: str = ""
    """The id of the call this answers (the provider's tool-call id)."""
    tool_name: str = ""
    """The tool that was called, as registered."""
    status: ResultStatus = "ok"
    """`"ok"`, `"error"` or `"confirmation_required"`."""
    value: Any = None
    """The tool's return value, made JSON-safe."""
    message: str | None = None
    """Text for the model. When set it is what `render()` shows instead of the value."""
    error: ToolError | None = None
    """Set when `status == "error"`."""
    confirmation_id: str | None = None
    """Set when `status == "confirmation_required"`: the id to approve or deny."""
    duration: float = 0.0
    """Seconds spent in the executor for this call."""
    attempts: int = 0
    """How many times the tool's handler was started (0 when it never ran)."""
    cached: bool = False
    """True when the value came from the result cache and the handler did not run."""
    exclude_value_from_context: bool = False
    """Keep `value` from the model: `render()` shows only `message` (or a short note)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Free-form, JSON-safe data for the caller; never shown to the model."""
    content: tuple[Content, ...] = ()
    """Images, files, audio, text blocks and resource links the tool returned beside `value` (see
    `toolrun.content`); empty for plain JSON results. Wire formats render them as their provider allows."""

    @classmethod
    def ok(cls, value: Any = None, *, message: str | None = None, **kwargs: Any) -> ToolResult:
        """A successful result."""
        return cls(status="ok", value=value, message=message, **kwargs)

    @classmethod
    def fail(cls, error: ToolError, **kwargs: Any) -> ToolResult:
        """A failed result carrying `error`."""
        return cls(status="error", error=error, **kwargs)

    @classmethod
    def error_result(
        cls,
        code: str | ErrorCode,
        message: str,
        *,
        retryable: bool = False,
        recover_action: str | None = None,
        details: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> ToolResult:
        """A failed result, built from the parts of a `ToolError`."""
        err = ToolError(code, message, retryable=retryable, recover_action=recover_action, details=details)
        return cls(status="error", error=err, **kwargs)

    @classmethod
    def confirmation_required_result(cls, confirmation_id: str, summary: str, **kwargs: Any) -> ToolResult:
        """A call held back until a person approves it; `summary` says what it would do."""
        return cls(status="confirmation_required", confirmation_id=confirmation_id, message=summary, **kwargs)

    @property
    def is_ok(self) -> bool:
        return self.status == "ok"

    @property
    def is_error(self) -> bool:
        return self.status == "error"

    def render(self) -> str:
        """A compact string for the model: the value as JSON, the error with what to do, or the pause."""
        if self.status == "error" and self.error is not None:
            return self.error.render()
        if self.status == "confirmation_required":
            return (
                f"Confirmation required: {self.message or 'this action needs approval'}. "
                "The action has NOT run; it will run only if the user approves it."
            )
        if self.message is not None:
            return self.message
        if self.exclude_value_from_context:
            return "Done. (The result was delivered to the user and is not shown here.)"
        if self.content:
            return self._render_with_content()
        value = self.value
        kind = type(value)
        if kind is str or isinstance(value, str):
            return value  # type: ignore[no-any-return]
        if kind is int:
            return int.__repr__(value)  # what the JSON encoder writes for an int, without building one
        return _RENDER.encode(value)

    def _render_with_content(self) -> str:
        """The value (when there is one) and every content item as text: text blocks as they are, other
        items as a one-line note (`[image/png image, 1,234 bytes]`), for places that take text only."""
        from toolrun.content import describe

        parts = [] if self.value is None else [ToolResult(value=self.value).render()]
        parts.extend(describe(item) for item in self.content)
        return "\n".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe form; `from_dict` reverses it (content bytes travel as base64)."""
        return {
            "call_id": self.call_id,
            "tool_name": self.tool_name,
            "status": self.status,
            "value": self.value,
            "message": self.message,
            "error": self.error.to_dict() if self.error is not None else None,
            "confirmation_id": self.confirmation_id,
            "duration": self.duration,
            "attempts": self.attempts,
            "cached": self.cached,
            "exclude_value_from_context": self.exclude_value_from_context,
            "metadata": self.metadata,
            "content": [item.to_dict() for item in self.content],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolResult:
        """Rebuild a result from `to_dict()` output."""
        fields = dict(data)
        err = fields.pop("error", None)
        items = fields.pop("content", None)
        if items:
            from toolrun.content import content_from_dict

            fields["content"] = tuple(content_from_dict(item) for item in items)
        return cls(error=ToolError.from_dict(err) if err else None, **fields)


class _ErrorAttribute:
    """`ToolResult.error` is two things by contract: on the class, the constructor
    `ToolResult.error(code, message, ...)`; on an instance, the `ToolError` field.

    A non-data descriptor (no `__set__`): an instance's own `error` (in its `__dict__`, where `__init__`
    and assignments put it) is found first, by a plain dict lookup, without calling `__get__`.
    """

    def __get__(self, obj: ToolResult | None, owner: type[ToolResult]) -> Any:
        if obj is None:
            return owner.error_result
        return obj.__dict__.get("error")


ToolResult.error = _ErrorAttribute()  # type: ignore[assignment]
