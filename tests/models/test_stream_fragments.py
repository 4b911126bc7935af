"""Property tests: however a provider splits the arguments of tool calls, and however it interleaves
calls, the reassembled calls are exactly what was sent. Over the real socket server, and on the assembler."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolrun.models import ModelRequest, ToolCallReady, UserMessage
from toolrun.models._stream import StreamAssembler

from .fakes import ANTHROPIC_PATH, OPENAI_PATH, Reply, anthropic_stream, openai_chunk, openai_stream

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
arguments = st.dictionaries(st.text(min_size=1, max_size=8), json_values, max_size=4).map(
    lambda d: json.dumps(d, ensure_ascii=False)
)


@st.composite
def fragments(draw: st.DrawFn, text: str) -> list[str]:
    """`text` cut at random points (empty fragments included: servers send them)."""
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=10)))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@st.composite
def interleaved(draw: st.DrawFn, sequences: list[list[Any]]) -> list[tuple[int, Any]]:
    """A random merge of several sequences that keeps each one's own order."""
    positions = [0] * len(sequences)
    out: list[tuple[int, Any]] = []
    while any(p < len(s) for p, s in zip(positions, sequences, strict=True)):
        live = [i for i, s in enumerate(sequences) if positions[i] < len(s)]
        i = draw(st.sampled_from(live))
        out.append((i, sequences[i][positions[i]]))
        positions[i] += 1
    return out


PROPERTY = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@PROPERTY
@given(data=st.data(), texts=st.lists(arguments, min_size=1, max_size=3))
async def test_openai_fragmented_interleaved_calls_reassemble_exactly(
    server, make_openai, registry, data: st.DataObject, texts: list[str]
) -> None:
    server.reset()
    pieces = [data.draw(fragments(t)) for t in texts]
    order = data.draw(interleaved(pieces))
    chunks = [openai_chunk({"role": "assistant", "content": None})]
    opened: set[int] = set()
    for index, piece in order:
        call: dict[str, Any] = {"index": index, "function": {"arguments": piece}}
        if index not in opened:  # the first fragment of a call carries its id and name
            opened.add(index)
            call.update(id=f"call_{index}", type="function")
            call["function"]["name"] = "get_weather"
        chunks.append(openai_chunk({"tool_calls": [call]}))
    chunks.append(openai_chunk({}, finish_reason="tool_calls"))
    server.reply(OPENAI_PATH, Reply(frames=openai_stream(chunks)))

    model = make_openai()
    events = [e async for e in model.stream(ModelRequest([UserMessage(content="go")], registry))]
    response = events[-1].response
    # calls are numbered by first appearance, which is not always their provider index
    first_seen = sorted(range(len(texts)), key=lambda i: next(n for n, (j, _) in enumerate(order) if j == i))
    assert [(c.id, c.arguments) for c in response.tool_calls] == [
        (f"call_{i}", texts[i] or "{}") for i in first_seen
    ]
    assert [e.call for e in events if isinstance(e, ToolCallReady)] == response.tool_calls


@PROPERTY
@given(data=st.data(), texts=st.lists(arguments, min_size=1, max_size=3))
async def test_anthropic_fragmented_input_json_reassembles_exactly(
    server, make_anthropic, registry, data: st.DataObject, texts: list[str]
) -> None:
    server.reset()
    blocks = [
        ("tool_use", (f"toolu_{i}", "get_weather", data.draw(fragments(t)))) for i, t in enumerate(texts)
    ]
    server.reply(ANTHROPIC_PATH, Reply(frames=anthropic_stream(blocks, stop_reason="tool_use")))

    model = make_anthropic()
    events = [e async for e in model.stream(ModelRequest([UserMessage(content="go")], registry))]
    response = events[-1].response
    assert [(c.id, c.arguments) for c in response.tool_calls] == [
        (f"toolu_{i}", json.loads(t)) for i, t in enumerate(texts)
    ]


@settings(max_examples=150)
@given(data=st.data(), texts=st.lists(arguments, min_size=1, max_size=4))
def test_assembler_reassembles_any_interleaving(data: st.DataObject, texts: list[str]) -> None:
    pieces = [data.draw(fragments(t)) for t in texts]
    order = data.draw(interleaved(pieces))
    assembler = StreamAssembler()
    opened: set[int] = set()
    emitted: dict[int, list[str]] = {}
    for key, piece in order:
        first = key not in opened
        opened.add(key)
        delta = assembler.tool_fragment(
            ("k", key), id=f"id{key}" if first else None, name="t" if first else None, arguments=piece
        )
        emitted.setdefault(delta.index, []).append(delta.arguments_delta)
    response = assembler.response()
    by_id = {c.id: c.arguments for c in response.tool_calls}
    assert by_id == {f"id{i}": (t or "{}") for i, t in enumerate(texts)}
    # the deltas handed to a consumer also add up, per call index
    assert sorted("".join(v) for v in emitted.values()) == sorted(texts)
