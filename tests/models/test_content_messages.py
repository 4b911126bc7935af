"""A tool's images and files reach the model: the Agent keeps them in the conversation (and in run JSON),
and the OpenAI and Anthropic clients send them through the official SDKs in the shapes the providers
document (checked by `check_result`)."""

from __future__ import annotations

from media_samples import pdf, png
from toolrun import Agent, ToolCall, ToolRegistry, ToolResult, tool
from toolrun.agent import AgentRun
from toolrun.content import File, Image, Text
from toolrun.formats import check_result
from toolrun.models import (
    AssistantMessage,
    FunctionModel,
    ModelRequest,
    ModelResponse,
    ToolResultMessage,
    UserMessage,
)
from toolrun.models._messages import message_from_dict

from .fakes import ANTHROPIC_PATH, OPENAI_PATH, Reply, anthropic_message, openai_completion, text_block


@tool
async def chart(q: str) -> list[Text | Image]:
    """A chart for a question."""
    return [Text(f"chart of {q}"), Image(data=png())]


def history() -> list:  # type: ignore[type-arg]
    image = ToolResult(call_id="c1", tool_name="chart", value={"n": 2}, content=(Image(data=png()),))
    report = ToolResult(call_id="c2", tool_name="report", content=(File(data=pdf(), name="r.pdf"),))
    plain = ToolResult(call_id="c3", tool_name="plain", value=1)
    return [
        UserMessage(content="draw"),
        AssistantMessage(
            tool_calls=[
                ToolCall(id=c, name=n, arguments={})
                for c, n in (("c1", "chart"), ("c2", "report"), ("c3", "plain"))
            ]
        ),
        ToolResultMessage.from_result(image),
        ToolResultMessage.from_result(report),
        ToolResultMessage.from_result(plain),
    ]


def test_messages_keep_their_parts_through_json() -> None:
    for message in history():
        assert message_from_dict(message.to_dict()) == message
    assert "parts" not in history()[-1].to_dict()  # plain results keep the old shape


async def test_openai_chat_sends_images_in_a_user_message_after_the_tool_messages(
    server, make_openai
) -> None:  # type: ignore[no-untyped-def]
    server.reply(OPENAI_PATH, Reply(json=openai_completion("ok")))
    await make_openai().request(ModelRequest(history()))
    sent = server.bodies()[0]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool", "tool", "user"]
    for tool_message in sent[2:5]:
        assert check_result(tool_message, "openai") == []
    assert check_result(sent[-1], "openai", followup=True) == []
    kinds = [p["type"] for p in sent[-1]["content"]]
    assert kinds == ["text", "image_url", "text", "file"]
    assert "c1" in sent[-1]["content"][0]["text"] and "c2" in sent[-1]["content"][2]["text"]


async def test_anthropic_sends_image_and_document_blocks(server, make_anthropic) -> None:  # type: ignore[no-untyped-def]
    server.reply(ANTHROPIC_PATH, Reply(json=anthropic_message([text_block("ok")])))
    await make_anthropic().request(ModelRequest(history()))
    turn = server.bodies()[0]["messages"][-1]
    results = [b for b in turn["content"] if b["type"] == "tool_result"]
    for block in results:
        assert check_result(block, "anthropic") == []
    assert [b["type"] for b in results[0]["content"]] == ["text", "image"]
    assert [b["type"] for b in results[1]["content"]] == ["document"]
    assert results[2]["content"] == "1"


async def test_the_agent_shows_the_model_a_tools_image() -> None:
    seen: list[ModelRequest] = []

    def reply(messages, tools):  # type: ignore[no-untyped-def]
        seen.append(messages)
        if len(seen) == 1:
            return ModelResponse.from_tool_calls(("chart", {"q": "sales"}))
        return ModelResponse.from_text("done")

    agent = Agent(FunctionModel(reply), ToolRegistry([chart]))
    run = await agent.run("draw sales")
    last = seen[-1][-1]
    assert isinstance(last, ToolResultMessage)
    assert last.parts == (Text("chart of sales"), Image(data=png()))
    again = AgentRun.from_json(run.to_json())
    assert next(m for m in again.messages if isinstance(m, ToolResultMessage)).parts == last.parts
