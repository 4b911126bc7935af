"""One model request under the run's limits, and a failed one described without its secrets.

The agent asks the model through here (`Agent._ask`, a hook `DurableAgent` extends): each request is
refused past `max_steps`, the deadline or `max_tokens` (`Stop`), time-boxed by what is left of the
deadline, and its response passes the model boundary (`_boundary.clean_response`, `TextCleaner` for
streamed text). A request that fails ends the run readable: `describe_failure` keeps the provider's message
(which can carry an API key or user text) in the log only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TYPE_CHECKING, Any, cast

from toolrun.agent._boundary import TextCleaner, clean_response
from toolrun.agent._events import AgentEvent, TextDelta
from toolrun.agent._run import AgentRun, RunErrorCode, RunStatus
from toolrun.exceptions import ToolrunError
from toolrun.models import (
    FinalResponse,
    ModelRequest,
    ModelResponse,
    ModelTextDelta,
    ProviderError,
    StreamEvent,
)
from toolrun.runtime._errors import new_error_id
from toolrun.runtime._logging import REDACTED, log_exception
from toolrun.tools import ToolContext

if TYPE_CHECKING:
    from toolrun.agent._agent import Agent

__all__ = ["Stop", "ask", "ask_quietly", "check_limits", "describe_failure"]

logger = logging.getLogger("toolrun.agent")


class Stop(Exception):
    """The run reached a limit while waiting on the model: `Agent._loop` ends it with this status."""

    def __init__(self, status: RunStatus, error: str) -> None:
        self.status = status
        self.error = error
        self.code = RunErrorCode.LIMIT_REACHED


def check_limits(agent: Agent, run: AgentRun, ctx: ToolContext[Any]) -> None:
    """Refuse another model request past `max_steps`, the deadline or `max_tokens` (`Stop`)."""
    if run.steps >= agent.max_steps:
        raise Stop("max_steps", f"Stopped after {run.steps} model requests (max_steps={agent.max_steps}).")
    if ctx.deadline is not None and time.time() >= ctx.deadline:
        raise Stop("deadline_exceeded", "The run's deadline passed before the answer.")
    if agent.max_tokens is not None and run.usage.total_tokens >= agent.max_tokens:
        raise Stop(
            "budget_exceeded", f"Spent {run.usage.total_tokens} tokens (max_tokens={agent.max_tokens})."
        )


async def ask(
    agent: Agent, run: AgentRun, ctx: ToolContext[Any], request: ModelRequest, *, streaming: bool
) -> AsyncIterator[AgentEvent | ModelResponse]:
    """One model request (streamed or not); yields text deltas, then the response itself."""
    if not streaming:
        yield await ask_quietly(agent, run, ctx, request)
        return
    check_limits(agent, run, ctx)
    run.steps += 1
    response: ModelResponse | None = None
    time_left = ctx.time_left
    cleaner = TextCleaner()
    room = agent.output_limits.max_text_chars
    try:
        async with (
            asyncio.timeout(time_left),
            contextlib.aclosing(
                cast(AsyncGenerator[StreamEvent, None], agent.model.stream(request))
            ) as events,
        ):
            async for event in events:
                if isinstance(event, ModelTextDelta):
                    text = cleaner.feed(event.text)[: max(room, 0)]
                    room -= len(text)
                    if text:
                        yield TextDelta(text=text, step=run.steps)
                elif isinstance(event, FinalResponse):
                    response = event.response
    except TimeoutError:
        raise Stop("deadline_exceeded", "The run's deadline passed while the model was answering.") from None
    if response is None:
        raise RuntimeError("The model's stream ended without a final response.")
    tail = cleaner.flush()[: max(room, 0)]
    if tail:
        yield TextDelta(text=tail, step=run.steps)
    run.usage += response.usage
    yield clean_response(response, agent.output_limits)


async def ask_quietly(
    agent: Agent, run: AgentRun, ctx: ToolContext[Any], request: ModelRequest
) -> ModelResponse:
    """One model request, not streamed, under the run's limits and deadline; the cleaned response."""
    check_limits(agent, run, ctx)
    run.steps += 1
    time_left = ctx.time_left
    try:
        if time_left is None:
            response = await agent.model.request(request)
        else:
            async with asyncio.timeout(time_left):
                response = await agent.model.request(request)
    except TimeoutError:
        raise Stop("deadline_exceeded", "The run's deadline passed while the model was answering.") from None
    run.usage += response.usage
    return clean_response(response, agent.output_limits)


def describe_failure(agent: Agent, run: AgentRun, exc: Exception) -> str:
    """Log a model or provider failure and describe it for `run.error` without its message.

    Provider messages can carry secrets (an API key echoed in a 401) and user text, and `run.error`
    travels to browsers and logs: like a tool's exception, the message is replaced by a marker and an
    error id that finds the logged traceback (messages are logged only with the executor's
    `log_exception_messages=True`). toolrun's own errors (a test script running out) keep theirs.
    """
    error_id = new_error_id()
    log_exception(
        logger,
        "agent run %s failed: %s (error_id=%s)",
        exc,
        run.run_id,
        type(exc).__name__,
        error_id,
        level=logging.WARNING,
        redact=not agent.executor.log_exception_messages,
        one_line=True,
    )
    name = type(exc).__name__
    if isinstance(exc, ToolrunError):
        return f"{name}: {exc}"
    if isinstance(exc, ProviderError):
        where = ", ".join(
            part
            for part in (
                exc.provider or None,
                f"HTTP {exc.status_code}" if exc.status_code is not None else None,
            )
            if part
        )
        name += f" ({where})" if where else ""
    return f"The model request failed: {name}: {REDACTED} (error id {error_id})."
