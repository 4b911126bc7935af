"""`GET /api/v1/app` (the App's face: title, intro, starters, panel) and `GET /api/v1/app/panel` (the
panel's read-only tool run for the signed-in user through the executor, the same gates as any call).

The page renders what these say; nothing about one app lives in the server's code.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from fastapi import APIRouter

from toolrun.server._errors import PROBLEM_RESPONSES, ServiceError
from toolrun.server.deps import CurrentUser, State
from toolrun.server.schemas import AppFace, PanelResult
from toolrun.tools import ToolCall, ToolContext

router = APIRouter(prefix="/api/v1", tags=["app"], responses=PROBLEM_RESPONSES)


@router.get("/app", response_model=AppFace)
async def app_face(state: State) -> Any:
    """What the page shows of the App: its title, intro, starters and panel (no sign-in needed: it is the
    page's face, the same for everyone)."""
    served = state.app
    panel = served.panel
    return {
        "name": served.name,
        "title": served.title,
        "intro": served.intro,
        "starters": list(served.starters),
        "panel": None if panel is None else {"title": panel.title, "tool": panel.tool},
        "demo": state.demo,
    }


@router.get("/app/panel", response_model=PanelResult)
async def app_panel(user: CurrentUser, state: State) -> Any:
    """The panel's tool, run with no arguments for this user (its result as any call's: `status`, `value`,
    `error`); 404 when the App has no panel."""
    panel = state.app.panel
    if panel is None:
        raise ServiceError(404, "not_found", f"The app {state.app.name!r} has no panel.")
    context = ToolContext(
        user_id=user.user_id,
        roles=user.roles,
        deadline=time.time() + state.settings.run_timeout,
    )
    call = ToolCall(id=f"panel_{uuid.uuid4().hex[:16]}", name=panel.tool, arguments="{}")
    result = await state.executor.execute(call, context)
    body = result.to_dict()
    return {
        "title": panel.title,
        "tool": panel.tool,
        "status": body["status"],
        "value": body.get("value"),
        "error": body.get("error"),
    }
