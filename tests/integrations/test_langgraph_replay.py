"""Positional resumes (`{"decisions": [...]}`) replayed through `ToolrunNode`: a decision is bound to the
held calls the person was shown, and is single use.

A positional answer names no confirmation id, so on its own it would fit any request with as many actions.
When the graph is time-travelled to the checkpoint before an approval (or a call was decided through another
door while the graph was paused), the node re-holds the call under a NEW confirmation that nobody was shown;
the answer must not approve it. These tests run the destructive tool once, replay, and count.
"""

from __future__ import annotations

import collections
from typing import Any

from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from toolrun import ToolContext, ToolExecutor
from toolrun.runtime import InMemoryAuditSink

from .test_langgraph_node import (
    MIXED,
    Runs,
    UnlistableStore,
    build,
    call,
    config,
    make_tools,
    tool_messages,
)

APPROVE = {"type": "approve"}
REJECT = {"type": "reject", "message": "keep it"}


async def _before_tools(app: Any, cfg: dict[str, Any]) -> dict[str, Any]:
    """The config of the checkpoint at which the tools node was about to run (the one whose interrupt was
    answered), for the same user (a snapshot's config names the thread and checkpoint only)."""
    history = [s async for s in app.aget_state_history(cfg)]
    before = next(s for s in history if s.next == ("tools",))
    return {"configurable": {**before.config["configurable"], "user_id": cfg["configurable"]["user_id"]}}


def _one_message_per_call(state: dict[str, Any], ids: list[str]) -> dict[str, ToolMessage]:
    msgs = tool_messages(state)
    assert sorted(m.tool_call_id for m in msgs) == sorted(ids), "every call ends with exactly one result"
    return {m.tool_call_id: m for m in msgs}


async def test_a_time_travelled_positional_approval_runs_the_call_once(checkpointer: Any) -> None:
    runs: Runs = collections.Counter()
    executor = ToolExecutor(make_tools(runs))
    app = build(executor, [call("b", "delete_item", item_id="1")], checkpointer)
    cfg = config()
    await app.ainvoke({"messages": [HumanMessage("go")]}, cfg)
    answer = Command(resume={"decisions": [APPROVE]})
    state = await app.ainvoke(answer, cfg)
    assert runs == {"delete:1": 1}
    assert _one_message_per_call(state, ["b"])["b"].content == "deleted 1"

    replayed = await app.ainvoke(answer, await _before_tools(app, cfg))
    assert runs == {"delete:1": 1}  # not twice
    msg = _one_message_per_call(replayed, ["b"])["b"]
    assert msg.status == "error" and "CONFIRMATION_NOT_FOUND" in msg.content
    assert "did not run" in msg.content
    assert replayed["messages"][-1].content == "done"  # the model read the result and went on
    # Nothing is left waiting: the confirmation the replay held was withdrawn, not left to a later answer.
    assert await executor.pending_confirmations(ToolContext(user_id="u1")) == []


async def test_parallel_held_calls_approve_one_deny_the_other_then_replay(checkpointer: Any) -> None:
    """Two held calls in one turn (and a free one): each decision reaches its own call, then a replay of
    the same answer neither runs the approved one again nor turns the denied one into a run."""
    runs: Runs = collections.Counter()
    executor = ToolExecutor(make_tools(runs))
    app = build(executor, MIXED, checkpointer)
    cfg = config()
    first = (await app.ainvoke({"messages": [HumanMessage("go")]}, cfg))["__interrupt__"][0].value
    shown = [a["confirmation_id"] for a in first["action_requests"]]
    answer = Command(resume={"decisions": [APPROVE, REJECT]})
    state = await app.ainvoke(answer, cfg)
    assert runs == {"lookup": 1, "delete:1": 1}
    msgs = _one_message_per_call(state, ["a", "b", "c"])
    assert msgs["b"].content == "deleted 1" and "keep it" in msgs["c"].content

    for swapped in (answer, Command(resume={"decisions": [REJECT, APPROVE]})):
        replayed = await app.ainvoke(swapped, await _before_tools(app, cfg))
        assert runs["delete:1"] == 1 and runs["delete:2"] == 0
        msgs = _one_message_per_call(replayed, ["a", "b", "c"])
        assert msgs["a"].status == "success"  # the safe call is simply run again on a replay
        for cid in ("b", "c"):
            assert msgs[cid].status == "error" and "CONFIRMATION_NOT_FOUND" in msgs[cid].content
    assert await executor.pending_confirmations(ToolContext(user_id="u1")) == []
    # The ids the person was shown are used; answering them by id is refused by the executor too.
    for cid in shown:
        result = await executor.approve(cid, ToolContext(user_id="u1"))
        assert result.error is not None and result.error.code == "CONFIRMATION_NOT_FOUND"


