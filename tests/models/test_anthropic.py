"""AnthropicModel against a fake Messages API server on 127.0.0.1 (JSON and SSE with `event:` lines)."""

from __future__ import annotations

import json
import threading
from contextlib import aclosing
from typing import Any

import pytest

from toolrun import ToolCall
from toolrun.formats import get_format
from toolrun.models import (
    AssistantMessage,
    FinalResponse,
    ModelRequest,
    ModelSettings,
    ModelTextDelta,
    ProviderStreamError,
    ProviderUnavailableError,
    SystemMessage,
    ToolCallDelta,
    ToolCallReady,
    ToolResultMessage,
    Usage,
    UserMessage,
)

from .fakes import (
    ANTHROPIC_PATH,
    Reply,
    anthropic_frame,
    anthropic_message,
    anthropic_start,
    anthropic_stream,
    text_block,
    tool_use_block,
)


async def collect(model: Any, request: ModelRequest) -> list[Any]:
    return [event async for event in model.stream(request)]


async def test_plain_text_and_system_prompt_placement(server, make_anthropic) -> None:
    server.reply(ANTHROPIC_PATH, Reply(json=anthropic_message([text_block("Hello!")], usage=(25, 10))))
    request = ModelRequest(
        [SystemMessage(content="Be brief."), UserMessage(content="Hi"), SystemMessage(content="Be kind.")]
    )
    response = await make_anthropic().request(request)

    assert response.text == "Hello!"
    assert response.finish_reason == "stop"
    assert response.provider_finish_reason == "end_turn"
    assert response.usage == Usage(input_tokens=25, output_tokens=10, requests=1)
    assert response.model_name == "claude-sonnet-4-5-20250929"
    (sent,) = server.bodies()
    assert sent == {
        "model": "claude-haiku-4-5",
        "max_tokens": 4096,
        "system": "Be brief.\n\nBe kind.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
    }
    headers = server.requests[0].headers
    # The key travels as `x-api-key` (or, in newer SDKs, a bearer token): either way, the one given.
    assert "sk-ant-test" in headers.get("x-api-key", "") + headers.get("authorization", "")
    assert "anthropic-version" in headers


async def test_tools_in_anthropic_format_and_one_tool_use(server, make_anthropic, registry) -> None:
    server.reply(
        ANTHROPIC_PATH,
        Reply(
            json=anthropic_message(
                [text_block("Let me look."), tool_use_block("toolu_01", "get_weather", {"city": "Paris"})]
            )
        ),
    )
    response = await make_anthropic().request(ModelRequest([UserMessage(content="Weather?")], registry))

    assert response.text == "Let me look."
    assert response.tool_calls == [ToolCall(id="toolu_01", name="get_weather", arguments={"city": "Paris"})]
    assert response.finish_reason == "tool_calls"
    assert response.provider_finish_reason == "tool_use"
    (sent,) = server.bodies()
    assert sent["tools"] == registry.definitions("anthropic", strict=False)
    assert [t["name"] for t in sent["tools"]] == ["get_weather", "tasks_create"]
    assert all("input_schema" in t for t in sent["tools"])


async def test_parallel_tool_use_maps_aliases_back(server, make_anthropic, registry) -> None:
    server.reply(
        ANTHROPIC_PATH,
        Reply(
            json=anthropic_message(
                [
                    tool_use_block("toolu_01", "get_weather", {"city": "Paris"}),
                    tool_use_block("toolu_02", "tasks_create", {"title": "Umbrella"}),
                ]
            )
        ),
    )
    response = await make_anthropic().request(ModelRequest([UserMessage(content="go")], registry))
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("toolu_01", "get_weather", {"city": "Paris"}),
        ("toolu_02", "tasks.create", {"title": "Umbrella"}),
    ]


