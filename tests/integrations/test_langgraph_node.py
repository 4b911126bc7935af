"""`ToolrunNode` in real LangGraph graphs: one ToolMessage per call, interrupts, exactly-once resumes."""

from __future__ import annotations

import asyncio
import collections
import subprocess
import sys
import uuid
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, interrupt

from toolrun import ToolContext, ToolError, ToolExecutor, ToolRegistry, tool
from toolrun.integrations.langgraph import ToolrunNode, read_decisions
from toolrun.store import InMemoryConfirmationStore

Runs = collections.Counter[str]


def make_tools(runs: Runs) -> ToolRegistry:
    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        runs["lookup"] += 1
        return f"found {q}"

    @tool(destructive=True)
    def delete_item(item_id: str) -> str:
        """Delete an item permanently."""
        runs[f"delete:{item_id}"] += 1
        return f"deleted {item_id}"

    @tool
    def explode() -> str:
        """Always fails."""
        runs["explode"] += 1
        raise RuntimeError("secret internal detail")

    @tool
    def refuse() -> str:
        """Fails the way tools should."""
        raise ToolError("NO_STOCK", "Nothing left in stock.")

    @tool(timeout=0.05)
    async def slow() -> str:
        """Too slow."""
        await asyncio.sleep(5)
        return "late"

    return ToolRegistry([lookup, delete_item, explode, refuse, slow])


def build(
    executor: ToolExecutor,
    calls: list[dict[str, Any]],
    checkpointer: Any = None,
    *,
    review_after: bool = False,
) -> Any:
    """agent (one AI message with `calls`, then "done") → tools → agent; optionally a review node that
    interrupts after the tools ran (to prove a later resume never re-runs them)."""

    def agent(state: MessagesState) -> dict[str, Any]:
        if isinstance(state["messages"][-1], HumanMessage):
            return {"messages": [AIMessage("", tool_calls=calls)]}
        return {"messages": [AIMessage("done")]}

    def review(state: MessagesState) -> dict[str, Any]:
        interrupt({"question": "happy?"})
        return {}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolrunNode(executor))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges(
        "agent", lambda s: "tools" if s["messages"][-1].tool_calls else END, ["tools", END]
    )
    if review_after:
        graph.add_node("review", review)
        graph.add_edge("tools", "review")
        graph.add_edge("review", "agent")
    else:
        graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)


def config(user: str = "u1", thread: str | None = None) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread or uuid.uuid4().hex, "user_id": user}}


