"""The Vercel AI SDK UI message stream v1 over the service's event stream (what `useChat` reads).

```
data: {"type":"start"}
data: {"type":"text-start","id":…} · {"type":"text-delta",…}… · {"type":"text-end",…}
data: {"type":"tool-input-start",…} · {"type":"tool-input-delta",…} · {"type":"tool-input-available",…}
data: {"type":"data-tool-progress","transient":true,…}                 progress while the call runs
data: {"type":"tool-output-available","preliminary":true,…}            a generator tool's result so far
data: {"type":"tool-output-available",…} | {"type":"tool-output-error",…} | {"type":"tool-output-denied",…}
data: {"type":"tool-approval-request","approvalId":…,"toolCallId":…}      a call that waits for a person
data: {"type":"finish","finishReason":…}
data: [DONE]
```

Responses carry the header `x-vercel-ai-ui-message-stream: v1` (`HEADERS`). A person's decision comes back
in the next request: the last (assistant) message's tool part in state `approval-responded` with
`approval: {"id", "approved"}` (`read_request`). `approved` must be a JSON boolean; the id is only a claim
until the route finds it in the server's pending record.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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
    is_denied,
    result_payload,
    strict_decision,
)

__all__ = ["DONE", "HEADERS", "AISDKEncoder", "AISDKRequest", "DecisionError", "read_request"]

HEADERS: dict[str, str] = {
    "cache-control": "no-cache",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
}
"""Headers of every UI message stream response (the media type is `text/event-stream`)."""

DONE = "data: [DONE]\n\n"

_FINISH_REASONS = {
    "completed": "stop",
    "needs_user_input": "stop",
    "awaiting_confirmation": "tool-calls",
    "failed": "error",
    "max_steps": "length",
    "budget_exceeded": "length",
    "deadline_exceeded": "other",
}


@dataclass(kw_only=True)
class AISDKRequest:
    """What a `useChat` request asks for, read without trusting any of it."""

    chat_id: str | None
    """The chat's id (`useChat`'s `id`): the conversation to continue, if it is this user's."""
    user_text: str | None = None
    """The new user message's text, when the last message is the user's."""
    user_message_id: str | None = None
    """Its id."""
    approvals: dict[str, bool] = field(default_factory=dict)
    """`{approval id: approved}` from tool parts in state `approval-responded` of the last message."""
    reasons: dict[str, str] = field(default_factory=dict)
    """`{approval id: reason}` for denials that carry the person's reason (`approval.reason`)."""
    user_texts: list[str] = field(default_factory=list)
    """The text of every user message the client sent (to compare with the stored conversation)."""
    trigger: str = "submit-message"
    """`submit-message` or `regenerate-message`."""


def _text_of(parts: Any) -> str:
    if not isinstance(parts, list):
        return ""
    texts = [p["text"] for p in parts if isinstance(p, Mapping) and p.get("type") == "text"]
    return "\n".join(t for t in texts if isinstance(t, str))


