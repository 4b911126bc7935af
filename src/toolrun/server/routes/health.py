"""`/healthz` (the process is up), `/readyz` (the database answers), `/metrics`, `/api/v1/me`."""

from __future__ import annotations

import hmac
from typing import Any

import sqlalchemy as sa
from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from toolrun.server._errors import PROBLEM_RESPONSES, ServiceError, problem_doc
from toolrun.server.deps import CurrentUser, State
from toolrun.server.schemas import Me

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: problem_doc("The database does not answer.")})
async def readyz(state: State) -> dict[str, str]:
    """The database answers."""
    try:
        async with state.engine.connect() as conn:
            await conn.execute(sa.text("SELECT 1"))
    except Exception:
        raise ServiceError(503, "database_unavailable", "The database does not answer.") from None
    return {"status": "ok"}


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {"content": {"text/plain": {}}},
        401: problem_doc("`TOOLRUN_METRICS_TOKEN` is set and the request does not carry it."),
        403: problem_doc("Metrics are not published: neither a token nor `TOOLRUN_METRICS_PUBLIC` is set."),
    },
)
async def metrics(state: State, request: Request) -> Response:
    """Prometheus metrics of this process: with `Authorization: Bearer TOKEN` when `TOOLRUN_METRICS_TOKEN`
    is set, to anyone when `TOOLRUN_METRICS_PUBLIC=true`, else to nobody (403)."""
    settings = state.settings
    if settings.metrics_token is not None:
        expected = ("Bearer " + settings.metrics_token.get_secret_value()).encode()
        # Read from the request, not declared as a parameter: the token is not part of the API's schema.
        given = request.headers.get("authorization", "").encode("utf-8", "surrogateescape")
        if not hmac.compare_digest(given, expected):
            raise ServiceError(
                401, "unauthorized", "Send the metrics token as `Authorization: Bearer TOKEN`."
            )
    elif not settings.metrics_public:
        raise ServiceError(
            403,
            "metrics_not_public",
            "Metrics are not published: set TOOLRUN_METRICS_TOKEN (scrapers send it as a bearer token) "
            "or TOOLRUN_METRICS_PUBLIC=true.",
        )
    return Response(generate_latest(state.observer.registry), media_type=CONTENT_TYPE_LATEST)


@router.get("/api/v1/me", response_model=Me, responses={401: PROBLEM_RESPONSES[401]})
async def me(user: CurrentUser, state: State) -> Any:
    """Who the token belongs to, and which model answers (`demo: true` for the offline demo model)."""
    return {
        "user_id": user.user_id,
        "name": user.name,
        "roles": list(user.roles),
        "model": {"name": state.model_name, "demo": state.demo},
    }