def tool_messages(state: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


def call(cid: str, name: str, **args: Any) -> dict[str, Any]:
    return {"id": cid, "name": name, "args": args}


MIXED = [
    call("a", "lookup", q="x"),
    call("b", "delete_item", item_id="1"),
    call("c", "delete_item", item_id="2"),
]


# ---------------------------------------------------------------------------------------------------------
# One ToolMessage per call


async def test_every_call_gets_exactly_one_tool_message_failures_included() -> None:
    runs: Runs = collections.Counter()
    executor = ToolExecutor(make_tools(runs))
    calls = [
        call("a", "lookup", q="x"),
        call("b", "explode"),
        call("c", "refuse"),
        call("d", "slow"),
        call("e", "lookup", q=3),  # wrong type: toolrun validates
        call("f", "no_such_tool"),
    ]
    state = await build(executor, calls).ainvoke({"messages": [HumanMessage("go")]}, config())
    msgs = tool_messages(state)
    assert [m.tool_call_id for m in msgs] == ["a", "b", "c", "d", "e", "f"]
    assert [m.status for m in msgs] == ["success", "error", "error", "error", "error", "error"]
    assert msgs[0].content == "found x"
    assert "EXECUTION_FAILED" in msgs[1].content and "secret internal detail" not in msgs[1].content
    assert "NO_STOCK" in msgs[2].content
    assert "TIMEOUT" in msgs[3].content
    assert "INVALID_ARGUMENTS" in msgs[4].content
    assert "NOT_FOUND" in msgs[5].content
    assert state["messages"][-1].content == "done"  # the graph went on


async def test_invalid_tool_calls_are_answered_too() -> None:
    executor = ToolExecutor(make_tools(collections.Counter()))
    node = ToolrunNode(executor)
    ai = AIMessage(
        "",
        tool_calls=[call("a", "lookup", q="x")],
        invalid_tool_calls=[{"id": "z", "name": "lookup", "args": '{"q": ', "error": "bad json"}],
    )
    out = await node({"messages": [ai]}, config())
    assert [(m.tool_call_id, m.status) for m in out["messages"]] == [("a", "success"), ("z", "error")]
    assert "INVALID_ARGUMENTS" in out["messages"][1].content


async def test_calls_already_answered_are_not_run_again() -> None:
    runs: Runs = collections.Counter()
    node = ToolrunNode(ToolExecutor(make_tools(runs)))
    ai = AIMessage("", tool_calls=[call("a", "lookup", q="x"), call("b", "lookup", q="y")])
    done = ToolMessage("found x", tool_call_id="a")
    out = await node({"messages": [HumanMessage("go"), ai, done]}, config())
    assert [m.tool_call_id for m in out["messages"]] == ["b"]
    assert runs["lookup"] == 1


async def test_calls_run_in_parallel() -> None:
    arrived: list[str] = []
    both = asyncio.Event()

    @tool
    async def wait_for_peer(who: str) -> str:
        """Returns once both calls have started: only possible if they run at the same time."""
        arrived.append(who)
        if len(arrived) == 2:
            both.set()
        await asyncio.wait_for(both.wait(), 2)
        return who

    node = ToolrunNode(ToolExecutor(ToolRegistry([wait_for_peer])))
    ai = AIMessage("", tool_calls=[call("a", "wait_for_peer", who="a"), call("b", "wait_for_peer", who="b")])
    out = await node({"messages": [ai]}, config())
    assert [m.status for m in out["messages"]] == ["success", "success"]


async def test_context_from_config_and_thread_id() -> None:
    seen: list[ToolContext[Any]] = []

    @tool
    def whoami(ctx: ToolContext) -> str:
        """Who is calling."""
        seen.append(ctx)
        return str(ctx.user_id)

    node = ToolrunNode(ToolExecutor(ToolRegistry([whoami])))
    await node({"messages": [AIMessage("", tool_calls=[call("a", "whoami")])]}, config("alice", "thread-9"))
    assert seen[0].user_id == "alice"
    assert seen[0].conversation_id == "thread-9"
    assert seen[0].metadata["langgraph_thread_id"] == "thread-9"


# ---------------------------------------------------------------------------------------------------------
# Confirmations through interrupt(), with each checkpointer


async def test_one_interrupt_lists_every_gated_call_before_anything_runs(checkpointer: Any) -> None:
    runs: Runs = collections.Counter()
    app = build(ToolExecutor(make_tools(runs)), MIXED, checkpointer)
    state = await app.ainvoke({"messages": [HumanMessage("go")]}, config())
    assert sum(runs.values()) == 0  # not even the safe lookup ran
    [pending] = state["__interrupt__"]
    request = pending.value
    assert [(a["name"], a["args"], a["tool_call_id"]) for a in request["action_requests"]] == [
        ("delete_item", {"item_id": "1"}, "b"),
        ("delete_item", {"item_id": "2"}, "c"),
    ]
    for action in request["action_requests"]:
        assert action["confirmation_id"].startswith("conf_")
        assert action["description"].startswith(f'delete_item(item_id="{action["args"]["item_id"]}")')
    assert (
        request["review_configs"]
        == [{"action_name": "delete_item", "allowed_decisions": ["approve", "edit", "reject"]}] * 2
    )


async def test_resume_runs_each_approved_call_exactly_once(checkpointer: Any) -> None:
    runs: Runs = collections.Counter()
    app = build(ToolExecutor(make_tools(runs)), MIXED, checkpointer, review_after=True)
    cfg = config()
    state = await app.ainvoke({"messages": [HumanMessage("go")]}, cfg)
    decisions = {"decisions": [{"type": "approve"}, {"type": "reject", "message": "keep it"}]}
    state = await app.ainvoke(Command(resume=decisions), cfg)
    assert runs == {"lookup": 1, "delete:1": 1}
    msgs = {m.tool_call_id: m for m in tool_messages(state)}
    assert msgs["a"].content == "found x" and msgs["b"].content == "deleted 1"
    assert msgs["c"].status == "error"
    assert "declined" in msgs["c"].content and "keep it" in msgs["c"].content
    assert state["__interrupt__"][0].value == {"question": "happy?"}  # the review node paused after tools
    # Resuming the later interrupt re-runs nothing that had finished.
    state = await app.ainvoke(Command(resume="yes"), cfg)
    assert state["messages"][-1].content == "done"
    assert runs == {"lookup": 1, "delete:1": 1}
    assert len(tool_messages(state)) == 3


async def test_a_replayed_resume_runs_nothing_twice(checkpointer: Any) -> None:
    runs: Runs = collections.Counter()
    app = build(ToolExecutor(make_tools(runs)), MIXED, checkpointer)
    cfg = config()
    state = await app.ainvoke({"messages": [HumanMessage("go")]}, cfg)
    ids = [a["confirmation_id"] for a in state["__interrupt__"][0].value["action_requests"]]
    await app.ainvoke(Command(resume=dict.fromkeys(ids, True)), cfg)
    assert runs == {"lookup": 1, "delete:1": 1, "delete:2": 1}
    # Run the tools node again from the checkpoint before it (time travel): the approvals are used up.
    history = [s async for s in app.aget_state_history(cfg)]
    before_tools = next(s for s in history if s.next == ("tools",))
    as_user = {"configurable": {**before_tools.config["configurable"], "user_id": "u1"}}
    state = await app.ainvoke(Command(resume=dict.fromkeys(ids, True)), as_user)
    assert runs["delete:1"] == 1 and runs["delete:2"] == 1
    # The calls are held anew under new ids, which the replayed answer does not name: asked again.
    again = state["__interrupt__"][0].value
    assert "unknown" in again["error"]
    assert not {a["confirmation_id"] for a in again["action_requests"]} & set(ids)


async def test_concurrent_resumes_run_each_approved_call_once() -> None:
    runs: Runs = collections.Counter()
    app = build(ToolExecutor(make_tools(runs)), MIXED, InMemorySaver())
    cfg = config()
    state = await app.ainvoke({"messages": [HumanMessage("go")]}, cfg)
    ids = [a["confirmation_id"] for a in state["__interrupt__"][0].value["action_requests"]]
    await asyncio.gather(*(app.ainvoke(Command(resume=dict.fromkeys(ids, True)), cfg) for _ in range(3)))
    assert runs["delete:1"] == 1 and runs["delete:2"] == 1


FORGED = [
    pytest.param({"conf_unknown": True}, id="unknown-id"),
    pytest.param("yes", id="not-a-mapping"),
    pytest.param({"decisions": [{"type": "approve"}]}, id="too-few-decisions"),
    pytest.param({"decisions": [{"type": "approve"}, "yes"]}, id="non-boolean-decision"),
    pytest.param({"decisions": [{"type": "approve"}, 1]}, id="integer-decision"),
    pytest.param(
        {"decisions": [{"type": "edit", "edited_action": {"name": "lookup", "args": {"q": "9"}}}] * 2},
        id="edit-changing-the-tool",
    ),
    pytest.param(
        {
            "decisions": [{"type": "edit", "edited_action": {"name": "delete_item", "args": {"item_id": 9}}}]
            * 2
        },
        id="edit-to-invalid-arguments",
    ),
    pytest.param(
        {
            "decisions": [
                {"type": "edit", "edited_action": {"args": {"item_id": "9"}}, "message": "x"},
                {"type": "approve"},
            ]
        },
        id="edit-with-more-than-an-action",
    ),
    pytest.param(
        {"decisions": [{"type": "edit", "edited_action": {"name": "delete_item", "args": ["9"]}}] * 2},
        id="edit-without-an-object",
    ),
    pytest.param({"decisions": [{"type": "approve", "args": {"item_id": "9"}}] * 2}, id="smuggled-args"),
]


@pytest.mark.parametrize("forged", FORGED)
async def test_forged_resume_payloads_run_nothing(forged: Any) -> None:
    runs: Runs = collections.Counter()
    app = build(ToolExecutor(make_tools(runs)), MIXED, InMemorySaver())
    cfg = config()
    first = (await app.ainvoke({"messages": [HumanMessage("go")]}, cfg))["__interrupt__"][0].value
    state = await app.ainvoke(Command(resume=forged), cfg)
    assert sum(runs.values()) == 0
    again = state["__interrupt__"][0].value
    assert again["error"]
    # The same held calls (same ids) are asked again, and a valid answer still works.
    assert again["action_requests"] == first["action_requests"]
    await app.ainvoke(Command(resume={"decisions": [{"type": "approve"}] * 2}), cfg)
    assert runs == {"lookup": 1, "delete:1": 1, "delete:2": 1}


async def test_a_mixed_forged_payload_with_some_valid_ids_runs_nothing(checkpointer: Any) -> None:
    runs: Runs = collections.Counter()
    app = build(ToolExecutor(make_tools(runs)), MIXED, checkpointer)
    cfg = config()
    state = await app.ainvoke({"messages": [HumanMessage("go")]}, cfg)
    ids = [a["confirmation_id"] for a in state["__interrupt__"][0].value["action_requests"]]
    state = await app.ainvoke(Command(resume={ids[0]: True, ids[1]: "true"}), cfg)
    assert sum(runs.values()) == 0
    assert "true/false" in state["__interrupt__"][0].value["error"]


async def test_another_users_confirmation_ids_run_nothing() -> None:
    runs: Runs = collections.Counter()
    executor = ToolExecutor(make_tools(runs))
    app = build(executor, [call("b", "delete_item", item_id="1")], InMemorySaver())
    alice, mallory = config("alice"), config("mallory")
    alice_ids = [
        a["confirmation_id"]
        for a in (await app.ainvoke({"messages": [HumanMessage("go")]}, alice))["__interrupt__"][0].value[
            "action_requests"
        ]
    ]
    await app.ainvoke({"messages": [HumanMessage("go")]}, mallory)
    # Mallory answers her own interrupt with Alice's ids, then resumes Alice's thread as herself.
    state = await app.ainvoke(Command(resume=dict.fromkeys(alice_ids, True)), mallory)
    assert "error" in state["__interrupt__"][0].value
    hijack = {**alice, "configurable": {**alice["configurable"], "user_id": "mallory"}}
    state = await app.ainvoke(Command(resume=dict.fromkeys(alice_ids, True)), hijack)
    assert "error" in state["__interrupt__"][0].value
    assert sum(runs.values()) == 0
    # Alice's confirmation is still hers, unused.
    assert [p.id for p in await executor.pending_confirmations(ToolContext(user_id="alice"))] == alice_ids


async def test_without_a_user_gated_calls_interrupt_bound_to_the_thread() -> None:
    """A graph run without a user pauses like any other (issue 7 item 8); the held calls belong to "no
    user" and this thread: another anonymous thread does not see them, and each approved call runs once."""
    runs: Runs = collections.Counter()
    executor = ToolExecutor(make_tools(runs))
    app = build(executor, MIXED, InMemorySaver())
    config = {"configurable": {"thread_id": uuid.uuid4().hex}}
    state = await app.ainvoke({"messages": [HumanMessage("go")]}, config)
    request = state["__interrupt__"][0].value
    assert [a["args"] for a in request["action_requests"]] == [{"item_id": "1"}, {"item_id": "2"}]
    assert runs == {}
    other = ToolContext(conversation_id="another-thread")
    assert await executor.pending_confirmations(other) == []
    assert await executor.pending_confirmations(ToolContext()) == []
    state = await app.ainvoke(
        Command(resume={"decisions": [{"type": "approve"}, {"type": "reject", "message": "no"}]}), config
    )
    msgs = {m.tool_call_id: m for m in tool_messages(state)}
    assert msgs["a"].status == "success" and msgs["b"].status == "success"
    assert msgs["c"].status == "error" and "CONFIRMATION_DENIED" in msgs["c"].content
    assert runs == {"lookup": 1, "delete:1": 1}


async def test_a_required_user_refuses_gated_calls_without_an_interrupt() -> None:
    """`require_user_for_confirmation=True`: a server that requires signed-in users says so explicitly."""
    runs: Runs = collections.Counter()
    executor = ToolExecutor(make_tools(runs), require_user_for_confirmation=True)
    app = build(executor, MIXED, InMemorySaver())
    state = await app.ainvoke(
        {"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": uuid.uuid4().hex}}
    )
    assert "__interrupt__" not in state
    msgs = {m.tool_call_id: m for m in tool_messages(state)}
    assert msgs["a"].status == "success"
    assert msgs["b"].status == "error" and "CONFIRMATION_DENIED" in msgs["b"].content
    assert runs == {"lookup": 1}


