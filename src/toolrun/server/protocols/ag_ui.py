"""AG-UI 1.0 over the agent's events, with the `ag-ui-protocol` package's types and SSE encoder.

```
RUN_STARTED
  TEXT_MESSAGE_START · TEXT_MESSAGE_CONTENT… · TEXT_MESSAGE_END
  TOOL_CALL_START · TOOL_CALL_ARGS · TOOL_CALL_END · TOOL_CALL_RESULT        one call at a time
RUN_FINISHED (outcome success | interrupt)   or   RUN_ERROR                  nothing after either
```

A call that needs a person's approval gets no `TOOL_CALL_RESULT`: the run ends with `RUN_FINISHED` whose
outcome is an interrupt per pending call (`reason` `"tool_call"`, `id` = the confirmation id, `toolCallId`,
a `responseSchema` for `{"approved": boolean}`, `expiresAt`, the call in `metadata`). The client answers in
the next request's `RunAgentInput.resume` (`read_resume`), and the resumed run emits the call's
`TOOL_CALL_RESULT` (no second `TOOL_CALL_START`), then the answer.

CopilotKit rejects a `TOOL_CALL_START` while another call is open, and the agent announces a turn's calls
before their results: `AGUIEncoder` queues them and lets the next one start only after the previous one's
result (or its interrupt) is known.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    Interrupt,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder

from toolrun.agent import (
    AgentEvent,
    AgentRun,
    ConfirmationRequired,
    RunFinished,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from toolrun.results import ToolResult
from toolrun.server.protocols._common import (
    DecisionError,
    call_arguments,
    call_arguments_text,
    result_payload,
    strict_decision,
)
from toolrun.tools import ToolCall

__all__ = [
    "APPROVAL_SCHEMA",
    "AGUIEncoder",
    "DecisionError",
    "last_user_message",
    "read_resume",
]

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approved": {"type": "boolean", "description": "true runs the call, false refuses it"}},
    "required": ["approved"],
    "additionalProperties": False,
}
"""What an interrupt of reason `tool_call` expects back in `ResumeEntry.payload`."""

_FINAL_ERRORS = {"failed", "max_steps", "deadline_exceeded", "budget_exceeded"}


def _now_ms() -> int:
    return int(time.time() * 1000)


def read_resume(entries: list[ResumeEntry] | None) -> dict[str, bool]:
    """The decisions in `RunAgentInput.resume`: `{interrupt id: approved}`.

    `resolved` needs `payload` `{"approved": true|false}` (a JSON boolean, nothing else); `cancelled` is a
    refusal. An interrupt answered twice in one request is refused too.

    Raises:
        DecisionError: a malformed entry; nothing may run then.
    """
    decisions: dict[str, bool] = {}
    for entry in entries or ():
        if entry.interrupt_id in decisions:
            raise DecisionError(f"Interrupt {entry.interrupt_id!r} is answered twice.")
        if entry.status == "cancelled":
            decisions[entry.interrupt_id] = False
            continue
        payload = entry.payload
        if not isinstance(payload, Mapping) or "approved" not in payload:
            raise DecisionError('A resolved tool_call interrupt needs payload {"approved": true|false}.')
        decisions[entry.interrupt_id] = strict_decision(payload["approved"], field="payload.approved")
    return decisions


def last_user_message(run_input: RunAgentInput) -> tuple[str, str] | None:
    """`(message id, text)` of the input's last message when it is the user's, else `None`.

    The client resends the whole conversation every time; only this last message can be new. Everything
    before it is the server's to know (the routes load the stored conversation, never this history).
    """
    if not run_input.messages:
        return None
    message = run_input.messages[-1]
    if getattr(message, "role", None) != "user":
        return None
    content = message.content
    if isinstance(content, str):
        text = content
    else:
        text = "\n".join(str(getattr(part, "text", "")) for part in content if getattr(part, "text", None))
    return message.id, text


class AGUIEncoder:
    """Turns one run's agent events into AG-UI SSE frames (`str`, ready to send).

    Args:
        thread_id: The conversation.
        run_id: This run (the client's `runId`).
        run_input: The request, echoed on `RUN_STARTED` (messages left out: the server's history counts).
        expires_at: Looks up when a pending confirmation expires (ISO 8601), from the server's record.
    """

    media_type = "text/event-stream"

    def __init__(
        self,
        *,
        thread_id: str,
        run_id: str,
        run_input: RunAgentInput | None = None,
        expires_at: Callable[[str], str | None] | None = None,
    ) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self._input = run_input
        self._expires_at = expires_at
        self._encoder = EventEncoder()
        self._text_id: str | None = None
        self._queue: list[ToolCall] = []
        self._current: str | None = None
        self._announced: set[str] = set()
        self._results: dict[str, ToolResult] = {}
        self._wrote_text = False
        self.finished = False

    # ------------------------------------------------------------------------------------------------

    def _encode(self, event: BaseEvent) -> str:
        if event.timestamp is None:
            event.timestamp = _now_ms()
        return self._encoder.encode(event)

    def run_started(self) -> str:
        """The first frame of every run."""
        echo = None
        if self._input is not None:
            echo = self._input.model_copy(update={"messages": []})
        return self._encode(
            RunStartedEvent(
                thread_id=self.thread_id, run_id=self.run_id, protocol_version=PROTOCOL_VERSION, input=echo
            )
        )

    def run_error(self, message: str, code: str | None = None) -> list[str]:
        """End the run with `RUN_ERROR` (closing an open text message first); nothing may follow."""
        if self.finished:
            return []
        frames = self._close_text()
        self.finished = True
        frames.append(self._encode(RunErrorEvent(message=message, code=code)))
        return frames

    def feed(self, event: AgentEvent) -> list[str]:
        """The frames for one agent event (often none or several)."""
        if self.finished:
            return []
        if isinstance(event, TextDelta):
            return self._text(event.text)
        if isinstance(event, ToolCallStarted):
            self._queue.append(event.call)
            return self._pump()
        if isinstance(event, ToolCallFinished):
            return self._finished(event.call, event.result)
        if isinstance(event, ConfirmationRequired):
            return []  # the interrupt goes on RUN_FINISHED, built from the run's pending list
        if isinstance(event, RunFinished):
            return self._run_finished(event.run)
        return []

    # ------------------------------------------------------------------------------------------------

    def _text(self, delta: str) -> list[str]:
        if not delta:
            return []
        frames: list[str] = []
        if self._text_id is None:
            self._text_id = f"msg_{uuid.uuid4().hex[:20]}"
            frames.append(self._encode(TextMessageStartEvent(message_id=self._text_id, role="assistant")))
        self._wrote_text = True
        frames.append(self._encode(TextMessageContentEvent(message_id=self._text_id, delta=delta)))
        return frames

    def _close_text(self) -> list[str]:
        if self._text_id is None:
            return []
        frame = self._encode(TextMessageEndEvent(message_id=self._text_id))
        self._text_id = None
        return [frame]

    def _pump(self) -> list[str]:
        """Open the next queued call when none is open, and settle calls whose result is known."""
        frames: list[str] = []
        while True:
            if self._current is not None:
                result = self._results.pop(self._current, None)
                if result is None:
                    return frames
                if result.status != "confirmation_required":
                    frames.append(self._result(self._current, result))
                self._current = None
            if not self._queue:
                return frames
            call = self._queue.pop(0)
            frames.extend(self._close_text())
            frames.extend(self._announce(call))
            self._current = call.id

    def _announce(self, call: ToolCall) -> list[str]:
        self._announced.add(call.id)
        return [
            self._encode(ToolCallStartEvent(tool_call_id=call.id, tool_call_name=call.name)),
            self._encode(ToolCallArgsEvent(tool_call_id=call.id, delta=call_arguments_text(call))),
            self._encode(ToolCallEndEvent(tool_call_id=call.id)),
        ]

    def _result(self, call_id: str, result: ToolResult) -> str:
        return self._encode(
            ToolCallResultEvent(
                message_id=f"result_{call_id}",
                tool_call_id=call_id,
                role="tool",
                content=json.dumps(result_payload(result), ensure_ascii=False, default=str),
            )
        )

    def _finished(self, call: ToolCall, result: ToolResult) -> list[str]:
        queued = any(c.id == call.id for c in self._queue)
        if call.id not in self._announced and not queued:
            # A resumed run: the call was announced by the run that paused; only its result is new.
            if result.status == "confirmation_required":
                return []
            frames = self._close_text()
            frames.append(self._result(call.id, result))
            return frames
        self._results[call.id] = result
        return self._pump()

    def _run_finished(self, run: AgentRun) -> list[str]:
        frames = self._pump()
        while self._queue or self._current is not None:  # a call whose result never came: close it
            if self._current is not None:
                self._current = None
            frames.extend(self._pump())
        if not self._wrote_text and run.output and run.status in ("completed", "needs_user_input"):
            frames.extend(self._text(run.output))
        frames.extend(self._close_text())
        if run.status in _FINAL_ERRORS:
            self.finished = True
            frames.append(self._encode(RunErrorEvent(message=run.error or run.status, code=run.status)))
            return frames
        outcome: RunFinishedInterruptOutcome | RunFinishedSuccessOutcome
        if run.status == "awaiting_confirmation" and run.pending:
            interrupts = [
                Interrupt(
                    id=p.confirmation_id,
                    reason="tool_call",
                    message=p.summary,
                    tool_call_id=p.call.id,
                    response_schema=APPROVAL_SCHEMA,
                    expires_at=self._expires_at(p.confirmation_id) if self._expires_at else None,
                    metadata={"tool": p.call.name, "arguments": call_arguments(p.call)},
                )
                for p in run.pending
            ]
            outcome = RunFinishedInterruptOutcome(interrupts=interrupts)
        else:
            outcome = RunFinishedSuccessOutcome()
        self.finished = True
        frames.append(
            self._encode(
                RunFinishedEvent(
                    thread_id=self.thread_id,
                    run_id=self.run_id,
                    outcome=outcome,
                    result={"status": run.status} if run.status != "completed" else None,
                )
            )
        )
        return frames
