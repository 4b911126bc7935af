"""`ScriptedModel`: a model that plays back a fixed list of responses. Ships with toolrun for tests and demos.

```python
model = ScriptedModel([
    ToolCall(name="get_weather", arguments={"city": "Paris"}),     # turn 1: call a tool
    "It is sunny in Paris.",                                        # turn 2: answer
])
```

**Where a run starts.** By default (`cursor="conversation"`) the response to give is read off the
conversation itself: it is the response numbered by how many assistant messages the request already holds.
A new conversation (no assistant turn yet) always starts at the top of the script, so the same model
serves any number of runs, concurrent ones included, with no `reset()`; and a run paused, written to JSON
and resumed in another process with a fresh `ScriptedModel` continues at the right response, because the
position travels with the messages. An agent that sends a request without appending the previous answer as
an assistant message (or a conversation that carries earlier runs' turns) moves along the script the same
way: the script is the list of *model turns of a conversation*.

With `cursor="sequential"` the model instead answers with the next response on every request, whatever
the messages say, until `reset()` starts from the top again.

Either way, asking past the end raises `ScriptExhaustedError`, naming the position and the last message.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import AsyncIterator, Iterable
from typing import Literal

from toolrun.models._errors import ScriptExhaustedError
from toolrun.models._fake import ResponseLike, coerce_response, synthesize_stream, with_usage
from toolrun.models._messages import AssistantMessage, ModelRequest, ModelResponse, StreamEvent

__all__ = ["ScriptedModel"]

ScriptItem = ResponseLike | BaseException
"""A response, or an exception to raise at that turn (e.g. a `ProviderUnavailableError`)."""


class ScriptedModel:
    """Plays back `responses`, one per model turn.

    Args:
        responses: Each item is a `str` (final text), a `ToolCall`, a list of `ToolCall`s (parallel calls),
            a `ModelResponse`, or an exception instance to raise at that turn.
        cursor: `"conversation"` (default: position = assistant turns in the request) or `"sequential"`
            (position = requests since the last `reset()`).
        name: The model's name in runs and logs.
        max_recorded: How many recent requests `requests` keeps (a long-lived demo must not grow forever).

    Attributes:
        requests: The requests received, oldest first (the last `max_recorded`), for assertions in tests.
    """

    def __init__(
        self,
        responses: Iterable[ScriptItem],
        *,
        cursor: Literal["conversation", "sequential"] = "conversation",
        name: str = "scripted",
        max_recorded: int = 1000,
    ) -> None:
        if cursor not in ("conversation", "sequential"):
            raise ValueError(f"cursor must be 'conversation' or 'sequential', not {cursor!r}.")
        self.script: list[ScriptItem] = list(responses)
        for item in self.script:
            if not isinstance(item, BaseException):
                coerce_response(item)  # refuse a bad item now, not at the turn that reaches it
        self.cursor = cursor
        self._name = name
        self._next = 0
        self._lock = threading.Lock()
        self.requests: deque[ModelRequest] = deque(maxlen=max_recorded)

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"ScriptedModel({len(self.script)} responses, cursor={self.cursor!r})"

    def reset(self) -> None:
        """Start from the top of the script again (`"sequential"` cursor) and forget recorded requests."""
        with self._lock:
            self._next = 0
            self.requests.clear()

    def position(self, request: ModelRequest) -> int:
        """The index of the script item that answers `request` (without consuming it)."""
        if self.cursor == "conversation":
            return sum(1 for m in request.messages if isinstance(m, AssistantMessage))
        return self._next

    def _respond(self, request: ModelRequest) -> ModelResponse:
        with self._lock:
            self.requests.append(request)
            index = self.position(request)
            if self.cursor == "sequential":
                self._next += 1
        if index >= len(self.script):
            last = request.messages[-1] if request.messages else None
            seen = (
                f"{index} assistant turns in the conversation"
                if self.cursor == "conversation"
                else (f"{index} requests since the last reset()")
            )
            raise ScriptExhaustedError(
                f"ScriptedModel ran out of responses: it has {len(self.script)}, and response "
                f"#{index + 1} was asked for ({seen}). Last message: {last!r:.160}. Add responses to the "
                "script, or check why the run did not stop earlier."
            )
        item = self.script[index]
        if isinstance(item, BaseException):
            raise item
        return with_usage(request.messages, coerce_response(item))

    async def request(self, request: ModelRequest) -> ModelResponse:
        return self._respond(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        for event in synthesize_stream(self._respond(request)):
            yield event
