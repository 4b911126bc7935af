"""The agent graph: select_tool (toolrun planner) → run_tools (toolrun executor) → answer."""

from __future__ import annotations

import json
import os
import re
from typing import Any

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from toolrun import ToolContext, ToolExecutor, ToolRegistry
from toolrun.agent._planner import answer_prompt
from toolrun.integrations.langgraph import PlannedCallsNode, PlannerNode, plan_router
from toolrun.models import FunctionModel, Message, Model, ModelRequest, UserMessage, infer_model

INSTRUCTIONS = "You are a helpful assistant. Pick the one tool that answers the user, or none."
GREETING = "Hello! I can tell you the weather, do sums, or show your profile."


class AgentState(TypedDict, total=False):
    message: str
    intent: str
    tool_calls: list[dict[str, Any]]
    tool_results: list[dict[str, Any]]
    needs_user_input: bool
    input_request: str | None
    plan_error: str | None
    answer: str


_CITY = re.compile(r"weather in ([A-Za-z ]+)", re.IGNORECASE)
_SUM = re.compile(r"[-+*/() .\d]{3,}")


def _plan(text: str) -> dict[str, Any]:
    calls: list[dict[str, Any]] = []
    if city := _CITY.search(text):
        calls.append(
            {"tool": "get_weather", "args": {"city": city.group(1).strip(" ?")}, "reason": "weather"}
        )
    elif "who am i" in text.lower() or "my profile" in text.lower():
        calls.append({"tool": "whoami", "args": {}, "reason": "profile"})
    elif (expr := _SUM.search(text)) and any(op in expr.group(0) for op in "+-*/"):
        calls.append({"tool": "calculate", "args": {"expression": expr.group(0).strip()}, "reason": "maths"})
    return {"intent": "chat", "tool_calls": calls, "needs_user_input": False, "input_request": None}


def _answer(results: str) -> str:
    if results == "(no tools were called)":
        return GREETING
    parts = []
    for line in results.splitlines():
        tool, _, body = line.removeprefix("- ").partition(" -> ")
        if body.startswith("Error"):
            parts.append(f"Sorry, {tool} did not work: {body.splitlines()[0].split(': ', 1)[-1]}")
        elif tool == "get_weather":
            data = json.loads(body)
            parts.append(f"The weather in {data['city']} is {data['weather']}.")
        elif tool == "calculate":
            parts.append(f"The result is {json.loads(body):g}.")
        elif tool == "whoami":
            data = json.loads(body)
            parts.append(f"You are {data['user_id']} on the {data.get('plan', 'free')} plan.")
    return " ".join(parts)


def scripted_reply(messages: list[Message], tools: list[Any]) -> str:
    last = messages[-1].content if messages else ""
    text = last if isinstance(last, str) else ""
    if text.startswith("The tools ran."):
        return _answer(text.split("Their results:\n", 1)[1].rsplit("\n\nNow answer", 1)[0])
    return json.dumps(_plan(text))


def default_model() -> Model:
    """`TOOLRUN_MODEL` (any toolrun model string) if set, else the scripted model."""
    name = os.environ.get("TOOLRUN_MODEL")
    return infer_model(name) if name else FunctionModel(scripted_reply, name="fastapi-agent-scripted")


def build_agent(model: Model, registry: ToolRegistry, executor: ToolExecutor) -> Any:
    """The compiled graph; the caller passes the user in `configurable.user_id` / `user_context`."""

    def context(state: Any, config: Any) -> ToolContext[Any]:
        conf = config.get("configurable") or {}
        return ToolContext(
            user_id=conf.get("user_id"), metadata={"user_context": conf.get("user_context", {})}
        )

    async def answer(state: AgentState) -> dict[str, Any]:
        results = state.get("tool_results") or []
        if state.get("plan_error"):
            return {"answer": "Sorry, I could not work out what to do; please rephrase."}
        if state.get("needs_user_input"):
            return {"answer": state.get("input_request") or "Could you tell me more?"}
        text = "\n".join(f"- {r['tool']} -> {r['content']}" for r in results)
        try:
            reply = await model.request(
                ModelRequest(
                    [UserMessage(content=state.get("message", "")), UserMessage(content=answer_prompt(text))]
                )
            )
        except Exception:
            return {"answer": "Sorry, I cannot answer right now; please try again."}
        return {"answer": reply.text.strip() or "Done."}

    graph = StateGraph(AgentState)
    graph.add_node(
        "select_tool", PlannerNode(model, registry, instructions=INSTRUCTIONS, input_key="message")
    )
    graph.add_node("run_tools", PlannedCallsNode(executor, context=context))
    graph.add_node("answer", answer)
    graph.add_edge(START, "select_tool")
    graph.add_conditional_edges(
        "select_tool",
        plan_router(registry, tools_node="run_tools", queries_node="run_tools", respond_node="answer"),
        ["run_tools", "answer"],
    )
    graph.add_edge("run_tools", "answer")
    graph.add_edge("answer", END)
    return graph.compile()
