"""OpenAIModel against a fake Chat Completions server on 127.0.0.1 (JSON and SSE)."""

from __future__ import annotations

import json
import threading
from contextlib import aclosing
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolrun import ToolCall
from toolrun.models import (
    AssistantMessage,
    FinalResponse,
    ModelRequest,
    ModelSettings,
    ModelTextDelta,
    ProviderStreamError,
    ProviderUnavailableError,
    RetryPolicy,
    SystemMessage,
    ToolCallDelta,
    ToolCallReady,
    ToolResultMessage,
    Usage,
    UserMessage,
)

from .fakes import (
    OPENAI_PATH,
    Reply,
    openai_chunk,
    openai_completion,
    openai_stream,
    openai_usage_chunk,
)


def hello() -> ModelRequest:
    return ModelRequest([SystemMessage(content="Be brief."), UserMessage(content="Hi")])


async def collect(model: Any, request: ModelRequest) -> list[Any]:
    return [event async for event in model.stream(request)]


async def test_plain_text(server, make_openai) -> None:
    server.reply(OPENAI_PATH, Reply(json=openai_completion("Hello there!", usage=(12, 5))))
    response = await make_openai().request(hello())

    assert response.text == "Hello there!"
    assert response.tool_calls == []
    assert response.finish_reason == "stop"
    assert response.provider_finish_reason == "stop"
    assert response.usage == Usage(input_tokens=12, output_tokens=5, requests=1)
    assert response.model_name == "gpt-4o-mini-2024-07-18"
    assert response.response_id == "chatcmpl-123"
    (sent,) = server.bodies()
    assert sent == {
        "model": "gpt-4o-mini",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
    }
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"


async def test_one_tool_call_with_tools_in_openai_format(server, make_openai, registry) -> None:
    server.reply(
        OPENAI_PATH,
        Reply(json=openai_completion(None, [("call_abc", "get_weather", '{"city": "Paris"}')])),
    )
    response = await make_openai().request(ModelRequest([UserMessage(content="Weather?")], registry))

    assert response.text == ""
    assert response.tool_calls == [ToolCall(id="call_abc", name="get_weather", arguments='{"city": "Paris"}')]
    assert response.finish_reason == "tool_calls"
    (sent,) = server.bodies()
    assert sent["tools"] == registry.definitions("openai", strict=False)
    assert [t["function"]["name"] for t in sent["tools"]] == ["get_weather", "tasks_create"]
    assert all(t["type"] == "function" for t in sent["tools"])
    assert "tool_choice" not in sent
    assert "parallel_tool_calls" not in sent


async def test_parallel_tool_calls_and_alias_mapped_back(server, make_openai, tools) -> None:
    server.reply(
        OPENAI_PATH,
        Reply(
            json=openai_completion(
                None,
                [
                    ("call_1", "get_weather", '{"city": "Paris"}'),
                    ("call_2", "tasks_create", '{"title": "Pack umbrella"}'),
                ],
            )
        ),
    )
    request = ModelRequest(
        [UserMessage(content="Weather, and a task")], tools, ModelSettings(parallel_tool_calls=True)
    )
    response = await make_openai().request(request)

    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("call_1", "get_weather", '{"city": "Paris"}'),
        ("call_2", "tasks.create", '{"title": "Pack umbrella"}'),
    ]
    assert server.bodies()[0]["parallel_tool_calls"] is True


async def test_history_with_tool_calls_and_results(server, make_openai, registry) -> None:
    server.reply(OPENAI_PATH, Reply(json=openai_completion("Done: 21 degrees, task created.")))
    messages = [
        SystemMessage(content="You help."),
        UserMessage(content="Weather in Paris and create a task"),
        AssistantMessage(
            content="Let me check.",
            tool_calls=[
                ToolCall(id="c1", name="get_weather", arguments={"city": "Paris"}),
                ToolCall(id="c2", name="tasks.create", arguments='{"title": "x"}'),
            ],
        ),
        ToolResultMessage(call_id="c1", tool_name="get_weather", content='{"temp":21}'),
        ToolResultMessage(call_id="c2", tool_name="tasks.create", content="Error X: nope", is_error=True),
    ]
    await make_openai().request(ModelRequest(messages, registry))

    assert server.bodies()[0]["messages"] == [
        {"role": "system", "content": "You help."},
        {"role": "user", "content": "Weather in Paris and create a task"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "tasks_create", "arguments": '{"title": "x"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"temp":21}'},
        {"role": "tool", "tool_call_id": "c2", "content": "Error X: nope"},
    ]