async def test_tool_results_go_in_one_user_turn(server, make_anthropic, registry) -> None:
    server.reply(ANTHROPIC_PATH, Reply(json=anthropic_message([text_block("Done.")])))
    messages = [
        SystemMessage(content="You help."),
        UserMessage(content="Weather and a task"),
        AssistantMessage(
            content="On it.",
            tool_calls=[
                ToolCall(id="toolu_1", name="get_weather", arguments='{"city": "Paris"}'),
                ToolCall(id="toolu_2", name="tasks.create", arguments={"title": "x"}),
            ],
        ),
        ToolResultMessage(call_id="toolu_1", tool_name="get_weather", content='{"temp":21}'),
        ToolResultMessage(call_id="toolu_2", tool_name="tasks.create", content="Error X: no", is_error=True),
        UserMessage(content="Also, thanks!"),
    ]
    await make_anthropic().request(ModelRequest(messages, registry))

    (sent,) = server.bodies()
    assert sent["system"] == "You help."
    assert sent["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather and a task"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "On it."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "toolu_2", "name": "tasks_create", "input": {"title": "x"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"temp":21}'},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "Error X: no", "is_error": True},
                {"type": "text", "text": "Also, thanks!"},
            ],
        },
    ]


async def test_malformed_arguments_in_history_still_send_an_object(server, make_anthropic, registry) -> None:
    server.reply(ANTHROPIC_PATH, Reply(json=anthropic_message([text_block("ok")])))
    messages = [
        UserMessage(content="hi"),
        AssistantMessage(tool_calls=[ToolCall(id="t1", name="get_weather", arguments='{"city": ')]),
        ToolResultMessage(
            call_id="t1", tool_name="get_weather", content="Error INVALID_ARGUMENTS", is_error=True
        ),
    ]
    await make_anthropic().request(ModelRequest(messages, registry))
    tool_use = server.bodies()[0]["messages"][1]["content"][0]
    assert tool_use["input"] == {"_invalid_arguments": '{"city": '}


async def test_settings_and_tool_choice(server, make_anthropic, registry) -> None:
    cases = [
        (ModelSettings(tool_choice="auto"), {"type": "auto"}),
        (ModelSettings(tool_choice="required"), {"type": "any"}),
        (ModelSettings(tool_choice="none"), {"type": "none"}),
        (ModelSettings(tool_choice="tasks.create"), {"type": "tool", "name": "tasks_create"}),
        (ModelSettings(parallel_tool_calls=False), {"type": "auto", "disable_parallel_tool_use": True}),
    ]
    model = make_anthropic(settings=ModelSettings(max_tokens=1000, temperature=0.5))
    for settings, _ in cases:
        server.reply(ANTHROPIC_PATH, Reply(json=anthropic_message([text_block("ok")])))
        await model.request(ModelRequest([UserMessage(content="hi")], registry, settings))
    bodies = server.bodies()
    assert [b["tool_choice"] for b in bodies] == [expected for _, expected in cases]
    assert {b["max_tokens"] for b in bodies} == {1000}
    assert {b["temperature"] for b in bodies} == {0.5}

    server.reply(ANTHROPIC_PATH, Reply(json=anthropic_message([text_block("ok")])))
    await model.request(
        ModelRequest(
            [UserMessage(content="hi")], registry, ModelSettings(stop=("##",), top_p=0.8, strict_tools=True)
        )
    )
    last = server.bodies()[-1]
    assert last["stop_sequences"] == ["##"]
    assert last["top_p"] == 0.8
    assert last["tools"] == registry.definitions("anthropic", strict=True)


async def test_cache_usage_is_counted_in_input(server, make_anthropic) -> None:
    body = anthropic_message([text_block("ok")])
    body["usage"] = {
        "input_tokens": 10,
        "output_tokens": 4,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 20,
    }
    server.reply(ANTHROPIC_PATH, Reply(json=body))
    response = await make_anthropic().request(ModelRequest([UserMessage(content="hi")]))
    assert response.usage == Usage(
        input_tokens=130, output_tokens=4, cache_read_tokens=100, cache_write_tokens=20, requests=1
    )


# ----------------------------------------------------------------------------------------------------------
# Streaming, over the real socket


