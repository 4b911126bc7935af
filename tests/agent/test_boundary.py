"""The model boundary: whatever a model emits, the run's conversation stays valid for every provider, and
only `True`/`False` decide a confirmation."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolrun import Agent, ToolCall, ToolContext, ToolRegistry, tool
from toolrun.agent import AgentRun, InvalidDecisionError, OutputLimits, TextDelta, ToolCallFinished
from toolrun.models import (
    AssistantMessage,
    FunctionModel,
    Message,
    ModelResponse,
    SystemMessage,
    ToolCallDelta,
    ToolResultMessage,
    UserMessage,
    history_problems,
)
from toolrun.models._history import repair_history

CTX = ToolContext(user_id="u1", roles=("member",))


def make_registry() -> tuple[ToolRegistry, list[tuple[str, Any]]]:
    seen: list[tuple[str, Any]] = []

    @tool
    def note(text: str) -> str:
        """Write a note."""
        seen.append(("note", text))
        return f"noted {text}"

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        seen.append(("add", (a, b)))
        return a + b

    @tool
    def store(data: Any = None) -> str:
        """Store any JSON data."""
        seen.append(("store", data))
        return "stored"

    @tool(destructive=True)
    async def delete_task(task_id: str) -> dict[str, Any]:
        """Delete a task permanently."""
        seen.append(("delete_task", task_id))
        return {"deleted": task_id}

    return ToolRegistry([note, add, store, delete_task]), seen


def scripted(*turns: Any) -> FunctionModel:
    """A model that answers each request with the next turn, and "done" once the script is spent."""
    script = list(turns)

    def answer(messages: list[Message], tools: list[Any]) -> Any:
        return script.pop(0) if script else "done"

    return FunctionModel(answer)


def results_by_call(run: AgentRun) -> dict[str, ToolResultMessage]:
    return {m.call_id: m for m in run.messages if isinstance(m, ToolResultMessage)}


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def assert_valid(run: AgentRun, model: FunctionModel) -> None:
    open_tail = run.status == "awaiting_confirmation"
    assert history_problems(run.messages, open_tail=open_tail) == []
    for request in model.requests:  # what the model was actually sent, every time
        assert history_problems(request.messages) == []
    json.dumps([m.to_dict() for m in run.messages], ensure_ascii=False).encode("utf-8")


# ------------------------------------------------------------------------------------------------------
# Agent.resume: only True and False decide


@pytest.mark.parametrize(
    "decision", ["no", "false", "yes", 1, 0, None, {"approve": False}, ("deny", "why"), [], 1.0]
)
async def test_resume_takes_only_true_or_false(decision: Any) -> None:
    registry, seen = make_registry()
    agent = Agent(scripted(ToolCall(name="delete_task", arguments={"task_id": "t1"})), registry)
    run = await agent.run("delete t1", context=CTX)
    assert run.status == "awaiting_confirmation"
    cid = run.pending[0].confirmation_id
    with pytest.raises(InvalidDecisionError, match="must be True \\(approve\\) or False") as info:
        await agent.resume(run, approvals={cid: decision}, context=CTX)
    assert isinstance(info.value, ValueError) and info.value.confirmation_id == cid
    with pytest.raises(InvalidDecisionError):
        async for _ in agent.stream_resume(run, {cid: decision}, context=CTX):
            pass
    assert seen == []
    assert run.status == "awaiting_confirmation" and [p.confirmation_id for p in run.pending] == [cid]
    # the confirmation is untouched: a real decision still works, once
    done = await agent.resume(run, approvals={cid: True}, context=CTX)
    assert done.status == "completed" and seen == [("delete_task", "t1")]


async def test_a_loose_decision_next_to_a_valid_one_runs_nothing() -> None:
    registry, seen = make_registry()
    calls = [ToolCall(name="delete_task", arguments={"task_id": t}) for t in ("t1", "t2")]
    agent = Agent(scripted(calls), registry)
    run = await agent.run("delete both", context=CTX)
    first, second = (p.confirmation_id for p in run.pending)
    with pytest.raises(InvalidDecisionError):
        await agent.resume(run, approvals={first: True, second: "no"}, context=CTX)
    assert seen == [] and len(run.pending) == 2


# ------------------------------------------------------------------------------------------------------
# ids


async def test_duplicate_empty_and_odd_ids_get_unique_ids_and_results_pair() -> None:
    registry, seen = make_registry()
    bad_ids = ["same", "same", "", "x" * 200, "a b\x00", "call.with:colon", "\ud83d"]
    first = [ToolCall(id=cid, name="add", arguments={"a": i, "b": 100}) for i, cid in enumerate(bad_ids)]
    again = [ToolCall(id="same", name="add", arguments={"a": 50, "b": 100})]  # reused in a later turn
    model = scripted(first, again)
    run = await Agent(model, registry).run("add them", context=CTX)
    assert run.status == "completed"
    assert_valid(run, model)
    calls = [c for m in run.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert len({c.id for c in calls}) == len(calls) == 8
    results = results_by_call(run)
    for call in calls:  # each result answers its own call
        args = cast(dict[str, int], call.arguments)
        assert results[call.id].content == str(args["a"] + 100)
    assert sorted(a for name, (a, _) in seen if name == "add") == [0, 1, 2, 3, 4, 5, 6, 50]


async def test_two_held_calls_with_one_id_are_approved_one_by_one() -> None:
    """The issue's case: approving the first no longer fails the run, the second is still decidable."""
    registry, seen = make_registry()
    calls = [ToolCall(id="dup", name="delete_task", arguments={"task_id": t}) for t in ("t1", "t2")]
    model = scripted(calls)
    agent = Agent(model, registry)
    run = await agent.run("delete both", context=CTX)
    assert run.status == "awaiting_confirmation" and len(run.pending) == 2
    assert_valid(run, model)
    first, second = (p.confirmation_id for p in run.pending)
    run = await agent.resume(run, approvals={first: True}, context=CTX)
    assert run.status == "awaiting_confirmation", run.error
    run = await agent.resume(run, approvals={second: True}, context=CTX)
    assert run.status == "completed", run.error
    assert seen == [("delete_task", "t1"), ("delete_task", "t2")]
    assert_valid(run, model)


