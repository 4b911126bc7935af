"""`POST /api/v1/ai-sdk`: the Vercel AI SDK UI message stream v1 (what `useChat` reads) over the service.

`useChat({transport: new DefaultChatTransport({api: "/api/v1/ai-sdk", headers: {Authorization}})})` with
`sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses` works unmodified, approvals
included. What the client sends is a claim; the server's records decide:

- new input is only the last message, when it is the user's and not a resend (`routes._threads`);
- a chat with a pending approval takes no new input (an `error` part; nothing runs);
- an `approval-responded` part must name an approval pending in this chat right now; a forged, replayed
  or another chat's id gets an `error` part and nothing runs; so does an `approved` that is not a JSON
  boolean.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from toolrun.server._errors import OVERLOADED, PROBLEM_RESPONSES, ServiceError
from toolrun.server._service import ChatService
from toolrun.server._users import Principal
from toolrun.server.deps import Chat, CurrentUser, admit_run
from toolrun.server.protocols.ai_sdk import HEADERS, AISDKEncoder, AISDKRequest, DecisionError, read_request
from toolrun.server.routes._threads import check_text, find_thread, open_thread
from toolrun.server.sse import FramesResponse

__all__ = ["router"]

logger = logging.getLogger("toolrun.server")

router = APIRouter(prefix="/api/v1", tags=["ai-sdk"], responses=PROBLEM_RESPONSES)


class ChatBody(BaseModel):
    """What `DefaultChatTransport` posts (other fields, e.g. from the transport's `body` option, are kept)."""

    model_config = ConfigDict(extra="allow")

    id: str | None = Field(default=None, max_length=200, description="The chat's id: your conversation.")
    messages: list[dict[str, Any]] = Field(
        min_length=1,
        description="The chat's UI messages; only the last one is read (new input or approvals).",
    )
    trigger: str = Field(
        default="submit-message", description="`submit-message` (`regenerate-message` is refused)."
    )
    messageId: str | None = Field(default=None, description="The message the request is about, if any.")


_STREAM: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "A UI message stream v1 (server-sent events; see docs/frontends.md).",
        "content": {"text/event-stream": {}},
    }
}


@router.post(
    "/ai-sdk",
    responses={**_STREAM, **OVERLOADED},
    dependencies=[Depends(admit_run)],
    summary="Run the assistant for a Vercel AI SDK useChat client",
)
async def ai_sdk_chat(body: ChatBody, user: CurrentUser, chat: Chat) -> Any:
    """`{"id", "messages": [UIMessage...], "trigger"}` in (DefaultChatTransport's body); a UI message stream
    out, with header `x-vercel-ai-ui-message-stream: v1`."""
    try:
        parsed = read_request(body.model_dump(exclude_unset=True))
    except DecisionError as exc:
        refusal = AISDKEncoder(message_id=f"msg_{secrets.token_hex(10)}")
        frames = refusal.error(f"{exc} Nothing ran.")
        return StreamingResponse(iter(frames), media_type=refusal.media_type, headers=dict(HEADERS))
    encoder = AISDKEncoder(message_id=None if parsed.approvals else f"msg_{secrets.token_hex(10)}")
    return FramesResponse(
        _frames(chat, user, parsed, encoder), media_type=encoder.media_type, headers=dict(HEADERS)
    )


async def _frames(
    chat: ChatService, user: Principal, parsed: AISDKRequest, encoder: AISDKEncoder
) -> AsyncIterator[str]:
    try:
        async for frame in _run(chat, user, parsed, encoder):
            yield frame
    except ServiceError as exc:
        for frame in encoder.error(exc.detail):
            yield frame
    except Exception:  # a bug or a store failure: the stream still ends with its terminal event
        error_id = "err_" + secrets.token_hex(6)
        logger.exception("AI SDK run failed (error_id=%s)", error_id)
        for frame in encoder.error(f"The run failed on the server (error id {error_id})."):
            yield frame


async def _run(
    chat: ChatService, user: Principal, parsed: AISDKRequest, encoder: AISDKEncoder
) -> AsyncIterator[str]:
    if parsed.trigger != "submit-message":
        for frame in encoder.error(
            "Only submit-message is supported; regenerating an answer is not. Nothing ran."
        ):
            yield frame
        return
    thread = await find_thread(chat, user, parsed.chat_id or secrets.token_hex(10))
    open_ids = {p["confirmation_id"] for p in thread.pending}

    if parsed.approvals:
        if set(parsed.approvals) - open_ids:
            message = (
                "No pending approval with that id in this chat: it was already decided, expired, or never "
                "existed. Nothing ran."
            )
            for frame in encoder.error(message):
                yield frame
            return
        items = list(parsed.approvals.items())
        for index, (confirmation_id, approved) in enumerate(items):
            handle = await chat.start_decision(
                user, confirmation_id, approve=approved, reason=parsed.reasons.get(confirmation_id)
            )
            last = index == len(items) - 1
            async for event in handle:
                if last or event.kind != "run_finished":
                    for frame in encoder.feed(event):
                        yield frame
        return

    if parsed.user_text is None:
        for frame in encoder.error("The last message must be the user's new message. Nothing ran."):
            yield frame
        return
    if open_ids:
        message = "This chat waits for your decision on an action; approve or deny it first. Nothing ran."
        for frame in encoder.error(message):
            yield frame
        return
    problem = check_text(parsed.user_text)
    if problem is not None:
        for frame in encoder.error(problem):
            yield frame
        return
    if thread.is_resend(parsed.user_texts):
        for frame in encoder.error("This chat already answered that message; send a new one. Nothing ran."):
            yield frame
        return
    await open_thread(chat, user, thread, parsed.user_text)
    handle = await chat.start_message(user, parsed.user_text, conversation_id=thread.conversation_id)
    async for event in handle:
        for frame in encoder.feed(event):
            yield frame
