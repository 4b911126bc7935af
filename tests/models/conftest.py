from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from toolrun import Tool, ToolRegistry, tool
from toolrun.models import AnthropicModel, OpenAIModel, RetryPolicy

from .fakes import FakeServer

FAST_RETRY = RetryPolicy(max_retries=2, initial_delay=0.001, max_delay=0.05)


@pytest.fixture(scope="session")
def _server() -> Iterator[FakeServer]:
    server = FakeServer().start()
    yield server
    server.stop()


@pytest.fixture
def server(_server: FakeServer) -> Iterator[FakeServer]:
    _server.reset()
    yield _server
    _server.reset()


@contextlib.asynccontextmanager
async def _openai_factory(server: FakeServer, transport: str) -> AsyncIterator[Callable[..., OpenAIModel]]:
    models: list[OpenAIModel] = []

    def make(model_name: str = "gpt-4o-mini", **kwargs: Any) -> OpenAIModel:
        if "client" not in kwargs:
            kwargs.setdefault("transport", transport)
        kwargs.setdefault("base_url", server.url + "/v1")
        kwargs.setdefault("api_key", "sk-test")
        if "max_retries" not in kwargs:
            kwargs.setdefault("retry", FAST_RETRY)
        model = OpenAIModel(model_name, **kwargs)
        models.append(model)
        return model

    try:
        yield make
    finally:
        for model in models:
            await model.aclose()


@pytest.fixture(params=["aiohttp", "httpx", "sdk"])
async def make_openai(
    server: FakeServer, request: pytest.FixtureRequest
) -> AsyncIterator[Callable[..., OpenAIModel]]:
    """OpenAIModels on the fake server, once per transport: every OpenAI test runs against toolrun's own
    HTTP client (on aiohttp and on httpx) and the official SDK, so they stay interchangeable (same bodies,
    answers, errors)."""
    async with _openai_factory(server, request.param) as make:
        yield make


@pytest.fixture(params=["aiohttp", "httpx"])
async def make_openai_lean(
    server: FakeServer, request: pytest.FixtureRequest
) -> AsyncIterator[Callable[..., OpenAIModel]]:
    """OpenAIModels on toolrun's own client, once per transport it runs on (aiohttp, httpx)."""
    async with _openai_factory(server, request.param) as make:
        yield make


@pytest.fixture
async def make_openai_httpx(server: FakeServer) -> AsyncIterator[Callable[..., OpenAIModel]]:
    async with _openai_factory(server, "httpx") as make:
        yield make


@pytest.fixture
async def make_openai_aiohttp(server: FakeServer) -> AsyncIterator[Callable[..., OpenAIModel]]:
    async with _openai_factory(server, "aiohttp") as make:
        yield make


@pytest.fixture
async def make_openai_sdk(server: FakeServer) -> AsyncIterator[Callable[..., OpenAIModel]]:
    async with _openai_factory(server, "sdk") as make:
        yield make


@pytest.fixture
async def make_anthropic(server: FakeServer) -> AsyncIterator[Callable[..., AnthropicModel]]:
    models: list[AnthropicModel] = []

    def make(model_name: str = "claude-haiku-4-5", **kwargs: Any) -> AnthropicModel:
        kwargs.setdefault("base_url", server.url)
        kwargs.setdefault("api_key", "sk-ant-test")
        if "max_retries" not in kwargs:
            kwargs.setdefault("retry", FAST_RETRY)
        model = AnthropicModel(model_name, **kwargs)
        models.append(model)
        return model

    yield make
    for model in models:
        await model.aclose()


@tool
def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
    """Get the current weather for a city.

    Args:
        city: The city, e.g. "Paris".
        unit: "celsius" or "fahrenheit".
    """
    return {"city": city, "temp": 21}


@tool(name="tasks.create")
def create_task(title: str) -> dict[str, Any]:
    """Create a task with a title.

    Args:
        title: The task's title.
    """
    return {"id": "t1", "title": title}


@pytest.fixture
def tools() -> list[Tool]:
    return [get_weather, create_task]


@pytest.fixture
def registry(tools: list[Tool]) -> ToolRegistry:
    return ToolRegistry(tools)
