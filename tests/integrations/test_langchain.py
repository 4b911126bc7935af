"""`to_langchain` / `from_langchain`: toolrun's executor validates and gates, failures are error messages."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool, ToolException
from langchain_core.tools import tool as lc_tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from toolrun import ErrorCode, ToolCall, ToolContext, ToolExecutor, ToolRegistry, tool
from toolrun.integrations.langchain import from_langchain, to_langchain, tool_message
from toolrun.results import ToolResult
from toolrun.runtime import InMemoryAuditSink


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool(destructive=True)
def wipe(path: str) -> str:
    """Wipe a path."""
    raise AssertionError("never runs without an approval")


@tool
def crash() -> str:
    """Crashes."""
    raise RuntimeError("password=hunter2")


def tc(cid: str, name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_call", "id": cid, "name": name, "args": args}


async def test_to_langchain_runs_through_the_executor_and_keeps_the_call_id() -> None:
    sink = InMemoryAuditSink()
    executor = ToolExecutor(ToolRegistry([add]), audit=sink)
    [lc] = to_langchain(executor.registry, executor=executor, context=ToolContext(user_id="u1"))
    assert isinstance(lc, StructuredTool)
    msg = await lc.ainvoke(tc("call-7", "add", a=1, b=2))
    assert isinstance(msg, ToolMessage)
    assert (msg.content, msg.status, msg.tool_call_id) == ("3", "success", "call-7")
    [record] = sink.records
    assert record.call_id == "call-7" and record.principal == "u1"


async def test_toolrun_validates_not_langchain() -> None:
    [lc] = to_langchain([add])
    msg = await lc.ainvoke(tc("c1", "add", a="x", b=2, extra=1))
    assert msg.status == "error"
    assert "INVALID_ARGUMENTS" in msg.content and "extra" in msg.content


async def test_failures_are_error_messages_never_exceptions() -> None:
    crash_lc, wipe_lc = to_langchain([crash, wipe], context=ToolContext(user_id="u1"))
    msg = await crash_lc.ainvoke(tc("c1", "crash"))
    assert msg.status == "error" and "EXECUTION_FAILED" in msg.content and "hunter2" not in msg.content
    msg = await wipe_lc.ainvoke(tc("c2", "wipe", path="/"))
    assert msg.status == "error" and "confirmation id conf_" in msg.content


def test_sync_invoke_works_inside_and_outside_a_loop() -> None:
    [lc] = to_langchain([add])
    assert lc.invoke({"a": 2, "b": 3}) == "5"

    async def inside() -> Any:
        return lc.invoke({"a": 4, "b": 3})

    assert asyncio.run(inside()) == "7"


async def test_context_from_config_user_id() -> None:
    seen: list[str | None] = []

    @tool
    def whoami(ctx: ToolContext) -> str:
        """Who."""
        seen.append(ctx.user_id)
        return "ok"

    [lc] = to_langchain([whoami])
    await lc.ainvoke(tc("c1", "whoami"), config={"configurable": {"user_id": "bob"}})
    [lc2] = to_langchain([whoami], context=lambda config: ToolContext(user_id="fixed"))
    await lc2.ainvoke(tc("c2", "whoami"))
    assert seen == ["bob", "fixed"]


async def test_langgraph_tool_node_with_toolrun_tools_answers_every_call() -> None:
    tools = to_langchain([add, crash])

    def agent(state: MessagesState) -> dict[str, Any]:
        if isinstance(state["messages"][-1], HumanMessage):
            calls = [tc("a", "add", a=1, b=1), tc("b", "crash"), tc("c", "add", a="no", b=1)]
            return {"messages": [AIMessage("", tool_calls=calls)]}
        return {"messages": [AIMessage("done")]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges(
        "agent", lambda s: "tools" if s["messages"][-1].tool_calls else END, ["tools", END]
    )
    graph.add_edge("tools", "agent")
    state = await graph.compile().ainvoke(
        {"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": uuid.uuid4().hex}}
    )
    msgs = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.status) for m in msgs] == [("a", "success"), ("b", "error"), ("c", "error")]
    assert state["messages"][-1].content == "done"


def test_tool_message_from_a_result() -> None:
    ok = tool_message(ToolResult.ok(3, call_id="c1", tool_name="add"))
    assert (ok.content, ok.status, ok.name, ok.artifact["status"]) == ("3", "success", "add", "ok")
    bad = tool_message(ToolResult.error("NOPE", "no", call_id="c2", tool_name="add"))
    assert bad.status == "error" and bad.artifact["code"] == "NOPE"


# ---------------------------------------------------------------------------------------------------------
# from_langchain


@lc_tool
def multiply(x: int, y: int) -> int:
    """Multiply two integers."""
    return x * y


@lc_tool
async def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


@lc_tool
def fussy(n: int) -> str:
    """Refuses odd numbers."""
    if n % 2:
        raise ToolException("Odd numbers are not accepted; send an even one.")
    return "fine"


async def test_from_langchain_schema_and_runs_sync_and_async() -> None:
    mul, up = from_langchain(multiply), from_langchain(shout)
    assert mul.parameters["required"] == ["x", "y"]
    assert mul.parameters["properties"]["x"]["type"] == "integer"
    assert not mul.is_async and up.is_async
    executor = ToolExecutor(ToolRegistry([mul, up]))
    assert (await executor.execute(ToolCall(name="multiply", arguments={"x": 6, "y": 7}))).value == 42
    assert (await executor.execute(ToolCall(name="shout", arguments={"text": "hi"}))).value == "HI"
    bad = await executor.execute(ToolCall(name="multiply", arguments={"x": "six", "y": 7}))
    assert bad.error is not None and bad.error.code == ErrorCode.INVALID_ARGUMENTS


async def test_from_langchain_under_toolrun_timeouts_and_gates() -> None:
    @lc_tool
    def sleepy() -> str:
        """Sleeps."""
        time.sleep(0.5)
        return "late"

    @lc_tool
    async def sleepy_async() -> str:
        """Sleeps too."""
        await asyncio.sleep(5)
        return "late"

    @lc_tool
    def drop_table(name: str) -> str:
        """Drop a table."""
        raise AssertionError("must not run unapproved")

    executor = ToolExecutor(
        ToolRegistry(
            [
                from_langchain(sleepy, timeout=0.05),
                from_langchain(sleepy_async, timeout=0.05),
                from_langchain(drop_table, destructive=True),
            ]
        )
    )
    ctx = ToolContext(user_id="u1")
    for name in ("sleepy", "sleepy_async"):
        result = await executor.execute(ToolCall(name=name), ctx)
        assert result.error is not None and result.error.code == ErrorCode.TIMEOUT
    held = await executor.execute(ToolCall(name="drop_table", arguments={"name": "users"}), ctx)
    assert held.status == "confirmation_required"


async def test_from_langchain_tool_exception_reaches_the_model_as_tool_error() -> None:
    executor = ToolExecutor(ToolRegistry([from_langchain(fussy)]))
    result = await executor.execute(ToolCall(name="fussy", arguments={"n": 3}))
    assert result.error is not None and result.error.code == "TOOL_ERROR"
    assert "even one" in result.render()
    assert (await executor.execute(ToolCall(name="fussy", arguments={"n": 2}))).value == "fine"
