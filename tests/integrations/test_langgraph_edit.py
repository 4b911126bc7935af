"""Edit, then approve, through `ToolrunNode`'s interrupt: LangChain's edit decision approves the call with
the person's arguments (validated and previewed again before anything runs, bound to them, run once, the
model told what changed); a refused edit asks again and runs nothing."""

from __future__ import annotations

import collections
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from toolrun import ToolContext, ToolExecutor, ToolRegistry, tool

from .test_langgraph_node import MIXED, Runs, build, config, make_tools, read_decisions, tool_messages


def edit(name: str = "delete_item", **args: Any) -> dict[str, Any]:
    return {"type": "edit", "edited_action": {"name": name, "args": args}}


async def test_an_edit_runs_once_with_the_new_arguments_and_the_model_is_told(checkpointer: Any) -> None:
    runs: Runs = collections.Counter()
    executor = ToolExecutor(make_tools(runs))
    app = build(executor, MIXED, checkpointer)
    cfg = config()
    await app.ainvoke({"messages": [HumanMessage("go")]}, cfg)
    state = await app.ainvoke(
        Command(resume={"decisions": [edit(item_id="7"), {"type": "reject", "message": "keep it"}]}), cfg
    )
    assert runs == {"lookup": 1, "delete:7": 1}  # the edited call, not the model's delete:1
    msgs = {m.tool_call_id: m for m in tool_messages(state)}
    assert msgs["b"].status == "success"
    assert "The user changed the arguments before approving" in msgs["b"].content
    assert 'item_id: "1" → "7"' in msgs["b"].content and "deleted 7" in msgs["b"].content
    assert "keep it" in msgs["c"].content
    assert await executor.pending_confirmations(ToolContext(user_id="u1")) == []


async def test_an_edit_in_the_mapping_shape() -> None:
    runs: Runs = collections.Counter()
    app = build(ToolExecutor(make_tools(runs)), MIXED, InMemorySaver())
    cfg = config()
    first = (await app.ainvoke({"messages": [HumanMessage("go")]}, cfg))["__interrupt__"][0].value
    ids = [a["confirmation_id"] for a in first["action_requests"]]
    await app.ainvoke(Command(resume={ids[0]: edit(item_id="8"), ids[1]: True}), cfg)
    assert runs == {"lookup": 1, "delete:8": 1, "delete:2": 1}


async def test_an_edit_the_tool_refuses_asks_again_and_nothing_runs() -> None:
    """Validated before anything in the batch runs (not even the safe lookup): the same request comes back
    with the tool's own error, the calls stay held, and a valid answer then works."""
    runs: Runs = collections.Counter()
    app = build(ToolExecutor(make_tools(runs)), MIXED, InMemorySaver())
    cfg = config()
    first = (await app.ainvoke({"messages": [HumanMessage("go")]}, cfg))["__interrupt__"][0].value
    state = await app.ainvoke(
        Command(resume={"decisions": [{"type": "approve"}, edit(item_id="9", extra=True)]}), cfg
    )
    assert sum(runs.values()) == 0
    again = state["__interrupt__"][0].value
    assert again["error"].startswith("the edit of action 1 (delete_item) was refused")
    assert "extra" in again["error"]
    assert again["action_requests"] == first["action_requests"]
    await app.ainvoke(Command(resume={"decisions": [{"type": "approve"}, edit(item_id="9")]}), cfg)
    assert runs == {"lookup": 1, "delete:1": 1, "delete:9": 1}


