"""Provider and model errors are redacted like tool errors on every path: the run, its events, the logs
(issue 7, item 5). A provider's error text can echo an API key (OpenAI's 401 does) or the user's text."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from toolrun import Agent, ToolExecutor, ToolRegistry
from toolrun.agent import RunFinished
from toolrun.models import (
    FunctionModel,
    ModelTextDelta,
    ProviderAuthError,
    ProviderStreamError,
    ScriptedModel,
)


class Everything(logging.Handler):
    """Every record at DEBUG and up, formatted with its traceback."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []
        self.formatter_ = logging.Formatter("%(name)s %(levelname)s %(message)s")

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(self.formatter_.format(record))
        self.texts.append(repr(vars(record)))

    def text(self) -> str:
        return "\n".join(self.texts)


@pytest.fixture
def logs() -> Iterator[Everything]:
    handler = Everything()
    root = logging.getLogger()
    old = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield handler
    root.removeHandler(handler)
    root.setLevel(old)


def secret() -> str:
    return f"sk-CANARY{uuid.uuid4().hex}"


class SDKError(Exception):
    """Stands for an SDK's own exception, kept as the provider error's cause."""


def auth_error(key: str) -> ProviderAuthError:
    try:
        raise SDKError(f"Incorrect API key provided: {key}")
    except SDKError as sdk:
        error = ProviderAuthError(f"Incorrect API key provided: {key}", provider="openai", status_code=401)
        error.__cause__ = sdk
        return error


async def collect(agent: Agent, streaming: bool) -> tuple[Any, list[Any]]:
    if streaming:
        events = [e async for e in agent.stream("hi")]
        finished = events[-1]
        assert isinstance(finished, RunFinished)
        return finished.run, events
    return await agent.run("hi"), []


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_provider_error_never_shows_its_message(logs: Everything, streaming: bool) -> None:
    key = secret()
    agent = Agent(ScriptedModel([auth_error(key)]), ToolRegistry())
    run, events = await collect(agent, streaming)
    assert run.status == "failed"
    error = run.error or ""
    assert key not in error and "CANARY" not in run.to_json()
    assert "ProviderAuthError" in error and "openai" in error and "HTTP 401" in error
    assert "error id err_" in error
    assert all("CANARY" not in repr(e) for e in events)
    assert "CANARY" not in logs.text()
    # The error id in the run finds the logged traceback.
    error_id = error.split("error id ")[1].rstrip(").")
    assert error_id in logs.text() and "ProviderAuthError" in logs.text()


@pytest.mark.parametrize("streaming", [False, True])
async def test_any_model_failure_is_redacted(logs: Everything, streaming: bool) -> None:
    key = secret()

    def broken(messages: list[Any], tools: list[Any]) -> str:
        raise RuntimeError(f"token={key}")

    run, _ = await collect(Agent(FunctionModel(broken), ToolRegistry()), streaming)
    assert run.status == "failed" and "RuntimeError" in (run.error or "")
    assert key not in (run.error or "") and key not in logs.text()


async def test_a_stream_that_breaks_off_is_redacted(logs: Everything) -> None:
    key = secret()

    async def pieces(messages: list[Any], tools: list[Any]) -> AsyncIterator[str | ModelTextDelta]:
        yield "Hello"
        raise ProviderStreamError(f"connection reset; request had api_key={key}", provider="anthropic")

    run, events = await collect(Agent(FunctionModel(stream_function=pieces), ToolRegistry()), True)
    assert run.status == "failed" and "ProviderStreamError (anthropic)" in (run.error or "")
    assert key not in (run.error or "") and key not in logs.text()
    assert all(key not in repr(e) for e in events)


async def test_messages_are_logged_only_when_the_executor_allows_it(logs: Everything) -> None:
    key = secret()
    registry = ToolRegistry()
    executor = ToolExecutor(registry, log_exception_messages=True)
    run = await Agent(ScriptedModel([auth_error(key)]), registry, executor=executor).run("hi")
    assert key in logs.text()  # development: the real exception in the log ...
    assert key not in (run.error or "")  # ... but never in the run, which travels to browsers


async def test_toolruns_own_errors_keep_their_words() -> None:
    run = await Agent(ScriptedModel([]), ToolRegistry()).run("hi")
    assert run.status == "failed" and "ran out of responses" in (run.error or "")