async def test_stream_text_arrives_incrementally(server, make_anthropic) -> None:
    gate = threading.Event()
    frames = anthropic_stream([("text", ["Hel", "lo", "!"])], usage=(25, 12))
    # frames: message_start, ping, content_block_start, delta "Hel", ...: hold from the first delta on,
    # then release when the client has seen... the start only. Reorder so frame 1 is the first delta.
    frames = [frames[0], frames[3], *frames[1:3], *frames[4:]]
    server.reply(ANTHROPIC_PATH, Reply(frames=frames, gate=gate))
    events = []
    async with aclosing(make_anthropic().stream(ModelRequest([UserMessage(content="Hi")]))) as stream:
        async for event in stream:
            events.append(event)
            if event == ModelTextDelta(text="Hel"):
                gate.set()
    assert [e.text for e in events if isinstance(e, ModelTextDelta)] == ["Hel", "lo", "!"]
    final = events[-1]
    assert isinstance(final, FinalResponse)
    assert final.response.text == "Hello!"
    assert final.response.usage == Usage(input_tokens=25, output_tokens=12, requests=1)
    assert final.response.finish_reason == "stop"
    assert server.bodies()[0]["stream"] is True


async def test_stream_tool_use_with_input_json_deltas(server, make_anthropic, registry) -> None:
    frames = anthropic_stream(
        [
            ("text", ["Checking both."]),
            ("tool_use", ("toolu_a", "get_weather", ["", '{"ci', 'ty": "Pa', 'ris"}'])),
            ("tool_use", ("toolu_b", "tasks_create", ['{"title"', ': "Buy milk"}'])),
        ],
        stop_reason="tool_use",
    )
    server.reply(ANTHROPIC_PATH, Reply(frames=frames))
    events = await collect(make_anthropic(), ModelRequest([UserMessage(content="go")], registry))

    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert deltas[0] == ToolCallDelta(index=0, id="toolu_a", name="get_weather", arguments_delta="")
    assert [d.index for d in deltas] == [0] * 5 + [1] * 3  # each block start, then its json deltas
    ready = [e for e in events if isinstance(e, ToolCallReady)]
    assert [r.call for r in ready] == [
        ToolCall(id="toolu_a", name="get_weather", arguments={"city": "Paris"}),
        ToolCall(id="toolu_b", name="tasks.create", arguments={"title": "Buy milk"}),
    ]
    # Each call is ready at its own content_block_stop, before the next block starts.
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("ToolCallReady") < max(i for i, e in enumerate(events) if getattr(e, "index", -1) == 1)
    final = events[-1].response
    assert final.text == "Checking both."
    assert final.tool_calls == [r.call for r in ready]
    assert final.finish_reason == "tool_calls"


async def test_stream_equals_json_response(server, make_anthropic, registry) -> None:
    server.reply(
        ANTHROPIC_PATH,
        Reply(
            json=anthropic_message(
                [text_block("Hi"), tool_use_block("toolu_1", "get_weather", {"city": "Rome"})]
            )
        ),
    )
    server.reply(
        ANTHROPIC_PATH,
        Reply(
            frames=anthropic_stream(
                [("text", ["H", "i"]), ("tool_use", ("toolu_1", "get_weather", ['{"city":', ' "Rome"}']))],
                stop_reason="tool_use",
            )
        ),
    )
    model = make_anthropic()
    request = ModelRequest([UserMessage(content="x")], registry)
    whole = await model.request(request)
    streamed = (await collect(model, request))[-1].response
    assert (whole.text, whole.tool_calls, whole.finish_reason, whole.usage) == (
        streamed.text,
        streamed.tool_calls,
        streamed.finish_reason,
        streamed.usage,
    )


async def test_tool_without_arguments_streams_as_empty_object(server, make_anthropic, registry) -> None:
    frames = anthropic_stream([("tool_use", ("toolu_z", "get_weather", [""]))], stop_reason="tool_use")
    server.reply(ANTHROPIC_PATH, Reply(frames=frames))
    events = await collect(make_anthropic(), ModelRequest([UserMessage(content="go")], registry))
    assert events[-1].response.tool_calls == [ToolCall(id="toolu_z", name="get_weather", arguments={})]


