"""OpenTelemetry spans for tool calls, following the GenAI semantic conventions; a no-op without OTel.

One span per call, named `execute_tool {gen_ai.tool.name}`, kind INTERNAL, with `gen_ai.operation.name`
= `execute_tool`, `gen_ai.tool.name`, `gen_ai.tool.call.id` and `gen_ai.tool.type` = `function`; on
failure `error.type` holds the error code and the status is ERROR (with the code, never the message).
Argument values and results are never recorded. toolrun adds `toolrun.outcome`, `toolrun.attempts` and
`toolrun.cached`.

`opentelemetry-api` is imported lazily and optionally. While no SDK tracer provider is installed (the
API's proxy or no-op provider is in place) no span is started at all, so the cost is one check per call.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Tracing"]


class Tracing:
    """Starts spans on the given tracer provider, or on the global one."""

    def __init__(self, provider: Any = None) -> None:
        try:
            from opentelemetry import context, trace
        except ImportError:  # pragma: no cover - opentelemetry is installed for the tests
            trace = None  # type: ignore[assignment]
            context = None  # type: ignore[assignment]
        self._trace: Any = trace
        self._context: Any = context
        self._provider = provider
        self._noop: tuple[type, ...] = ()
        if trace is not None:
            self._noop = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
        self._tracer: Any = None
        self._tracer_of: Any = None
        # `get_tracer_provider()` reads os.environ on every call while no provider is set (~1 µs); the API
        # module's global tells the same for free. If a future API drops that global, ask every time.
        self._peek = trace is not None and hasattr(trace, "_TRACER_PROVIDER")
        if self._peek:
            import os

            self._peek = "OTEL_PYTHON_TRACER_PROVIDER" not in os.environ
        self.unset: Any = trace if self._peek and provider is None else None
        """The API module, when `unset._TRACER_PROVIDER is None` tells that no provider is set (then
        `tracer()` is None): the executor checks that inline, without calling `tracer()`."""

    def tracer(self) -> Any:
        """The tracer to use now, or None when spans would go nowhere."""
        provider = self._provider
        if provider is None:
            if self._trace is None or (self._peek and self._trace._TRACER_PROVIDER is None):
                return None
            provider = self._trace.get_tracer_provider()
        if isinstance(provider, self._noop):
            return None
        if provider is not self._tracer_of:
            from toolrun import __version__

            self._tracer = provider.get_tracer("toolrun", __version__)
            self._tracer_of = provider
        return self._tracer

    def start(self, tracer: Any, tool_name: str | None, call_id: str) -> tuple[Any, Any]:
        """Start the call's span and make it current; returns (span, token) for `finish`."""
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
        }
        if tool_name is not None:
            attributes["gen_ai.tool.name"] = tool_name
        name = f"execute_tool {tool_name}" if tool_name is not None else "execute_tool"
        try:
            span = tracer.start_span(name, kind=self._trace.SpanKind.INTERNAL, attributes=attributes)
            token = self._context.attach(self._trace.set_span_in_context(span))
        except Exception as exc:  # tracing must never break a call
            _log_failure(exc)
            return None, None
        return span, token

    def finish(
        self,
        span: Any,
        token: Any,
        *,
        outcome: str,
        code: str | None,
        attempts: int,
        cached: bool,
    ) -> None:
        """Record the outcome, end the span and restore the previous context. Never raises."""
        try:
            span.set_attribute("toolrun.outcome", outcome)
            span.set_attribute("toolrun.attempts", attempts)
            span.set_attribute("toolrun.cached", cached)
            if code is not None:
                span.set_attribute("error.type", code)
                span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, code))
            span.end()
        except Exception as exc:
            _log_failure(exc)
        finally:
            try:
                self._context.detach(token)
            except Exception as exc:
                _log_failure(exc)


def _log_failure(exc: BaseException) -> None:
    import logging

    from toolrun.runtime._logging import log_exception

    log_exception(logging.getLogger("toolrun"), "OpenTelemetry failed; the call goes on untraced", exc)