# ------------------------------------------------------------------------------------------------------
# text and Unicode


async def test_streamed_text_is_valid_unicode_and_a_split_pair_is_joined() -> None:
    registry, _ = make_registry()

    async def pieces(messages: list[Message], tools: list[Any]) -> AsyncIterator[str | ToolCallDelta]:
        for piece in ("a\ud83d", "\ude00b", "c\udc00", "\x00d\ud83d"):
            yield piece

    agent = Agent(FunctionModel(stream_function=pieces), registry)
    deltas = [e.text async for e in agent.stream("hi", context=CTX) if isinstance(e, TextDelta)]
    streamed = "".join(deltas)
    assert streamed == "a😀bc\ufffd\ufffdd\ufffd"
    for delta in deltas:
        delta.encode("utf-8")


async def test_lone_surrogates_and_nul_in_arguments_are_replaced() -> None:
    registry, seen = make_registry()
    raw_text = '{"text": "raw \ud83d and \x00"}'
    escaped = '{"text": "escaped \\ud83d, pair \\ud83d\\ude00"}'
    mapping = {"text": "mapped \udc00", "\ud800key": 1}
    calls = [
        ToolCall(name="note", arguments=raw_text),
        ToolCall(name="note", arguments=escaped),
        ToolCall(name="store", arguments={"data": mapping}),
    ]
    model = scripted(calls, "answer \ud83d")
    run = await Agent(model, registry).run("go", context=CTX)
    assert run.status == "completed" and run.output == "answer \ufffd"
    assert_valid(run, model)
    assert seen == [
        ("note", "raw \ufffd and \ufffd"),
        ("note", "escaped \ufffd, pair 😀"),
        ("store", {"text": "mapped \ufffd", "\ufffdkey": 1}),
    ]


# ------------------------------------------------------------------------------------------------------
# sizes, nesting, names, counts