async def test_stream_without_message_stop_is_an_error_with_partial(server, make_anthropic, registry) -> None:
    frames = anthropic_stream(
        [("text", ["Let me"]), ("tool_use", ("toolu_a", "get_weather", ['{"city": "Pa']))], complete=False
    )
    frames = frames[:-1]  # also lose the last content_block_stop: the call never completed
    server.reply(ANTHROPIC_PATH, Reply(frames=frames))
    with pytest.raises(ProviderStreamError) as info:
        await collect(make_anthropic(), ModelRequest([UserMessage(content="go")], registry))
    partial = info.value.partial
    assert partial is not None
    assert partial.finish_reason == "error"
    assert partial.text == "Let me"
    assert partial.tool_calls == [ToolCall(id="toolu_a", name="get_weather", arguments='{"city": "Pa')]
    assert "message_stop" in str(info.value)


async def test_stream_dropped_connection_is_an_error_with_partial(server, make_anthropic) -> None:
    frames = anthropic_stream([("text", ["Once", " upon"])], complete=False)[:-1]
    server.reply(ANTHROPIC_PATH, Reply(frames=frames, cut=True))
    with pytest.raises(ProviderStreamError) as info:
        await collect(make_anthropic(), ModelRequest([UserMessage(content="go")]))
    assert info.value.partial is not None
    assert info.value.partial.text == "Once upon"
    assert info.value.__cause__ is not None
    assert len(server.requests) == 1


async def test_error_event_mid_stream(server, make_anthropic) -> None:
    frames = anthropic_stream([("text", ["Part"])], complete=False)
    frames.append(
        anthropic_frame({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    )
    server.reply(ANTHROPIC_PATH, Reply(frames=frames))
    with pytest.raises(ProviderStreamError) as info:
        await collect(make_anthropic(), ModelRequest([UserMessage(content="go")]))
    assert "Overloaded" in str(info.value)
    assert isinstance(info.value.__cause__, Exception)
    assert info.value.partial is not None
    assert info.value.partial.text == "Part"


async def test_overloaded_before_stream_opens_is_retried(server, make_anthropic) -> None:
    overloaded = Reply(
        status=529, json={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    )
    server.reply(ANTHROPIC_PATH, overloaded, overloaded, overloaded)
    with pytest.raises(ProviderUnavailableError):
        await collect(make_anthropic(), ModelRequest([UserMessage(content="go")]))
    assert len(server.requests) == 3


# A message in which Claude first used server tools (tool search, then code execution), which Anthropic runs
# itself, then called one of the client's tools: the blocks as the Messages API sends them.
_SERVER_TOOL_BLOCKS: list[tuple[dict[str, Any], list[str]]] = [
    (
        {"type": "server_tool_use", "id": "srvtoolu_01", "name": "tool_search_tool_regex", "input": {}},
        ['{"query"', ': "weather"}'],
    ),
    (
        {
            "type": "tool_search_tool_result",
            "tool_use_id": "srvtoolu_01",
            "content": {
                "type": "tool_search_tool_search_result",
                "tool_references": [{"type": "tool_reference", "tool_name": "get_weather"}],
            },
        },
        [],
    ),
    (
        {"type": "server_tool_use", "id": "srvtoolu_02", "name": "bash_code_execution", "input": {}},
        ['{"command": "echo', ' 1"}'],
    ),
    (
        {
            "type": "bash_code_execution_tool_result",
            "tool_use_id": "srvtoolu_02",
            "content": {
                "type": "bash_code_execution_result",
                "stdout": "1\n",
                "stderr": "",
                "return_code": 0,
            },
        },
        [],
    ),
    ({"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {}}, ['{"city": ', '"Oslo"}']),
]


def _server_tool_frames() -> list[str]:
    events: list[dict[str, Any]] = [anthropic_start("msg_01Srv")]
    for index, (block, pieces) in enumerate(_SERVER_TOOL_BLOCKS):
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        events += [
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "input_json_delta", "partial_json": p},
            }
            for p in pieces
        ]
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 10},
        }
    )
    events.append({"type": "message_stop"})
    return [anthropic_frame(e) for e in events]