def test_read_decisions_accepts_both_shapes() -> None:
    from toolrun.integrations.langgraph import _Held
    from toolrun.tools import ToolCall

    held = [_Held(0, ToolCall(id="a", name="t"), "c1", "s"), _Held(1, ToolCall(id="b", name="t"), "c2", "s")]
    assert read_decisions({"c1": True, "c2": False}, held) == (
        {"c1": (True, None), "c2": (False, None)},
        None,
    )
    assert read_decisions({"decisions": {"c1": {"type": "approve"}, "c2": False}}, held)[1] is None
    got, error = read_decisions({"decisions": [{"type": "reject", "message": "no"}, True]}, held)
    assert error is None and got == {"c1": (False, "no"), "c2": (True, None)}
    assert read_decisions({}, held)[1]
    assert read_decisions({"c1": True}, held)[1]
    assert read_decisions({"decisions": [{"type": "reject", "message": 5}, True]}, held)[1]


@pytest.mark.parametrize(
    "loose", ["no", "false", "yes", 1, 0, None, 1.0, {"approve": False}, ("deny", "why")]
)
def test_read_decisions_takes_only_booleans_or_approve_reject(loose: Any) -> None:
    """The rule of every door that takes a decision: a truthy value never approves."""
    from toolrun.integrations.langgraph import _Held
    from toolrun.tools import ToolCall

    held = [_Held(0, ToolCall(id="a", name="t"), "c1", "s")]
    for answer in ({"c1": loose}, {"decisions": [loose]}, {"decisions": {"c1": loose}}):
        got, error = read_decisions(answer, held)
        assert got == {} and error is not None, answer


