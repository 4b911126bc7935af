"""Events `Agent.stream()` yields while a run unfolds. The last one is always `RunFinished`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeAlias

from toolrun.agent._run import AgentRun
from toolrun.results import ToolResult
from toolrun.tools import ToolCall

__all__ = [
    "AgentEvent",
    "ConfirmationRequired",
    "RunFinished",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallProgress",
    "ToolCallStarted",
]


@dataclass(kw_only=True, slots=True)
class TextDelta:
    """A piece of the model's text, as it arrives."""

    kind: ClassVar[Literal["text_delta"]] = "text_delta"
    text: str
    step: int


@dataclass(kw_only=True, slots=True)
class ToolCallStarted:
    """The executor is about to run a call the model made."""

    kind: ClassVar[Literal["tool_call_started"]] = "tool_call_started"
    call: ToolCall
    step: int


@dataclass(kw_only=True, slots=True)
class ToolCallProgress:
    """A running call reported how far it has come (`ToolContext.report_progress`), at most every
    `Agent(progress_interval=...)` seconds; never after the call ended. Not in the audit.

    An async generator tool's partial result is one too: `progress` counts its yields, `message` is the
    value as text and `partial` the value itself as JSON data (the whole result so far)."""

    kind: ClassVar[Literal["tool_call_progress"]] = "tool_call_progress"
    call: ToolCall
    progress: float
    total: float | None
    message: str | None
    step: int
    partial: Any = None
    """A partial result's value as JSON data; None for a plain report, or a value with no JSON form or
    over 32,000 characters of JSON (its text is in `message`)."""


@dataclass(kw_only=True, slots=True)
class ToolCallFinished:
    """A call's result is known."""

    kind: ClassVar[Literal["tool_call_finished"]] = "tool_call_finished"
    call: ToolCall
    result: ToolResult
    step: int


@dataclass(kw_only=True, slots=True)
class ConfirmationRequired:
    """A call waits for a person; the run will pause with `awaiting_confirmation`."""

    kind: ClassVar[Literal["confirmation_required"]] = "confirmation_required"
    confirmation_id: str
    call: ToolCall
    summary: str
    preview: str | None = None
    """The text the person approves (the tool's preview from the application's records), if any."""


@dataclass(kw_only=True, slots=True)
class RunFinished:
    """The run stopped (finished, paused, or hit a limit); `run.status` says which."""

    kind: ClassVar[Literal["final"]] = "final"
    run: AgentRun


AgentEvent: TypeAlias = (
    TextDelta | ToolCallStarted | ToolCallProgress | ToolCallFinished | ConfirmationRequired | RunFinished
)
