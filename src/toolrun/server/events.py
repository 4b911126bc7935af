"""The internal event stream of a run (public name for adapters); see `toolrun.server._events`."""

from toolrun.server._events import (
    ConfirmationRequired,
    JobFinished,
    JobProgress,
    RunError,
    RunFinished,
    RunStarted,
    ServiceEvent,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)

__all__ = [
    "ConfirmationRequired",
    "JobFinished",
    "JobProgress",
    "RunError",
    "RunFinished",
    "RunStarted",
    "ServiceEvent",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallStarted",
]
