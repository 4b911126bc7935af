"""The `Model` protocol every client implements, and the one retry policy real clients share."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

from toolrun.models._errors import ProviderError, ProviderRateLimitError
from toolrun.models._messages import ModelRequest, ModelResponse, StreamEvent

__all__ = ["Model", "RetryPolicy"]

T = TypeVar("T")


@runtime_checkable
class Model(Protocol):
    """An LLM behind one interface: a request gives a response, or a stream of events ending in one.

    Implementations: `OpenAIModel`, `AnthropicModel`, and the test models `ScriptedModel` and
    `FunctionModel`. Real clients raise `ProviderError`s; they never return a half response.
    """

    @property
    def name(self) -> str:
        """A label for logs and runs, e.g. `"openai:gpt-4o-mini"`."""
        ...

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Send the conversation and tools; return the whole response."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Send the conversation and tools; yield deltas as they arrive, then one `FinalResponse`.

        The iterator is an async generator: if you may stop before the end, close it
        (`async with contextlib.aclosing(model.stream(req)) as events: ...`) so the connection is released.
        """
        ...


@dataclass(kw_only=True, frozen=True, slots=True)
class RetryPolicy:
    """Retries of transient provider failures, with exponential backoff and jitter.

    Retried: `ProviderUnavailableError` and `ProviderRateLimitError` (not a spent quota). When the provider
    says how long to wait (`retry-after`), that wait is honoured; when it asks for longer than `max_delay`,
    the error is raised at once (carrying `retry_after`) instead of waiting. The SDKs' own retries are
    turned off, so this is the only retry policy. Streams are retried only until they open.
    """

    max_retries: int = 2
    """Retries after the first attempt (0: never retry)."""
    initial_delay: float = 0.5
    """Seconds before the first retry (before jitter)."""
    multiplier: float = 2.0
    """Each further retry waits this much longer."""
    max_delay: float = 20.0
    """The longest single wait."""
    jitter: float = 0.5
    """Fraction of each wait drawn at random (0: none; 0.5: between half and the whole wait)."""

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.initial_delay < 0 or self.max_delay < 0 or not 0 <= self.jitter <= 1:
            raise ValueError(f"Invalid {self!r}: counts and delays must be >= 0 and jitter within [0, 1].")

    def delay(self, retry: int, error: BaseException | None = None) -> float:
        """Seconds to wait before retry number `retry` (1-based) after `error`."""
        base = min(self.max_delay, self.initial_delay * self.multiplier ** (retry - 1))
        wait = base * (1 - self.jitter * random.random())
        if isinstance(error, ProviderRateLimitError) and error.retry_after is not None:
            wait = max(wait, error.retry_after)
        return min(wait, self.max_delay)

    def _stops(self, attempt: int, error: BaseException | None) -> bool:
        """No retry after attempt number `attempt` (1-based) failed with `error`: the retries are spent, or
        the provider asks to wait longer than `max_delay`."""
        if attempt > self.max_retries:
            return True
        return (
            isinstance(error, ProviderRateLimitError)
            and error.retry_after is not None
            and error.retry_after > self.max_delay
        )

    async def call(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """Run `attempt` until it succeeds, fails for good, or the retries are spent (then re-raise)."""
        retry = 0
        while True:
            try:
                return await attempt()
            except ProviderError as error:
                retry += 1
                if not error.retryable or self._stops(retry, error):
                    raise
                await asyncio.sleep(self.delay(retry, error))
