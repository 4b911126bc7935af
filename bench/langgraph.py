"""LangGraph: the same graph, tools and scripted model with LangGraph's `ToolNode` and with toolrun's node.

Two scenarios, each in one process and one event loop, interleaved round-robin (see `_harness.py`):

* ``langgraph_tools_step`` — a graph ``START → tools → END`` fed one AI message carrying a batch of
  ``BATCH`` tool calls (6 async tools, 2 sync): the cost of running one batch of calls as a graph step.
* ``langgraph_agent`` — the whole loop ``agent → tools → agent → END`` with a scripted model node (turn 1:
  the batch of calls; turn 2: the answer): what a user of the graph sees per turn.

Rows:

* ``graph_only`` — the same graph whose tools node runs no tool and returns the expected messages: the
  graph's own cost (Pregel, state, reducers). Subtracted from the other rows for the *net* figures.
* ``floor`` — the same graph whose tools node does only ``json`` + Pydantic validation, the calls
  (``asyncio.gather``; sync tools in ``asyncio.to_thread``) and one ``ToolMessage`` each.
* ``langgraph_toolnode`` — ``langgraph.prebuilt.ToolNode`` over LangChain ``@tool`` functions (the same
  bodies), default error handling (errors become error ``ToolMessage``s).
* ``toolrun_node`` — ``ToolrunNode(ToolExecutor(registry))`` over toolrun ``@tool`` functions (the same
  bodies) **with the gates on**: every tool has a timeout and a rate limit (high enough never to refuse),
  arguments are validated (extra fields forbidden), access checks, events and one audit record per call
  (a counting sink), the confirmation stage in the chain. LangChain has no timeout, rate limit or
  audit to switch on.

Run: ``python bench/langgraph.py [--quick]`` (needs the ``langgraph`` extra; ``make install`` has it).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

# This file is called langgraph.py: keep its folder off the path until the real `langgraph` is imported.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool as lc_tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from pydantic import BaseModel, ConfigDict

from toolrun import ToolExecutor, ToolRegistry, tool
from toolrun.integrations.langgraph import ToolrunNode
from toolrun.runtime import AuditRecord

sys.path.append(str(_HERE))
import _harness
from _harness import Op

BATCH = 8
CONFIG: dict[str, Any] = {"configurable": {"thread_id": "bench", "user_id": "u1"}}


# The tool bodies, shared by every row.
async def _add(a: int, b: int) -> int:
    return a + b


async def _greet(name: str, excited: bool = False) -> str:
    return f"Hello, {name}{'!' if excited else '.'}"


def _lookup(key: str) -> dict[str, Any]:
    return {"key": key, "value": len(key)}


CALLS = [
    {"id": f"call_{i}", "name": name, "args": args}
    for i, (name, args) in enumerate(
        [
            ("add", {"a": 1, "b": 2}),
            ("greet", {"name": "Ada"}),
            ("add", {"a": 3, "b": 4}),
            ("lookup", {"key": "alpha"}),
            ("greet", {"name": "Alan", "excited": True}),
            ("add", {"a": 5, "b": 6}),
            ("lookup", {"key": "beta"}),
            ("add", {"a": 7, "b": 8}),
        ][:BATCH]
    )
]
EXPECTED = [
    "3",
    "Hello, Ada.",
    "7",
    '{"key":"alpha","value":5}',
    "Hello, Alan!",
    "11",
    '{"key":"beta","value":4}',
    "15",
]
FINAL = "All done."


def _normal(content: Any) -> str:
    """ToolNode renders dicts with `json.dumps` defaults, toolrun compactly: compare the data."""
    return str(content).replace(", ", ",").replace(": ", ":")


def check(state: Any) -> bool:
    tool_messages = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    return [_normal(m.content) for m in tool_messages] == [_normal(e) for e in EXPECTED] and all(
        m.status == "success" for m in tool_messages
    )


# --------------------------------------------------------------------------------------------------------
# Tools nodes


def toolnode() -> Any:
    add = lc_tool("add", description="Add two integers.")(_add)
    greet = lc_tool("greet", description="Greet someone.")(_greet)
    lookup = lc_tool("lookup", description="Look a key up.")(_lookup)
    return ToolNode([add, greet, lookup])


def toolrun_node() -> Any:
    gates = {"timeout": 5.0, "rate_limit": "1000000/s"}
    registry = ToolRegistry(
        [
            tool(name="add", description="Add two integers.", **gates)(_add),
            tool(name="greet", description="Greet someone.", **gates)(_greet),
            tool(name="lookup", description="Look a key up.", read_only=True, **gates)(_lookup),
        ]
    )
    return ToolrunNode(ToolExecutor(registry, audit=CountingSink()))


class CountingSink:
    """An audit sink that keeps a count (an in-memory list would grow for the whole benchmark)."""

    def __init__(self) -> None:
        self.count = 0

    def write(self, record: AuditRecord) -> None:
        self.count += 1


class _AddArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    a: int
    b: int


class _GreetArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    excited: bool = False


class _LookupArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str


def floor_node() -> Any:
    import json

    table: dict[str, tuple[type[BaseModel], Any, bool]] = {
        "add": (_AddArgs, _add, True),
        "greet": (_GreetArgs, _greet, True),
        "lookup": (_LookupArgs, _lookup, False),
    }

    async def one(call: dict[str, Any]) -> ToolMessage:
        model, fn, is_async = table[call["name"]]
        args = model.model_validate(call["args"]).model_dump()
        value = await fn(**args) if is_async else await asyncio.to_thread(fn, **args)
        text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        return ToolMessage(text, tool_call_id=call["id"], name=call["name"])

    async def node(state: MessagesState) -> dict[str, Any]:
        calls = state["messages"][-1].tool_calls  # type: ignore[union-attr]
        return {"messages": list(await asyncio.gather(*(one(c) for c in calls)))}

    return node


def graph_only_node() -> Any:
    """Runs no tool: returns the expected messages (built fresh). Its row is the graph's own cost."""

    async def node(state: MessagesState) -> dict[str, Any]:
        calls = state["messages"][-1].tool_calls  # type: ignore[union-attr]
        return {
            "messages": [
                ToolMessage(text, tool_call_id=c["id"], name=c["name"])
                for c, text in zip(calls, EXPECTED, strict=True)
            ]
        }

    return node


