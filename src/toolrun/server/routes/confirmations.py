"""`GET /api/v1/confirmations`, `POST /api/v1/confirmations/{id}` and its `/stream` variant, and
`POST /api/v1/confirmations/{id}/preview` (what an edit would do, before approving it)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Path

from toolrun.server._errors import OVERLOADED, PROBLEM_RESPONSES, problem_doc
from toolrun.server._responses import FastJSONResponse
from toolrun.server.deps import Chat, CurrentUser
from toolrun.server.schemas import ChatResponse, DecisionRequest, EditPreview, EditRequest, PendingList
from toolrun.server.sse import SSE_DOC, SSEResponse, sse_response

router = APIRouter(prefix="/api/v1", tags=["confirmations"], responses=PROBLEM_RESPONSES)

_CONFLICT: dict[int | str, dict[str, Any]] = {
    409: problem_doc("The conversation has a run working right now."),
    **OVERLOADED,
}
ConfirmationId = Path(min_length=1, max_length=64, description="From a pending item.")


@router.get("/confirmations", response_model=PendingList)
async def list_confirmations(user: CurrentUser, chat: Chat) -> Any:
    """The user's pending confirmations (not expired), oldest first."""
    return {"pending": await chat.pending(user)}


@router.post("/confirmations/{confirmation_id}", response_model=ChatResponse, responses=_CONFLICT)
async def decide(
    body: DecisionRequest, user: CurrentUser, chat: Chat, confirmation_id: str = ConfirmationId
) -> Any:
    """Approve (`{"approve": true}`, optionally with edited `arguments`) or deny (optionally with a
    `reason` for the model) a pending call; the run continues and answers like `/chat`."""
    handle = await chat.start_decision(
        user, confirmation_id, approve=body.approve, arguments=body.arguments, reason=body.reason
    )
    # Built by the service, documented by response_model: sent as is, without validating it a second time.
    return FastJSONResponse(await handle.result())


@router.post(
    "/confirmations/{confirmation_id}/stream",
    response_class=SSEResponse,
    status_code=200,
    responses={**_CONFLICT, **SSE_DOC},
)
async def decide_stream(
    body: DecisionRequest, user: CurrentUser, chat: Chat, confirmation_id: str = ConfirmationId
) -> Any:
    """Like `POST /confirmations/{id}`, streaming the continued run's events."""
    handle = await chat.start_decision(
        user, confirmation_id, approve=body.approve, arguments=body.arguments, reason=body.reason
    )
    return sse_response(handle)


@router.post("/confirmations/{confirmation_id}/preview", response_model=EditPreview)
async def preview_edit(
    body: EditRequest, user: CurrentUser, chat: Chat, confirmation_id: str = ConfirmationId
) -> Any:
    """What approving with edited arguments would do: validated (422 otherwise) and previewed from the
    server's records. Decides nothing; the confirmation stays pending."""
    return await chat.preview_edit(user, confirmation_id, body.arguments)
