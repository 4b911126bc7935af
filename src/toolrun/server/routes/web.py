"""`GET /`: the page (server-rendered HTML) and its static files: ES modules, a style sheet, and the
vendored libraries that render answers as Markdown (`static/vendor/README.md`: marked, DOMPurify,
highlight.js, pinned, with their licences).

No build step and no framework; tool results and task fields are put in the DOM with `textContent`, and an
answer's Markdown becomes markup only through DOMPurify (no raw HTML, no `javascript:` links). The page's
Content-Security-Policy allows scripts from this origin only (no inline script, no `eval`), so markup that
slipped through could still not run.
"""

from __future__ import annotations

import html
from functools import cache
from importlib import resources
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from toolrun.server._errors import ServiceError
from toolrun.server._text import MAX_MESSAGE_CHARS
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

_JS = "text/javascript; charset=utf-8"
_STATIC = {
    "app.js": _JS,
    "api.js": _JS,
    "view.js": _JS,
    "markdown.js": _JS,
    "style.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
    "vendor/marked.esm.js": _JS,
    "vendor/purify.es.mjs": _JS,
    "vendor/highlight/core.min.js": _JS,
    **{
        f"vendor/highlight/{language}.min.js": _JS
        for language in (
            [
                "bash",
                "css",
                "diff",
                "javascript",
                "json",
                "plaintext",
                "python",
                "shell",
                "sql",
                "typescript",
                "xml",
                "yaml",
            ]
        )
    },
}
"""Every file `/static/` serves (nothing else under the folder is reachable)."""


@cache
def _asset(name: str) -> bytes:
    return resources.files("toolrun.server").joinpath("static", *name.split("/")).read_bytes()


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
        .replace("{max_message}", str(MAX_MESSAGE_CHARS))
    )
    return HTMLResponse(body, headers=_HEADERS)


@router.get("/static/{name:path}")
async def static(name: str) -> Response:
    """The page's ES modules, style sheet and vendored libraries."""
    media_type = _STATIC.get(name)
    if media_type is None:
        raise ServiceError(404, "not_found", "No such file.")
    return Response(_asset(name), media_type=media_type, headers=_HEADERS)
