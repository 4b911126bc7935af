"""`POST /api/v1/chat` (JSON) and `POST /api/v1/chat/stream` (SSE)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from toolrun.server._errors import OVERLOADED, PROBLEM_RESPONSES, problem_doc
from toolrun.server._responses import FastJSONResponse
from toolrun.server.deps import Chat, CurrentUser
from toolrun.server.schemas import ChatRequest, ChatResponse
from toolrun.server.sse import SSE_DOC, SSEResponse, sse_response

router = APIRouter(prefix="/api/v1", tags=["chat"], responses=PROBLEM_RESPONSES)

_CONFLICT: dict[int | str, dict[str, Any]] = {
    409: problem_doc("The conversation has a run working, or waits for a decision."),
    **OVERLOADED,
}


@router.post("/chat", response_model=ChatResponse, responses=_CONFLICT)
async def post_chat(body: ChatRequest, user: CurrentUser, chat: Chat) -> Any:
    """Send a message; answers when the run completes or pauses for a confirmation."""
    handle = await chat.start_message(user, body.message, conversation_id=body.conversation_id)
    # Built by the service, documented by response_model: sent as is, without validating it a second time.
    return FastJSONResponse(await handle.result())


@router.post("/chat/stream", response_class=SSEResponse, status_code=200, responses={**_CONFLICT, **SSE_DOC})
async def post_chat_stream(body: ChatRequest, user: CurrentUser, chat: Chat) -> Any:
    """Send a message; the run's events as they happen (`text/event-stream`)."""
    handle = await chat.start_message(user, body.message, conversation_id=body.conversation_id)
    return sse_response(handle)