async def test_assistant_with_only_tool_calls_sends_null_content(server, make_openai, registry) -> None:
    server.reply(OPENAI_PATH, Reply(json=openai_completion("ok")))
    messages = [
        UserMessage(content="hi"),
        AssistantMessage(tool_calls=[ToolCall(id="c1", name="get_weather", arguments=None)]),
        ToolResultMessage(call_id="c1", tool_name="get_weather", content="sunny"),
    ]
    await make_openai().request(ModelRequest(messages, registry))
    assistant = server.bodies()[0]["messages"][1]
    assert assistant["content"] is None
    assert assistant["tool_calls"][0]["function"]["arguments"] == "{}"


async def test_settings_strict_tools_and_named_tool_choice(server, make_openai, registry) -> None:
    server.reply(OPENAI_PATH, Reply(json=openai_completion("ok")))
    settings = ModelSettings(
        temperature=0.2,
        top_p=0.9,
        max_tokens=100,
        stop=("END",),
        seed=7,
        tool_choice="tasks.create",
        strict_tools=True,
        extra_body={"top_k": 5},
    )
    await make_openai(settings=ModelSettings(temperature=1.0, max_tokens=50)).request(
        ModelRequest([UserMessage(content="hi")], registry, settings)
    )
    (sent,) = server.bodies()
    assert sent["tools"] == registry.definitions("openai", strict=True)
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "tasks_create"}}
    assert sent["temperature"] == 0.2
    assert sent["top_p"] == 0.9
    assert sent["max_tokens"] == 100  # compatible servers know `max_tokens`
    assert sent["stop"] == ["END"]
    assert sent["seed"] == 7
    assert sent["top_k"] == 5


async def test_strict_tools_default_on_for_openai_off_for_others(make_openai) -> None:
    assert make_openai(base_url="https://api.openai.com/v1").strict_tools is True
    assert make_openai().strict_tools is False
    assert make_openai(strict_tools=True).strict_tools is True


async def test_tool_choice_modes(server, make_openai, registry) -> None:
    for mode in ("auto", "none", "required"):
        server.reply(OPENAI_PATH, Reply(json=openai_completion("ok")))
        await make_openai().request(
            ModelRequest([UserMessage(content="hi")], registry, ModelSettings(tool_choice=mode))
        )
    assert [b["tool_choice"] for b in server.bodies()] == ["auto", "none", "required"]


async def test_server_saying_stop_after_tool_calls_is_normalised(server, make_openai, registry) -> None:
    server.reply(
        OPENAI_PATH,
        Reply(json=openai_completion(None, [("c", "get_weather", '{"city":"Oslo"}')], finish_reason="stop")),
    )
    response = await make_openai().request(ModelRequest([UserMessage(content="w")], registry))
    assert response.finish_reason == "tool_calls"
    assert response.provider_finish_reason == "stop"


# ----------------------------------------------------------------------------------------------------------
# Streaming, over the real socket


async def test_stream_text_arrives_incrementally(server, make_openai) -> None:
    gate = threading.Event()
    chunks = [
        openai_chunk({"role": "assistant", "content": ""}),
        openai_chunk({"content": "Hel"}),
        openai_chunk({"content": "lo"}),
        openai_chunk({"content": "!"}),
        openai_chunk({}, finish_reason="stop"),
        openai_usage_chunk(9, 3),
    ]
    # frame 0 is the empty role chunk; the gate holds everything after frame 1 ("Hel").
    server.reply(OPENAI_PATH, Reply(frames=openai_stream(chunks), gate=gate))
    events = []
    async with aclosing(make_openai().stream(hello())) as stream:
        async for event in stream:
            events.append(event)
            if event == ModelTextDelta(text="Hel"):
                gate.set()  # the server sends the rest only now: deltas are not buffered

    assert [e.text for e in events if isinstance(e, ModelTextDelta)] == ["Hel", "lo", "!"]
    final = events[-1]
    assert isinstance(final, FinalResponse)
    assert final.response.text == "Hello!"
    assert final.response.finish_reason == "stop"
    assert final.response.usage == Usage(input_tokens=9, output_tokens=3, requests=1)
    (sent,) = server.bodies()
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}


