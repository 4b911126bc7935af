"""Blocks toolrun does not model go back to Anthropic as they came: thinking (the API wants it back in a
tool-use loop), server tools, and programmatic tool calling (`tool_use` with a `caller`: Claude's code in
the code-execution container calls the client's tool). The `Agent` runs a call made from code through
every gate, exactly as a direct call — a destructive one waits for its user — and the next request carries
the turn's blocks verbatim, the tool's result, and the container the code runs in. JSON and streamed
responses alike, against the fake Messages API on 127.0.0.1; the shapes follow Anthropic's
programmatic-tool-calling and extended-thinking documentation."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolrun import Agent, ToolCall, ToolRegistry, tool
from toolrun.models import AssistantMessage, ModelRequest, UserMessage
from toolrun.models._messages import message_from_dict

from .fakes import ANTHROPIC_PATH, Reply, anthropic_frame, anthropic_message, anthropic_start, text_block

CALLER = {"type": "code_execution_20250825", "tool_id": "srvtoolu_01"}
CONTAINER = {"id": "container_011CWH6e", "expires_at": "2099-01-01T00:00:00Z"}
CODE = "rows = await query_sales(region='West')\nprint(sum(r['revenue'] for r in rows))"

FIRST = [
    {"type": "thinking", "thinking": "I should total West's sales in code.", "signature": "EqQBCgIYAh..."},
    {"type": "text", "text": "I'll total them in code."},
    {"type": "server_tool_use", "id": "srvtoolu_01", "name": "code_execution", "input": {"code": CODE}},
    {
        "type": "tool_use",
        "id": "toolu_01",
        "name": "query_sales",
        "input": {"region": "West"},
        "caller": CALLER,
    },
]
SECOND = [
    {
        "type": "code_execution_tool_result",
        "tool_use_id": "srvtoolu_01",
        "content": {"type": "code_execution_result", "stdout": "300\n", "stderr": "", "return_code": 0},
    },
    text_block("West sold 300."),
]


def message(blocks: list[dict[str, Any]], *, container: bool = True) -> dict[str, Any]:
    body = anthropic_message(blocks)
    if container:
        body["container"] = CONTAINER
    return body


def frames(blocks: list[dict[str, Any]], *, stop_reason: str) -> list[str]:
    """The stream of a message with `blocks`: each block opened empty, filled by its deltas, closed."""
    events: list[dict[str, Any]] = [anthropic_start("msg_01Replay")]
    for index, block in enumerate(blocks):
        kind = block["type"]
        deltas: list[dict[str, Any]] = []
        if kind == "text":
            opened = {"type": "text", "text": ""}
            deltas = [
                {"type": "text_delta", "text": block["text"][:5]},
                {"type": "text_delta", "text": block["text"][5:]},
            ]
        elif kind == "thinking":
            opened = {"type": "thinking", "thinking": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": block["thinking"]},
                {"type": "signature_delta", "signature": block["signature"]},
            ]
        elif "input" in block:
            opened = {**block, "input": {}}
            text = json.dumps(block["input"])
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in (text[:7], text[7:])]
        else:
            opened = block
        events.append({"type": "content_block_start", "index": index, "content_block": opened})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    delta = {"stop_reason": stop_reason, "stop_sequence": None, "container": CONTAINER}
    events += [
        {"type": "message_delta", "delta": delta, "usage": {"output_tokens": 10}},
        {"type": "message_stop"},
    ]
    return [anthropic_frame(e) for e in events]


def reply(blocks: list[dict[str, Any]], *, streamed: bool, stop_reason: str) -> Reply:
    return Reply(frames=frames(blocks, stop_reason=stop_reason)) if streamed else Reply(json=message(blocks))


def make_tools(ran: list[Any]) -> ToolRegistry:
    @tool
    async def query_sales(region: str) -> list[dict[str, int]]:
        """Sales rows of one region.

        Args:
            region: The region's name.
        """
        ran.append(("query_sales", region))
        return [{"revenue": 100}, {"revenue": 200}]

    @tool(destructive=True)
    async def purge_region(region: str) -> str:
        """Delete every sales row of a region.

        Args:
            region: The region's name.
        """
        ran.append(("purge_region", region))
        return f"purged {region}"

    return ToolRegistry([query_sales, purge_region])


async def _run(agent: Agent, streamed: bool, prompt: str) -> Any:
    if not streamed:
        return await agent.run(prompt)
    run = None
    async for event in agent.stream(prompt):
        run = getattr(event, "run", run)
    return run


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "stream"])
async def test_a_call_made_from_code_runs_and_the_turn_goes_back_verbatim(
    server: Any, make_anthropic: Any, streamed: bool
) -> None:
    ran: list[Any] = []
    server.reply(ANTHROPIC_PATH, reply(FIRST, streamed=streamed, stop_reason="tool_use"))
    server.reply(ANTHROPIC_PATH, reply(SECOND, streamed=streamed, stop_reason="end_turn"))
    agent = Agent(make_anthropic(), make_tools(ran))
    run = await _run(agent, streamed, "West's total sales?")
    assert run.status == "completed" and run.output == "West sold 300."
    assert ran == [("query_sales", "West")]  # through the executor, once
    first, second = server.bodies()
    assert "container" not in first
    assert second["container"] == CONTAINER["id"]
    assistant, results = second["messages"][1], second["messages"][2]
    assert assistant == {"role": "assistant", "content": FIRST}  # thinking, code and the call, as they came
    assert results["role"] == "user" and [b["type"] for b in results["content"]] == ["tool_result"]
    assert results["content"][0]["tool_use_id"] == "toolu_01"
    assert json.loads(results["content"][0]["content"]) == [{"revenue": 100}, {"revenue": 200}]


async def test_a_destructive_call_from_code_waits_for_its_user_like_any_other(
    server: Any, make_anthropic: Any
) -> None:
    ran: list[Any] = []
    blocks = [
        *FIRST[:3],
        {
            "type": "tool_use",
            "id": "toolu_02",
            "name": "purge_region",
            "input": {"region": "West"},
            "caller": CALLER,
        },
    ]
    server.reply(ANTHROPIC_PATH, Reply(json=message(blocks)))
    server.reply(ANTHROPIC_PATH, Reply(json=message(SECOND)))
    agent = Agent(make_anthropic(), make_tools(ran))
    run = await agent.run("Purge West")
    assert run.status == "awaiting_confirmation" and ran == []  # the gate held the call made from code
    (pending,) = run.pending
    assert pending.call.name == "purge_region" and pending.call.arguments == {"region": "West"}
    run = await agent.resume(run, {pending.confirmation_id: True})
    assert run.status == "completed" and ran == [("purge_region", "West")]
    _, second = server.bodies()
    assert second["messages"][1]["content"] == blocks and second["container"] == CONTAINER["id"]


async def test_the_turn_survives_storage_and_is_dropped_when_its_calls_changed(make_anthropic: Any) -> None:
    """What the service stores (`to_dict` → JSON → `message_from_dict`) replays the same; a turn whose
    calls no longer match its blocks (ids renamed at the boundary) falls back to toolrun's own rendering."""
    response = make_anthropic().parse_response(message(FIRST), ModelRequest([], make_tools([])))
    stored = message_from_dict(json.loads(json.dumps(response.to_message().to_dict())))
    assert isinstance(stored, AssistantMessage) and stored.provider_data == response.provider_data
    model = make_anthropic()
    body = model.build_body(ModelRequest([UserMessage(content="hi"), stored], make_tools([])))
    assert body["messages"][1]["content"] == FIRST and body["container"] == CONTAINER["id"]
    renamed = AssistantMessage(
        content=stored.content,
        tool_calls=[ToolCall(id="call_fresh", name="query_sales", arguments={"region": "West"})],
        provider_data=stored.provider_data,
    )
    body = model.build_body(ModelRequest([UserMessage(content="hi"), renamed], make_tools([])))
    assert [b["type"] for b in body["messages"][1]["content"]] == ["text", "tool_use"]
    assert body["messages"][1]["content"][1]["id"] == "call_fresh"


async def test_a_plain_turn_keeps_nothing_extra(make_anthropic: Any) -> None:
    plain = anthropic_message(
        [text_block("Hi"), {"type": "tool_use", "id": "t1", "name": "query_sales", "input": {}}]
    )
    response = make_anthropic().parse_response(plain, ModelRequest([], make_tools([])))
    assert response.provider_data is None and "provider_data" not in response.to_message().to_dict()
