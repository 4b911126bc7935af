"""The service's internal event stream: what every wire format (toolrun SSE, AG-UI, AI SDK, JSON) adapts.

One run (a new message, or a decision on a pending confirmation) yields, in order:

```
RunStarted
  ( TextDelta | ToolCallStarted | ToolCallProgress | ToolCallFinished | ConfirmationRequired )*
RunFinished                      (always last, unless RunError ends the stream instead)
```

`RunFinished.response` is exactly the body `POST /api/v1/chat` answers; `RunError` is only for failures of
the service itself (a model or tool failure is a `RunFinished` with status `failed`). Background jobs
outlive their run, so their `JobProgress` / `JobFinished` come on the user's jobs stream instead. Each
event has a `kind` (the SSE event name) and `data()` (a JSON-safe dict, the SSE data). The ordering rules
and each event's fields: docs/service.md, "The internal event stream".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeAlias

__all__ = [
    "ConfirmationRequired",
    "JobEvent",
    "JobFinished",
    "JobProgress",
    "RunError",
    "RunFinished",
    "RunStarted",
    "ServiceEvent",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallProgress",
    "ToolCallStarted",
]


@dataclass(kw_only=True, slots=True)
class RunStarted:
    """The run began (or resumed, after a decision). Always the first event."""

    kind: ClassVar[str] = "run_started"
    run_id: str
    conversation_id: str
    model: str
    """The model's name (`demo` for the demo model)."""
    demo: bool
    """Whether the model is the offline demo stand-in."""
    resumed: bool = False
    """True when this run continues after a decision on a confirmation."""

    def data(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "conversation_id": self.conversation_id,
            "model": self.model,
            "demo": self.demo,
            "resumed": self.resumed,
        }


@dataclass(kw_only=True, slots=True)
class TextDelta:
    """A piece of the assistant's answer, as it arrives."""

    kind: ClassVar[str] = "text_delta"
    run_id: str
    message_id: str
    """Groups the deltas of one assistant message."""
    text: str

    def data(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "message_id": self.message_id, "text": self.text}


@dataclass(kw_only=True, slots=True)
class ToolCallStarted:
    """The model called a tool; the executor is about to run it (or hold it for confirmation)."""

    kind: ClassVar[str] = "tool_call_started"
    run_id: str
    call_id: str
    tool: str
    arguments: Any
    """The arguments as the model sent them (a dict when they are a JSON object)."""

    def data(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "call_id": self.call_id,
            "tool": self.tool,
            "arguments": self.arguments,
        }


@dataclass(kw_only=True, slots=True)
class ToolCallFinished:
    """A call's result is known: `ok`, `error` or `confirmation_required`."""

    kind: ClassVar[str] = "tool_call_finished"
    run_id: str
    call_id: str
    tool: str
    status: str
    result: Any
    """The tool's value when `status == "ok"`."""
    error: dict[str, Any] | None
    """`{"code", "message", "retryable", "recover_action", "details"}` when `status == "error"`."""
    duration_ms: float
    content: list[dict[str, Any]] = field(default_factory=list)
    """Content items beside the value (see the module docstring); only in `data()` when there are any."""

    def data(self) -> dict[str, Any]:
        out = {
            "run_id": self.run_id,
            "call_id": self.call_id,
            "tool": self.tool,
            "status": self.status,
            "result": self.result,
            "error": self.error,
            "duration_ms": self.duration_ms,
        }
        if self.content:
            out["content"] = self.content
        return out


@dataclass(kw_only=True, slots=True)
class ToolCallProgress:
    """A running call reported progress (`ctx.report_progress`); throttled by the agent. An async
    generator tool's partial result carries its value too (`partial`, JSON data: the whole result so
    far), sent only when there is one."""

    kind: ClassVar[str] = "tool_call_progress"
    run_id: str
    call_id: str
    tool: str
    progress: float
    total: float | None
    message: str | None
    partial: Any = None

    def data(self) -> dict[str, Any]:
        out = {
            "run_id": self.run_id,
            "call_id": self.call_id,
            "tool": self.tool,
            "progress": self.progress,
            "total": self.total,
            "message": self.message,
        }
        if self.partial is not None:
            out["partial"] = self.partial
        return out


@dataclass(kw_only=True, slots=True)
class ConfirmationRequired:
    """A call waits for the user's decision; `pending` is the server's record (see `PendingItem`)."""

    kind: ClassVar[str] = "confirmation_required"
    run_id: str
    pending: dict[str, Any]
    """`{"confirmation_id", "tool", "arguments", "summary", "expires_at", "run_id", "conversation_id"}`."""

    def data(self) -> dict[str, Any]:
        return dict(self.pending)


@dataclass(kw_only=True, slots=True)
class RunFinished:
    """The run stopped (completed, paused for confirmation, failed, ...) and is stored. Always last."""

    kind: ClassVar[str] = "run_finished"
    run_id: str
    response: dict[str, Any]
    """The `ChatResponse` body: conversation_id, run_id, status, output, messages, pending, model."""

    def data(self) -> dict[str, Any]:
        return self.response


@dataclass(kw_only=True, slots=True)
class RunError:
    """The service failed while running (not the model or a tool): the stream ends here."""

    kind: ClassVar[str] = "error"
    run_id: str | None
    code: str
    message: str

    def data(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "code": self.code, "message": self.message}


@dataclass(kw_only=True, slots=True)
class JobProgress:
    """A running background job changed: started, or reported progress (`ctx.report_progress`)."""

    kind: ClassVar[str] = "job_progress"
    job: dict[str, Any]
    """The job as the API shows it (`status` is `running`)."""

    def data(self) -> dict[str, Any]:
        return dict(self.job)


@dataclass(kw_only=True, slots=True)
class JobFinished:
    """A background job ended: `completed`, `failed` or `cancelled`, with its `result`."""

    kind: ClassVar[str] = "job_finished"
    job: dict[str, Any]
    """The job as the API shows it."""

    def data(self) -> dict[str, Any]:
        return dict(self.job)


JobEvent: TypeAlias = JobProgress | JobFinished
"""What the jobs stream carries."""

ServiceEvent: TypeAlias = (
    RunStarted
    | TextDelta
    | ToolCallStarted
    | ToolCallProgress
    | ToolCallFinished
    | ConfirmationRequired
    | RunFinished
    | RunError
    | JobProgress
    | JobFinished
)