def call_start(index: int, call_id: str, name: str) -> dict[str, Any]:
    return openai_chunk(
        {
            "tool_calls": [
                {
                    "index": index,
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": ""},
                }
            ]
        }
    )


def call_args(index: int, fragment: str) -> dict[str, Any]:
    return openai_chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})


async def test_stream_parallel_calls_interleaved(server, make_openai, registry) -> None:
    chunks = [
        openai_chunk({"role": "assistant", "content": None}),
        call_start(0, "call_a", "get_weather"),
        call_args(0, '{"ci'),
        call_start(1, "call_b", "tasks_create"),
        call_args(1, '{"title"'),
        call_args(0, 'ty": "Pa'),
        call_args(1, ': "Buy milk"}'),
        call_args(0, 'ris"}'),
        openai_chunk({}, finish_reason="tool_calls"),
        openai_usage_chunk(30, 20),
    ]
    server.reply(OPENAI_PATH, Reply(frames=openai_stream(chunks)))
    events = await collect(make_openai(), ModelRequest([UserMessage(content="go")], registry))

    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert deltas[0] == ToolCallDelta(index=0, id="call_a", name="get_weather", arguments_delta="")
    assert deltas[2] == ToolCallDelta(index=1, id="call_b", name="tasks.create", arguments_delta="")
    assert "".join(d.arguments_delta for d in deltas if d.index == 1) == '{"title": "Buy milk"}'
    ready = [e for e in events if isinstance(e, ToolCallReady)]
    assert [r.call for r in ready] == [
        ToolCall(id="call_a", name="get_weather", arguments='{"city": "Paris"}'),
        ToolCall(id="call_b", name="tasks.create", arguments='{"title": "Buy milk"}'),
    ]
    final = events[-1].response
    assert final.tool_calls == [r.call for r in ready]
    assert final.finish_reason == "tool_calls"
    assert final.usage.total_tokens == 50


async def test_stream_call_without_index_servers(server, make_openai, registry) -> None:
    # Some compatible servers (older llama.cpp/Ollama) omit `index` and send each call whole.
    chunks = [
        openai_chunk(
            {"tool_calls": [{"id": "x1", "function": {"name": "get_weather", "arguments": '{"city":"A"}'}}]}
        ),
        openai_chunk(
            {"tool_calls": [{"id": "x2", "function": {"name": "get_weather", "arguments": '{"city":"B"}'}}]}
        ),
        openai_chunk({}, finish_reason="tool_calls"),
    ]
    server.reply(OPENAI_PATH, Reply(frames=openai_stream(chunks, done=False)))
    events = await collect(
        make_openai(stream_usage=False), ModelRequest([UserMessage(content="go")], registry)
    )
    assert [(c.id, c.arguments) for c in events[-1].response.tool_calls] == [
        ("x1", '{"city":"A"}'),
        ("x2", '{"city":"B"}'),
    ]
    assert "stream_options" not in server.bodies()[0]


