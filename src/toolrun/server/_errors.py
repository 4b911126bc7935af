"""Errors at one edge: every failure leaves the service as `application/problem+json` (RFC 9457).

```json
{"type": "https://toolrun.dev/problems/not_found", "title": "Not found", "status": 404,
 "detail": "No conversation with that id.", "code": "not_found", "request_id": "req_…",
 "errors": [{"path": "body.approve", "loc": ["body", "approve"], "message": "Input should be a valid boolean",
             "type": "bool_type"}]}
```

Routes and the chat service raise `ServiceError` (or let FastAPI raise its validation error); the
handlers here build every error body. Another user's id and a missing id answer the same 404.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import Scope

__all__ = [
    "OVERLOADED",
    "PROBLEM_RESPONSES",
    "Problem",
    "ServiceError",
    "install_error_handlers",
    "problem_response",
]

logger = logging.getLogger("toolrun.server")

PROBLEM_TYPE = "https://toolrun.dev/problems/"
PROBLEM_JSON = "application/problem+json"


class FieldProblem(BaseModel):
    path: str = Field(description="The field, dotted: `body.approve`, `query.limit`.")
    loc: list[str | int]
    message: str
    type: str


class Problem(BaseModel):
    """An error response (RFC 9457 problem details)."""

    type: str
    title: str
    status: int
    detail: str
    code: str
    request_id: str | None = None
    errors: list[FieldProblem] | None = None


class ServiceError(Exception):
    """An error a route or the chat service reports to the client (turned into problem+json)."""

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        *,
        title: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail
        self.title = title or _TITLES.get(status, "Error")
        self.retry_after = retry_after
        """Seconds a client should wait before trying again (a `Retry-After` header on 503 and 429)."""


_TITLES = {
    400: "Bad request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Payload too large",
    415: "Unsupported media type",
    422: "Invalid request",
    429: "Too many requests",
    500: "Internal server error",
    503: "Service unavailable",
}
_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "too_many_requests",
    500: "internal_error",
    503: "unavailable",
}


def not_found(what: str) -> ServiceError:
    return ServiceError(404, "not_found", f"No {what} with that id.")


def problem_body(
    status: int,
    code: str,
    detail: str,
    *,
    title: str | None = None,
    request_id: str | None = None,
    errors: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": PROBLEM_TYPE + code,
        "title": title or _TITLES.get(status, "Error"),
        "status": status,
        "detail": detail,
        "code": code,
        "request_id": request_id,
    }
    if errors is not None:
        body["errors"] = errors
    return body


def problem_response(
    status: int,
    code: str,
    detail: str,
    *,
    title: str | None = None,
    request_id: str | None = None,
    errors: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(
        problem_body(status, code, detail, title=title, request_id=request_id, errors=errors),
        status_code=status,
        media_type=PROBLEM_JSON,
        headers=headers,
    )


def _request_id(request: Request) -> str | None:
    value = request.scope.get("state", {}).get("request_id")
    return value if isinstance(value, str) else None


def _field_errors(exc: RequestValidationError) -> list[dict[str, Any]]:
    out = []
    for err in exc.errors():
        loc = [p if isinstance(p, int) else str(p) for p in err.get("loc", ())]
        out.append(
            {
                "path": ".".join(str(p) for p in loc),
                "loc": loc,
                "message": str(err.get("msg", "invalid")),
                "type": str(err.get("type", "invalid")),
            }
        )
    return out


_UNREADABLE: dict[type[BaseException], str] = {
    UnicodeDecodeError: "it is not UTF-8 text",
    RecursionError: "it is nested too deeply",
}
"""Why FastAPI could not read a JSON body, by the exception behind its bare 400."""
_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def methods_taken(scope: Scope) -> list[str]:
    """The methods some route of the app takes at the request's path: each one tried against the routes'
    public `matches` (FastAPI's included routers answer it for the routes inside them)."""
    routes = getattr(getattr(scope.get("app"), "router", None), "routes", ())
    return [
        method
        for method in _METHODS
        if any(route.matches({**scope, "method": method})[0] == Match.FULL for route in routes)
    ]


def _allowed_methods(request: Request) -> list[str]:
    """`Allow` of a 405: the methods taken at the path, `HEAD` beside every `GET` (the request middleware
    answers it)."""
    allowed = methods_taken(request.scope)
    if "GET" in allowed and "HEAD" not in allowed:
        allowed.insert(allowed.index("GET") + 1, "HEAD")
    return allowed


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers that turn every error into problem+json."""

    async def service_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ServiceError)
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        if exc.retry_after is not None:
            headers = {"Retry-After": str(exc.retry_after)}
        return problem_response(
            exc.status,
            exc.code,
            exc.detail,
            title=exc.title,
            request_id=_request_id(request),
            headers=headers,
        )

    async def validation_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = _field_errors(exc)
        if any(e["type"] == "json_invalid" for e in errors):
            detail = "The request body is not valid JSON."
        else:
            first = errors[0] if errors else None
            detail = f"{first['path']}: {first['message']}" if first else "The request is invalid."
            if len(errors) > 1:
                detail += f" (and {len(errors) - 1} more)"
        return problem_response(
            422, "invalid_request", detail, request_id=_request_id(request), errors=errors
        )

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        status = exc.status_code
        code = _CODES.get(status, "error")
        detail = exc.detail if isinstance(exc.detail, str) else _TITLES.get(status, "Error")
        cause = exc.__cause__
        unreadable = _UNREADABLE.get(type(cause)) if status == 400 and cause is not None else None
        if unreadable is not None:
            # FastAPI answers a JSON body it cannot decode (not UTF-8, nested past Python's recursion
            # limit) with a bare 400 ("There was an error parsing the body"): the same problem as a body
            # that is not JSON, so it gets the same answer.
            return problem_response(
                422,
                "invalid_request",
                f"The request body is not valid JSON ({unreadable}).",
                request_id=_request_id(request),
                errors=[{"path": "body", "loc": ["body"], "message": unreadable, "type": "json_invalid"}],
            )
        if status == 404 and detail == "Not Found":
            detail = "There is nothing at this address."
        headers = dict(exc.headers) if exc.headers else None
        if status == 405:
            if detail == "Method Not Allowed":
                detail = "This address does not accept that method."
            # Starlette names only the first route that matched the path; one path can have several
            # routes (GET and DELETE of a conversation), so `Allow` lists the methods of all of them.
            allowed = _allowed_methods(request)
            if allowed:
                headers = {**(headers or {}), "Allow": ", ".join(allowed)}
        return problem_response(status, code, detail, request_id=_request_id(request), headers=headers)

    async def pool_timeout(request: Request, exc: Exception) -> JSONResponse:
        # No database connection came free within the pool's timeout: the process is past its capacity.
        # Shed the request like the admission limit does, rather than answer 500.
        logger.warning("database pool exhausted", extra={"event": "pool_timeout"})
        return problem_response(
            503,
            "overloaded",
            "The server is busier than its database connections allow; try again shortly.",
            request_id=_request_id(request),
            headers={"Retry-After": "1"},
        )

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        error_id = "err_" + secrets.token_hex(6)
        logger.error(
            "unhandled error",
            exc_info=(type(exc), exc, None),
            extra={"event": "unhandled_error", "error_id": error_id, "error": type(exc).__name__},
        )
        return problem_response(
            500,
            "internal_error",
            f"Something went wrong on the server (error id {error_id}).",
            request_id=_request_id(request),
        )

    app.add_exception_handler(ServiceError, service_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(PoolTimeout, pool_timeout)
    app.add_exception_handler(Exception, unexpected)


def problem_doc(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }


PROBLEM_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: problem_doc("Missing, unknown or revoked token."),
    404: problem_doc("No such resource for this user."),
    413: problem_doc("The request body is too large."),
    422: problem_doc("The request is invalid; `errors` names each field."),
}
"""Error responses every API route may give (documented in the OpenAPI schema)."""

OVERLOADED: dict[int | str, dict[str, Any]] = {
    503: problem_doc(
        "The process runs as many chats as `TOOLRUN_MAX_RUNS` allows (code `overloaded`), or is shutting "
        "down: try again after `Retry-After` seconds."
    )
}
"""The 503 of every route that starts a run (load shedding, `server/_admission.py`)."""
