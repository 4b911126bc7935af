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

Sessions are bounded per user: a principal with `max_sessions_per_user` sessions open gets `429` (a JSON-RPC
error) when it tries to open another, while every other user can still open theirs. A session nobody used for
`session_idle_timeout` seconds is closed (its id then answers 404), which frees its place.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections import Counter
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
_INVALID_REQUEST = -32600

DEFAULT_MAX_SESSIONS_PER_USER = 16
"""Open sessions one principal may hold at once (`TOOLRUN_MCP_MAX_SESSIONS_PER_USER` in the service)."""
DEFAULT_SESSION_IDLE_TIMEOUT = 600.0
"""Seconds without any request after which a session is closed (`TOOLRUN_MCP_SESSION_IDLE_TIMEOUT`)."""
DEFAULT_MAX_SESSIONS = 10_000
"""Open sessions the endpoint holds in all (the server's capacity, shared by every user)."""


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
        max_sessions_per_user: Open sessions one principal may hold; one more gets 429 (only that principal
            is refused). None: no per-user limit. Applies with `resolve_principal` (without one, every
            request is the same principal and only `max_sessions` applies).
        session_idle_timeout: Seconds without a request (and without an open stream) after which a session
            is closed and its place freed. None: sessions live until the client deletes them.
        max_sessions: Open sessions in all, every user together; one more gets 503.
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
        max_sessions_per_user: int | None = DEFAULT_MAX_SESSIONS_PER_USER,
        session_idle_timeout: float | None = DEFAULT_SESSION_IDLE_TIMEOUT,
        max_sessions: int | None = DEFAULT_MAX_SESSIONS,
    ) -> None:
        if max_sessions_per_user is not None and max_sessions_per_user < 1:
            raise ValueError("max_sessions_per_user must be at least 1 (or None for no per-user limit)")
        security = None
        if allowed_hosts is not None:
            security = TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=list(allowed_hosts),
                allowed_origins=list(allowed_origins or ()),
            )
        self.server = server
        self.resolve_principal = resolve_principal
        self.max_sessions_per_user = max_sessions_per_user
        self.session_manager = StreamableHTTPSessionManager(
            app=server,
            stateless=stateless,
            json_response=json_response,
            security_settings=security,
            session_idle_timeout=session_idle_timeout,
            max_sessions=max_sessions,
        )
        if not isinstance(getattr(self.session_manager, "_server_instances", None), dict):
            # Which sessions are still open is read from the SDK manager's table (see `_open_sessions`);
            # an SDK without it would never free a place, so refuse to start instead.
            raise RuntimeError(
                "This version of the MCP SDK does not expose its open sessions; toolrun's per-user session "
                "limit needs mcp>=2.3,<3."
            )
        self._owners: dict[str, str | None] = {}
        """Session id → the user that opened it (sessions the manager has since closed are pruned lazily)."""
        self._opening: Counter[str | None] = Counter()
        """Requests without a session id being served now, per user: each may open a session."""

    def lifespan(self) -> AbstractAsyncContextManager[None]:
        """The session manager's lifetime: enter it once, around serving."""
        return self.session_manager.run()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope = _without_ows(scope)
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
        scope = {**scope, PRINCIPAL_SCOPE_KEY: principal}
        session_id = _header(scope, _SESSION_HEADER)
        if session_id is not None:
            if session_id in self._owners and self._owners[session_id] != owner:
                await _respond(send, 404, "not_found", "Session not found.")
                return
            await self.session_manager.handle_request(scope, receive, send)
            return
        if self.session_manager.stateless:
            await self.session_manager.handle_request(scope, receive, send)
            return
        limit = self.max_sessions_per_user
        held = self._open_sessions(owner) + self._opening[owner]  # no await since: concurrent opens count
        if limit is not None and held >= limit:
            _logger.warning("MCP session refused: user has %d open sessions (the limit)", limit)
            await _respond_jsonrpc(
                send,
                429,
                f"Too many open MCP sessions for this user (limit {limit}): end one (HTTP DELETE with its "
                "Mcp-Session-Id) or let an idle one expire, then retry.",
            )
            return

        opening = True

        def done_opening() -> None:
            nonlocal opening
            if opening:
                opening = False
                self._opening[owner] -= 1
                if not self._opening[owner]:
                    del self._opening[owner]

        async def send_and_own(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                for key, value in message.get("headers", ()):
                    if key.lower() == _SESSION_HEADER:
                        self._owners[value.decode("latin-1")] = owner
                done_opening()  # owned now (or refused): no longer counted as opening
            await send(message)

        self._opening[owner] += 1
        try:
            await self.session_manager.handle_request(scope, receive, send_and_own)
        finally:
            done_opening()

    def _open_sessions(self, owner: str | None) -> int:
        """How many sessions `owner` holds now; forgets the sessions the manager has closed meanwhile."""
        # The SDK manager discards a session when it ends (DELETE, idle timeout, crash) and tells no one:
        # its table of live transports is the only record of which sessions are still open.
        live = self.session_manager._server_instances
        for session_id in [sid for sid in self._owners if sid not in live]:
            del self._owners[session_id]
        return sum(1 for holder in self._owners.values() if holder == owner)

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


_OWS = b" \t"


def _without_ows(scope: Scope) -> Scope:
    """`scope` with its header values stripped of leading and trailing whitespace (RFC 9110 §5.5: a field's
    value excludes the OWS around it). uvicorn's h11 parser strips it, its httptools parser (the one
    `uvicorn[standard]` installs) passes it on, and the SDK compares `Mcp-Name` and `Mcp-Method` with the
    body as they come: `Mcp-Name: "  add  "` was refused under httptools (MCP conformance,
    `sep-2243-server-accepts-whitespace-header-value`)."""
    headers = scope["headers"]
    if not any(value[:1] in (b" ", b"\t") or value[-1:] in (b" ", b"\t") for _, value in headers):
        return scope
    return {**scope, "headers": [(name, value.strip(_OWS)) for name, value in headers]}


def create_http_app(
    server: Server[Any],
    *,
    resolve_principal: PrincipalResolver | None = None,
    path: str = "/mcp",
    stateless: bool = False,
    json_response: bool = False,
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] | None = None,
    max_sessions_per_user: int | None = DEFAULT_MAX_SESSIONS_PER_USER,
    session_idle_timeout: float | None = DEFAULT_SESSION_IDLE_TIMEOUT,
    max_sessions: int | None = DEFAULT_MAX_SESSIONS,
) -> Starlette:
    """A Starlette app serving `server` at `path` (see `MCPHTTPEndpoint` for the arguments)."""
    endpoint = MCPHTTPEndpoint(
        server,
        resolve_principal=resolve_principal,
        stateless=stateless,
        json_response=json_response,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
        max_sessions_per_user=max_sessions_per_user,
        session_idle_timeout=session_idle_timeout,
        max_sessions=max_sessions,
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
    max_sessions_per_user: int | None = DEFAULT_MAX_SESSIONS_PER_USER,
    session_idle_timeout: float | None = DEFAULT_SESSION_IDLE_TIMEOUT,
    max_sessions: int | None = DEFAULT_MAX_SESSIONS,
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
        max_sessions_per_user: See `MCPHTTPEndpoint`.
        session_idle_timeout: See `MCPHTTPEndpoint`.
        max_sessions: See `MCPHTTPEndpoint`.
    """
    endpoint = MCPHTTPEndpoint(
        server,
        resolve_principal=resolve_principal,
        stateless=stateless,
        json_response=json_response,
        max_sessions_per_user=max_sessions_per_user,
        session_idle_timeout=session_idle_timeout,
        max_sessions=max_sessions,
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


async def _respond_jsonrpc(send: Send, status: int, message: str) -> None:
    """A JSON-RPC error (id null: the request was refused before it was read) at an HTTP status."""
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": _INVALID_REQUEST, "message": message}}
    body = json.dumps(error).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _respond(send: Send, status: int, code: str, message: str, *, bearer: bool = False) -> None:
    body = json.dumps({"error": code, "message": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if bearer:
        headers.append((b"www-authenticate", b'Bearer error="invalid_token"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