def read_request(body: Any) -> AISDKRequest:
    """Read a `DefaultChatTransport` request body: `{"id", "messages": [UIMessage...], "trigger", ...}`.

    Only the last message counts (the history the client resends is the server's to know): a user message
    is new input; an assistant message carries approval decisions.

    Raises:
        DecisionError: the body is malformed, or an approval's `approved` is not a JSON boolean.
    """
    if not isinstance(body, Mapping):
        raise DecisionError("The request body must be a JSON object.")
    chat_id = body.get("id")
    if chat_id is not None and not isinstance(chat_id, str):
        raise DecisionError("id must be a string.")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise DecisionError("messages must be a non-empty list of UI messages.")
    last = messages[-1]
    if not isinstance(last, Mapping):
        raise DecisionError("Each message must be an object.")
    trigger = body.get("trigger", "submit-message")
    request = AISDKRequest(chat_id=chat_id, trigger=trigger if isinstance(trigger, str) else "submit-message")
    request.user_texts = [
        _text_of(m.get("parts")) for m in messages if isinstance(m, Mapping) and m.get("role") == "user"
    ]
    role = last.get("role")
    if role == "user":
        request.user_text = _text_of(last.get("parts"))
        message_id = last.get("id")
        request.user_message_id = message_id if isinstance(message_id, str) else None
        return request
    if role != "assistant":
        raise DecisionError("The last message must be the user's or the assistant's.")
    for part in last.get("parts") or ():
        if not isinstance(part, Mapping) or part.get("state") != "approval-responded":
            continue
        kind = part.get("type")
        if not isinstance(kind, str) or not (kind.startswith("tool-") or kind == "dynamic-tool"):
            continue
        approval = part.get("approval")
        if not isinstance(approval, Mapping) or not isinstance(approval.get("id"), str):
            raise DecisionError("An approval-responded part needs approval.id.")
        approval_id = approval["id"]
        if approval_id in request.approvals:
            raise DecisionError(f"Approval {approval_id!r} is answered twice.")
        request.approvals[approval_id] = strict_decision(approval.get("approved"), field="approval.approved")
        reason = approval.get("reason")
        if isinstance(reason, str) and reason.strip() and not request.approvals[approval_id]:
            request.reasons[approval_id] = reason.strip()[:2000]
    return request