def _server_tool_message() -> dict[str, Any]:
    blocks = []
    for block, pieces in _SERVER_TOOL_BLOCKS:
        full = dict(block)
        if "input" in full:
            full["input"] = json.loads("".join(pieces))
        blocks.append(full)
    return anthropic_message(blocks, stop_reason="tool_use")


async def test_server_tool_blocks_are_not_the_clients_tool_calls(server, make_anthropic, registry) -> None:
    """`server_tool_use` blocks (tool search, code execution) run at Anthropic: neither the stream, nor the
    JSON response, nor the wire format reads them as calls the client must run."""
    server.reply(ANTHROPIC_PATH, Reply(frames=_server_tool_frames()))
    server.reply(ANTHROPIC_PATH, Reply(json=_server_tool_message()))
    model = make_anthropic()
    request = ModelRequest([UserMessage(content="Weather in Oslo?")], registry)
    events = await collect(model, request)
    whole = await model.request(request)
    only = [ToolCall(id="toolu_01", name="get_weather", arguments={"city": "Oslo"})]
    assert [e.call for e in events if isinstance(e, ToolCallReady)] == only
    assert all(e.name != "" and e.index == 0 for e in events if isinstance(e, ToolCallDelta))
    assert events[-1].response.tool_calls == only
    assert whole.tool_calls == only
    assert get_format("anthropic").parse_tool_calls(_server_tool_message()) == only


# A turn Anthropic paused (`pause_turn`: its own server-tool loop ran long): the first part ends on a
# `server_tool_use` whose result only the continuation brings.
_PAUSED = [
    text_block("Let me look that up."),
    {
        "type": "server_tool_use",
        "id": "srvtoolu_p1",
        "name": "web_search",
        "input": {"query": "oslo weather"},
    },
]
_CONTINUED = [
    {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_p1",
        "content": [
            {
                "type": "web_search_result",
                "url": "https://weather.example/oslo",
                "title": "Oslo",
                "encrypted_content": "EqgfCioIARgBIiQ3",
                "page_age": None,
            }
        ],
    },
    text_block(" It is 4 °C."),
]


def _frames_of(blocks: list[dict[str, Any]], stop_reason: str, message_id: str) -> list[str]:
    events: list[dict[str, Any]] = [anthropic_start(message_id)]
    for index, block in enumerate(blocks):
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": 7},
        }
    )
    events.append({"type": "message_stop"})
    return [anthropic_frame(e) for e in events]


def _unpaired_server_calls(turn: dict[str, Any]) -> set[str]:
    """The `server_tool_use` ids of an assistant turn that no result block of the same turn answers."""
    calls = {b["id"] for b in turn["content"] if b["type"] == "server_tool_use"}
    answered = {b.get("tool_use_id") for b in turn["content"] if b["type"].endswith("_tool_result")}
    return calls - answered


async def _next_turn_body(server: Any, model: Any, paused: Any) -> dict[str, Any]:
    """The body of the conversation's next request, after the (continued) turn was stored."""
    history = [
        UserMessage(content="Weather in Oslo?"),
        AssistantMessage(
            content=paused.text, tool_calls=paused.tool_calls, provider_data=paused.provider_data
        ),
        UserMessage(content="Thanks"),
    ]
    server.reply(ANTHROPIC_PATH, Reply(json=anthropic_message([text_block("You're welcome.")])))
    await model.request(ModelRequest(history))
    return dict(server.bodies(ANTHROPIC_PATH)[-1])


async def test_a_paused_turn_is_continued_and_stored_as_one_turn(server, make_anthropic) -> None:
    """`pause_turn` is continued at once (the paused content sent back as the last assistant turn); the
    parts make one response, and the next request sends them back as one assistant turn in which the
    server tool's call has its result. Ended at the pause, every later request would be refused."""
    server.reply(
        ANTHROPIC_PATH,
        Reply(json=anthropic_message(_PAUSED, stop_reason="pause_turn")),
        Reply(json=anthropic_message(_CONTINUED, stop_reason="end_turn")),
    )
    model = make_anthropic()
    response = await model.request(ModelRequest([UserMessage(content="Weather in Oslo?")]))
    assert response.text == "Let me look that up. It is 4 °C."
    assert (response.finish_reason, response.provider_finish_reason) == ("stop", "end_turn")
    assert response.usage.requests == 2 and response.usage.output_tokens == 20
    first, continuation = server.bodies(ANTHROPIC_PATH)
    assert continuation["messages"][:-1] == first["messages"]
    assert continuation["messages"][-1] == {"role": "assistant", "content": _PAUSED}

    later = await _next_turn_body(server, model, response)
    assert later["messages"][1] == {"role": "assistant", "content": _PAUSED + _CONTINUED}
    assert _unpaired_server_calls(later["messages"][1]) == set()


