"""`FunctionModel`: a model whose answers come from your function. Ships with toolrun for tests and demos.

```python
def answer(messages: list[Message], tools: list[Tool]) -> ResponseLike:
    if isinstance(messages[-1], ToolResultMessage):
        return f"The tool said: {messages[-1].content}"
    return ToolCall(name="get_weather", arguments={"city": "Paris"})

model = FunctionModel(answer)             # sync or async functions
```

A stream function (`stream_function=`) yields text pieces (`str` or `ModelTextDelta`) and `ToolCallDelta`s;
the model reassembles them (fragments of a call are joined by `index`) into the `FinalResponse`. With only a
function, `stream()` synthesises deltas from its response; with only a stream function, `request()`
collects the stream.
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeAlias

from toolrun.models._fake import ResponseLike, coerce_response, synthesize_stream, with_usage
from toolrun.models._messages import (
    FinalResponse,
    Message,
    ModelRequest,
    ModelResponse,
    ModelTextDelta,
    StreamEvent,
    ToolCallDelta,
    UserMessage,
)
from toolrun.models._stream import StreamAssembler
from toolrun.tools import Tool

__all__ = ["FunctionModel", "ModelFunction", "StreamFunction", "echo"]

ModelFunction: TypeAlias = Callable[[list[Message], list[Tool]], ResponseLike | Awaitable[ResponseLike]]
"""`fn(messages, tools)` → a response (str, ToolCall, list of ToolCalls, ModelResponse); sync or async."""
StreamFunction: TypeAlias = Callable[
    [list[Message], list[Tool]], AsyncIterator[str | ModelTextDelta | ToolCallDelta]
]
"""`fn(messages, tools)` → an async iterator of text pieces and `ToolCallDelta`s."""


class FunctionModel:
    """A model that calls `function(messages, tools)` for every request.

    Args:
        function: Gives the response; sync or async.
        stream_function: Gives the response as deltas, for `stream()` (and `request()` without `function`).
        name: The model's name in runs and logs.
        max_recorded: How many recent requests `requests` keeps (a long-lived demo must not grow forever).

    Attributes:
        requests: The requests received, oldest first (the last `max_recorded`), for assertions in tests.
    """

    def __init__(
        self,
        function: ModelFunction | None = None,
        *,
        stream_function: StreamFunction | None = None,
        name: str = "function",
        max_recorded: int = 1000,
    ) -> None:
        if function is None and stream_function is None:
            raise ValueError("FunctionModel needs a function, a stream_function, or both.")
        self.function = function
        self.stream_function = stream_function
        self._name = name
        self.requests: deque[ModelRequest] = deque(maxlen=max_recorded)

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        fn = self.function or self.stream_function
        return f"FunctionModel({getattr(fn, '__qualname__', fn)!r})"

    async def _call(self, request: ModelRequest) -> ModelResponse:
        assert self.function is not None  # checked by the callers
        result: Any = self.function(request.messages, request.tools.tools())
        if inspect.isawaitable(result):
            result = await result
        response = coerce_response(result)
        for call in response.tool_calls:
            call.name = request.tools.original_name(call.name)
        return with_usage(request.messages, response)

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        if self.function is not None:
            return await self._call(request)
        response: ModelResponse | None = None
        async for event in self._from_stream_function(request):
            if isinstance(event, FinalResponse):
                response = event.response
        assert response is not None  # the generator always ends with a FinalResponse
        return response

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        if self.stream_function is None:
            for event in synthesize_stream(await self._call(request)):
                yield event
            return
        async for event in self._from_stream_function(request):
            yield event

    async def _from_stream_function(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        assert self.stream_function is not None
        assembler = StreamAssembler(request.tools.original_name)
        async for piece in self.stream_function(request.messages, request.tools.tools()):
            if isinstance(piece, str):
                if piece:
                    yield assembler.text(piece)
            elif isinstance(piece, ModelTextDelta):
                yield assembler.text(piece.text)
            elif isinstance(piece, ToolCallDelta):
                yield assembler.tool_fragment(
                    piece.index, id=piece.id, name=piece.name, arguments=piece.arguments_delta
                )
            else:
                raise TypeError(
                    f"A stream function yields str, ModelTextDelta or ToolCallDelta, not {piece!r}."
                )
        for ready in assembler.finish_all():
            yield ready
        yield FinalResponse(response=with_usage(request.messages, assembler.response()))


def echo(messages: list[Message], tools: list[Tool]) -> str:
    """Answer with the last user message (the `"test"` model of `infer_model`)."""
    for message in reversed(messages):
        if isinstance(message, UserMessage):
            return message.content
    return ""
