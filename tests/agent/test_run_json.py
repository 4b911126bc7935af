"""Reading a serialised `AgentRun`: one clear error naming the field, whatever is wrong (issue 7, item 14)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolrun import ToolCall, ToolContext, ToolRegistry, ToolrunError, tool
from toolrun.agent import Agent, AgentRun, InvalidRunError, RunSignatureError
from toolrun.models import ScriptedModel


@tool(destructive=True)
async def delete_task(task_id: str) -> str:
    """Delete a task."""
    return "deleted"


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


async def sample() -> AgentRun:
    model = ScriptedModel(
        [
            ToolCall(id="a1", name="add", arguments={"a": 1, "b": 2}),
            ToolCall(id="d1", name="delete_task", arguments='{"task_id": "t1"}'),
        ]
    )
    run = await Agent(model, ToolRegistry([add, delete_task]), instructions="Be brief.").run(
        "add, then delete", context=ToolContext(user_id="u1")
    )
    assert run.status == "awaiting_confirmation" and run.pending
    return run


def with_change(data: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(data)
    target = changed
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return changed


_DELETE = object()

CASES = [
    (["run_id"], _DELETE, "run_id"),
    (["run_id"], 5, "run_id"),
    (["status"], "paused", "status"),
    (["status"], None, "status"),
    (["mode"], "magic", "mode"),
    (["messages"], _DELETE, "messages"),
    (["messages"], {"role": "user"}, "messages"),
    (["messages", 1], "hello", "messages[1]"),
    (["messages", 1, "content"], _DELETE, "messages[1].content"),
    (["messages", 1, "content"], {"text": "hi"}, "messages[1].content"),
    (["messages", 1, "role"], "robot", "messages[1]"),
    (["messages", 2, "tool_calls", 0, "name"], None, "messages[2].tool_calls[0].name"),
    (["messages", 3, "call_id"], _DELETE, "messages[3].call_id"),
    (["steps"], "2", "steps"),
    (["steps"], True, "steps"),
    (["output"], 3, "output"),
    (["tool_calls", 0, "call"], _DELETE, "tool_calls[0].call"),
    (["tool_calls", 0, "call", "id"], 1, "tool_calls[0].call.id"),
    (["tool_calls", 0, "call", "arguments"], [1, 2], "tool_calls[0].call.arguments"),
    (["tool_calls", 0, "result", "status"], "weird", "tool_calls[0].result.status"),
    (["tool_calls", 0, "result", "surprise"], 1, "tool_calls[0].result"),
    (["tool_calls", 0, "result", "error"], {"code": 1}, "tool_calls[0].result.error.code"),
    (["tool_calls", 0, "step"], None, "tool_calls[0].step"),
    (["pending", 0, "confirmation_id"], _DELETE, "pending[0].confirmation_id"),
    (["pending", 0, "call"], "delete it", "pending[0].call"),
    (["pending", 0, "summary"], None, "pending[0].summary"),
    (["pending", 0, "arguments"], "all", "pending[0].arguments"),
    (["pending"], [None], "pending[0]"),
    (["batch", 0, "name"], _DELETE, "batch[0].name"),
    (["usage"], {"input_tokens": "many"}, "usage"),
    (["usage"], [], "usage"),
    (["error"], ["x"], "error"),
    (["plan"], "a plan", "plan"),
    (["schema_version"], 2, "schema_version"),
    (["schema_version"], True, "schema_version"),
]


@pytest.mark.parametrize(("path", "value", "field"), CASES, ids=[c[2] + "=" + repr(c[1])[:12] for c in CASES])
async def test_a_malformed_run_raises_one_error_naming_the_field(
    path: list[Any], value: Any, field: str
) -> None:
    data = (await sample()).to_dict()
    bad = with_change(data, path, value)
    with pytest.raises(InvalidRunError) as info:
        AgentRun.from_dict(bad)
    assert info.value.field == field and field in str(info.value)
    with pytest.raises(InvalidRunError):
        AgentRun.from_json(json.dumps(bad))


@pytest.mark.parametrize("text", ["", "{", "[]", "null", "42", '"run"', b"\xff\xfe", "{} {}"])
def test_text_that_is_not_a_run_object(text: str | bytes) -> None:
    with pytest.raises(InvalidRunError):
        AgentRun.from_json(text)


def test_the_error_is_a_toolrun_error_and_a_value_error() -> None:
    assert issubclass(InvalidRunError, ToolrunError) and issubclass(InvalidRunError, ValueError)
    with pytest.raises(ValueError, match="schema_version"):
        AgentRun.from_dict({"schema_version": 99})


async def test_round_trip_is_exact() -> None:
    run = await sample()
    assert AgentRun.from_json(run.to_json()).to_dict() == run.to_dict()
    key = b"s" * 32
    assert AgentRun.from_json(run.to_json(signing_key=key), signing_key=key).to_dict() == run.to_dict()
    # Reading without a key ignores a signature (the caller trusts where the text comes from).
    assert AgentRun.from_json(run.to_json(signing_key=key)).to_dict() == run.to_dict()
    with pytest.raises(ValueError, match="16 bytes"):
        run.to_json(signing_key=b"short")


async def test_a_signature_covers_every_field() -> None:
    run = await sample()
    key = b"s" * 32
    data = json.loads(run.to_json(signing_key=key))
    for field in data:
        if field == "signature":
            continue
        changed = dict(data)
        changed[field] = "x" if not isinstance(data[field], str) else data[field] + "x"
        with pytest.raises(RunSignatureError):
            AgentRun.from_json(json.dumps(changed), signing_key=key)
    unsigned = {k: v for k, v in data.items() if k != "signature"}
    with pytest.raises(RunSignatureError, match="not signed"):
        AgentRun.from_json(json.dumps(unsigned), signing_key=key)
    for bad in (7, "\ud800", "hmac-sha256:" + "0" * 64, ""):
        with pytest.raises(RunSignatureError):
            AgentRun.from_json(json.dumps(dict(data, signature=bad)), signing_key=key)


async def test_a_run_holding_tuples_and_odd_keys_verifies_after_the_round_trip() -> None:
    run = await sample()
    run.tool_calls[0].result.value = {"pair": (1, 2), "nested": [("a", {"k": (True, None)})]}
    run.plan = {"steps": (1, 2.5)}
    key = b"s" * 32
    assert AgentRun.from_json(run.to_json(signing_key=key), signing_key=key).plan == {"steps": [1, 2.5]}


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_any_json_at_any_field_is_a_run_or_an_invalid_run_error(data: st.DataObject) -> None:
    base = {
        "schema_version": 1,
        "run_id": "run_1",
        "status": "awaiting_confirmation",
        "messages": [{"role": "user", "content": "hi"}],
        "tool_calls": [
            {
                "call": {"id": "c", "name": "t", "arguments": "{}"},
                "result": {"call_id": "c", "tool_name": "t", "status": "ok"},
                "step": 1,
            }
        ],
        "pending": [{"confirmation_id": "conf", "call": {"id": "c", "name": "t"}, "summary": "s"}],
        "batch": [{"id": "c", "name": "t"}],
        "usage": {"input_tokens": 1},
    }
    AgentRun.from_dict(base)
    field = data.draw(st.sampled_from(sorted(base)))
    value = data.draw(_JSON)
    try:
        AgentRun.from_dict({**base, field: value})
    except InvalidRunError:
        pass
