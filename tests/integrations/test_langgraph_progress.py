"""Progress from `ToolrunNode` in real LangGraph graphs: what a running call reports (and an async generator
tool's partial results) arrives on `stream_mode="custom"`, named by its tool call, throttled, silent after
the call ended, and never in the messages; approved calls report too."""

from __future__ import annotations

import asyncio
import time
import types
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command

from toolrun import ToolContext, ToolExecutor, ToolRegistry, tool
from toolrun.integrations.langgraph import ToolrunNode


@tool(read_only=True)
async def crunch(n: int, ctx: ToolContext) -> str:
    """Crunch n items, saying how far it is."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, total=n, message="crunching")
        if i % 50 == 0:
            await asyncio.sleep(0.01)
    return f"crunched {n}"


@tool(read_only=True)
async def scan(hosts: int) -> AsyncIterator[dict[str, int]]:
    """Scan hosts; each partial count is a progress report."""
    for done in range(1, hosts + 1):
        await asyncio.sleep(0.03)
        yield {"scanned": done}


@tool(destructive=True)
async def wipe(disk: str, ctx: ToolContext) -> str:
    """Wipe a disk (needs approval)."""
    for i in (1, 2):
        await asyncio.sleep(0.12)
        await ctx.report_progress(i, total=2, message=f"wiping {disk}")
    return f"wiped {disk}"


def build(executor: ToolExecutor, calls: list[dict[str, Any]], checkpointer: Any = None) -> Any:
    return graph_with(ToolrunNode(executor, progress_interval=0.05), calls, checkpointer)


def graph_with(tools: Any, calls: list[dict[str, Any]], checkpointer: Any = None) -> Any:
    """agent (asks for `calls` once, then answers "done") → `tools` → agent."""

    def agent(state: MessagesState) -> dict[str, Any]:
        if isinstance(state["messages"][-1], HumanMessage):
            return {"messages": [AIMessage("", tool_calls=calls)]}
        return {"messages": [AIMessage("done")]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", tools)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges(
        "agent", lambda s: "tools" if s["messages"][-1].tool_calls else END, ["tools", END]
    )
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)


async def stream(app: Any, value: Any, config: dict[str, Any]) -> tuple[list[dict[str, Any]], list[Any]]:
    custom: list[dict[str, Any]] = []
    updates: list[Any] = []
    async for mode, chunk in app.astream(value, config, stream_mode=["custom", "updates"]):
        (custom if mode == "custom" else updates).append(chunk)
    return custom, updates


class StepClock:
    """A clock for the throttle that moves `step` seconds at each read, however fast the machine runs."""

    def __init__(self, step: float) -> None:
        self.step = step
        self.now = 0.0

    def __call__(self) -> float:
        self.now += self.step
        return self.now


async def test_progress_and_partial_results_reach_the_custom_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    import toolrun.tools._context as context_module

    clock = StepClock(0.001)  # the reports' throttle (`ProgressThrottle`) reads this clock
    monkeypatch.setattr(context_module, "time", types.SimpleNamespace(monotonic=clock, time=time.time))
    executor = ToolExecutor(ToolRegistry([crunch, scan]))
    calls = [
        {"name": "crunch", "args": {"n": 5000}, "id": "call_crunch"},
        {"name": "scan", "args": {"hosts": 4}, "id": "call_scan"},
    ]
    app = build(executor, calls)
    config = {"configurable": {"user_id": "u1"}}
    custom, updates = await stream(app, {"messages": [HumanMessage("go")]}, config)
    crunching = [c for c in custom if c["tool_call_id"] == "call_crunch"]
    scanning = [c for c in custom if c["tool_call_id"] == "call_scan"]
    assert crunching and all(c["type"] == "tool_progress" and c["name"] == "crunch" for c in crunching)
    assert crunching[-1] == {
        "type": "tool_progress",
        "tool_call_id": "call_crunch",
        "name": "crunch",
        "progress": 5000,
        "total": 5000,
        "message": "crunching",
    }  # the final report always gets through
    # 5,000 reports, throttled: a burst of 5, then one per 0.05 s of the clock, and the last
    assert 1 < len(crunching) <= clock.now / 0.05 + 5 + 1
    assert scanning[0]["progress"] == 1 and scanning[0]["message"] == '{"scanned":1}'
    assert scanning[0]["partial"] == {"scanned": 1} and "partial" not in crunching[-1]
    assert len(scanning) <= 4 and all(c["total"] is None for c in scanning)
    tool_messages = [m for u in updates for m in (u.get("tools") or {}).get("messages", [])]
    assert {m.tool_call_id: m.content for m in tool_messages} == {
        "call_crunch": "crunched 5000",
        "call_scan": '{"scanned":4}',
    }
    assert all(isinstance(m, ToolMessage) and "crunching" not in str(m.content) for m in tool_messages)


async def test_the_node_outside_a_graph_runs_without_a_reporter() -> None:
    node = ToolrunNode(ToolExecutor(ToolRegistry([crunch])))
    state = {"messages": [AIMessage("", tool_calls=[{"name": "crunch", "args": {"n": 10}, "id": "c1"}])]}
    out = await node.ainvoke(state, {})
    assert [m.content for m in out["messages"]] == ["crunched 10"]


async def test_an_approved_call_reports_progress_after_the_resume() -> None:
    executor = ToolExecutor(ToolRegistry([wipe]))
    app = build(executor, [{"name": "wipe", "args": {"disk": "d1"}, "id": "call_wipe"}], InMemorySaver())
    config = {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:6]}", "user_id": "u1"}}
    before, updates = await stream(app, {"messages": [HumanMessage("wipe d1")]}, config)
    assert before == [] and any("__interrupt__" in u for u in updates)  # nothing ran, nothing reported
    after, _ = await stream(app, Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert [(c["tool_call_id"], c["progress"], c["message"]) for c in after] == [
        ("call_wipe", 1, "wiping d1"),
        ("call_wipe", 2, "wiping d1"),
    ]
    state = await app.aget_state(config)
    assert any(getattr(m, "content", "") == "wiped d1" for m in state.values["messages"])


async def test_nothing_is_reported_after_the_call_ended() -> None:
    call_over = asyncio.Event()
    late_report_made = asyncio.Event()
    background: set[asyncio.Task[None]] = set()

    async def later(ctx: ToolContext) -> None:
        await call_over.wait()
        await ctx.report_progress(1000, total=1000, message="too late")
        late_report_made.set()

    @tool(read_only=True)
    async def fire_and_forget(ctx: ToolContext) -> str:
        """Returns at once, leaving a task behind that reports later."""
        await ctx.report_progress(1, total=1000, message="started")
        task = asyncio.create_task(later(ctx))
        background.add(task)
        return "started"

    async def agent(state: MessagesState) -> dict[str, Any]:
        if isinstance(state["messages"][-1], HumanMessage):
            call = {"name": "fire_and_forget", "args": {}, "id": "call_f"}
            return {"messages": [AIMessage("", tool_calls=[call])]}
        call_over.set()  # the tools node is done: the call is over
        await late_report_made.wait()  # the graph still streams while the late report is made
        return {"messages": [AIMessage("done")]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolrunNode(ToolExecutor(ToolRegistry([fire_and_forget]))))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges(
        "agent", lambda s: "tools" if s["messages"][-1].tool_calls else END, ["tools", END]
    )
    graph.add_edge("tools", "agent")
    custom, _ = await stream(graph.compile(), {"messages": [HumanMessage("go")]}, {"configurable": {}})
    assert late_report_made.is_set()
    assert [c["message"] for c in custom] == ["started"]


async def test_toolrun_tools_in_langgraphs_prebuilt_tool_node_stream_progress_too() -> None:
    from langgraph.prebuilt import ToolNode

    from toolrun.integrations.langchain import to_langchain

    registry = ToolRegistry([crunch, scan])
    lc_tools = to_langchain(registry, progress_interval=0.05)
    calls = [
        {"name": "crunch", "args": {"n": 3000}, "id": "call_crunch"},
        {"name": "scan", "args": {"hosts": 3}, "id": "call_scan"},
    ]

    graph = graph_with(ToolNode(lc_tools), calls)
    custom, _ = await stream(graph, {"messages": [HumanMessage("go")]}, {"configurable": {}})
    by_call = {c["tool_call_id"] for c in custom}
    assert by_call == {"call_crunch", "call_scan"}
    assert [c for c in custom if c["tool_call_id"] == "call_crunch"][-1]["progress"] == 3000
    assert len(custom) < 100
