"""Errors from the outside world (LLM providers), mapped at one boundary.

```
ProviderError                     a provider call failed; `provider`, `status_code`, `retryable`, `body`
├── ProviderAuthError             401/403, or no API key: fix credentials (never retried)
├── ProviderRateLimitError        429: `retry_after` seconds if the provider said; retried unless it is a
│                                 spent quota (`retryable` False)
├── ProviderBadRequestError       400/404/413/422: the request is wrong; `message` is the provider's own words
├── ProviderUnavailableError      5xx, 529, 408, timeouts, refused or dropped connections (retried)
└── ProviderResponseError         a response toolrun cannot read: malformed JSON, missing fields
    └── ProviderStreamError       a stream broke off after it started; `partial` holds what had arrived

ScriptExhaustedError              (a ToolrunError: the developer's test script is too short)
UnknownModelError                 (a ToolrunError and ValueError: a model string toolrun cannot parse)
```

Model clients catch SDK exceptions in one place each and raise these `from` the original, so the
provider's exception stays in `__cause__` for debugging while callers branch on toolrun types only.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

from toolrun.exceptions import ToolrunError

if TYPE_CHECKING:
    from toolrun.models._messages import ModelResponse

__all__ = [
    "ProviderAuthError",
    "ProviderBadRequestError",
    "ProviderError",
    "ProviderRateLimitError",
    "ProviderResponseError",
    "ProviderStreamError",
    "ProviderUnavailableError",
    "ScriptExhaustedError",
    "UnknownModelError",
    "error_from_body",
    "error_from_status",
    "map_sdk_error",
    "map_stream_error",
]


class ProviderError(Exception):
    """A call to an LLM provider failed.

    Attributes:
        message: What went wrong (the provider's own message where it gave one).
        provider: `"openai"`, `"anthropic"`, ... (the client that failed).
        status_code: The HTTP status, when there was a response.
        retryable: Whether trying the same request again may succeed.
        body: The provider's error body as decoded JSON (or text), for diagnosis.
    """

    retryable: bool = False

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        status_code: int | None = None,
        body: Any = None,
        retryable: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.status_code = status_code
        self.body = body
        if retryable is not None:
            self.retryable = retryable

    def __str__(self) -> str:
        where = f"{self.provider} " if self.provider else ""
        status = f" (HTTP {self.status_code})" if self.status_code is not None else ""
        return f"{where}{type(self).__name__}{status}: {self.message}"


class ProviderAuthError(ProviderError):
    """The provider refused the credentials (401), or the key may not do this (403), or none was set."""


class ProviderRateLimitError(ProviderError):
    """Too many requests (429).

    Attributes:
        retry_after: Seconds the provider asked to wait (`retry-after-ms` / `retry-after`), if it said.
    """

    retryable = True

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class ProviderBadRequestError(ProviderError):
    """The provider rejected the request as malformed or impossible; `message` is its explanation."""


class ProviderUnavailableError(ProviderError):
    """The provider failed or could not be reached: 5xx, overloaded, timeout, connection error."""

    retryable = True


class ProviderResponseError(ProviderError):
    """The provider answered with something toolrun cannot read (not JSON, missing fields)."""


class ProviderStreamError(ProviderResponseError):
    """A streamed response broke off after it started (connection dropped, no final event, error event).

    Streams are never retried: part of the answer may already have been shown.

    Attributes:
        partial: What had arrived before the break, assembled into a response (text and the tool calls
            seen so far, whose arguments may be incomplete JSON); `finish_reason` is `"error"`.
    """

    def __init__(self, message: str, *, partial: ModelResponse | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.partial = partial


class ScriptExhaustedError(ToolrunError):
    """A `ScriptedModel` was asked for more responses than its script holds."""


class UnknownModelError(ToolrunError, ValueError):
    """A model string `infer_model` cannot parse, or a provider it does not know."""


# ------------------------------------------------------------------------------------------------------
# The boundary: SDK exception -> ProviderError


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from `retry-after-ms` (OpenAI) or `retry-after` (seconds or an HTTP date)."""
    if not headers:
        return None
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(0.0, float(value) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_fields(body: Any) -> tuple[str | None, str | None, str | None]:
    """(message, type, code) from either provider's error body.

    OpenAI's SDK hands over the inner object (`{"message", "type", "code"}`); Anthropic's hands over the
    whole body (`{"type": "error", "error": {"type", "message"}}`).
    """
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return (body.strip() or None), None, None
    if not isinstance(body, Mapping):
        return None, None, None
    inner = body.get("error")
    if isinstance(inner, Mapping):
        body = inner
    elif isinstance(inner, str):
        return inner, None, None
    message = body.get("message")
    kind = body.get("type")
    code = body.get("code")
    return (
        message if isinstance(message, str) else None,
        kind if isinstance(kind, str) else None,
        str(code) if code is not None else None,
    )


# Anthropic reports some failures inside an HTTP 200 stream as an `error` event carrying only a type.
_ERROR_TYPES: dict[str, type[ProviderError]] = {
    "authentication_error": ProviderAuthError,
    "permission_error": ProviderAuthError,
    "rate_limit_error": ProviderRateLimitError,
    "invalid_request_error": ProviderBadRequestError,
    "not_found_error": ProviderBadRequestError,
    "request_too_large": ProviderBadRequestError,
    "overloaded_error": ProviderUnavailableError,
    "api_error": ProviderUnavailableError,
    "server_error": ProviderUnavailableError,
}

_QUOTA_CODES = {"insufficient_quota", "billing_hard_limit_reached"}


def _class_for_status(status: int, kind: str | None) -> type[ProviderError]:
    if status in (401, 403):
        return ProviderAuthError
    if status == 429:
        return ProviderRateLimitError
    if status in (408, 409) or status >= 500:
        return ProviderUnavailableError
    if 400 <= status < 500:
        return ProviderBadRequestError
    return _ERROR_TYPES.get(kind or "", ProviderUnavailableError)


def error_from_body(
    body: Any,
    *,
    status: int | None,
    headers: Mapping[str, str] | None,
    provider: str,
    fallback: str | None = None,
) -> ProviderError:
    """The `ProviderError` for an error answer: its HTTP `status` (None for an error event inside a 200
    stream, where the body's type says what happened) and its error `body` (the decoded JSON or text).

    The SDK boundary (`map_sdk_error`) and toolrun's own HTTP client (`models._http`) both end here, so a
    failure reads the same whichever transport met it.
    """
    message, kind, code = _error_fields(body)
    if status is not None and 200 <= status < 300:
        status = None
    cls = _class_for_status(status, kind) if status is not None else _ERROR_TYPES.get(kind or "")
    cls = cls or ProviderUnavailableError
    text = message or fallback or f"HTTP {status}"
    kwargs: dict[str, Any] = {"provider": provider, "status_code": status, "body": body}
    if cls is ProviderRateLimitError:
        return ProviderRateLimitError(
            text,
            retry_after=parse_retry_after(headers),
            retryable=(code not in _QUOTA_CODES and kind not in _QUOTA_CODES),
            **kwargs,
        )
    return cls(text, **kwargs)


def error_from_status(
    status: int, headers: Mapping[str, str] | None, content: bytes, *, provider: str
) -> ProviderError:
    """The `ProviderError` for a non-2xx HTTP answer with raw `content`, as the SDKs would report it: the
    body is the decoded JSON's `error` object when it has one (else the JSON, else the text)."""
    text = content.decode("utf-8", "replace").strip()
    body: Any = text
    try:
        body = json.loads(text)
    except ValueError:
        pass
    else:
        if isinstance(body, Mapping) and "error" in body:
            body = body["error"]
    return error_from_body(
        body, status=status, headers=headers, provider=provider, fallback=f"Error code: {status}"
    )


def map_sdk_error(exc: BaseException, *, provider: str, sdk: ModuleType) -> ProviderError | None:
    """The `ProviderError` for an exception raised by an OpenAI or Anthropic SDK call (same shapes).

    The caller raises the result `from exc`. None means the exception is not a provider failure (a bug, a
    warning turned into an error) and must propagate unchanged.
    """
    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, sdk.APIResponseValidationError):
        return ProviderResponseError(
            f"the response does not have the documented shape: {exc.message}",
            provider=provider,
            status_code=exc.status_code,
            body=exc.body,
        )
    if isinstance(exc, sdk.APITimeoutError):
        return ProviderUnavailableError("the request timed out", provider=provider)
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__
        detail = f": {type(cause).__name__}: {cause}" if cause is not None else ""
        return ProviderUnavailableError(f"could not reach the provider{detail}", provider=provider)
    if isinstance(exc, sdk.APIError):  # APIStatusError, or an error event inside a stream
        status: int | None = getattr(exc, "status_code", None)
        response = getattr(exc, "response", None)
        return error_from_body(
            exc.body,
            status=status,
            headers=getattr(response, "headers", None),
            provider=provider,
            fallback=exc.message,
        )
    if isinstance(exc, TypeError) and "authentication" in str(exc):
        # anthropic: no api_key, auth_token or credentials found when the request was built
        return ProviderAuthError(str(exc).strip('"'), provider=provider)
    if isinstance(exc, ValueError):  # json.JSONDecodeError from a body that is not JSON
        return ProviderResponseError(f"the response is not valid JSON: {exc}", provider=provider)
    sdk_base: type[BaseException] = getattr(sdk, "OpenAIError", None) or sdk.AnthropicError
    if isinstance(exc, sdk_base):
        # Raised before any request: most often no API key configured.
        text = str(exc)
        if any(word in text.lower() for word in ("api_key", "api key", "auth", "credential", "profile")):
            return ProviderAuthError(text, provider=provider)
        return ProviderError(text, provider=provider)
    return None


def map_stream_error(exc: BaseException, *, provider: str, sdk: ModuleType) -> ProviderError | None:
    """Like `map_sdk_error`, for an exception raised while reading an open stream.

    There, anything but a warning is the stream failing (Anthropic's SDK lets transport errors such as a
    dropped connection through unwrapped), so unknown exceptions become `ProviderResponseError`.
    """
    error = map_sdk_error(exc, provider=provider, sdk=sdk)
    if error is None and not isinstance(exc, Warning):
        error = ProviderResponseError(f"{type(exc).__name__}: {exc}", provider=provider)
    return error
