"""`GET /api/v1/conversations`, `GET|PATCH|DELETE /api/v1/conversations/{id}` (read, rename, delete), and
`POST /api/v1/conversations/{id}/stop` (stop the running turn: the page's Stop)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Path, Query, Response

from toolrun.server._errors import PROBLEM_RESPONSES, problem_doc
from toolrun.server.deps import Chat, CurrentUser
from toolrun.server.schemas import (
    ConversationDetail,
    ConversationList,
    ConversationRename,
    ConversationSummary,
    StopAccepted,
)

router = APIRouter(prefix="/api/v1", tags=["conversations"], responses=PROBLEM_RESPONSES)

ConversationId = Path(min_length=1, max_length=64)


@router.get("/conversations", response_model=ConversationList)
async def list_conversations(
    user: CurrentUser,
    chat: Chat,
    limit: int = Query(default=50, ge=1, le=200),
    offset: int = Query(default=0, ge=0, le=1_000_000),
) -> Any:
    """The user's conversations, most recently active first."""
    return {"conversations": await chat.list_conversations(user, limit=limit, offset=offset)}


@router.get("/conversations/{conversation_id}", response_model=ConversationDetail)
async def get_conversation(user: CurrentUser, chat: Chat, conversation_id: str = ConversationId) -> Any:
    """One conversation: its messages in order, its last run and pending confirmations."""
    return await chat.get_conversation(user, conversation_id)


@router.delete(
    "/conversations/{conversation_id}",
    status_code=204,
    response_class=Response,
    responses={409: problem_doc("A run is working on the conversation.")},
)
async def delete_conversation(
    user: CurrentUser, chat: Chat, conversation_id: str = ConversationId
) -> Response:
    """Delete a conversation with its messages, runs and pending confirmations."""
    await chat.delete_conversation(user, conversation_id)
    return Response(status_code=204)


@router.patch("/conversations/{conversation_id}", response_model=ConversationSummary)
async def rename_conversation(
    body: ConversationRename, user: CurrentUser, chat: Chat, conversation_id: str = ConversationId
) -> Any:
    """Rename a conversation (its title, trimmed; no line breaks)."""
    return await chat.rename_conversation(user, conversation_id, body.title)


@router.post(
    "/conversations/{conversation_id}/stop",
    status_code=202,
    response_model=StopAccepted,
    responses={409: problem_doc("Nothing is running in the conversation (`not_running`).")},
)
async def stop_conversation(user: CurrentUser, chat: Chat, conversation_id: str = ConversationId) -> Any:
    """Stop the conversation's running turn: the model stream is closed, a running tool cancelled, the
    answer so far kept and flagged `stopped`; the turn's stream ends with `run_finished` status `stopped`.
    Any process of the deployment may take the request (the running one sees it within a heartbeat)."""
    return await chat.stop(user, conversation_id)
