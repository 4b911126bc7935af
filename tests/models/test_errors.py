"""HTTP failures map to the ProviderError family, at one boundary, for both clients; transient ones retry."""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from toolrun.models import (
    ModelRequest,
    ProviderAuthError,
    ProviderBadRequestError,
    ProviderError,
    ProviderRateLimitError,
    ProviderResponseError,
    ProviderUnavailableError,
    RetryPolicy,
    UserMessage,
)

from .fakes import (
    ANTHROPIC_PATH,
    OPENAI_PATH,
    Reply,
    anthropic_error,
    anthropic_message,
    openai_completion,
    openai_error,
    text_block,
)


@dataclass
class Provider:
    name: str
    path: str
    error: Callable[..., dict[str, Any]]
    ok: Callable[[str], dict[str, Any]]
    factory: str


PROVIDERS = [
    Provider("openai", OPENAI_PATH, openai_error, lambda t: openai_completion(t), "make_openai_httpx"),
    Provider("openai-sdk", OPENAI_PATH, openai_error, lambda t: openai_completion(t), "make_openai_sdk"),
    Provider(
        "anthropic",
        ANTHROPIC_PATH,
        anthropic_error,
        lambda t: anthropic_message([text_block(t)]),
        "make_anthropic",
    ),
]


@pytest.fixture(params=PROVIDERS, ids=[p.name for p in PROVIDERS])
def provider(request: pytest.FixtureRequest) -> Provider:
    return request.param


@pytest.fixture
def make(provider: Provider, request: pytest.FixtureRequest) -> Callable[..., Any]:
    return request.getfixturevalue(provider.factory)


def req() -> ModelRequest:
    return ModelRequest([UserMessage(content="hi")])


async def test_401_is_auth_error_and_not_retried(server, provider, make) -> None:
    server.reply(
        provider.path, Reply(status=401, json=provider.error("Incorrect API key provided: sk-te***st."))
    )
    with pytest.raises(ProviderAuthError) as info:
        await make().request(req())
    assert info.value.status_code == 401
    assert info.value.provider == provider.name.removesuffix("-sdk")
    assert info.value.message == "Incorrect API key provided: sk-te***st."
    assert info.value.__cause__ is not None  # the SDK's exception, kept for debugging
    assert len(server.requests) == 1


async def test_403_is_auth_error(server, provider, make) -> None:
    server.reply(
        provider.path, Reply(status=403, json=provider.error("not allowed", type="permission_error"))
    )
    with pytest.raises(ProviderAuthError):
        await make().request(req())


async def test_400_carries_the_provider_message_and_is_not_retried(server, provider, make) -> None:
    message = "Invalid 'messages[1].content': string too long. Expected a string with maximum length 1048576."
    server.reply(provider.path, Reply(status=400, json=provider.error(message)))
    with pytest.raises(ProviderBadRequestError) as info:
        await make().request(req())
    assert info.value.message == message
    assert message in str(info.value)
    assert info.value.retryable is False
    assert len(server.requests) == 1


async def test_404_unknown_model_is_bad_request(server, provider, make) -> None:
    server.reply(
        provider.path, Reply(status=404, json=provider.error("model: nope not found", type="not_found_error"))
    )
    with pytest.raises(ProviderBadRequestError, match="nope not found"):
        await make().request(req())


async def test_429_with_retry_after_is_retried_then_raised(server, provider, make) -> None:
    limited = Reply(
        status=429,
        json=provider.error("Rate limit reached", type="rate_limit_error"),
        headers={"retry-after": "0", "retry-after-ms": "20"},
    )
    server.reply(provider.path, limited, limited, limited)
    with pytest.raises(ProviderRateLimitError) as info:
        await make(retry=RetryPolicy(max_retries=2, initial_delay=0.001, max_delay=1.0)).request(req())
    assert info.value.retry_after == pytest.approx(0.02)
    assert info.value.message == "Rate limit reached"
    assert len(server.requests) == 3  # the first try and two retries: the SDK's own retries are off


async def test_429_then_success(server, provider, make) -> None:
    server.reply(
        provider.path,
        Reply(
            status=429,
            json=provider.error("slow down", type="rate_limit_error"),
            headers={"retry-after": "0"},
        ),
        Reply(json=provider.ok("finally")),
    )
    response = await make().request(req())
    assert response.text == "finally"
    assert len(server.requests) == 2


