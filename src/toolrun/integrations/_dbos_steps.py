"""The step helpers of durable runs (`toolrun.integrations.dbos`), and the model whose requests are steps.
Internal: import from `toolrun.integrations.dbos`."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, cast

import sqlalchemy as sa
from dbos import DBOS

from toolrun.models import FinalResponse, Model, ModelRequest, ModelResponse, ModelTextDelta, StreamEvent
from toolrun.results import ErrorCode, ToolResult
from toolrun.runtime import _errors

__all__ = [
    "ModelStepFailed",
    "StepModel",
    "idempotency_key",
    "in_workflow",
    "interrupted",
    "step",
    "sync_url",
]

_LOCAL_ERRORS: dict[str, BaseException] = {}


def sync_url(database_url: str) -> str:
    """The URL with the synchronous driver DBOS itself uses: psycopg 3 for PostgreSQL (the driver the
    `dbos` extra installs, named, not SQLAlchemy's default, which differs between its versions)."""
    url = sa.make_url(database_url)
    if url.drivername.startswith("postgresql"):
        url = url.set(drivername="postgresql+psycopg")
    elif url.drivername.startswith("sqlite"):
        url = url.set(drivername="sqlite")
    return url.render_as_string(hide_password=False)


def idempotency_key(run_id: str, call_id: str) -> str:
    """The idempotency key of one tool call of one run: the same on every retry of that call."""
    digest = hashlib.sha256(f"{run_id}\x00{call_id}".encode("utf-8", "surrogatepass")).hexdigest()
    return f"idem_{digest[:40]}"


def in_workflow() -> bool:
    """Whether this code runs as workflow code (in a workflow, not inside one of its steps)."""
    return DBOS.workflow_id is not None and DBOS.step_id is None


def interrupted(call_id: str, tool_name: str) -> ToolResult:
    """The result of a non-idempotent call whose process stopped while it ran: it is not run again."""
    return _errors.fail(
        call_id,
        tool_name,
        ErrorCode.TIMEOUT,
        f"The tool {tool_name!r} was interrupted before it finished (its process stopped). It may or may "
        "not have taken effect.",
        retryable=False,
        recover_action="Do not call it again blindly: check whether it took effect first, or ask the user.",
        details={"interrupted": True},
    )


async def step(reservation: Any, name: str, fn: Callable[[], Awaitable[Any]]) -> Any:
    """Run `fn` as a DBOS step named `name` (at a reserved step id when given one)."""
    if reservation is not None:
        return await reservation.run_async({"name": name}, fn)
    return await DBOS.run_step_async({"name": name}, fn)


# --------------------------------------------------------------------------------------------------------
# The model: each request a step


class StepModel:
    """A model whose requests are DBOS steps when made from workflow code (else the model itself)."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    async def request(self, request: ModelRequest) -> ModelResponse:
        if not in_workflow():
            return await self.inner.request(request)
        token = secrets.token_hex(8)

        async def ask() -> dict[str, Any]:
            try:
                return {"response": (await self.inner.request(request)).to_dict()}
            except Exception as exc:
                return _failed(token, exc)

        return _response(await step(None, "toolrun.model.request", ask), token)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        if not in_workflow():
            async with contextlib.aclosing(cast(Any, self.inner.stream(request))) as events:
                async for event in events:
                    yield event
            return
        # The step streams into a queue as the model answers; a replayed step (already recorded) puts
        # nothing there and only gives its response.
        token = secrets.token_hex(8)
        queue: asyncio.Queue[ModelTextDelta] = asyncio.Queue()

        async def ask() -> dict[str, Any]:
            try:
                response: ModelResponse | None = None
                async with contextlib.aclosing(cast(Any, self.inner.stream(request))) as events:
                    async for event in events:
                        if isinstance(event, ModelTextDelta):
                            queue.put_nowait(event)
                        elif isinstance(event, FinalResponse):
                            response = event.response
                if response is None:
                    raise RuntimeError("The model's stream ended without a final response.")
                return {"response": response.to_dict()}
            except Exception as exc:
                return _failed(token, exc)

        reservation = DBOS.reserve_step()
        task = asyncio.ensure_future(step(reservation, "toolrun.model.stream", ask))
        try:
            while not task.done():
                getter = asyncio.ensure_future(queue.get())
                await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    yield getter.result()
                else:
                    getter.cancel()
            while not queue.empty():
                yield queue.get_nowait()
            data = task.result()
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        yield FinalResponse(response=_response(data, token))


def _failed(token: str, exc: Exception) -> dict[str, Any]:
    """A failed model request, as its step records it (the exception itself stays in this process)."""
    _LOCAL_ERRORS[token] = exc
    return {"error": type(exc).__name__}


def _response(data: Mapping[str, Any], token: str) -> ModelResponse:
    if "response" in data:
        return ModelResponse.from_dict(data["response"])
    exc = _LOCAL_ERRORS.pop(token, None)
    if exc is not None:
        raise exc
    raise ModelStepFailed(str(data.get("error", "error")))


class ModelStepFailed(RuntimeError):
    """A model request that failed before the process stopped, replayed from its record (the original
    exception is gone with the process; the run ends `failed`, as it did the first time)."""
