"""The FastAPI agent's tools as a toolrun `App`: served with the page, chat API, AG-UI, AI SDK stream and
MCP by `cd examples && toolrun serve fastapi_agent.assistant:app`, or inside this example's own FastAPI
app with `toolrun.server.mount(host, app, prefix="/assistant", user=your_dependency)`.

The LangGraph planner (`agent.py`) plans in JSON; the service calls tools natively, so the offline demo
here turns the same rules into native calls and answers from the results with the same sentences.
"""

from __future__ import annotations

from typing import Any

from fastapi_agent.agent import GREETING, INSTRUCTIONS, _answer, _plan
from fastapi_agent.tools import default_tools
from toolrun import ToolCall
from toolrun.models import FunctionModel, Message, ModelResponse, ToolResultMessage, UserMessage
from toolrun.server import App


def _demo(messages: list[Message], tools: list[Any]) -> ModelResponse:
    results: list[ToolResultMessage] = []
    for message in reversed(messages):
        if not isinstance(message, ToolResultMessage):
            break
        results.append(message)
    if results:
        return ModelResponse(
            text=_answer("\n".join(f"- {r.tool_name} -> {r.content}" for r in reversed(results)))
        )
    last = messages[-1] if messages else None
    plan = _plan(last.content if isinstance(last, UserMessage) else "")
    calls = [
        ToolCall(id=f"c{i}", name=c["tool"], arguments=c["args"]) for i, c in enumerate(plan["tool_calls"])
    ]
    return ModelResponse(tool_calls=calls) if calls else ModelResponse(text=GREETING)


app = App(
    name="fastapi-agent",
    title="Weather, sums and you",
    description=GREETING,
    instructions=INSTRUCTIONS,
    tools=lambda resources: default_tools().registry,
    starters=["What's the weather in Paris?", "What is 2+3*4?", "Who am I?"],
    demo_model=lambda: FunctionModel(_demo, name="fastapi-agent-demo"),
)
