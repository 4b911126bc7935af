"""`GET /`: the page (server-rendered HTML) and its few static files: ES modules and a style sheet.

No build step and no framework; every piece of model output, tool result and task field is put in the DOM
with `textContent`. The page's Content-Security-Policy allows scripts from this origin only (no inline
script, no `eval`), so markup that slipped through could still not run.
"""

from __future__ import annotations

import html
from functools import cache
from importlib import resources
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from toolrun.server._errors import ServiceError
from toolrun.server.deps import State

__all__ = ["CSP", "router"]

router = APIRouter(include_in_schema=False)

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; connect-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
"""The page's Content-Security-Policy."""

_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}

_STATIC = {
    "app.js": "text/javascript; charset=utf-8",
    "api.js": "text/javascript; charset=utf-8",
    "view.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}


@cache
def _asset(name: str) -> bytes:
    return resources.files("toolrun.server").joinpath("static", name).read_bytes()


@router.get("/", response_class=HTMLResponse)
async def page(request: Request, state: State) -> Any:
    """The page: sign in, conversations, chat, confirmations and the App's panel. `{root}` in the template
    is where the service is mounted (`""`, or a host's prefix such as `/assistant`), `{title}` the App's."""
    template = _asset("index.html").decode()
    body = (
        template.replace("{root}", html.escape(request.scope.get("root_path", "")))
        .replace("{title}", html.escape(state.app.title))
        .replace("{model}", html.escape(state.model_name))
        .replace("{demo_hidden}", "" if state.demo else "hidden")
        .replace("{demo}", "true" if state.demo else "false")
    )
    return HTMLResponse(body, headers=_HEADERS)


@router.get("/static/{name}")
async def static(name: str) -> Response:
    """The page's ES modules and style sheet."""
    media_type = _STATIC.get(name)
    if media_type is None:
        raise ServiceError(404, "not_found", "No such file.")
    return Response(_asset(name), media_type=media_type, headers=_HEADERS)