async def test_a_paused_streamed_turn_is_continued_in_a_second_stream(server, make_anthropic) -> None:
    server.reply(
        ANTHROPIC_PATH,
        Reply(frames=_frames_of(_PAUSED, "pause_turn", "msg_01Paused")),
        Reply(frames=_frames_of(_CONTINUED, "end_turn", "msg_01Continued")),
    )
    model = make_anthropic()
    events = await collect(model, ModelRequest([UserMessage(content="Weather in Oslo?")]))
    assert (
        "".join(e.text for e in events if isinstance(e, ModelTextDelta)) == "Let me look that up. It is 4 °C."
    )
    finals = [e for e in events if isinstance(e, FinalResponse)]
    assert len(finals) == 1 and events[-1] is finals[0]
    whole = finals[0].response
    assert whole.text == "Let me look that up. It is 4 °C." and whole.provider_finish_reason == "end_turn"
    assert server.bodies(ANTHROPIC_PATH)[1]["messages"][-1] == {"role": "assistant", "content": _PAUSED}

    later = await _next_turn_body(server, model, whole)
    assert later["messages"][1] == {"role": "assistant", "content": _PAUSED + _CONTINUED}


async def test_a_turn_paused_again_and_again_is_returned_after_the_last_continuation(
    server, make_anthropic, monkeypatch
) -> None:
    import toolrun.models.anthropic as anthropic_module

    monkeypatch.setattr(anthropic_module, "PAUSE_CONTINUATIONS", 2)
    paused = Reply(json=anthropic_message([text_block("…")], stop_reason="pause_turn"))
    server.reply(ANTHROPIC_PATH, paused, paused, paused, paused)
    response = await make_anthropic().request(ModelRequest([UserMessage(content="go")]))
    assert len(server.bodies(ANTHROPIC_PATH)) == 3  # the turn and two continuations, no more
    assert response.provider_finish_reason == "pause_turn" and response.text == "………"


async def test_a_stored_turn_left_paused_does_not_brick_the_conversation(server, make_anthropic) -> None:
    """A turn stored while paused (its continuations ran out, or stored by an older toolrun) holds a
    server tool's call without its result: sent back as it is before the next user message, the API
    refuses that request and every later one. Its text is sent instead; as the last turn (a continuation)
    it goes as it came, and a turn with a client call keeps its server blocks (the API answers them)."""
    paused = AssistantMessage(
        content="Let me look that up.", provider_data={"anthropic": {"content": _PAUSED}}
    )
    server.reply(ANTHROPIC_PATH, *[Reply(json=anthropic_message([text_block("ok")])) for _ in range(3)])
    model = make_anthropic()

    await model.request(ModelRequest([UserMessage(content="Weather?"), paused, UserMessage(content="And?")]))
    sent = server.bodies(ANTHROPIC_PATH)[-1]["messages"][1]
    assert sent == {"role": "assistant", "content": [text_block("Let me look that up.")]}

    await model.request(ModelRequest([UserMessage(content="Weather?"), paused]))
    assert server.bodies(ANTHROPIC_PATH)[-1]["messages"][-1] == {"role": "assistant", "content": _PAUSED}

    call = tool_use_block("toolu_9", "get_weather", {"city": "Oslo"})
    mixed = AssistantMessage(
        content="Let me look that up.",
        tool_calls=[ToolCall(id="toolu_9", name="get_weather", arguments={"city": "Oslo"})],
        provider_data={"anthropic": {"content": [*_PAUSED, call]}},
    )
    result = ToolResultMessage(call_id="toolu_9", tool_name="get_weather", content="4 °C")
    await model.request(ModelRequest([UserMessage(content="Weather?"), mixed, result]))
    assert server.bodies(ANTHROPIC_PATH)[-1]["messages"][1]["content"] == [*_PAUSED, call]


