"""`PlannerNode`, `plan_router` and `PlannedCallsNode`: planner mode as LangGraph nodes."""

from __future__ import annotations

import collections
import json
import uuid
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from typing_extensions import TypedDict

from toolrun import ToolExecutor, ToolRegistry, tool
from toolrun.integrations.langgraph import PlannedCallsNode, PlannerNode, plan_router
from toolrun.models import ProviderUnavailableError, ScriptedModel


@tool(read_only=True)
def search(query: str) -> list[str]:
    """Search the catalogue."""
    return [f"{query}-1"]


@tool(destructive=True)
def cancel(order_id: str) -> str:
    """Cancel an order."""
    return f"cancelled {order_id}"


TOOLS = ToolRegistry([search, cancel])


def plan(*calls: tuple[str, dict[str, Any]], ask: str | None = None) -> str:
    return json.dumps(
        {
            "intent": "test",
            "tool_calls": [{"tool": t, "args": a, "reason": "r"} for t, a in calls],
            "needs_user_input": ask is not None,
            "input_request": ask,
        }
    )


async def test_planner_writes_the_plan_into_the_state() -> None:
    node = PlannerNode(ScriptedModel([plan(("search", {"query": "milk"}))]), TOOLS)
    out = await node({"messages": [HumanMessage("find milk")]})
    assert out["tool_calls"] == [{"id": "plan_0", "tool": "search", "args": {"query": "milk"}, "reason": "r"}]
    assert out["needs_user_input"] is False and out["input_request"] is None and out["plan_error"] is None


async def test_planner_repairs_once_then_reports() -> None:
    model = ScriptedModel(["not json", plan(ask="Which order?")], cursor="sequential")
    out = await PlannerNode(model, TOOLS, input_key="question")({"question": "cancel my order"})
    assert out["needs_user_input"] is True and out["input_request"] == "Which order?"
    model = ScriptedModel(["not json", "still not json"], cursor="sequential")
    out = await PlannerNode(model, TOOLS)({"messages": [HumanMessage("x")]})
    assert out["tool_calls"] == [] and "valid plan" in out["plan_error"]


async def test_planner_survives_a_provider_failure() -> None:
    model = ScriptedModel([ProviderUnavailableError("down")])
    out = await PlannerNode(model, TOOLS)({"messages": [HumanMessage("x")]})
    assert out["plan_error"] and "ProviderUnavailableError" in out["plan_error"]


def test_router() -> None:
    route = plan_router(TOOLS)
    assert route({"tool_calls": [{"tool": "search"}]}) == "execute_queries"
    assert route({"tool_calls": [{"tool": "search"}, {"tool": "cancel"}]}) == "execute_tools"
    assert route({"tool_calls": [{"tool": "unknown"}]}) == "execute_tools"
    assert route({"tool_calls": []}) == "respond"
    assert route({"tool_calls": [{"tool": "search"}], "needs_user_input": True}) == "respond"
    assert route({"tool_calls": [{"tool": "search"}], "plan_error": "bad"}) == "respond"


class State(TypedDict, total=False):
    question: str
    intent: str
    tool_calls: list[dict[str, Any]]
    tool_results: list[dict[str, Any]]
    needs_user_input: bool
    input_request: str | None
    plan_error: str | None
    answer: str


async def test_planned_calls_with_confirmation_in_a_graph() -> None:
    runs: collections.Counter[str] = collections.Counter()

    @tool(destructive=True)
    def cancel(order_id: str) -> str:
        """Cancel an order."""
        runs[order_id] += 1
        return f"cancelled {order_id}"

    tools = ToolRegistry([search, cancel])
    model = ScriptedModel([plan(("search", {"query": "o"}), ("cancel", {"order_id": "o1"}))])
    executor = ToolExecutor(tools)
    graph = StateGraph(State)
    graph.add_node("plan", PlannerNode(model, tools, input_key="question"))
    graph.add_node("execute_tools", PlannedCallsNode(executor))
    graph.add_node("execute_queries", PlannedCallsNode(executor))
    graph.add_node(
        "respond", lambda s: {"answer": "; ".join(r["content"] for r in s.get("tool_results", []))}
    )
    graph.add_edge(START, "plan")
    graph.add_conditional_edges("plan", plan_router(tools), ["execute_tools", "execute_queries", "respond"])
    graph.add_edge("execute_tools", "respond")
    graph.add_edge("execute_queries", "respond")
    graph.add_edge("respond", END)
    app = graph.compile(checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": uuid.uuid4().hex, "user_id": "u1"}}
    state = await app.ainvoke({"question": "cancel o1"}, cfg)
    [action] = state["__interrupt__"][0].value["action_requests"]
    assert action["args"] == {"order_id": "o1"} and runs["o1"] == 0
    state = await app.ainvoke(Command(resume={action["confirmation_id"]: True}), cfg)
    assert runs["o1"] == 1
    assert [(r["tool"], r["ok"]) for r in state["tool_results"]] == [("search", True), ("cancel", True)]
    assert state["answer"] == '["o-1"]; cancelled o1'