async def test_stream_that_ends_without_finish_reason_is_an_error_with_partial(
    server, make_openai, registry
) -> None:
    chunks = [
        openai_chunk({"content": "Checking"}),
        call_start(0, "call_a", "get_weather"),
        call_args(0, '{"city": "Pa'),
    ]
    server.reply(OPENAI_PATH, Reply(frames=openai_stream(chunks, done=False)))
    seen: list[Any] = []

    async def consume() -> None:
        async for event in make_openai().stream(ModelRequest([UserMessage(content="go")], registry)):
            seen.append(event)

    with pytest.raises(ProviderStreamError) as info:
        await consume()

    assert [type(e) for e in seen] == [ModelTextDelta, ToolCallDelta, ToolCallDelta]
    partial = info.value.partial
    assert partial is not None
    assert partial.finish_reason == "error"
    assert partial.text == "Checking"
    assert partial.tool_calls == [ToolCall(id="call_a", name="get_weather", arguments='{"city": "Pa')]
    assert "without a finish_reason" in str(info.value)


async def test_stream_dropped_connection_is_an_error_with_partial(server, make_openai) -> None:
    chunks = [openai_chunk({"content": "Once upon"}), openai_chunk({"content": " a time"})]
    server.reply(OPENAI_PATH, Reply(frames=openai_stream(chunks, done=False), cut=True))
    with pytest.raises(ProviderStreamError) as info:
        await collect(make_openai(), hello())
    assert info.value.partial is not None
    assert info.value.partial.text == "Once upon a time"
    assert info.value.__cause__ is not None
    assert len(server.requests) == 1  # a stream that started is never retried


async def test_stream_malformed_chunk_is_a_stream_error(server, make_openai) -> None:
    frames = [*openai_stream([openai_chunk({"content": "ok"})], done=False), "data: {not json\n\n"]
    server.reply(OPENAI_PATH, Reply(frames=frames))
    with pytest.raises(ProviderStreamError) as info:
        await collect(make_openai(), hello())
    assert info.value.partial is not None
    assert info.value.partial.text == "ok"


async def test_stream_retries_until_it_opens(server, make_openai) -> None:
    chunks = [openai_chunk({"content": "fine"}), openai_chunk({}, finish_reason="stop")]
    server.reply(
        OPENAI_PATH,
        Reply(status=503, json={"error": {"message": "overloaded", "type": "server_error"}}),
        Reply(frames=openai_stream(chunks)),
    )
    events = await collect(make_openai(), hello())
    assert events[-1].response.text == "fine"
    assert len(server.requests) == 2


async def test_response_from_stream_equals_response_from_json(server, make_openai, registry) -> None:
    server.reply(
        OPENAI_PATH,
        Reply(json=openai_completion("Hi", [("c1", "get_weather", '{"city":"Rome"}')], usage=(3, 4))),
    )
    chunks = [
        openai_chunk({"content": "Hi"}),
        call_start(0, "c1", "get_weather"),
        call_args(0, '{"city":"Rome"}'),
        openai_chunk({}, finish_reason="tool_calls"),
        openai_usage_chunk(3, 4),
    ]
    server.reply(OPENAI_PATH, Reply(frames=openai_stream(chunks)))
    model = make_openai()
    request = ModelRequest([UserMessage(content="x")], registry)
    whole = await model.request(request)
    streamed = (await collect(model, request))[-1].response
    assert whole == streamed


async def test_request_body_is_json_serialisable_and_sent_once_per_call(server, make_openai) -> None:
    server.reply(OPENAI_PATH, Reply(json=openai_completion("a")), Reply(json=openai_completion("b")))
    model = make_openai()
    assert (await model.request(hello())).text == "a"
    assert (await model.request(hello())).text == "b"
    assert len(server.requests) == 2
    json.dumps(model.build_body(hello(), stream=True))


async def test_model_name(server, make_openai) -> None:
    assert make_openai("llama3.1").name == f"openai-compatible:{server.url}/v1:llama3.1"
    assert make_openai(base_url=None).name == "openai:gpt-4o-mini"


async def test_stopping_a_stream_early_releases_it_and_the_model_stays_usable(server, make_openai) -> None:
    chunks = [openai_chunk({"content": f"w{i} "}) for i in range(50)] + [
        openai_chunk({}, finish_reason="stop")
    ]
    server.reply(OPENAI_PATH, Reply(frames=openai_stream(chunks)), Reply(json=openai_completion("again")))
    model = make_openai()
    async with aclosing(model.stream(hello())) as stream:
        async for event in stream:
            assert event == ModelTextDelta(text="w0 ")
            break
    assert (await model.request(hello())).text == "again"


