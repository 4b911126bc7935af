"""A compaction policy changes what the model is sent of old tool results, never what the run keeps."""

from __future__ import annotations

from typing import Any

from media_samples import png
from toolrun import Agent, ToolRegistry, tool
from toolrun.agent import CompactToolResults
from toolrun.content import Image
from toolrun.models import FunctionModel, ModelResponse, ToolResultMessage


@tool(read_only=True)
async def fetch(n: int) -> str:
    """Fetches a long page."""
    return f"page {n} " + "x" * 2000


@tool(read_only=True)
async def snap() -> Image:
    """A picture."""
    return Image(data=png())


async def test_old_results_become_notes_in_what_is_sent_only() -> None:
    sent: list[list[Any]] = []
    script = iter([("fetch", {"n": 1}), ("snap", {}), ("fetch", {"n": 2}), ("fetch", {"n": 3})])

    def reply(messages, tools):  # type: ignore[no-untyped-def]
        sent.append(list(messages))
        for call in script:
            return ModelResponse.from_tool_calls(call)
        return ModelResponse.from_text("done")

    agent = Agent(
        FunctionModel(reply),
        ToolRegistry([fetch, snap]),
        compact_history=CompactToolResults(keep_last=1, min_chars=100),
    )
    run = await agent.run("read")
    last = [m for m in sent[-1] if isinstance(m, ToolResultMessage)]
    assert [m.content.startswith("[An earlier result of") for m in last] == [True, True, True, False]
    assert "with attachments" in last[1].content and last[1].parts == ()
    assert last[-1].content.startswith("page 3 ")
    kept = [m for m in run.messages if isinstance(m, ToolResultMessage)]
    assert [m.content[:6] for m in kept] == ["page 1", "[image", "page 2", "page 3"]
    assert kept[1].parts == (Image(data=png()),)
