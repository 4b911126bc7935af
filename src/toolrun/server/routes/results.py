"""`GET /api/v1/results/{artifact_id}`: a stored tool result (an image, a file, or the whole text of a
result cut to fit an output budget), for the user whose call made it only (404 for anyone else)."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Path, Response

from toolrun.server._errors import PROBLEM_RESPONSES, not_found
from toolrun.server.deps import CurrentUser, State

router = APIRouter(prefix="/api/v1", tags=["results"], responses=PROBLEM_RESPONSES)

_INLINE = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


@router.get(
    "/results/{artifact_id}",
    response_class=Response,
    responses={
        200: {"content": {"application/octet-stream": {}, "text/plain": {}}, "description": "The bytes."}
    },
)
async def get_result(
    artifact_id: Annotated[str, Path(pattern=r"^art_[A-Za-z0-9_-]{1,64}$")], user: CurrentUser, state: State
) -> Response:
    """The stored result: the bytes of an image or file with its media type, or the text of a whole
    result. Images are shown inline; anything else is a download in a sandbox (a tool's HTML never runs
    on this origin)."""
    artifact = await state.executor.artifacts.get(artifact_id, user.user_id)
    if artifact is None:
        raise not_found("result")
    headers = {"X-Content-Type-Options": "nosniff", "Cache-Control": "private, max-age=300"}
    if artifact.data is None:
        return Response(artifact.text, media_type="text/plain; charset=utf-8", headers=headers)
    media = artifact.media_type or "application/octet-stream"
    if media not in _INLINE:
        name = quote(artifact.name or artifact_id)
        headers["Content-Disposition"] = f"attachment; filename*=UTF-8''{name}"
        headers["Content-Security-Policy"] = "sandbox"
    return Response(artifact.data, media_type=media, headers=headers)