class AISDKEncoder:
    """Turns one run's service events into UI message stream frames (`str`, ready to send).

    Args:
        message_id: The assistant message's id for a new message; `None` continues the client's last
            assistant message (after an approval).
    """

    media_type = "text/event-stream"

    def __init__(self, *, message_id: str | None = None) -> None:
        self.message_id = message_id
        self._started = False
        self._text_id: str | None = None
        self._wrote_text = False
        self._calls = CallTracker()
        self.finished = False

    @staticmethod
    def _frame(part: dict[str, Any]) -> str:
        return f"data: {json_text(part)}\n\n"

    def start(self) -> list[str]:
        """The `start` part, once."""
        if self._started:
            return []
        self._started = True
        part: dict[str, Any] = {"type": "start"}
        if self.message_id is not None:
            part["messageId"] = self.message_id
        return [self._frame(part)]

    def error(self, message: str) -> list[str]:
        """End the stream with an error part (the client shows `errorText`), `finish` and `[DONE]`."""
        if self.finished:
            return []
        self.finished = True
        return [
            *self.start(),
            *self._close_text(),
            self._frame({"type": "error", "errorText": message}),
            self._frame({"type": "finish", "finishReason": "error"}),
            DONE,
        ]

    def feed(self, event: ServiceEvent) -> list[str]:
        """The frames for one service event."""
        if self.finished:
            return []
        frames = self.start()
        if isinstance(event, RunStarted):
            return frames
        if isinstance(event, TextDelta):
            frames.extend(self._text(event.text))
        elif isinstance(event, ToolCallStarted):
            frames.extend(self._close_text())
            frames.append(
                self._frame({"type": "tool-input-start", "toolCallId": event.call_id, "toolName": event.tool})
            )
            frames.append(
                self._frame(
                    {
                        "type": "tool-input-delta",
                        "toolCallId": event.call_id,
                        "inputTextDelta": arguments_text(event.arguments),
                    }
                )
            )
            frames.append(
                self._frame(
                    {
                        "type": "tool-input-available",
                        "toolCallId": event.call_id,
                        "toolName": event.tool,
                        "input": event.arguments,
                    }
                )
            )
        elif isinstance(event, JobProgress | JobFinished):
            # a background job's state (the jobs stream): a data part with the job's id, so a UI's part
            # for the job is replaced by each newer state (not transient: the last state stays)
            job = event.data()
            frames.append(self._frame({"type": "data-job", "id": str(job.get("id")), "data": job}))
        elif isinstance(event, ToolCallProgress):
            # a transient data part (`onData` on the client), one id per call so a UI can update in place
            data = event.data()
            data.pop("partial", None)  # it goes as the preliminary output below
            part = {
                "type": "data-tool-progress",
                "id": f"progress_{event.call_id}",
                "data": data,
                "transient": True,
            }
            frames.append(self._frame(part))
            if event.partial is not None:  # a generator's result so far: shown as the call's output
                frames.append(
                    self._frame(
                        {
                            "type": "tool-output-available",
                            "toolCallId": event.call_id,
                            "output": {"status": "running", "value": event.partial},
                            "preliminary": True,
                        }
                    )
                )
        elif isinstance(event, ToolCallFinished):
            self._calls.finished(event)
            frames.extend(self._tool_finished(event))
        elif isinstance(event, ConfirmationRequired):
            call_id = self._calls.confirmation(event)
            if call_id is not None:
                approval_id = str(event.pending.get("confirmation_id"))
                frames.append(  # what the person approves, for the UI to show beside the request
                    self._frame(
                        {
                            "type": "data-confirmation",
                            "id": approval_id,
                            "data": {
                                "approvalId": approval_id,
                                "toolCallId": call_id,
                                "preview": event.pending.get("preview") or event.pending.get("summary"),
                                "summary": event.pending.get("summary"),
                            },
                        }
                    )
                )
                frames.append(
                    self._frame(
                        {"type": "tool-approval-request", "approvalId": approval_id, "toolCallId": call_id}
                    )
                )
        elif isinstance(event, RunFinished):
            frames.extend(self._finish(event.response))
        elif isinstance(event, RunError):
            frames.extend(self.error(event.message))
        return frames

    def _tool_finished(self, event: ToolCallFinished) -> list[str]:
        if event.status == "confirmation_required":
            return []
        if is_denied(event):
            return [self._frame({"type": "tool-output-denied", "toolCallId": event.call_id})]
        if event.status == "error":
            error = event.error or {}
            text = f"{error.get('code', 'ERROR')}: {error.get('message', 'the tool failed')}"
            return [
                self._frame({"type": "tool-output-error", "toolCallId": event.call_id, "errorText": text})
            ]
        return [
            self._frame(
                {
                    "type": "tool-output-available",
                    "toolCallId": event.call_id,
                    "output": result_payload(event),
                }
            )
        ]

    def _text(self, delta: str) -> list[str]:
        if not delta:
            return []
        frames: list[str] = []
        if self._text_id is None:
            self._text_id = f"txt_{uuid.uuid4().hex[:16]}"
            frames.append(self._frame({"type": "text-start", "id": self._text_id}))
        self._wrote_text = True
        frames.append(self._frame({"type": "text-delta", "id": self._text_id, "delta": delta}))
        return frames

    def _close_text(self) -> list[str]:
        if self._text_id is None:
            return []
        frame = self._frame({"type": "text-end", "id": self._text_id})
        self._text_id = None
        return [frame]

    def _finish(self, response: Mapping[str, Any]) -> list[str]:
        status = str(response.get("status", "completed"))
        output = response.get("output")
        frames: list[str] = []
        if (
            not self._wrote_text
            and isinstance(output, str)
            and output
            and status in ("completed", "needs_user_input", "stopped")
        ):
            frames.extend(self._text(output))
        frames.extend(self._close_text())
        if status == "stopped":  # the person's Stop: an abort, as the SDK's own streams end one
            self.finished = True
            return [*frames, self._frame({"type": "abort", "reason": "stopped"}), DONE]
        if status not in ("completed", "needs_user_input", "awaiting_confirmation"):
            frames.append(self._frame({"type": "error", "errorText": str(response.get("error") or status)}))
        self.finished = True
        frames.append(self._frame({"type": "finish", "finishReason": _FINISH_REASONS.get(status, "other")}))
        frames.append(DONE)
        return frames