async def test_content_parts_from_compatible_servers(server, make_openai) -> None:
    body = openai_completion("x")
    body["choices"][0]["message"]["content"] = [
        {"type": "text", "text": "Hello "},
        {"type": "text", "text": "parts"},
    ]
    server.reply(OPENAI_PATH, Reply(json=body))
    assert (await make_openai().request(hello())).text == "Hello parts"


# A Chat Completions response as Google's OpenAI-compatible endpoint
# (generativelanguage.googleapis.com/v1beta/openai) answers a request with two parallel calls: `"id": ""`.
GOOGLE_COMPAT_RESPONSE: dict[str, Any] = {
    "choices": [
        {
            "finish_reason": "tool_calls",
            "index": 0,
            "message": {
                "role": "assistant",
                "tool_calls": [
                    {
                        "function": {"arguments": '{"city":"Paris"}', "name": "get_weather"},
                        "id": "",
                        "type": "function",
                    },
                    {
                        "function": {"arguments": '{"city":"Rome"}', "name": "get_weather"},
                        "id": "",
                        "type": "function",
                    },
                ],
            },
        }
    ],
    "created": 1732000000,
    "model": "gemini-2.0-flash",
    "object": "chat.completion",
    "usage": {"completion_tokens": 10, "prompt_tokens": 40, "total_tokens": 50},
}


async def test_empty_call_ids_get_unique_ids_in_the_model_and_the_format(
    server, make_openai, registry
) -> None:
    from toolrun.formats import get_format

    server.reply(OPENAI_PATH, Reply(json=GOOGLE_COMPAT_RESPONSE))
    response = await make_openai().request(ModelRequest([UserMessage(content="Weather?")], registry))
    parsed = get_format("openai").parse_tool_calls(GOOGLE_COMPAT_RESPONSE)
    chunks = [
        call_start(0, "", "get_weather"),
        call_args(0, '{"city":"Paris"}'),
        call_start(1, "", "get_weather"),
        call_args(1, '{"city":"Rome"}'),
        openai_chunk({}, finish_reason="tool_calls"),
    ]
    server.reply(OPENAI_PATH, Reply(frames=openai_stream(chunks)))
    streamed = (await collect(make_openai(), ModelRequest([UserMessage(content="Weather?")], registry)))[-1]
    for calls in (response.tool_calls, parsed, streamed.response.tool_calls):
        assert [(c.name, c.arguments) for c in calls] == [
            ("get_weather", '{"city":"Paris"}'),
            ("get_weather", '{"city":"Rome"}'),
        ]
        assert all(c.id.startswith("call_") for c in calls) and len({c.id for c in calls}) == 2


_MISSING = object()
_IDS = st.one_of(
    st.none(),
    st.just(""),
    st.text(max_size=40),
    st.integers(),
    st.booleans(),
    st.floats(allow_nan=False),
    st.lists(st.text(max_size=3), max_size=2),
    st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
)


