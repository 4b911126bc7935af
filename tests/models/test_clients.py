"""Client lifecycle and configuration: user-owned SDK clients, missing keys, timeouts, the retry policy."""

from __future__ import annotations

import email.utils
import threading
import time
from typing import Any

import anthropic
import openai
import pytest

from toolrun.models import (
    AnthropicModel,
    ModelRequest,
    ModelSettings,
    OpenAIModel,
    ProviderAuthError,
    ProviderRateLimitError,
    ProviderStreamError,
    ProviderUnavailableError,
    RetryPolicy,
    UserMessage,
)
from toolrun.models._errors import parse_retry_after

from .fakes import (
    ANTHROPIC_PATH,
    OPENAI_PATH,
    Reply,
    anthropic_message,
    openai_chunk,
    openai_completion,
    openai_stream,
    text_block,
)


def req(**settings: object) -> ModelRequest:
    return ModelRequest([UserMessage(content="hi")], settings=ModelSettings(**settings) if settings else None)  # type: ignore[arg-type]


async def test_user_openai_client_keeps_its_config_loses_its_retries_and_stays_open(server) -> None:
    client = openai.AsyncOpenAI(api_key="sk-user", base_url=server.url + "/v1", max_retries=5)
    try:
        model = OpenAIModel(
            "gpt-4o-mini", client=client, retry=RetryPolicy(max_retries=1, initial_delay=0.001)
        )
        server.reply(OPENAI_PATH, *[Reply(status=500, json={"error": {"message": "boom"}})] * 6)
        with pytest.raises(ProviderUnavailableError):
            await model.request(req())
        assert len(server.requests) == 2  # toolrun's one retry; none of the client's five
        assert server.requests[0].headers["authorization"] == "Bearer sk-user"
        await model.aclose()
        server.reset()
        server.reply(OPENAI_PATH, Reply(json=openai_completion("still open")))
        completion = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}]
        )
        assert completion.choices[0].message.content == "still open"
    finally:
        await client.close()


async def test_user_anthropic_client(server) -> None:
    client = anthropic.AsyncAnthropic(api_key="sk-ant-user", base_url=server.url, max_retries=5)
    try:
        model = AnthropicModel("claude-haiku-4-5", client=client, max_retries=0)
        server.reply(
            ANTHROPIC_PATH,
            *[
                Reply(
                    status=529,
                    json={"type": "error", "error": {"type": "overloaded_error", "message": "busy"}},
                )
            ]
            * 6,
        )
        with pytest.raises(ProviderUnavailableError):
            await model.request(req())
        assert len(server.requests) == 1
        server.reset()
        server.reply(ANTHROPIC_PATH, Reply(json=anthropic_message([text_block("ok")])))
        async with model:
            assert (await model.request(req())).text == "ok"
    finally:
        await client.close()


async def test_missing_openai_key_is_auth_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    async with OpenAIModel("gpt-4o-mini") as model:
        with pytest.raises(ProviderAuthError, match="api_key"):
            await model.request(req())


async def test_local_server_needs_no_key(server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.reply(OPENAI_PATH, Reply(json=openai_completion("local")))
    async with OpenAIModel("llama3.1", base_url=server.url + "/v1") as model:
        assert (await model.request(req())).text == "local"


async def test_missing_anthropic_key_is_auth_error(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no profile credentials either
    async with AnthropicModel("claude-haiku-4-5", base_url="http://127.0.0.1:9") as model:
        with pytest.raises(ProviderAuthError):
            await model.request(req())


async def test_timeout_is_retried_then_unavailable(server, make_openai) -> None:
    gate = threading.Event()
    server.reply(
        OPENAI_PATH,
        Reply(json=openai_completion("late"), gate=gate),
        Reply(json=openai_completion("late"), gate=gate),
    )
    try:
        with pytest.raises(ProviderUnavailableError, match="timed out"):
            await make_openai(retry=RetryPolicy(max_retries=1, initial_delay=0.001)).request(req(timeout=0.2))
        assert len(server.requests) == 2
    finally:
        gate.set()


async def test_stream_stalling_past_the_timeout_is_a_stream_error(server, make_openai) -> None:
    gate = threading.Event()
    chunks = [
        openai_chunk({"content": "a"}),
        openai_chunk({"content": "b"}),
        openai_chunk({}, finish_reason="stop"),
    ]
    server.reply(OPENAI_PATH, Reply(frames=openai_stream(chunks), gate=gate))
    try:
        with pytest.raises(ProviderStreamError) as info:
            _ = [e async for e in make_openai().stream(req(timeout=0.3))]
        assert info.value.partial is not None
        assert info.value.partial.text == "ab"  # frames 0 and 1 came before the stall
    finally:
        gate.set()


def test_parse_retry_after() -> None:
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"retry-after": "7"}) == 7
    assert parse_retry_after({"retry-after": "nonsense"}) is None
    assert parse_retry_after({}) is None
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 < (parse_retry_after({"retry-after": future}) or 0) <= 30


