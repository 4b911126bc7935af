"""One whole agent run — scripted model, one tool call, two model turns — toolrun beside the peers.

toolrun's row: ``Agent(ScriptedModel([call add(1, 2), "3"]), [add])`` and ``await agent.run(PROMPT)``, with
the default executor (timeout, events and the audit logger all on, as shipped). The scripted model reads its
position off the conversation, so one agent serves every run.

Run: ``python bench/agent.py [--quick]`` (needs the ``bench`` extra for the peers).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _peers_agent
from _harness import Op

from toolrun import Agent, Tool, ToolCall
from toolrun.models import ScriptedModel


def make_toolrun() -> Op:
    script = [
        ToolCall(id=_peers_agent.CALL_ID, name=_peers_agent.TOOL_NAME, arguments=_peers_agent.TOOL_ARGS_JSON),
        _peers_agent.FINAL_TEXT,
    ]
    agent = Agent(ScriptedModel(script), [Tool.from_function(_peers_agent.add)])

    async def op() -> str:
        run = await agent.run(_peers_agent.PROMPT)
        return run.output or ""

    return op


if __name__ == "__main__":
    _peers_agent.run(toolrun={"toolrun": make_toolrun})
