"""Service event sequences, as `toolrun.server`'s chat service yields them, for the adapters' tests."""

from __future__ import annotations

import json
from typing import Any

from toolrun.server.events import (
    ConfirmationRequired,
    RunError,
    RunFinished,
    RunStarted,
    ServiceEvent,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)

PENDING = {
    "confirmation_id": "conf_1",
    "tool": "delete_task",
    "arguments": {"task_id": "t0"},
    "summary": "delete_task(task_id='t0')",
    "expires_at": "2030-01-01T00:00:00Z",
    "run_id": "r1",
    "conversation_id": "c1",
}


def paused_run() -> list[ServiceEvent]:
    """One turn with two calls announced before their results (the second needs approval)."""
    return [
        RunStarted(run_id="r1", conversation_id="c1", model="demo", demo=True),
        ToolCallStarted(run_id="r1", call_id="c_add", tool="create_task", arguments={"title": "Buy milk"}),
        ToolCallStarted(run_id="r1", call_id="c_del", tool="delete_task", arguments={"task_id": "t0"}),
        ToolCallFinished(
            run_id="r1", call_id="c_add", tool="create_task", status="ok",
            result={"id": "t1", "title": "Buy milk"}, error=None, duration_ms=1.5,
        ),
        ToolCallFinished(
            run_id="r1", call_id="c_del", tool="delete_task", status="confirmation_required",
            result=None, error=None, duration_ms=0.2,
        ),
        ConfirmationRequired(run_id="r1", pending=dict(PENDING)),
        RunFinished(
            run_id="r1",
            response={"conversation_id": "c1", "run_id": "r1", "status": "awaiting_confirmation",
                      "output": None, "messages": [], "pending": [dict(PENDING)]},
        ),
    ]  # fmt: skip


def resumed_run(*, approved: bool) -> list[ServiceEvent]:
    """The same run after the decision: only the held call's result, then the answer."""
    if approved:
        finished = ToolCallFinished(
            run_id="r1", call_id="c_del", tool="delete_task", status="ok",
            result={"deleted": "t0"}, error=None, duration_ms=3.0,
        )  # fmt: skip
        answer = "Added t1 and deleted t0."
    else:
        error = {"code": "CONFIRMATION_DENIED", "message": "The user declined.", "retryable": False,
                 "recover_action": None, "details": {"reason": "denied"}}  # fmt: skip
        finished = ToolCallFinished(
            run_id="r1", call_id="c_del", tool="delete_task", status="error",
            result=None, error=error, duration_ms=0.1,
        )  # fmt: skip
        answer = "I did not delete t0."
    return [
        RunStarted(run_id="r1", conversation_id="c1", model="demo", demo=True, resumed=True),
        finished,
        TextDelta(run_id="r1", message_id="m1", text=answer[:5]),
        TextDelta(run_id="r1", message_id="m1", text=answer[5:]),
        RunFinished(
            run_id="r1",
            response={"conversation_id": "c1", "run_id": "r1", "status": "completed", "output": answer,
                      "messages": [], "pending": []},
        ),
    ]  # fmt: skip


def failed_run() -> list[ServiceEvent]:
    return [
        RunStarted(run_id="r2", conversation_id="c1", model="demo", demo=True),
        TextDelta(run_id="r2", message_id="m2", text="Let me"),
        RunError(run_id="r2", code="INTERNAL", message="The database went away."),
    ]


def sse_data(frames: list[str]) -> list[Any]:
    """The JSON of each `data:` frame (`[DONE]` kept as the string)."""
    out: list[Any] = []
    for frame in frames:
        assert frame.startswith("data: ") and frame.endswith("\n\n"), frame
        body = frame[len("data: ") : -2]
        out.append(body if body == "[DONE]" else json.loads(body))
    return out