@settings(max_examples=200, deadline=None)
@given(ids=st.lists(st.one_of(_IDS, st.just(_MISSING)), min_size=1, max_size=4))
def test_one_rule_for_call_ids_in_every_reader(ids: list[Any]) -> None:
    """`parse_tool_calls` and `OpenAIModel` read the same response to the same calls, or both refuse it."""
    from toolrun.formats import ToolCallParseError, get_format
    from toolrun.models import OpenAIModel, ProviderResponseError

    calls = []
    for i, call_id in enumerate(ids):
        call = {"type": "function", "function": {"name": "get_weather", "arguments": f'{{"n": {i}}}'}}
        if call_id is not _MISSING:
            call["id"] = call_id
        calls.append(call)
    body = {
        "choices": [
            {"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "tool_calls": calls}}
        ]
    }
    model = OpenAIModel("m", base_url="http://127.0.0.1:9/v1", api_key="sk-test")
    try:
        from_model = model.parse_response(body, ModelRequest([UserMessage(content="x")])).tool_calls
    except ProviderResponseError:
        from_model = None
    try:
        from_format = get_format("openai").parse_tool_calls(body)
    except ToolCallParseError:
        from_format = None
    assert (from_model is None) == (from_format is None)
    if from_model is None or from_format is None:
        assert any(
            not isinstance(c, str | int | None) or isinstance(c, bool) for c in ids if c is not _MISSING
        )
        return
    for a, b, sent in zip(from_model, from_format, ids, strict=True):
        assert a.name == b.name and a.arguments == b.arguments
        if sent is _MISSING or sent in (None, ""):
            assert a.id.startswith("call_") and b.id.startswith("call_") and a.id != b.id  # fresh each time
        else:
            assert a.id == b.id == str(sent) != ""
    for parsed in (from_model, from_format):
        generated = [
            c.id for c, sent in zip(parsed, ids, strict=True) if sent is _MISSING or sent in (None, "")
        ]
        assert len(set(generated)) == len(generated)


# -- the two transports: same bodies, same responses ----------------------------------------------------

RECORDED = [
    openai_completion("Plain text."),
    openai_completion(None, [("call_1", "get_weather", '{"city":"Rome"}')]),
    openai_completion(
        "Both.", [("c1", "get_weather", '{"city":"Oslo"}'), ("c2", "tasks_create", '{"title":"x"}')]
    ),
    openai_completion(None, [("c9", "get_weather", "{}")], finish_reason="stop"),  # "stop" after calls
    {
        **openai_completion(None),
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "from "}, {"type": "text", "text": "parts"}],
                },
                "finish_reason": "stop",
            }
        ],
    },
    {**openai_completion("x"), "usage": None},
]


@pytest.mark.parametrize("recorded", RECORDED)
async def test_httpx_and_sdk_transports_parse_a_recorded_response_alike(
    server, make_openai_httpx, make_openai_sdk, registry, recorded: dict[str, Any]
) -> None:
    request = ModelRequest([UserMessage(content="x")], registry)
    server.reply(OPENAI_PATH, Reply(json=recorded), Reply(json=recorded))
    ours = await make_openai_httpx().request(request)
    sdk = await make_openai_sdk().request(request)
    assert ours.text == sdk.text
    assert [(c.id, c.name, c.arguments) for c in ours.tool_calls] == [
        (c.id, c.name, c.arguments) for c in sdk.tool_calls
    ]
    assert (
        ours.usage,
        ours.finish_reason,
        ours.provider_finish_reason,
        ours.model_name,
        ours.response_id,
    ) == (
        sdk.usage,
        sdk.finish_reason,
        sdk.provider_finish_reason,
        sdk.model_name,
        sdk.response_id,
    )
    bodies = server.bodies(OPENAI_PATH)
    assert bodies[0] == bodies[1]  # the same JSON body went out through both


async def test_empty_tool_call_ids_get_fresh_ids_on_both_transports(
    server, make_openai_httpx, make_openai_sdk, registry
) -> None:
    recorded = openai_completion(
        None, [("", "get_weather", '{"city":"A"}'), ("", "get_weather", '{"city":"B"}')]
    )
    request = ModelRequest([UserMessage(content="x")], registry)
    server.reply(OPENAI_PATH, Reply(json=recorded), Reply(json=recorded))
    for make in (make_openai_httpx, make_openai_sdk):
        calls = (await make().request(request)).tool_calls
        ids = [c.id for c in calls]
        assert all(ids) and len(set(ids)) == 2


async def test_httpx_transport_encodes_tool_definitions_once(server, make_openai_httpx, registry) -> None:
    import toolrun.models.openai as openai_module

    encoded: list[Any] = []
    real = openai_module._encode

    def counting(value: Any) -> bytes:
        encoded.append(value)
        return real(value)

    server.reply(OPENAI_PATH, *[Reply(json=openai_completion("ok"))] * 3)
    model = make_openai_httpx()
    request = ModelRequest([UserMessage(content="x")], registry)
    openai_module._encode = counting
    try:
        for _ in range(3):
            await model.request(request)
    finally:
        openai_module._encode = real
    tool_lists = [v for v in encoded if isinstance(v, list)]
    assert len(tool_lists) == 1  # the definitions were encoded for the first request only
    bodies = server.bodies(OPENAI_PATH)
    assert bodies[0] == bodies[1] == bodies[2]
    assert [t["function"]["name"] for t in bodies[2]["tools"]] == [
        d["function"]["name"] for d in registry.definitions("openai")
    ]