@pytest.mark.parametrize(
    ("arguments", "why"),
    [
        ({"data": nested(300)}, "deeper than 64"),
        ("[" * 1200 + "]" * 1200, "deeper than 64"),
        ('{"data": ' + "[" * 5000 + "]" * 5000 + "}", "deeper than 64"),
        (json.dumps({"data": "x" * 10_000_000}), "the limit is 256000"),
        ({"data": "y" * 300_000}, "the limit is 256000"),
        ([1, 2], "must be a JSON object"),
        (7, "must be a JSON object"),
        ({"data": float("nan")}, "not JSON data"),
        ({"data": {1, 2}}, "not JSON data"),
    ],
)
async def test_oversized_deep_or_non_json_arguments_are_refused_and_not_kept(
    arguments: Any, why: str
) -> None:
    registry, seen = make_registry()
    model = scripted(ToolCall(name="store", arguments=arguments))
    run = await Agent(model, registry).run("store it", context=CTX)
    assert run.status == "completed"
    assert seen == []  # never ran
    [record] = run.tool_calls
    assert record.result.error is not None and record.result.error.code == "INVALID_ARGUMENTS"
    assert why in record.result.error.message
    [call] = [c for m in run.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert isinstance(call.arguments, dict) and set(call.arguments) == {"_removed"}
    assert_valid(run, model)
    # the next request carried a short note, not the arguments
    assert len(json.dumps([m.to_dict() for m in model.requests[-1].messages])) < 5_000


async def test_arguments_under_the_limits_pass_untouched() -> None:
    registry, seen = make_registry()
    text = json.dumps({"data": {"deep": nested(60), "big": "z" * 200_000, "emoji": "😀 עברית"}})
    model = scripted(ToolCall(name="store", arguments=text))
    run = await Agent(model, registry).run("store it", context=CTX)
    assert run.tool_calls[0].result.status == "ok"
    assert seen and seen[0][1]["big"] == "z" * 200_000
    assert run.tool_calls[0].call.arguments == text


@pytest.mark.parametrize("name", ["", "💥 drop\x00table", "a" * 300, "tool\ud83d", "rm -rf /"])
async def test_unknown_names_no_provider_takes_are_not_run_and_kept_safe(name: str) -> None:
    registry, seen = make_registry()
    model = scripted(ToolCall(name=name, arguments={}))
    run = await Agent(model, registry).run("go", context=CTX)
    assert run.status == "completed" and seen == []
    [record] = run.tool_calls
    assert record.result.error is not None and record.result.error.code == "NOT_FOUND"
    assert record.call.name and len(record.call.name) <= 64
    assert all(ch.isalnum() or ch in "_-" for ch in record.call.name)
    assert_valid(run, model)


async def test_a_registered_name_is_never_rewritten_into_another_tool() -> None:
    registry, seen = make_registry()
    model = scripted(ToolCall(name="add ", arguments={"a": 1, "b": 2}))  # "add " is not "add"
    run = await Agent(model, registry).run("go", context=CTX)
    assert seen == [] and run.tool_calls[0].result.error is not None
    assert run.tool_calls[0].result.error.code == "NOT_FOUND"


async def test_calls_over_the_per_response_limit_are_refused() -> None:
    registry, seen = make_registry()
    calls = [ToolCall(name="add", arguments={"a": i, "b": 0}) for i in range(5)]
    model = scripted(calls)
    run = await Agent(model, registry, output_limits=OutputLimits(max_calls=2)).run("go", context=CTX)
    assert [a for _, (a, _) in seen] == [0, 1]
    codes = [r.result.error.code if r.result.error else "ok" for r in run.tool_calls]
    assert codes == ["ok", "ok", "TOO_MANY_CALLS", "TOO_MANY_CALLS", "TOO_MANY_CALLS"]
    assert_valid(run, model)


async def test_long_text_is_cut_and_whitespace_only_text_is_not_kept() -> None:
    registry, _ = make_registry()
    model = scripted(
        ModelResponse(text="   \n", tool_calls=[ToolCall(name="add", arguments={"a": 1, "b": 1})]), "x" * 50
    )
    agent = Agent(model, registry, output_limits=OutputLimits(max_text_chars=10))
    events = [e async for e in agent.stream("go", context=CTX)]
    run = events[-1].run  # type: ignore[attr-defined]
    assert run.output.startswith("x" * 10) and "40 more characters cut" in run.output
    streamed = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert streamed == "   \n" + "x" * 10  # each response streams up to the same limit
    assert isinstance(run.messages[1], AssistantMessage) and run.messages[1].content == ""
    assert_valid(run, model)
    assert any(isinstance(e, ToolCallFinished) for e in events)


def test_limits_cannot_be_raised_past_what_a_conversation_may_hold() -> None:
    with pytest.raises(ValueError, match="may be lowered"):
        OutputLimits(max_argument_depth=1000)
    with pytest.raises(ValueError, match="at least 1"):
        OutputLimits(max_calls=0)


# ------------------------------------------------------------------------------------------------------
# the validator and the repair


def call(cid: str, name: str = "add", arguments: Any = None) -> ToolCall:
    return ToolCall(id=cid, name=name, arguments=arguments if arguments is not None else {"a": 1})


def result(cid: str) -> ToolResultMessage:
    return ToolResultMessage(call_id=cid, tool_name="add", content="2")


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([UserMessage(content="hi"), AssistantMessage(tool_calls=[call("a"), call("a")])], "used twice"),
        ([UserMessage(content="hi"), AssistantMessage(tool_calls=[call("")])], "is not 1-64"),
        ([UserMessage(content="hi"), AssistantMessage(tool_calls=[call("a")])], "without results"),
        (
            [UserMessage(content="hi"), AssistantMessage(tool_calls=[call("a")]), UserMessage(content="x")],
            "follows calls without results",
        ),
        ([UserMessage(content="hi"), result("a")], "which is not open"),
        (
            [UserMessage(content="hi"), AssistantMessage(tool_calls=[call("a")]), result("a"), result("a")],
            "a second result",
        ),
        ([UserMessage(content="bad \ud83d")], "not valid Unicode"),
        ([UserMessage(content="nul \x00")], "NUL"),
        ([UserMessage(content="  ")], "empty"),
        ([AssistantMessage(content="first")], "must start with the user"),
        ([UserMessage(content="hi"), AssistantMessage(content=" \n ")], "whitespace only"),
        (
            [
                UserMessage(content="hi"),
                AssistantMessage(tool_calls=[call("a", arguments={"d": nested(80)})]),
            ],
            "deeper than 64",
        ),
        (
            [
                UserMessage(content="hi"),
                AssistantMessage(tool_calls=[call("a", arguments='{"t": "\\udc00"}')]),
            ],
            "a lone surrogate",
        ),
        ([UserMessage(content="hi"), AssistantMessage(tool_calls=[call("a", name="")])], "name is empty"),
        ([UserMessage(content="hi"), SystemMessage(content="late")], "system message after"),
    ],
)
def test_history_problems_names_each_broken_rule(messages: list[Message], problem: str) -> None:
    problems = history_problems(messages)
    assert any(problem in p for p in problems), problems
    assert history_problems(repair_history(messages), open_tail=True) == []