@pytest.mark.parametrize("variant", ["regex", "bm25"])
async def test_a_tool_search_result_typed_by_its_variant_is_sent_back_as_requests_take_it(
    server, make_anthropic, variant: str
) -> None:
    search = {
        "type": "server_tool_use",
        "id": "srvtoolu_s",
        "name": f"tool_search_tool_{variant}",
        "input": {},
    }
    found = {
        "type": f"tool_search_tool_{variant}_tool_result",
        "tool_use_id": "srvtoolu_s",
        "content": {
            "type": "tool_search_tool_search_result",
            "tool_references": [{"type": "tool_reference", "tool_name": "get_weather"}],
        },
    }
    call = tool_use_block("toolu_w", "get_weather", {"city": "Oslo"})
    turn = AssistantMessage(
        tool_calls=[ToolCall(id="toolu_w", name="get_weather", arguments={"city": "Oslo"})],
        provider_data={"anthropic": {"content": [search, found, call]}},
    )
    result = ToolResultMessage(call_id="toolu_w", tool_name="get_weather", content="4 °C")
    server.reply(ANTHROPIC_PATH, Reply(json=anthropic_message([text_block("4 °C in Oslo.")])))
    await make_anthropic().request(ModelRequest([UserMessage(content="Weather?"), turn, result]))
    sent = server.bodies(ANTHROPIC_PATH)[-1]["messages"][1]["content"]
    assert sent == [search, {**found, "type": "tool_search_tool_result"}, call]


async def test_kept_text_blocks_are_sent_as_requests_take_them(server, make_anthropic) -> None:
    """A kept turn's text blocks go back without what requests refuse: `citations: null`, an SDK's
    `parsed_output`, a block with no visible text; citations that are there stay."""
    cited = {"type": "text", "text": "Oslo is 4 °C.", "citations": [{"type": "web_search_result_location"}]}
    kept = [
        {"type": "text", "text": "Let me look that up.", "citations": None, "parsed_output": None},
        *_PAUSED[1:],
        *_CONTINUED[:1],
        {"type": "text", "text": " \n "},
        cited,
    ]
    turn = AssistantMessage(
        content="Let me look that up.Oslo is 4 °C.", provider_data={"anthropic": {"content": kept}}
    )
    server.reply(ANTHROPIC_PATH, Reply(json=anthropic_message([text_block("ok")])))
    await make_anthropic().request(
        ModelRequest([UserMessage(content="Weather?"), turn, UserMessage(content="And?")])
    )
    sent = server.bodies(ANTHROPIC_PATH)[-1]["messages"][1]["content"]
    assert sent == [text_block("Let me look that up."), *_PAUSED[1:], *_CONTINUED[:1], cited]


async def test_an_assistant_turn_of_white_space_and_a_call_sends_no_text_block(
    server, make_anthropic
) -> None:
    """Requests refuse a text block of only white space; a turn whose text is "\\n\\n" before its call
    (stored from a model that wrote it) goes as its call alone, so the conversation can go on."""
    turn = AssistantMessage(
        content="\n\n", tool_calls=[ToolCall(id="toolu_1", name="get_weather", arguments={"city": "Oslo"})]
    )
    result = ToolResultMessage(call_id="toolu_1", tool_name="get_weather", content="4 °C")
    server.reply(ANTHROPIC_PATH, Reply(json=anthropic_message([text_block("4 °C.")])))
    await make_anthropic().request(ModelRequest([UserMessage(content="Weather?"), turn, result]))
    sent = server.bodies(ANTHROPIC_PATH)[-1]["messages"][1]
    assert sent == {
        "role": "assistant",
        "content": [tool_use_block("toolu_1", "get_weather", {"city": "Oslo"})],
    }
