"""AG-UI 1.0 over the service's event stream, with the `ag-ui-protocol` package's types and SSE encoder.

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
from collections.abc import Mapping
from typing import Any

from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    CustomEvent,
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
    TextPart,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UserMessage,
)
from ag_ui.encoder import EventEncoder

from toolrun.server._responses import json_text
from toolrun.server.events import (
    ConfirmationRequired,
    JobFinished,
    JobProgress,
    RunError,
    RunFinished,
    RunStarted,
    ServiceEvent,
    TextDelta,
    ToolCallFinished,
    ToolCallProgress,
    ToolCallStarted,
)
from toolrun.server.protocols._common import (
    CallTracker,
    DecisionError,
    arguments_text,
    result_payload,
    strict_decision,
)

__all__ = [
    "APPROVAL_SCHEMA",
    "AGUIEncoder",
    "DecisionError",
    "last_user_message",
    "read_resume",
    "read_resume_extras",
    "user_texts",
]

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean", "description": "true runs the call, false refuses it"},
        "arguments": {
            "type": "object",
            "description": "approving: the person's edited arguments (all of them), validated by the server",
        },
        "reason": {"type": "string", "maxLength": 2000, "description": "refusing: why, for the model"},
    },
    "required": ["approved"],
    "additionalProperties": False,
}
"""What an interrupt of reason `tool_call` expects back in `ResumeEntry.payload`."""

_ANSWERED = {"completed", "needs_user_input"}


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


def read_resume_extras(entries: list[ResumeEntry] | None) -> dict[str, dict[str, Any]]:
    """What a resume entry adds to its decision: `{interrupt id: {"arguments": ...} | {"reason": ...}}`
    (edited arguments when approving, the person's reason when refusing). Call after `read_resume`.

    Raises:
        DecisionError: `arguments` that are not an object, or a `reason` that is not text.
    """
    extras: dict[str, dict[str, Any]] = {}
    for entry in entries or ():
        payload = entry.payload
        if entry.status == "cancelled" or not isinstance(payload, Mapping):
            continue
        arguments, reason = payload.get("arguments"), payload.get("reason")
        if arguments is not None and not isinstance(arguments, Mapping):
            raise DecisionError("payload.arguments must be an object of the tool's arguments.")
        if reason is not None and not isinstance(reason, str):
            raise DecisionError("payload.reason must be text.")
        if payload.get("approved") is True and arguments is not None:
            extras[entry.interrupt_id] = {"arguments": dict(arguments)}
        elif payload.get("approved") is False and reason and reason.strip():
            extras[entry.interrupt_id] = {"reason": reason.strip()[:2000]}
    return extras


def _text(message: UserMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "\n".join(part.text for part in content if isinstance(part, TextPart))


def user_texts(run_input: RunAgentInput) -> list[str]:
    """The text of every user message the client sent, in order (to compare with the stored ones)."""
    return [_text(m) for m in run_input.messages if isinstance(m, UserMessage)]


def last_user_message(run_input: RunAgentInput) -> tuple[str, str] | None:
    """`(message id, text)` of the input's last message when it is the user's, else `None`.

    The client resends the whole conversation every time; only this last message can be new. Everything
    before it is the server's to know (the routes load the stored conversation, never this history).
    """
    if not run_input.messages or not isinstance(run_input.messages[-1], UserMessage):
        return None
    message = run_input.messages[-1]
    return message.id, _text(message)


class AGUIEncoder:
    """Turns one run's service events into AG-UI SSE frames (`str`, ready to send).

    Args:
        thread_id: The client's thread (the conversation).
        run_id: The client's `runId` for this run.
        run_input: The request, echoed on `RUN_STARTED` (messages left out: the server's history counts).
    """

    media_type = "text/event-stream"

    def __init__(self, *, thread_id: str, run_id: str, run_input: RunAgentInput | None = None) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self._input = run_input
        self._encoder = EventEncoder()
        self._started = False
        self._text_id: str | None = None
        self._queue: list[ToolCallStarted] = []
        self._current: str | None = None
        self._announced: set[str] = set()
        self._results: dict[str, ToolCallFinished] = {}
        self._calls = CallTracker()
        self._wrote_text = False
        self.finished = False

    # ------------------------------------------------------------------------------------------------

    def _encode(self, event: BaseEvent) -> str:
        if event.timestamp is None:
            event.timestamp = _now_ms()
        try:
            return self._encoder.encode(event)
        except ValueError:  # a string no UTF-8 takes (a tool's value, a client's echoed input): clean it
            data = event.model_dump(by_alias=True, exclude_none=True)
            return f"data: {json_text(data)}\n\n"

    def run_started(self) -> list[str]:
        """`RUN_STARTED`, once: the first frame of every run."""
        if self._started:
            return []
        self._started = True
        echo = None
        if self._input is not None:
            echo = self._input.model_copy(update={"messages": []})
        return [
            self._encode(
                RunStartedEvent(
                    thread_id=self.thread_id,
                    run_id=self.run_id,
                    protocol_version=PROTOCOL_VERSION,
                    input=echo,
                )
            )
        ]

    def run_error(self, message: str, code: str | None = None) -> list[str]:
        """End the run with `RUN_ERROR` (closing an open text message first); nothing may follow."""
        if self.finished:
            return []
        frames = [*self.run_started(), *self._close_text()]
        self.finished = True
        frames.append(self._encode(RunErrorEvent(message=message, code=code)))
        return frames

    def feed(self, event: ServiceEvent) -> list[str]:
        """The frames for one service event (often none or several)."""
        if self.finished:
            return []
        if isinstance(event, RunStarted):
            return self.run_started()
        frames = self.run_started()
        if isinstance(event, TextDelta):
            frames.extend(self._text(event.text))
        elif isinstance(event, ToolCallStarted):
            self._queue.append(event)
            frames.extend(self._pump())
        elif isinstance(event, JobProgress | JobFinished):
            # a background job's news (the jobs stream): a CUSTOM event named as toolrun's SSE event
            frames.append(self._encode(CustomEvent(name=event.kind, value=event.data())))
        elif isinstance(event, ToolCallProgress):
            # AG-UI has no progress event of its own: a CUSTOM event, named, carrying the report
            frames.append(self._encode(CustomEvent(name="tool_call_progress", value=event.data())))
        elif isinstance(event, ToolCallFinished):
            self._calls.finished(event)
            frames.extend(self._finished(event))
        elif isinstance(event, ConfirmationRequired):
            self._calls.confirmation(event)  # the interrupt itself goes on RUN_FINISHED
        elif isinstance(event, RunFinished):
            frames.extend(self._run_finished(event.response))
        elif isinstance(event, RunError):
            frames.extend(self.run_error(event.message, event.code))
        return frames

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
                    frames.append(self._result(result))
                self._current = None
            if not self._queue:
                return frames
            call = self._queue.pop(0)
            frames.extend(self._close_text())
            self._announced.add(call.call_id)
            frames += [
                self._encode(ToolCallStartEvent(tool_call_id=call.call_id, tool_call_name=call.tool)),
                self._encode(
                    ToolCallArgsEvent(tool_call_id=call.call_id, delta=arguments_text(call.arguments))
                ),
                self._encode(ToolCallEndEvent(tool_call_id=call.call_id)),
            ]
            self._current = call.call_id

    def _result(self, event: ToolCallFinished) -> str:
        return self._encode(
            ToolCallResultEvent(
                message_id=f"result_{event.call_id}",
                tool_call_id=event.call_id,
                role="tool",
                content=json.dumps(result_payload(event), ensure_ascii=False, default=str),
            )
        )

    def _finished(self, event: ToolCallFinished) -> list[str]:
        queued = any(c.call_id == event.call_id for c in self._queue)
        if event.call_id not in self._announced and not queued:
            # A resumed run: the run that paused announced the call; only its result is new here.
            if event.status == "confirmation_required":
                return []
            return [*self._close_text(), self._result(event)]
        self._results[event.call_id] = event
        return self._pump()

    def _run_finished(self, response: Mapping[str, Any]) -> list[str]:
        frames = self._pump()
        while self._queue or self._current is not None:  # a call whose result never came: close it
            self._current = None
            frames.extend(self._pump())
        status = str(response.get("status", "completed"))
        output = response.get("output")
        if not self._wrote_text and isinstance(output, str) and output and status in {*_ANSWERED, "stopped"}:
            frames.extend(self._text(output))
        frames.extend(self._close_text())
        if status not in _ANSWERED and status not in ("awaiting_confirmation", "stopped"):
            message = response.get("error") or f"The run stopped: {status}."
            frames.extend(self.run_error(str(message), status))
            return frames
        outcome: RunFinishedInterruptOutcome | RunFinishedSuccessOutcome = RunFinishedSuccessOutcome()
        pending = [p for p in response.get("pending") or () if isinstance(p, Mapping)]
        if status == "awaiting_confirmation" and pending:
            outcome = RunFinishedInterruptOutcome(interrupts=[self._interrupt(p) for p in pending])
        self.finished = True
        frames.append(
            self._encode(
                RunFinishedEvent(
                    thread_id=self.thread_id,
                    run_id=self.run_id,
                    outcome=outcome,
                    result={"status": status, "conversation_id": response.get("conversation_id")},
                )
            )
        )
        return frames

    def _interrupt(self, pending: Mapping[str, Any]) -> Interrupt:
        confirmation_id = str(pending.get("confirmation_id"))
        expires = pending.get("expires_at")
        return Interrupt(
            id=confirmation_id,
            reason="tool_call",
            message=str(pending.get("preview") or pending.get("summary") or f"Run {pending.get('tool')}?"),
            tool_call_id=self._calls.call_of.get(confirmation_id),
            response_schema=APPROVAL_SCHEMA,
            expires_at=str(expires) if expires is not None else None,
            metadata={
                "tool": pending.get("tool"),
                "arguments": pending.get("arguments"),
                "summary": pending.get("summary"),
                "preview": pending.get("preview"),
            },
        )