def test_a_paused_turn_may_stay_open_only_when_asked() -> None:
    messages: list[Message] = [UserMessage(content="hi"), AssistantMessage(tool_calls=[call("a")])]
    assert history_problems(messages, open_tail=True) == []
    assert history_problems(messages) != []


_texts = st.text(st.characters(codec=None, categories=None), max_size=12) | st.sampled_from(
    ["", " ", "\x00", "\ud83d", "\udc00x", "😀", "ok"]
)
_ids = st.sampled_from(["", "a", "a", "b", "x" * 70, "c d", "\ud83d"])
_args = st.one_of(
    st.none(),
    _texts,
    st.dictionaries(_texts, _texts, max_size=2),
    st.sampled_from([{"d": nested(70)}, "[" * 100 + "]" * 100, '{"t": "\\ud83d"}', '{"a": 1}']),
)
_calls = st.builds(ToolCall, id=_ids, name=_texts, arguments=_args)
_messages = st.lists(
    st.one_of(
        st.builds(SystemMessage, content=_texts),
        st.builds(UserMessage, content=_texts),
        st.builds(AssistantMessage, content=_texts, tool_calls=st.lists(_calls, max_size=3)),
        st.builds(ToolResultMessage, call_id=_ids, tool_name=_texts, content=_texts, is_error=st.booleans()),
    ),
    max_size=10,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_messages)
def test_repair_makes_any_history_valid_and_keeps_a_valid_one(messages: list[Message]) -> None:
    repaired = repair_history(messages)
    assert history_problems(repaired, open_tail=True) == []
    assert repair_history(repaired) == repaired
    if not history_problems(messages, open_tail=True):
        assert repaired == messages
