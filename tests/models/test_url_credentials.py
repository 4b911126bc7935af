"""A model URL with credentials (`openai-compatible:http://KEY@gateway:8000/v1:MODEL`, docs/service.md):
every transport reaches the server, sends the URL's userinfo as its authorization (HTTP Basic, as the SDK
transport, curl and browsers do), and keeps it out of the URL it requests. aiohttp refused a URL with
credentials beside an authorization header, so every run on that transport failed."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from toolrun.models import ModelRequest, UserMessage, infer_model
from toolrun.models.openai import OpenAIModel


class Gateway:
    """An OpenAI-compatible server on 127.0.0.1 that answers only requests carrying `expected`."""

    def __init__(self, expected: str) -> None:
        self.expected = expected
        self.seen: list[tuple[str | None, str]] = []

    async def handle(self, request: web.Request) -> web.Response:
        auth = request.headers.get("Authorization")
        self.seen.append((auth, str(request.url)))
        if auth != self.expected:
            return web.json_response({"error": {"message": "bad credentials"}}, status=401)
        return web.json_response(
            {
                "id": "c1",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [
                    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}
                ],
            }
        )


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture
async def serve() -> AsyncIterator[object]:
    runners: list[web.AppRunner] = []

    async def start(gateway: Gateway) -> int:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", gateway.handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        return int(runner.addresses[0][1])

    yield start
    for runner in runners:
        await runner.cleanup()


@pytest.mark.parametrize("transport", ["aiohttp", "httpx", "sdk"])
@pytest.mark.parametrize(
    ("userinfo", "user", "password"),
    [("sk-gateway-key", "sk-gateway-key", ""), ("team:s%40cret", "team", "s@cret")],
)
async def test_a_url_with_credentials_authenticates_on_every_transport(
    serve: object, transport: str, userinfo: str, user: str, password: str
) -> None:
    gateway = Gateway(basic(user, password))
    port = await serve(gateway)  # type: ignore[operator]
    model = infer_model(f"openai-compatible:http://{userinfo}@127.0.0.1:{port}/v1:m", transport=transport)
    assert isinstance(model, OpenAIModel)
    try:
        response = await model.request(ModelRequest(messages=[UserMessage(content="hello")]))
    finally:
        await model.aclose()
    assert response.text == "hi"
    assert [auth for auth, _ in gateway.seen] == [basic(user, password)]
    assert all(userinfo not in url for _, url in gateway.seen)
    assert userinfo not in model.name and model.name.endswith(f"127.0.0.1:{port}/v1:m")


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
async def test_the_url_credentials_replace_the_api_key_header(serve: object, transport: str) -> None:
    """One authorization per request: the URL's (as the SDK transport sends), never two."""
    gateway = Gateway(basic("KEY", ""))
    port = await serve(gateway)  # type: ignore[operator]
    model = OpenAIModel(
        "m", base_url=f"http://KEY@127.0.0.1:{port}/v1", api_key="placeholder", transport=transport
    )
    try:
        await model.request(ModelRequest(messages=[UserMessage(content="hello")]))
    finally:
        await model.aclose()
    assert [auth for auth, _ in gateway.seen] == [basic("KEY", "")]
