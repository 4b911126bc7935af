"""OpenTelemetry spans for tool calls, following the GenAI semantic conventions; a no-op without OTel.

One span per call, named `execute_tool {gen_ai.tool.name}`, kind INTERNAL, with `gen_ai.operation.name`
= `execute_tool`, `gen_ai.tool.name`, `gen_ai.tool.call.id` and `gen_ai.tool.type` = `function`; on
failure `error.type` holds the error code and the status is ERROR (with the code, never the message).
Argument values and results are never recorded. toolrun adds `toolrun.outcome`, `toolrun.attempts` and
`toolrun.cached`.

`opentelemetry-api` is imported lazily and optionally. While no SDK tracer provider is installed (the
API's proxy or no-op provider is in place) no span is started at all: the cost is one call of the API's
public `get_tracer_provider()` per tool call (about 1 µs while none is set, when it looks at os.environ).
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
        self._global: Any = trace.get_tracer_provider if trace is not None and provider is None else None

    def tracer(self) -> Any:
        """The tracer to use now, or None when spans would go nowhere.

        Without a provider of its own it asks the API's public `get_tracer_provider()` on every call, so a
        provider installed later (as an app's start-up may do) is used from then on; the tracer is kept
        for the provider it was made for.
        """
        provider = self._provider
        if provider is None:
            get = self._global
            if get is None:
                return None
            provider = get()
        if provider is not self._tracer_of:
            if isinstance(provider, self._noop):
                tracer = None
            else:
                from toolrun import __version__

                tracer = provider.get_tracer("toolrun", __version__)
            self._tracer = tracer
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