def test_retry_policy_delays() -> None:
    policy = RetryPolicy(initial_delay=1.0, multiplier=2.0, max_delay=5.0, jitter=0.5)
    for retry, top in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (9, 5.0)]:
        for _ in range(50):
            assert top / 2 <= policy.delay(retry) <= top
    limited = ProviderRateLimitError("slow", retry_after=3.0)
    assert policy.delay(1, limited) == 3.0
    assert policy.delay(1, ProviderRateLimitError("slow", retry_after=60)) == 5.0
    assert RetryPolicy(jitter=0, initial_delay=0.25).delay(1) == 0.25
    with pytest.raises(ValueError, match="jitter"):
        RetryPolicy(jitter=2)
    with pytest.raises(ValueError, match="jitter"):
        RetryPolicy(max_retries=-1)


async def test_retry_policy_call_retries_what_is_retryable_then_reraises() -> None:
    """`RetryPolicy.call`: 1 + `max_retries` attempts of a retryable failure, waiting `delay` between them;
    a failure that is not retryable, or asks to wait past `max_delay`, is raised at once; anything that is
    not a `ProviderError` goes straight through."""
    from toolrun.models import ProviderBadRequestError, ProviderUnavailableError

    policy = RetryPolicy(max_retries=2, initial_delay=0.001, jitter=0, max_delay=1.0)

    def failing(errors: list[BaseException], then: str = "ok") -> tuple[list[int], Any]:
        calls: list[int] = []

        async def attempt() -> str:
            calls.append(1)
            if len(calls) <= len(errors):
                raise errors[len(calls) - 1]
            return then

        return calls, attempt

    calls, attempt = failing([ProviderUnavailableError("down"), ProviderUnavailableError("down")])
    assert await policy.call(attempt) == "ok" and len(calls) == 3
    calls, attempt = failing([ProviderUnavailableError(f"down {n}") for n in range(3)])
    with pytest.raises(ProviderUnavailableError, match="down 2"):
        await policy.call(attempt)
    assert len(calls) == 3
    for error in (
        ProviderBadRequestError("bad"),
        ProviderRateLimitError("slow", retry_after=60),
        ValueError("not the provider's"),
    ):
        calls, attempt = failing([error])
        with pytest.raises(type(error)):
            await policy.call(attempt)
        assert len(calls) == 1
    calls, attempt = failing([ProviderRateLimitError("slow", retry_after=0.01)])
    assert await policy.call(attempt) == "ok" and len(calls) == 2


def test_a_retrying_model_call_needs_no_retry_library() -> None:
    """The retry loop is toolrun's own: a call that retries imports no tenacity (a fresh interpreter)."""
    import subprocess
    import sys

    code = (
        "import asyncio, sys\n"
        "from toolrun.models import ProviderUnavailableError, RetryPolicy\n"
        "calls = []\n"
        "async def attempt():\n"
        "    calls.append(1)\n"
        "    if len(calls) == 1:\n"
        "        raise ProviderUnavailableError('down')\n"
        "    return 'ok'\n"
        "assert asyncio.run(RetryPolicy(initial_delay=0.001).call(attempt)) == 'ok'\n"
        "print('tenacity' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