def test_import_toolrun_does_not_import_the_integrations() -> None:
    code = (
        "import sys, toolrun; "
        "print([m for m in ('langchain_core', 'langgraph', 'toolrun.integrations') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------------------------------------------
# Sync graphs (graph.invoke) with the sync savers


@pytest.mark.parametrize("saver", ["memory", "sqlite"])
def test_sync_graphs_interrupt_and_resume_exactly_once(saver: str, tmp_path: Any) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    runs: Runs = collections.Counter()
    executor = ToolExecutor(make_tools(runs))
    cfg = config()

    def scenario(checkpointer: Any) -> None:
        app = build(executor, MIXED, checkpointer)
        state = app.invoke({"messages": [HumanMessage("go")]}, cfg)
        assert sum(runs.values()) == 0
        ids = [a["confirmation_id"] for a in state["__interrupt__"][0].value["action_requests"]]
        state = app.invoke(Command(resume={ids[0]: True, ids[1]: False}), cfg)
        assert runs == {"lookup": 1, "delete:1": 1}
        assert [m.status for m in tool_messages(state)] == ["success", "success", "error"]
        assert state["messages"][-1].content == "done"

    if saver == "memory":
        scenario(InMemorySaver())
    else:
        with SqliteSaver.from_conn_string(str(tmp_path / "sync.sqlite")) as checkpointer:
            scenario(checkpointer)


class UnlistableStore(InMemoryConfirmationStore):
    """A confirmation store that cannot list what is held (its database is down)."""

    async def list_pending(self, user_id: str, *, now: float) -> Any:
        raise ConnectionError("store down")


async def test_a_failing_confirmation_listing_fails_closed() -> None:
    runs: Runs = collections.Counter()
    app = build(ToolExecutor(make_tools(runs), confirmations=UnlistableStore()), MIXED, InMemorySaver())
    cfg = config()
    state = await app.ainvoke({"messages": [HumanMessage("go")]}, cfg)
    ids = [a["confirmation_id"] for a in state["__interrupt__"][0].value["action_requests"]]
    state = await app.ainvoke(Command(resume=dict.fromkeys(ids, True)), cfg)
    assert "error" in state["__interrupt__"][0].value  # asked again, never crashed
    assert sum(runs.values()) == 0


async def test_the_interrupt_describes_each_action_with_its_preview() -> None:
    from toolrun import tool

    names = {"1": "Renew passport", "2": "Buy milk"}

    @tool(destructive=True, preview=lambda args, ctx: f"Delete the item '{names[args['item_id']]}'")
    async def delete_item(item_id: str) -> str:
        """Delete an item."""
        return f"deleted {item_id}"

    @tool(read_only=True)
    async def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    app = build(ToolExecutor(ToolRegistry([delete_item, lookup])), MIXED, InMemorySaver())
    state = await app.ainvoke({"messages": [HumanMessage("go")]}, config())
    actions = state["__interrupt__"][0].value["action_requests"]
    assert [a["description"] for a in actions] == [
        "Delete the item 'Renew passport'",
        "Delete the item 'Buy milk'",
    ]
    assert [a["preview"] for a in actions] == [a["description"] for a in actions]
    assert all(a["summary"].startswith("delete_item(") for a in actions)