async def test_a_time_travelled_edit_runs_once() -> None:
    runs: Runs = collections.Counter()
    app = build(ToolExecutor(make_tools(runs)), MIXED, InMemorySaver())
    cfg = config()
    await app.ainvoke({"messages": [HumanMessage("go")]}, cfg)
    edit = {"type": "edit", "edited_action": {"name": "delete_item", "args": {"item_id": "7"}}}
    answer = Command(resume={"decisions": [edit, APPROVE]})
    await app.ainvoke(answer, cfg)
    assert runs == {"lookup": 1, "delete:7": 1, "delete:2": 1}
    replayed = await app.ainvoke(answer, await _before_tools(app, cfg))
    assert runs["delete:7"] == 1 and runs["delete:2"] == 1 and runs["delete:1"] == 0
    assert all(m.status == "error" for m in tool_messages(replayed) if m.tool_call_id in ("b", "c"))


async def test_time_travel_without_an_answer_asks_afresh_and_a_fresh_approval_runs() -> None:
    """Going back without a resume value is asking again: the request comes back under new ids (the
    old ones are used), and approving it is a new, explicit approval."""
    runs: Runs = collections.Counter()
    app = build(ToolExecutor(make_tools(runs)), [call("b", "delete_item", item_id="1")], InMemorySaver())
    cfg = config()
    first = (await app.ainvoke({"messages": [HumanMessage("go")]}, cfg))["__interrupt__"][0].value
    await app.ainvoke(Command(resume={"decisions": [APPROVE]}), cfg)
    state = await app.ainvoke(None, await _before_tools(app, cfg))
    again = state["__interrupt__"][0].value
    assert runs == {"delete:1": 1}
    [old], [new] = first["action_requests"], again["action_requests"]
    assert new["confirmation_id"] != old["confirmation_id"]
    assert (new["name"], new["args"], new["tool_call_id"]) == (old["name"], old["args"], old["tool_call_id"])
    state = await app.ainvoke(Command(resume={"decisions": [APPROVE]}), cfg)
    assert runs == {"delete:1": 2}
    assert _one_message_per_call(state, ["b"])["b"].content == "deleted 1"


async def test_a_call_decided_through_another_door_is_not_approved_by_a_positional_resume() -> None:
    """While the graph waits, the person approves one held call elsewhere (the API, the page): it runs
    there. A positional answer to the graph's request then decides only the call still held."""
    runs: Runs = collections.Counter()
    executor = ToolExecutor(make_tools(runs))
    app = build(executor, MIXED, InMemorySaver())
    cfg = config()
    first = (await app.ainvoke({"messages": [HumanMessage("go")]}, cfg))["__interrupt__"][0].value
    b_id = first["action_requests"][0]["confirmation_id"]
    elsewhere = await executor.approve(b_id, ToolContext(user_id="u1", conversation_id="x"))
    assert elsewhere.status == "ok" and runs == {"delete:1": 1}
    state = await app.ainvoke(Command(resume={"decisions": [APPROVE, APPROVE]}), cfg)
    assert runs == {"delete:1": 1, "delete:2": 1, "lookup": 1}
    msgs = _one_message_per_call(state, ["a", "b", "c"])
    assert "CONFIRMATION_NOT_FOUND" in msgs["b"].content and msgs["c"].content == "deleted 2"


async def test_a_replayed_positional_answer_is_audited_as_refused() -> None:
    runs: Runs = collections.Counter()
    audit = InMemoryAuditSink()
    app = build(
        ToolExecutor(make_tools(runs), audit=audit), [call("b", "delete_item", item_id="1")], InMemorySaver()
    )
    cfg = config()
    await app.ainvoke({"messages": [HumanMessage("go")]}, cfg)
    await app.ainvoke(Command(resume={"decisions": [APPROVE]}), cfg)
    before = len(audit.records)
    await app.ainvoke(Command(resume={"decisions": [APPROVE]}), await _before_tools(app, cfg))
    codes = [r.code for r in audit.records[before:]]
    assert "CONFIRMATION_NOT_FOUND" in codes
    assert runs == {"delete:1": 1}


async def test_every_answer_of_the_first_timeline_is_replayed_and_none_runs_a_call_again() -> None:
    """LangGraph hands a re-run node all the answers its interrupts got, in order: here a refused one (an
    edit the tool rejects), then the approval. Time-travelled, both come back first (whatever the new
    resume value): the refused one is refused again, the approval finds the call held anew, unshown."""
    runs: Runs = collections.Counter()
    executor = ToolExecutor(make_tools(runs))
    app = build(executor, [call("b", "delete_item", item_id="1")], InMemorySaver())
    cfg = config()
    await app.ainvoke({"messages": [HumanMessage("go")]}, cfg)
    bad_edit = {"type": "edit", "edited_action": {"name": "delete_item", "args": {"item_id": 5}}}
    state = await app.ainvoke(Command(resume={"decisions": [bad_edit]}), cfg)
    assert "was refused" in state["__interrupt__"][0].value["error"]
    await app.ainvoke(Command(resume={"decisions": [APPROVE]}), cfg)
    assert runs == {"delete:1": 1}
    replayed = await app.ainvoke(Command(resume={"decisions": [APPROVE]}), await _before_tools(app, cfg))
    assert runs == {"delete:1": 1}
    assert "CONFIRMATION_NOT_FOUND" in _one_message_per_call(replayed, ["b"])["b"].content
    assert await executor.pending_confirmations(ToolContext(user_id="u1")) == []


