"""The conference assistant as a toolrun `App`: the same tools, served by the service with its page, chat
API, AG-UI, AI SDK stream and MCP — `cd examples && toolrun serve conference_assistant.assistant:app`.

The LangGraph pipeline (`graph.py`) plans in JSON for models without native tool calling; the service
calls tools natively, so the offline demo here turns the same rules into native calls and answers from
the results with the same sentences.
"""

from __future__ import annotations

from typing import Any

from conference_assistant.graph import INSTRUCTIONS, _answer_for, _plan_for
from conference_assistant.tools import ConferenceBackend, build_registry
from toolrun import ToolCall
from toolrun.models import FunctionModel, Message, ModelResponse, ToolResultMessage, UserMessage
from toolrun.server import App, AppResources, Panel


def _demo(messages: list[Message], tools: list[Any]) -> ModelResponse:
    results: list[ToolResultMessage] = []
    for message in reversed(messages):
        if not isinstance(message, ToolResultMessage):
            break
        results.append(message)
    if results:
        lines = [f"- {r.tool_name} -> {r.content}" for r in reversed(results)]
        return ModelResponse(text=_answer_for("\n".join(lines)))
    last = messages[-1] if messages else None
    plan = _plan_for(last.content if isinstance(last, UserMessage) else "")
    if plan["needs_user_input"]:
        return ModelResponse(text=plan["input_request"])
    calls = [
        ToolCall(id=f"c{i}", name=c["tool"], arguments=c["args"]) for i, c in enumerate(plan["tool_calls"])
    ]
    return ModelResponse(tool_calls=calls) if calls else ModelResponse(text=_answer_for(""))


def tools(resources: AppResources) -> Any:
    """The tools on one in-memory back end for the whole service (a real one would use `resources.engine`)."""
    return build_registry(ConferenceBackend())


app = App(
    name="conference",
    title="Conference assistant",
    description="Your registration, e-mails and the programme of the conference.",
    instructions=INSTRUCTIONS,
    tools=tools,
    starters=["Where is my registration? REG-1001", "Which sessions are about privacy?"],
    panel=Panel(title="Sessions", tool="search_sessions"),
    demo_model=lambda: FunctionModel(_demo, name="conference-demo"),
)
