"""One pure-ASGI middleware (no BaseHTTPMiddleware: it would buffer SSE): request ids, the body size
limit (413), `HEAD` answered as `GET` without the body, one log line and the metrics of every request."""

from __future__ import annotations

import secrets
import time
from typing import Any

from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolrun.server._errors import methods_taken, problem_body
from toolrun.server._observe import Observer

__all__ = ["RequestMiddleware"]


class _TooLarge(StarletteHTTPException):
    # An HTTPException, so that FastAPI passes it through when it is raised while it reads the body
    # (any other exception there becomes a 400), and the problem handler answers 413.
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"The request body is larger than {limit} bytes.")


class _HeadAnswered(Exception):
    """Raised into the app once a `HEAD` request has its status and headers: the body is not wanted."""


class RequestMiddleware:
    def __init__(self, app: ASGIApp, *, observer: Observer, max_body_bytes: int) -> None:
        self.app = app
        self.observer = observer
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        request_id = "req_" + secrets.token_hex(8)
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        status_holder = [500]
        started = [False]
        limit = self.max_body_bytes
        # Every GET route answers HEAD too (RFC 9110 9.3.2; FastAPI routes take only the methods they
        # name): the app sees a GET, the client gets its status and headers, and the app is stopped as
        # soon as they are sent (no body is produced for nobody). Apps that take HEAD themselves (the MCP
        # mount, static files) get it as it is.
        head = scope.get("method") == "HEAD" and _get_stands_for_head(scope)
        app_scope = {**scope, "method": "GET"} if head else scope

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                started[0] = True
                status_holder[0] = message["status"]
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode()))
                message = {**message, "headers": headers}
                if head:
                    await send(message)
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                    raise _HeadAnswered
            await send(message)

        try:
            declared = _content_length(scope)
            if declared is not None and declared > limit:
                raise _TooLarge(limit)
            received = 0

            async def receive_wrapper() -> Message:
                nonlocal received
                message = await receive()
                if message["type"] == "http.request":
                    received += len(message.get("body", b""))
                    if received > limit:
                        raise _TooLarge(limit)
                return message

            await self.app(app_scope, receive_wrapper, send_wrapper)
        except _HeadAnswered:
            pass
        except _TooLarge:
            if started[0]:
                raise
            await _send_problem(
                send_wrapper,
                413,
                "payload_too_large",
                f"The request body is larger than {limit} bytes.",
                request_id,
            )
        finally:
            route = scope.get("route")
            path = getattr(route, "path", None) or "unmatched"
            self.observer.request(
                method=scope.get("method", "?"),
                route=path,
                status=status_holder[0],
                seconds=time.perf_counter() - start,
                request_id=request_id,
                user_id=state.get("user_id"),
            )


def _get_stands_for_head(scope: Scope) -> bool:
    """Whether no route of the app takes this HEAD request but one takes it as a GET."""
    taken = methods_taken(scope)
    return "HEAD" not in taken and "GET" in taken


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _send_problem(send: Any, status: int, code: str, detail: str, request_id: str) -> None:
    import json

    body = json.dumps(problem_body(status, code, detail, request_id=request_id)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/problem+json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
