"""`AgentRun`: everything one run produced, serialisable to JSON so a paused run can resume elsewhere."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from toolrun.models import Message, Usage, message_from_dict
from toolrun.results import ToolResult
from toolrun.tools import ToolCall

__all__ = ["AgentRun", "PendingConfirmation", "RunStatus", "ToolCallRecord"]

RunStatus = Literal[
    "running",
    "completed",
    "awaiting_confirmation",
    "needs_user_input",
    "max_steps",
    "deadline_exceeded",
    "budget_exceeded",
    "failed",
]
"""Where a run stands. Every status but `"running"` and `"awaiting_confirmation"` is final."""

SCHEMA_VERSION = 1


@dataclass(kw_only=True, slots=True)
class ToolCallRecord:
    """One tool call the model made in this run and what came of it."""

    call: ToolCall
    """The call, with the registered tool name."""
    result: ToolResult
    """Its result (for a call awaiting confirmation: the `confirmation_required` result)."""
    step: int
    """The model turn that made it (1-based)."""

    def to_dict(self) -> dict[str, Any]:
        return {"call": self.call.to_dict(), "result": self.result.to_dict(), "step": self.step}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCallRecord:
        return cls(
            call=ToolCall.from_dict(data["call"]),
            result=ToolResult.from_dict(data["result"]),
            step=data["step"],
        )


@dataclass(kw_only=True, slots=True)
class PendingConfirmation:
    """A call that waits for a person: approve or deny it by `confirmation_id` in `Agent.resume`."""

    confirmation_id: str
    """The id to pass in `approvals`."""
    call: ToolCall
    """The call that would run."""
    summary: str
    """What it would do, for the person deciding."""

    def to_dict(self) -> dict[str, Any]:
        return {"confirmation_id": self.confirmation_id, "call": self.call.to_dict(), "summary": self.summary}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PendingConfirmation:
        return cls(
            confirmation_id=data["confirmation_id"],
            call=ToolCall.from_dict(data["call"]),
            summary=data["summary"],
        )


@dataclass(kw_only=True)
class AgentRun:
    """The state and outcome of one agent run.

    A run that stops with `awaiting_confirmation` holds everything needed to continue it:
    `to_json()` it, and `Agent.resume(AgentRun.from_json(text), approvals={...})` later, in this process or
    another (the executor's confirmation store must be shared for approvals to be found there).
    """

    run_id: str = field(default_factory=lambda: f"run_{uuid.uuid4().hex[:20]}")
    """A unique id; also the default conversation id of tool contexts."""
    status: RunStatus = "running"
    """Where the run stands."""
    mode: Literal["native", "planner"] = "native"
    """Native tool calling, or a JSON plan for models without it."""
    messages: list[Message] = field(default_factory=list)
    """The conversation, system message first, as sent to the model."""
    output: str | None = None
    """The final answer (or the question for the user, with `needs_user_input`)."""
    steps: int = 0
    """Model turns taken."""
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    """Every tool call and its result, in order."""
    pending: list[PendingConfirmation] = field(default_factory=list)
    """Calls awaiting a person's decision (with `awaiting_confirmation`)."""
    batch: list[ToolCall] = field(default_factory=list)
    """The calls of the turn that paused, in the model's order (their results go back together)."""
    usage: Usage = field(default_factory=Usage)
    """Tokens spent, summed over every model request."""
    error: str | None = None
    """Why the run failed or stopped early, in words."""
    plan: dict[str, Any] | None = None
    """Planner mode: the validated plan."""
    state: dict[str, Any] = field(default_factory=dict)
    """The session state its tools saw (`ToolContext.state`): the context's own when it carried one, else
    the run's. Kept in the JSON (so it must be JSON-safe), and given back to tools on resume when the
    resuming context carries none: a plan made before a pause is still there after it."""

    @property
    def done(self) -> bool:
        """Whether the run has ended (nothing will continue it)."""
        return self.status not in ("running", "awaiting_confirmation")

    @property
    def results(self) -> list[ToolResult]:
        """Every tool result, in call order."""
        return [r.result for r in self.tool_calls]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "status": self.status,
            "mode": self.mode,
            "messages": [m.to_dict() for m in self.messages],
            "output": self.output,
            "steps": self.steps,
            "tool_calls": [r.to_dict() for r in self.tool_calls],
            "pending": [p.to_dict() for p in self.pending],
            "batch": [c.to_dict() for c in self.batch],
            "usage": self.usage.to_dict(),
            "error": self.error,
            "plan": self.plan,
            "state": self.state,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgentRun:
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ValueError(
                f"Cannot read an AgentRun of schema version {version!r} (expected {SCHEMA_VERSION})."
            )
        return cls(
            run_id=data["run_id"],
            status=data["status"],
            mode=data.get("mode", "native"),
            messages=[message_from_dict(m) for m in data["messages"]],
            output=data.get("output"),
            steps=data.get("steps", 0),
            tool_calls=[ToolCallRecord.from_dict(r) for r in data.get("tool_calls", ())],
            pending=[PendingConfirmation.from_dict(p) for p in data.get("pending", ())],
            batch=[ToolCall.from_dict(c) for c in data.get("batch", ())],
            usage=Usage.from_dict(data.get("usage") or {}),
            error=data.get("error"),
            plan=data.get("plan"),
            state=dict(data.get("state") or {}),
        )

    def to_json(self) -> str:
        """The run as JSON text. Raises `TypeError` naming the state key that is not JSON-safe."""
        try:
            return json.dumps(self.to_dict(), ensure_ascii=False)
        except (TypeError, ValueError):
            for key, value in self.state.items():
                try:
                    json.dumps(value)
                except (TypeError, ValueError) as exc:
                    raise TypeError(
                        f"AgentRun.state[{key!r}] is not JSON-safe ({exc}); a saved run keeps its state. "
                        "Keep handles and clients in ToolContext.deps, not in state."
                    ) from None
            raise

    @classmethod
    def from_json(cls, text: str | bytes) -> AgentRun:
        """A run from `to_json()` output."""
        return cls.from_dict(json.loads(text))
