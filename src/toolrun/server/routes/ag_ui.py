"""`POST /api/v1/ag-ui`: AG-UI 1.0 (`RunAgentInput` in, AG-UI events as SSE out) over the chat service.

What a client sends is a claim; the server's records decide:

- new input is only the last message, when it is the user's and not a resend of what the stored
  conversation already answered (`routes._threads`);
- a thread with an open interrupt takes no new input: `RUN_ERROR` (`INTERRUPT_OPEN`), nothing runs;
- `resume` entries must name interrupts open on this thread right now (the confirmation records):
  a stale, replayed, forged or another thread's id gets `RUN_ERROR` (`STALE_RESUME`) and nothing runs;
  `payload.approved` must be a JSON boolean (`INVALID_RESUME` otherwise).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator
from typing import Any

from ag_ui.core import RunAgentInput
from fastapi import APIRouter, Depends
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolrun.server._errors import OVERLOADED, PROBLEM_RESPONSES, ServiceError
from toolrun.server._service import ChatService
from toolrun.server._users import Principal
from toolrun.server.deps import Chat, CurrentUser, admit_run
from toolrun.server.protocols.ag_ui import (
    AGUIEncoder,
    DecisionError,
    last_user_message,
    read_resume,
    read_resume_extras,
    user_texts,
)
from toolrun.server.routes._threads import check_text, find_thread, open_thread
from toolrun.server.sse import FramesResponse

__all__ = ["router"]

logger = logging.getLogger("toolrun.server")

router = APIRouter(prefix="/api/v1", tags=["ag-ui"], responses=PROBLEM_RESPONSES)

_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


class RunEnvelope(BaseModel):
    """A `RunAgentInput` (AG-UI 1.0) as far as HTTP checks it; the rest is read with the `ag-ui-protocol`
    package's own model (`tools`, `context`, `state`, `forwardedProps`... are accepted and ignored)."""

    model_config = ConfigDict(extra="allow")

    threadId: str = Field(min_length=1, max_length=200, description="The thread: your conversation.")
    runId: str = Field(min_length=1, max_length=200, description="This run's id, echoed on its events.")
    messages: list[dict[str, Any]] = Field(
        description="The conversation so far; only the last message is read."
    )
    resume: list[dict[str, Any]] | None = Field(
        default=None,
        description='Answers to open interrupts: `{"interruptId", "status": "resolved", '
        '"payload": {"approved": true|false}}` or `"status": "cancelled"`.',
    )


_STREAM: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "AG-UI 1.0 events as server-sent events (see docs/frontends.md).",
        "content": {"text/event-stream": {}},
    }
}


@router.post(
    "/ag-ui",
    responses={**_STREAM, **OVERLOADED},
    dependencies=[Depends(admit_run)],
    summary="Run the assistant over AG-UI 1.0",
)
async def ag_ui_run(body: RunEnvelope, user: CurrentUser, chat: Chat) -> Any:
    """`RunAgentInput` in; an SSE stream of AG-UI events out. Confirmations are interrupts on
    `RUN_FINISHED`, answered with `RunAgentInput.resume` entries (`payload: {"approved": true|false}`).

    The envelope (`threadId`, `runId`, `messages`) is checked before the stream (422); anything else wrong
    with the input is a run that ends with `RUN_ERROR` (`INVALID_INPUT`), as AG-UI clients expect."""
    try:
        run_input = RunAgentInput.model_validate(body.model_dump(exclude_unset=True))
    except ValidationError as exc:
        where = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
        refusal = AGUIEncoder(thread_id=body.threadId, run_id=body.runId)
        frames = refusal.run_error(f"Not a valid RunAgentInput ({where}). Nothing ran.", "INVALID_INPUT")
        return StreamingResponse(iter(frames), media_type=refusal.media_type, headers=_HEADERS)
    encoder = AGUIEncoder(thread_id=run_input.thread_id, run_id=run_input.run_id, run_input=run_input)
    return FramesResponse(
        _frames(chat, user, run_input, encoder),
        media_type=encoder.media_type,
        headers=_HEADERS,
    )


async def _frames(
    chat: ChatService, user: Principal, run_input: RunAgentInput, encoder: AGUIEncoder
) -> AsyncIterator[str]:
    try:
        async for frame in _run(chat, user, run_input, encoder):
            yield frame
    except ServiceError as exc:
        for frame in encoder.run_error(exc.detail, exc.code.upper()):
            yield frame
    except Exception:  # a bug or a store failure: the stream still ends with its terminal event
        error_id = "err_" + secrets.token_hex(6)
        logger.exception("AG-UI run failed (error_id=%s)", error_id)
        message = f"The run failed on the server (error id {error_id})."
        for frame in encoder.run_error(message, "INTERNAL_ERROR"):
            yield frame


async def _run(
    chat: ChatService, user: Principal, run_input: RunAgentInput, encoder: AGUIEncoder
) -> AsyncIterator[str]:
    try:
        decisions = read_resume(run_input.resume)
        extras = read_resume_extras(run_input.resume)
    except DecisionError as exc:
        for frame in encoder.run_error(f"{exc} Nothing ran.", "INVALID_RESUME"):
            yield frame
        return
    thread = await find_thread(chat, user, run_input.thread_id)
    open_ids = {p["confirmation_id"] for p in thread.pending}

    if decisions:
        unknown = sorted(set(decisions) - open_ids)
        if unknown:
            message = (
                "No open interrupt with that id on this thread: it was already answered, expired, or never "
                "existed. Nothing ran."
            )
            for frame in encoder.run_error(message, "STALE_RESUME"):
                yield frame
            return
        items = list(decisions.items())
        for index, (confirmation_id, approved) in enumerate(items):
            handle = await chat.start_decision(
                user, confirmation_id, approve=approved, **extras.get(confirmation_id, {})
            )
            last = index == len(items) - 1
            async for event in handle:
                if last or event.kind not in ("run_finished", "run_started"):
                    for frame in encoder.feed(event):
                        yield frame
        return

    if open_ids:
        message = (
            "This thread waits for a decision on an interrupt; answer it with RunAgentInput.resume before "
            "sending new input. Nothing ran."
        )
        for frame in encoder.run_error(message, "INTERRUPT_OPEN"):
            yield frame
        return
    new = last_user_message(run_input)
    if new is None:
        for frame in encoder.run_error("The last message must be the user's new message.", "NO_INPUT"):
            yield frame
        return
    text = new[1]
    problem = check_text(text)
    if problem is not None:
        for frame in encoder.run_error(problem, "INVALID_MESSAGE"):
            yield frame
        return
    if thread.is_resend(user_texts(run_input)):
        message = "This thread already answered that message; send a new one. Nothing ran."
        for frame in encoder.run_error(message, "ALREADY_ANSWERED"):
            yield frame
        return
    await open_thread(chat, user, thread, text)
    handle = await chat.start_message(user, text, conversation_id=thread.conversation_id)
    async for event in handle:
        for frame in encoder.feed(event):
            yield frame