# -- the lean client's own pool: straight to the transport, through the client when a proxy applies ---------


async def test_httpx_transport_sends_straight_to_its_pool_with_every_header(
    server, make_openai_httpx, registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    server.reply(OPENAI_PATH, Reply(json=openai_completion("one")), Reply(json=openai_completion("two")))
    model = make_openai_httpx()
    request = ModelRequest([UserMessage(content="x")], registry)
    assert (await model.request(request)).text == "one"
    assert (await model.request(request)).text == "two"
    http = model._http()
    assert http._transports  # the direct path was taken
    for recorded in server.requests:
        headers = {k.lower(): v for k, v in recorded.headers.items()}
        assert headers["authorization"] == "Bearer sk-test"
        assert headers["content-type"] == "application/json"
        assert headers["accept"] == "application/json"
        assert int(headers["content-length"]) > 0


async def test_httpx_transport_goes_through_the_client_when_the_environment_names_a_proxy(
    server, make_openai_httpx, registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on: the "proxy" refuses every connection
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{dead}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    server.reply(OPENAI_PATH, Reply(json=openai_completion("never")))
    model = make_openai_httpx(retry=RetryPolicy(max_retries=0))
    assert not model._http()._transports
    with pytest.raises(ProviderUnavailableError):
        await model.request(ModelRequest([UserMessage(content="x")], registry))
    assert server.requests == []  # it went to the proxy, as httpx's client does with trust_env


async def test_lean_transports_keep_a_streams_connection(server, make_openai_lean) -> None:
    """The consumer stops at the finish reason; the stream is still read to its end (usage, `[DONE]`),
    so the next request goes out on the same connection instead of a new one."""
    chunks = [
        openai_chunk({"role": "assistant", "content": "Hi"}),
        openai_chunk({}, finish_reason="stop"),
        openai_usage_chunk(9, 3),
    ]
    server.reply(OPENAI_PATH, *[Reply(frames=openai_stream(chunks)) for _ in range(3)])
    model = make_openai_lean()
    for _ in range(3):
        async with aclosing(model.stream(hello())) as stream:
            events = [e async for e in stream]
        assert isinstance(events[-1], FinalResponse)
    peers = {r.peer for r in server.requests}
    assert len(server.requests) == 3 and len(peers) == 1, peers


async def test_httpx_transport_spreads_concurrent_requests_over_small_pools(
    server, make_openai_httpx, registry
) -> None:
    """httpcore's pool scan is quadratic in its connections: concurrent requests fill pools of a few
    requests each, and every request leaves its pool's count when its answer is closed."""
    import asyncio

    chunks = [openai_chunk({"role": "assistant", "content": "Hi"}), openai_chunk({}, finish_reason="stop")]
    gate = threading.Event()
    server.reply(OPENAI_PATH, *[Reply(frames=openai_stream(chunks), gate=gate) for _ in range(10)])
    server.reply(OPENAI_PATH, Reply(json=openai_completion("plain")))
    model = make_openai_httpx()
    http = model._http()
    seen: list[list[int]] = []

    async def one() -> None:
        async with aclosing(model.stream(hello())) as stream:
            async for _ in stream:
                seen.append(list(http._in_flight))
                gate.set()

    await asyncio.gather(*(one() for _ in range(10)))
    assert max(max(counts) for counts in seen) <= 4
    assert max(sum(1 for c in counts if c) for counts in seen) >= 2  # more than one pool in use
    assert http._in_flight == [0] * len(http._in_flight)
    assert (await model.request(ModelRequest([UserMessage(content="x")], registry))).text == "plain"
    assert http._in_flight == [0] * len(http._in_flight)
