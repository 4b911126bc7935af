"""`GET /api/v1/tools?format=...`: the tool definitions this user may use, in a provider's format."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Query

from toolrun.server._errors import PROBLEM_RESPONSES
from toolrun.server.deps import CurrentUser, State
from toolrun.server.schemas import ToolList
from toolrun.tools import ToolContext

router = APIRouter(prefix="/api/v1", tags=["tools"], responses=PROBLEM_RESPONSES)

Format = Literal["openai", "openai-responses", "anthropic", "gemini", "mcp"]


@router.get("/tools", response_model=ToolList)
async def list_tools(
    user: CurrentUser, state: State, format: Format = Query(default="openai"), strict: bool = False
) -> Any:
    """Tool definitions for the user's roles, as the chosen provider expects them."""
    view = state.registry.for_context(ToolContext(user_id=user.user_id, roles=user.roles))
    return {"format": format, "tools": view.definitions(format, strict=strict)}
