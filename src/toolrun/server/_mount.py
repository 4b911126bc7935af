"""`mount(host, app, prefix="/assistant", user=current_user)`: an App inside a team's own FastAPI app.

```python
from fastapi import FastAPI, Header, HTTPException
from toolrun.server import mount

host = FastAPI()

async def current_user(x_user: str = Header()) -> tuple[str, tuple[str, ...]]:   # your auth, as it is
    if x_user not in ACCOUNTS:
        raise HTTPException(401)
    return x_user, ACCOUNTS[x_user]          # (user id, roles), or a dict / object with user_id and roles

mount(host, notes_app, prefix="/assistant", user=current_user)
```

The App is served as a sub-application (FastAPI's "Sub Applications - Mounts") under `prefix`: the page,
the chat API, AG-UI, the AI SDK stream, tools, approvals, rules, jobs, results and `/mcp`, each asking the
host's dependency who the user is instead of toolrun's tokens. Its lifespan (stores, model client, MCP
sessions) runs inside the host's: a mounted app's own lifespan is never run by Starlette.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from fastapi import Depends, FastAPI, Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from toolrun.models import Model
from toolrun.server._app import create_app
from toolrun.server._apps import App
from toolrun.server._errors import ServiceError
from toolrun.server._settings import Settings
from toolrun.server._users import Principal
from toolrun.server.deps import get_current_user
from toolrun.tools import Tool, ToolContext

__all__ = ["mount"]

_HOST_PRINCIPAL: contextvars.ContextVar[ToolContext[Any] | None] = contextvars.ContextVar(
    "toolrun_host_principal", default=None
)


def _principal(who: Any) -> Principal | None:
    """The host dependency's answer as a `Principal`: a Principal, `(user_id, roles)`, a mapping or an
    object with `user_id` (and `roles`); None (or an empty id) means nobody is signed in."""
    if who is None or isinstance(who, Principal):
        return who
    if isinstance(who, tuple) and len(who) == 2:
        user_id, roles = who
    elif isinstance(who, Mapping):
        user_id, roles = who.get("user_id"), who.get("roles", ())
    else:
        user_id, roles = getattr(who, "user_id", None), getattr(who, "roles", ())
    if user_id is None or str(user_id) == "":
        return None
    if isinstance(roles, str):
        roles = (roles,)
    roles = tuple(str(r) for r in (roles or ()))
    return Principal(user_id=str(user_id), name=str(user_id), roles=roles)


def _current_user(user: Callable[..., Any]) -> Callable[..., Any]:
    async def current_user(request: Request, who: Any = Depends(user)) -> Principal:
        principal = _principal(who)
        if principal is None:
            raise ServiceError(401, "unauthorized", "Sign in first.")
        request.scope.setdefault("state", {})["user_id"] = principal.user_id
        return principal

    return current_user


class _ASGIDelegate(Response):
    """A route's response that hands the request to an ASGI app as it came (the MCP endpoint reads the body
    and writes its stream itself), with the principal the host's dependency gave."""

    def __init__(self, target: Any, principal: ToolContext[Any]) -> None:
        super().__init__()
        self.target = target
        self.principal = principal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The endpoint reads the principal from a bearer token; the host's auth has already named it.
        headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"authorization"]
        headers.append((b"authorization", b"Bearer host"))
        reset = _HOST_PRINCIPAL.set(self.principal)
        try:
            await self.target({**scope, "headers": headers}, receive, send)
        finally:
            _HOST_PRINCIPAL.reset(reset)


def _add_mcp(api: FastAPI, current_user: Callable[..., Any], settings: Settings) -> None:
    # Imported here: `toolrun.server` does not import `toolrun.mcp` at import time (it composes it).
    from toolrun.mcp import MCPHTTPEndpoint, create_server

    state = api.state.toolrun
    endpoint = MCPHTTPEndpoint(
        create_server(state.registry, executor=state.executor, name=state.app.title),
        resolve_principal=lambda _token: _HOST_PRINCIPAL.get(),
        max_sessions_per_user=settings.mcp_max_sessions_per_user,
        session_idle_timeout=settings.mcp_session_idle_timeout,
    )

    @api.api_route("/mcp", methods=["GET", "POST", "DELETE"], include_in_schema=False)
    async def mcp(user: Principal = Depends(current_user)) -> Response:
        return _ASGIDelegate(endpoint, ToolContext(user_id=user.user_id, roles=user.roles))

    original = api.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(running: Any) -> AsyncIterator[Any]:
        async with endpoint.lifespan(), original(running) as value:
            yield value

    api.router.lifespan_context = lifespan


def mount(
    host: FastAPI,
    app: App | str,
    *,
    prefix: str = "/assistant",
    user: Callable[..., Any],
    settings: Settings | None = None,
    model: Model | None = None,
    extra_tools: Sequence[Tool] = (),
) -> FastAPI:
    """Serve `app` inside `host` under `prefix`, its users from the host's own `user` dependency.

    Args:
        host: The team's FastAPI app (call before it starts: its lifespan is extended).
        app: The App (or its `module:attribute`).
        prefix: Where it is served (`/assistant`: the page at `/assistant/`, chat at
            `/assistant/api/v1/chat`, MCP at `/assistant/mcp`).
        user: A FastAPI dependency of the host (it may use `Depends`, headers, cookies) that returns who
            the request is for: `(user_id, roles)`, a mapping or object with `user_id` and `roles`, or
            a `Principal`; None refuses the request (401). It replaces toolrun's API tokens.
        settings: The service's settings (default: `Settings()` from the environment).
        model: A model instance instead of `settings.model`.
        extra_tools: Tools served next to the app's.

    Returns:
        The mounted app (its `state.toolrun` holds the executor, stores and chat service).
    """
    if not prefix.startswith("/") or prefix.endswith("/") or len(prefix) < 2:
        raise ValueError(f"prefix {prefix!r} must start with '/' and not end with one, e.g. '/assistant'.")
    chosen = settings if settings is not None else Settings()
    api = create_app(chosen, app=app, model=model, extra_tools=extra_tools)
    current_user = _current_user(user)
    api.dependency_overrides[get_current_user] = current_user
    _add_mcp(api, current_user, chosen)
    host.mount(prefix, api)
    outer = host.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(running: Any) -> AsyncIterator[Any]:
        async with outer(running) as value, api.router.lifespan_context(api):
            yield value

    host.router.lifespan_context = lifespan
    return api