# --------------------------------------------------------------------------------------------------------
# Graphs


def step_graph(node: Any) -> Op:
    graph = StateGraph(MessagesState)
    graph.add_node("tools", node)
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    app = graph.compile()
    start = {"messages": [HumanMessage("go"), AIMessage("", tool_calls=CALLS)]}

    async def op() -> Any:
        return await app.ainvoke(start, CONFIG)

    return op


def agent_graph(node: Any) -> Op:
    def agent(state: MessagesState) -> dict[str, Any]:  # the scripted model
        if isinstance(state["messages"][-1], HumanMessage):
            return {"messages": [AIMessage("", tool_calls=CALLS)]}
        return {"messages": [AIMessage(FINAL)]}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", node)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["tools", END])
    graph.add_edge("tools", "agent")
    app = graph.compile()
    start = {"messages": [HumanMessage("go")]}

    async def op() -> Any:
        return await app.ainvoke(start, CONFIG)

    return op


async def python_calls(op: Op, n: int = 50) -> float:
    """Python function calls per op, counted by cProfile (untimed): a measure of work that the noise of
    a shared machine does not move."""
    import cProfile
    import pstats

    for _ in range(5):
        await op()
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(n):
        await op()
    profile.disable()
    return float(pstats.Stats(profile).total_calls) / n  # type: ignore[attr-defined]


async def main(settings: _harness.Settings) -> dict[str, float]:
    ratios: dict[str, float] = {}
    for scenario, wrap in (("langgraph_tools_step", step_graph), ("langgraph_agent", agent_graph)):
        makers: dict[str, tuple[_harness.Kind, _harness.Maker]] = {
            "graph_only": ("floor", lambda w=wrap: w(graph_only_node())),
            "floor": ("floor", lambda w=wrap: w(floor_node())),
            "langgraph_toolnode": ("peer", lambda w=wrap: w(toolnode())),
            "toolrun_node": ("toolrun", lambda w=wrap: w(toolrun_node())),
        }
        candidates = await _harness.build(makers, expected=None, settings=settings, check=check)
        rows = await _harness.measure(candidates, settings)
        by = {r.name: r.median_us for r in rows}
        ratio = by["langgraph_toolnode"] / by["toolrun_node"]
        base = by["graph_only"]
        net = (by["langgraph_toolnode"] - base) / max(by["toolrun_node"] - base, 1e-9)
        ratios[scenario], ratios[f"{scenario}_net"] = ratio, net
        _harness.compare(
            rows,
            "floor",
            title=f"{scenario}: one batch of {BATCH} tool calls (toolrun gates on); "
            f"ToolNode / toolrun_node = {ratio:.2f}x",
            per="batch",
            name=scenario,
            settings=settings,
            extra={"batch": BATCH, "toolnode_over_toolrun": ratio, "toolnode_over_toolrun_net": net},
        )
        calls = {c.name: await python_calls(c.op) for c in candidates}
        base_calls = calls["graph_only"]
        print(
            "  Python function calls per batch: "
            + ", ".join(f"{k} {v:,.0f}" for k, v in calls.items())
            + f"; net of graph_only: ToolNode {calls['langgraph_toolnode'] - base_calls:,.0f}, "
            f"toolrun_node {calls['toolrun_node'] - base_calls:,.0f}"
        )
        print(
            f"  net of the graph's own cost (graph_only, {base:,.0f} µs): ToolNode "
            f"{by['langgraph_toolnode'] - base:,.0f} µs, toolrun_node {by['toolrun_node'] - base:,.0f} µs "
            f"per batch -> {net:.2f}x"
        )
    return ratios


if __name__ == "__main__":
    args = _harness.parse_args(
        sys.argv[1:], description="LangGraph ToolNode vs toolrun's node", rounds=31, target_ms=50.0
    )
    asyncio.run(main(args))