async def test_a_request_asked_again_under_a_new_id_is_decided_by_its_own_answer() -> None:
    """One held call is approved elsewhere while the graph waits, and the graph's answer is refused (a bad
    edit of the other call): the request comes back, the first call under a new id (the one shown now).
    The answer to that request decides both calls, on this and every later re-run of the node."""
    runs: Runs = collections.Counter()
    executor = ToolExecutor(make_tools(runs))
    app = build(executor, MIXED, InMemorySaver())
    cfg = config()
    first = (await app.ainvoke({"messages": [HumanMessage("go")]}, cfg))["__interrupt__"][0].value
    shown = [a["confirmation_id"] for a in first["action_requests"]]
    assert (await executor.approve(shown[0], ToolContext(user_id="u1"))).status == "ok"
    bad_edit = {"type": "edit", "edited_action": {"name": "delete_item", "args": {"item_id": 5}}}
    state = await app.ainvoke(Command(resume={"decisions": [APPROVE, bad_edit]}), cfg)
    again = state["__interrupt__"][0].value
    assert "edit of action 1" in again["error"]
    now = [a["confirmation_id"] for a in again["action_requests"]]
    assert now[0] != shown[0] and now[1] == shown[1]
    state = await app.ainvoke(Command(resume={"decisions": [REJECT, APPROVE]}), cfg)
    assert runs == {"delete:1": 1, "delete:2": 1, "lookup": 1}
    msgs = _one_message_per_call(state, ["a", "b", "c"])
    assert "CONFIRMATION_DENIED" in msgs["b"].content and msgs["c"].content == "deleted 2"


async def test_a_positional_answer_fails_closed_when_the_held_calls_cannot_be_listed() -> None:
    """The store cannot list what is held, so the node holds the calls anew: a positional answer was not
    given for those, and nothing runs (answered by id, the request comes back instead)."""
    runs: Runs = collections.Counter()
    app = build(ToolExecutor(make_tools(runs), confirmations=UnlistableStore()), MIXED, InMemorySaver())
    cfg = config()
    await app.ainvoke({"messages": [HumanMessage("go")]}, cfg)
    state = await app.ainvoke(Command(resume={"decisions": [APPROVE, APPROVE]}), cfg)
    assert runs == {"lookup": 1}
    msgs = _one_message_per_call(state, ["a", "b", "c"])
    assert all("CONFIRMATION_NOT_FOUND" in msgs[c].content for c in ("b", "c"))


async def test_a_positional_answer_after_the_request_expired_runs_nothing() -> None:
    """The shown confirmation expired while the person thought: the node holds the call anew (new id,
    new expiry), and the late positional answer does not approve what it never saw."""
    now = [1_000_000.0]
    runs: Runs = collections.Counter()
    executor = ToolExecutor(make_tools(runs), confirmation_ttl=60, clock=lambda: now[0])
    app = build(executor, [call("b", "delete_item", item_id="1")], InMemorySaver())
    cfg = config()
    await app.ainvoke({"messages": [HumanMessage("go")]}, cfg)
    now[0] += 61
    state = await app.ainvoke(Command(resume={"decisions": [APPROVE]}), cfg)
    assert runs == {}
    assert "CONFIRMATION_NOT_FOUND" in _one_message_per_call(state, ["b"])["b"].content


def test_a_sync_graph_time_travelled_with_a_positional_answer_runs_the_call_once(tmp_path: Any) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    runs: Runs = collections.Counter()
    executor = ToolExecutor(make_tools(runs))
    cfg = config()
    with SqliteSaver.from_conn_string(str(tmp_path / "sync.sqlite")) as checkpointer:
        app = build(executor, MIXED, checkpointer)
        app.invoke({"messages": [HumanMessage("go")]}, cfg)
        answer = Command(resume={"decisions": [APPROVE, APPROVE]})
        app.invoke(answer, cfg)
        assert runs == {"lookup": 1, "delete:1": 1, "delete:2": 1}
        before = next(s for s in app.get_state_history(cfg) if s.next == ("tools",)).config
        replayed = app.invoke(answer, {"configurable": {**before["configurable"], "user_id": "u1"}})
    assert runs == {"lookup": 2, "delete:1": 1, "delete:2": 1}
    msgs = _one_message_per_call(replayed, ["a", "b", "c"])
    assert all("CONFIRMATION_NOT_FOUND" in msgs[c].content for c in ("b", "c"))