async def test_429_asking_for_longer_than_max_delay_raises_at_once(server, provider, make) -> None:
    server.reply(
        provider.path,
        Reply(
            status=429, json=provider.error("wait", type="rate_limit_error"), headers={"retry-after": "120"}
        ),
    )
    with pytest.raises(ProviderRateLimitError) as info:
        await make(retry=RetryPolicy(max_retries=3, initial_delay=0.001, max_delay=5.0)).request(req())
    assert info.value.retry_after == 120
    assert len(server.requests) == 1


async def test_a_retry_asking_for_longer_than_max_delay_ends_the_retries(server, provider, make) -> None:
    def limited(seconds: str) -> Reply:
        error = provider.error("wait", type="rate_limit_error")
        return Reply(status=429, json=error, headers={"retry-after": seconds})

    server.reply(provider.path, limited("0"), limited("120"), limited("0"))
    with pytest.raises(ProviderRateLimitError) as info:
        await make(retry=RetryPolicy(max_retries=3, initial_delay=0.001, max_delay=5.0)).request(req())
    assert info.value.retry_after == 120
    assert len(server.requests) == 2  # the first try, one retry, then the provider's wait was too long


async def test_openai_spent_quota_is_not_retried(server, make_openai) -> None:
    body = openai_error(
        "You exceeded your current quota", type="insufficient_quota", code="insufficient_quota"
    )
    server.reply(OPENAI_PATH, Reply(status=429, json=body))
    with pytest.raises(ProviderRateLimitError) as info:
        await make_openai().request(req())
    assert info.value.retryable is False
    assert len(server.requests) == 1


@pytest.mark.parametrize("status", [500, 502, 503, 504, 529])
async def test_server_errors_are_retried_then_unavailable(server, provider, make, status: int) -> None:
    failing = Reply(status=status, json=provider.error("The server is overloaded", type="overloaded_error"))
    server.reply(provider.path, failing, failing, failing)
    with pytest.raises(ProviderUnavailableError) as info:
        await make().request(req())
    assert info.value.status_code == status
    assert info.value.retryable is True
    assert len(server.requests) == 3


async def test_503_then_success(server, provider, make) -> None:
    server.reply(provider.path, Reply(status=503, json=provider.error("busy")), Reply(json=provider.ok("ok")))
    assert (await make().request(req())).text == "ok"
    assert len(server.requests) == 2


async def test_max_retries_zero_means_exactly_one_request(server, provider, make) -> None:
    server.reply(
        provider.path, Reply(status=500, json=provider.error("boom")), Reply(json=provider.ok("never"))
    )
    with pytest.raises(ProviderUnavailableError):
        await make(max_retries=0).request(req())
    assert len(server.requests) == 1


async def test_malformed_json_body_is_response_error(server, provider, make) -> None:
    server.reply(provider.path, Reply(body=b'{"id": "x", "choices": [{"message": '))
    with pytest.raises(ProviderResponseError) as info:
        await make().request(req())
    assert not info.value.retryable
    assert len(server.requests) == 1


@pytest.mark.parametrize("body", [{"unexpected": True}, [1, 2, 3], {"choices": [], "content": "text"}])
async def test_json_of_the_wrong_shape_is_response_error(server, provider, make, body: Any) -> None:
    server.reply(provider.path, Reply(json=body))
    with pytest.raises(ProviderResponseError):
        await make().request(req())


async def test_error_body_that_is_not_json_keeps_the_text(server, provider, make) -> None:
    server.reply(
        provider.path, Reply(status=400, body=b"upstream said no", headers={"content-type": "text/plain"})
    )
    with pytest.raises(ProviderBadRequestError, match="upstream said no"):
        await make().request(req())


async def test_connection_refused_is_unavailable(provider, make) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}" + ("/v1" if provider.name.startswith("openai") else "")
    with pytest.raises(ProviderUnavailableError) as info:
        await make(base_url=url, retry=RetryPolicy(max_retries=1, initial_delay=0.001)).request(req())
    assert "could not reach" in info.value.message


async def test_every_provider_error_is_a_provider_error() -> None:
    for cls in (
        ProviderAuthError,
        ProviderBadRequestError,
        ProviderRateLimitError,
        ProviderResponseError,
        ProviderUnavailableError,
    ):
        assert issubclass(cls, ProviderError)