async def test_a_replayed_edit_runs_nothing_twice(checkpointer: Any) -> None:
    runs: Runs = collections.Counter()
    app = build(ToolExecutor(make_tools(runs)), MIXED, checkpointer)
    cfg = config()
    first = (await app.ainvoke({"messages": [HumanMessage("go")]}, cfg))["__interrupt__"][0].value
    ids = [a["confirmation_id"] for a in first["action_requests"]]
    answer = {ids[0]: edit(item_id="7"), ids[1]: edit(item_id="8")}
    await app.ainvoke(Command(resume=answer), cfg)
    assert runs == {"lookup": 1, "delete:7": 1, "delete:8": 1}
    # The same answer again, to the finished thread: nothing is waiting for it.
    await app.ainvoke(Command(resume=answer), cfg)
    # The tools node again from the checkpoint before it (time travel), with the same edits and with
    # other ones: the confirmations they name are used up, so nothing runs.
    history = [s async for s in app.aget_state_history(cfg)]
    before_tools = next(s for s in history if s.next == ("tools",))
    for replay in (answer, {ids[0]: edit(item_id="5"), ids[1]: edit(item_id="6")}):
        state = await app.ainvoke(Command(resume=replay), before_tools.config)
        assert state["__interrupt__"][0].value["error"]  # ids of calls no longer held: asked again
    assert runs["delete:7"] == runs["delete:8"] == 1
    assert not any(key in runs for key in ("delete:5", "delete:6", "delete:1", "delete:2"))


async def test_an_edit_is_previewed_again_from_the_applications_records() -> None:
    """The tool's preview runs for the edited arguments before anything runs (an id that names nothing is
    the tool's own refusal), and the run binds to the new arguments."""
    titles = {"t1": "Renew passport", "t2": "Buy milk"}
    previewed: list[str] = []
    deleted: list[str] = []

    def describe(args: Any, ctx: ToolContext) -> str:
        previewed.append(args["task_id"])
        return f"Delete '{titles[args['task_id']]}'"

    @tool(destructive=True, preview=describe)
    def delete_task(task_id: str) -> str:
        """Delete a task."""
        deleted.append(task_id)
        return f"deleted {task_id}"

    app = build(
        ToolExecutor(ToolRegistry([delete_task])),
        [{"id": "x", "name": "delete_task", "args": {"task_id": "t1"}}],
        InMemorySaver(),
    )
    cfg = config()
    request = (await app.ainvoke({"messages": [HumanMessage("go")]}, cfg))["__interrupt__"][0].value
    assert request["action_requests"][0]["description"] == "Delete 'Renew passport'"
    state = await app.ainvoke(Command(resume={"decisions": [edit("delete_task", task_id="t2")]}), cfg)
    assert deleted == ["t2"] and "t2" in previewed
    assert 'task_id: "t1" → "t2"' in tool_messages(state)[0].content


def test_read_decisions_takes_an_edit_only_when_asked_for() -> None:
    from toolrun.integrations.langgraph import _Held
    from toolrun.tools import ToolCall

    held = [_Held(0, ToolCall(id="a", name="t"), "c1", "s")]
    edits: dict[str, dict[str, Any]] = {}
    assert read_decisions({"decisions": [edit("t", x=1)]}, held, edits) == ({"c1": (True, None)}, None)
    assert edits == {"c1": {"x": 1}}
    assert read_decisions({"decisions": [edit("t", x=1)]}, held)[1]  # no place for edits: refused
    edits.clear()
    assert read_decisions({"decisions": [edit("other", x=1)]}, held, edits)[1]
    assert edits == {}


@pytest.mark.parametrize(
    "bad",
    [
        {"type": "edit"},
        {"type": "edit", "edited_action": None},
        {"type": "edit", "edited_action": {"name": "t"}},
        {"type": "edit", "edited_action": {"name": "t", "args": {}, "id": "z"}},
        {"type": "edit", "edited_action": {"name": "t", "args": {1: 2}}},
        {"type": "edit", "args": {"x": 1}},
    ],
)
def test_read_decisions_refuses_malformed_edits(bad: Any) -> None:
    from toolrun.integrations.langgraph import _Held
    from toolrun.tools import ToolCall

    held = [_Held(0, ToolCall(id="a", name="t"), "c1", "s")]
    edits: dict[str, dict[str, Any]] = {}
    got, error = read_decisions({"decisions": [bad]}, held, edits)
    assert got == {} and error and edits == {}
