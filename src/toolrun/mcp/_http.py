"""Streamable HTTP for a toolrun MCP server: a standalone ASGI app, or an endpoint mounted in your app.

```python
async def principal_for(token: str) -> ToolContext | None:      # your bearer tokens → principals
    user = await users.by_token(token)
    return ToolContext(user_id=user.id, roles=user.roles) if user else None

app = create_http_app(server, resolve_principal=principal_for)             # serves /mcp
endpoint = mount_mcp(fastapi_app, server, resolve_principal=principal_for)  # adds /mcp to your app
```

With a resolver every request needs `Authorization: Bearer <token>`; the resolver's `ToolContext` is the
principal of that request (roles, rate limits, confirmations, audit). No token or an unknown one → 401.
A session (`Mcp-Session-Id`) belongs to the principal that opened it; another principal presenting it
gets 404, as for an unknown session.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from toolrun.mcp._server import PRINCIPAL_SCOPE_KEY, REQUEST_PRINCIPAL
from toolrun.tools import ToolContext

__all__ = ["MCPHTTPEndpoint", "PrincipalResolver", "create_http_app", "mount_mcp"]

_logger = logging.getLogger("toolrun.mcp")

PrincipalResolver = Callable[[str], "Awaitable[ToolContext[Any] | None] | ToolContext[Any] | None"]
"""`(bearer token) -> ToolContext | None`, sync or async: the principal a token stands for, None to refuse."""

_SESSION_HEADER = b"mcp-session-id"
_MAX_OWNED_SESSIONS = 100_000


class MCPHTTPEndpoint:
    """The ASGI endpoint of an MCP server over Streamable HTTP, with bearer-token principals.

    Run `lifespan()` around serving (the app factories here do it for you).

    Args:
        server: The MCP server (`create_server(...)`).
        resolve_principal: Bearer token → `ToolContext` (or None to refuse). Without it, every request runs
            as the server's configured principal: only for trusted local use.
        stateless: A fresh transport per request (no sessions; no server-to-client requests on 2025
            protocol versions, so confirmations need a 2026-07-28 client there).
        json_response: Answer with JSON bodies instead of SSE streams (no progress notifications).
        allowed_hosts: Host headers accepted (DNS-rebinding protection), e.g. `["127.0.0.1:*"]`; None to
            accept any (behind your own proxy or app).
        allowed_origins: Origin headers accepted, with `allowed_hosts`.
    """

    def __init__(
        self,
        server: Server[Any],
        *,
        resolve_principal: PrincipalResolver | None = None,
        stateless: bool = False,
        json_response: bool = False,
        allowed_hosts: Sequence[str] | None = None,
        allowed_origins: Sequence[str] | None = None,
    ) -> None:
        security = None
        if allowed_hosts is not None:
            security = TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=list(allowed_hosts),
                allowed_origins=list(allowed_origins or ()),
            )
        self.server = server
        self.resolve_principal = resolve_principal
        self.session_manager = StreamableHTTPSessionManager(
            app=server, stateless=stateless, json_response=json_response, security_settings=security
        )
        self._owners: dict[str, str | None] = {}

    def lifespan(self) -> AbstractAsyncContextManager[None]:
        """The session manager's lifetime: enter it once, around serving."""
        return self.session_manager.run()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.resolve_principal is None:
            await self.session_manager.handle_request(scope, receive, send)
            return
        token = _bearer(scope)
        principal = await self._resolve(token) if token else None
        if principal is None:
            await _respond(send, 401, "unauthorized", "A valid bearer token is required.", bearer=True)
            return
        reset = REQUEST_PRINCIPAL.set(principal)
        try:
            await self._serve_as(principal, scope, receive, send)
        finally:
            REQUEST_PRINCIPAL.reset(reset)

    async def _serve_as(
        self, principal: ToolContext[Any], scope: Scope, receive: Receive, send: Send
    ) -> None:
        owner = principal.user_id
        session_id = _header(scope, _SESSION_HEADER)
        if session_id is not None:
            if session_id in self._owners and self._owners[session_id] != owner:
                await _respond(send, 404, "not_found", "Session not found.")
                return
            await self.session_manager.handle_request(
                {**scope, PRINCIPAL_SCOPE_KEY: principal}, receive, send
            )
            return

        async def send_and_own(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                for key, value in message.get("headers", ()):
                    if key.lower() == _SESSION_HEADER:
                        if len(self._owners) >= _MAX_OWNED_SESSIONS:
                            self._owners.pop(next(iter(self._owners)))
                        self._owners[value.decode("latin-1")] = owner
            await send(message)

        await self.session_manager.handle_request(
            {**scope, PRINCIPAL_SCOPE_KEY: principal}, receive, send_and_own
        )

    async def _resolve(self, token: str) -> ToolContext[Any] | None:
        assert self.resolve_principal is not None
        try:
            principal = self.resolve_principal(token)
            if inspect.isawaitable(principal):
                principal = await principal
        except Exception:  # a resolver failure refuses the request; its text stays in the log
            _logger.exception("The MCP principal resolver failed; the request is refused")
            return None
        return principal if isinstance(principal, ToolContext) else None


def create_http_app(
    server: Server[Any],
    *,
    resolve_principal: PrincipalResolver | None = None,
    path: str = "/mcp",
    stateless: bool = False,
    json_response: bool = False,
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] | None = None,
) -> Starlette:
    """A Starlette app serving `server` at `path` (see `MCPHTTPEndpoint` for the arguments)."""
    endpoint = MCPHTTPEndpoint(
        server,
        resolve_principal=resolve_principal,
        stateless=stateless,
        json_response=json_response,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with endpoint.lifespan():
            yield

    return Starlette(routes=[Route(path, endpoint=endpoint)], lifespan=lifespan)


def mount_mcp(
    app: Starlette,
    server: Server[Any],
    *,
    resolve_principal: PrincipalResolver | None,
    path: str = "/mcp",
    stateless: bool = False,
    json_response: bool = False,
) -> MCPHTTPEndpoint:
    """Serve `server` at `path` inside your Starlette or FastAPI `app`, principals from your bearer tokens.

    Adds the route and wraps the app's lifespan so the MCP session manager runs while the app does (a
    mounted sub-app's own lifespan would never run). Call it before the app starts.

    Args:
        app: Your application.
        server: The MCP server (`create_server(...)`).
        resolve_principal: Bearer token → `ToolContext` or None (401). Pass None explicitly to serve every
            request as the server's configured principal.
        path: Where to serve (default `/mcp`).
        stateless: See `MCPHTTPEndpoint`.
        json_response: See `MCPHTTPEndpoint`.
    """
    endpoint = MCPHTTPEndpoint(
        server, resolve_principal=resolve_principal, stateless=stateless, json_response=json_response
    )
    app.router.routes.append(Route(path, endpoint=endpoint))
    original = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(running: Any) -> AsyncIterator[Any]:
        async with endpoint.lifespan(), original(running) as state:
            yield state

    app.router.lifespan_context = lifespan
    return endpoint


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


def _bearer(scope: Scope) -> str | None:
    value = _header(scope, b"authorization")
    if value is None:
        return None
    scheme, _, token = value.partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


async def _respond(send: Send, status: int, code: str, message: str, *, bearer: bool = False) -> None:
    body = json.dumps({"error": code, "message": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if bearer:
        headers.append((b"www-authenticate", b'Bearer error="invalid_token"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
