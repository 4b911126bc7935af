"""Helpers for executor tests: a registry builder, a call builder, an event recorder."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from toolrun import Tool, ToolCall, ToolRegistry
from toolrun.runtime import ToolEvent, ToolExecutor

_counter = iter(range(1, 10**9))


def call(name: str, arguments: Any = None, *, id: str | None = None) -> ToolCall:
    """A call; dict arguments are sent as JSON text, like a model would."""
    if isinstance(arguments, dict):
        arguments = json.dumps(arguments)
    return ToolCall(id=id or f"call_{next(_counter)}", name=name, arguments=arguments)


class Recorder:
    """Collects events (a sync subscriber)."""

    def __init__(self) -> None:
        self.events: list[ToolEvent] = []

    def __call__(self, event: ToolEvent) -> None:
        self.events.append(event)

    def of(self, kind: type[ToolEvent]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


@pytest.fixture
def make_executor() -> Iterator[Callable[..., ToolExecutor]]:
    """Build executors over the given tools; closes them (their thread pools) after the test."""
    made: list[ToolExecutor] = []

    def make(*tools: Tool | Callable[..., Any], **kwargs: Any) -> ToolExecutor:
        kwargs.setdefault("retry_backoff", 0.001)
        ex = ToolExecutor(ToolRegistry(tools), **kwargs)
        made.append(ex)
        return ex

    yield make
    for ex in made:
        ex.close()
