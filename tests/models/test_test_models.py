"""ScriptedModel and FunctionModel: the test models that ship with toolrun."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from toolrun import Tool, ToolCall, ToolResult
from toolrun.models import (
    AssistantMessage,
    FinalResponse,
    FunctionModel,
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    ModelTextDelta,
    ProviderUnavailableError,
    ScriptedModel,
    ScriptExhaustedError,
    ToolCallDelta,
    ToolCallReady,
    ToolResultMessage,
    Usage,
    UserMessage,
    messages_from_json,
    messages_to_json,
)

WEATHER = ToolCall(id="c1", name="get_weather", arguments={"city": "Paris"})


async def run(model: Model, text: str, *, stream: bool = False) -> tuple[list[Message], list[ModelResponse]]:
    """A minimal agent loop: answer every call with a fixed result until the model answers in text."""
    messages: list[Message] = [UserMessage(content=text)]
    responses = []
    for _ in range(10):
        request = ModelRequest(messages)
        if stream:
            events = [e async for e in model.stream(request)]
            response = events[-1].response
        else:
            response = await model.request(request)
        responses.append(response)
        messages.append(response.to_message())
        if not response.tool_calls:
            break
        messages += [
            ToolResultMessage(call_id=c.id, tool_name=c.name, content="21C") for c in response.tool_calls
        ]
    return messages, responses


# ----------------------------------------------------------------------------------------------------------
# ScriptedModel


async def test_scripted_plays_the_script_and_every_run_starts_at_the_top() -> None:
    model = ScriptedModel([WEATHER, "Sunny, 21C."])
    for _ in range(3):
        _, responses = await run(model, "Weather in Paris?")
        assert [r.tool_calls for r in responses] == [[WEATHER], []]
        assert responses[-1].text == "Sunny, 21C."
    assert len(model.requests) == 6


async def test_scripted_items_of_every_kind() -> None:
    second = ToolCall(id="c2", name="get_time", arguments="{}")
    model = ScriptedModel(
        [
            [WEATHER, second],
            ModelResponse(
                text="thinking", tool_calls=[second], usage=Usage(input_tokens=7, output_tokens=3, requests=1)
            ),
            "done",
        ]
    )
    messages, responses = await run(model, "go")
    assert [len(r.tool_calls) for r in responses] == [2, 1, 0]
    assert responses[0].finish_reason == "tool_calls"
    assert responses[1].usage == Usage(input_tokens=7, output_tokens=3, requests=1)
    assert responses[2].usage.requests == 1
    assert responses[2].usage.input_tokens > 0  # estimated when the script gives none
    assert messages[-1] == AssistantMessage(content="done")


async def test_scripted_concurrent_runs_do_not_interfere() -> None:
    model = ScriptedModel([WEATHER, "answer"])
    results = await asyncio.gather(*(run(model, f"q{i}") for i in range(10)))
    assert all(responses[-1].text == "answer" for _, responses in results)


async def test_scripted_resumes_from_json_in_a_fresh_model() -> None:
    script = [WEATHER, ToolCall(id="c9", name="delete_task", arguments={"id": "t1"}), "Deleted."]
    first = ScriptedModel(script)
    messages: list[Message] = [UserMessage(content="delete t1 after checking weather")]
    response = await first.request(ModelRequest(messages))
    messages += [
        response.to_message(),
        ToolResultMessage(call_id="c1", tool_name="get_weather", content="ok"),
    ]
    saved = messages_to_json(messages)

    fresh = ScriptedModel(script)  # "another process"
    restored = messages_from_json(saved)
    assert (await fresh.request(ModelRequest(restored))).tool_calls[0].name == "delete_task"


async def test_scripted_returns_copies() -> None:
    model = ScriptedModel([WEATHER])
    response = await model.request(ModelRequest([UserMessage(content="x")]))
    response.tool_calls[0].name = "changed"
    assert (await model.request(ModelRequest([UserMessage(content="x")]))).tool_calls[0].name == "get_weather"


async def test_scripted_runs_out_with_a_clear_error() -> None:
    model = ScriptedModel(["only answer"])
    messages = [
        UserMessage(content="a"),
        AssistantMessage(content="only answer"),
        UserMessage(content="more?"),
    ]
    with pytest.raises(ScriptExhaustedError) as info:
        await model.request(ModelRequest(messages))
    text = str(info.value)
    assert "has 1" in text
    assert "#2" in text
    assert "more?" in text


async def test_scripted_sequential_cursor_and_reset() -> None:
    model = ScriptedModel(["one", "two"], cursor="sequential")
    request = ModelRequest([UserMessage(content="x")])
    assert [(await model.request(request)).text for _ in range(2)] == ["one", "two"]
    with pytest.raises(ScriptExhaustedError, match="since the last reset"):
        await model.request(request)
    model.reset()
    assert (await model.request(request)).text == "one"
    assert len(model.requests) == 1


async def test_scripted_can_raise_at_a_turn() -> None:
    model = ScriptedModel([ProviderUnavailableError("down", provider="scripted"), "never"])
    with pytest.raises(ProviderUnavailableError):
        await model.request(ModelRequest([UserMessage(content="x")]))


def test_scripted_refuses_bad_items_up_front() -> None:
    with pytest.raises(TypeError, match="Not a response"):
        ScriptedModel(["ok", 42])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="cursor"):
        ScriptedModel([], cursor="random")  # type: ignore[arg-type]


async def test_scripted_stream_synthesises_deltas() -> None:
    model = ScriptedModel([ModelResponse(text="It is sunny", tool_calls=[WEATHER])])
    events = [e async for e in model.stream(ModelRequest([UserMessage(content="x")]))]
    assert [e.text for e in events if isinstance(e, ModelTextDelta)] == ["It ", "is ", "sunny"]
    assert ToolCallDelta(index=0, id="c1", name="get_weather", arguments_delta='{"city": "Paris"}') in events
    assert ToolCallReady(index=0, call=WEATHER) in events
    assert isinstance(events[-1], FinalResponse)
    assert events[-1].response.text == "It is sunny"


async def test_stream_and_request_runs_agree() -> None:
    script = [WEATHER, "Sunny."]
    _, plain = await run(ScriptedModel(script), "w")
    _, streamed = await run(ScriptedModel(script), "w", stream=True)
    assert plain == streamed


def test_test_models_satisfy_the_protocol() -> None:
    assert isinstance(ScriptedModel([]), Model)
    assert isinstance(FunctionModel(lambda m, t: "x"), Model)


# ----------------------------------------------------------------------------------------------------------
# FunctionModel


def weather_agent(messages: list[Message], tools: list[Tool]) -> Any:
    last = messages[-1]
    if isinstance(last, ToolResultMessage):
        return f"The tool said {last.content} ({len(tools)} tools)"
    return ToolCall(id="f1", name="get_weather", arguments={"city": "Oslo"})


async def test_function_model_sync_function_sees_messages_and_tools(tools) -> None:
    model = FunctionModel(weather_agent)
    first = await model.request(ModelRequest([UserMessage(content="w")], tools))
    assert first.tool_calls == [ToolCall(id="f1", name="get_weather", arguments={"city": "Oslo"})]
    messages = [
        UserMessage(content="w"),
        first.to_message(),
        ToolResultMessage.from_result(ToolResult.ok({"temp": 21}, call_id="f1", tool_name="get_weather")),
    ]
    second = await model.request(ModelRequest(messages, tools))
    assert second.text == 'The tool said {"temp":21} (2 tools)'
    assert len(model.requests) == 2


async def test_function_model_async_function_and_alias_mapping(tools) -> None:
    async def answer(messages: list[Message], tools: list[Tool]) -> ToolCall:
        await asyncio.sleep(0)
        return ToolCall(name="tasks_create", arguments={"title": "t"})  # the wire alias

    response = await FunctionModel(answer).request(ModelRequest([UserMessage(content="x")], tools))
    assert response.tool_calls[0].name == "tasks.create"


async def test_function_model_stream_function(tools) -> None:
    async def stream(messages: list[Message], tools: list[Tool]) -> AsyncIterator[Any]:
        yield "Let me "
        yield ModelTextDelta(text="check.")
        yield ToolCallDelta(index=0, id="s1", name="get_weather", arguments_delta='{"ci')
        yield ToolCallDelta(index=1, id="s2", name="tasks_create", arguments_delta='{"title": "a"}')
        yield ToolCallDelta(index=0, arguments_delta='ty": "Rome"}')

    model = FunctionModel(stream_function=stream)
    events = [e async for e in model.stream(ModelRequest([UserMessage(content="x")], tools))]
    final = events[-1].response
    assert final.text == "Let me check."
    assert [(c.id, c.name, c.arguments) for c in final.tool_calls] == [
        ("s1", "get_weather", '{"city": "Rome"}'),
        ("s2", "tasks.create", '{"title": "a"}'),
    ]
    assert final.usage.requests == 1
    # request() collects the same stream
    assert (
        await model.request(ModelRequest([UserMessage(content="x")], tools))
    ).tool_calls == final.tool_calls


async def test_function_model_synthesises_stream_from_function() -> None:
    model = FunctionModel(lambda messages, tools: "hello world")
    events = [e async for e in model.stream(ModelRequest([UserMessage(content="x")]))]
    assert [e.text for e in events if isinstance(e, ModelTextDelta)] == ["hello ", "world"]


async def test_function_model_rejects_bad_returns() -> None:
    with pytest.raises(ValueError, match="needs a function"):
        FunctionModel()
    with pytest.raises(TypeError, match="Not a response"):
        await FunctionModel(lambda m, t: {"text": "x"}).request(ModelRequest([UserMessage(content="x")]))


def test_response_helpers() -> None:
    response = ModelResponse.from_tool_calls(("get_weather", {"city": "Paris"}), WEATHER, text="two calls")
    assert [c.name for c in response.tool_calls] == ["get_weather", "get_weather"]
    assert response.finish_reason == "tool_calls"
    assert ModelResponse.from_text("hi").finish_reason == "stop"
    assert json.loads(json.dumps(response.to_dict()))["tool_calls"][1]["id"] == "c1"
