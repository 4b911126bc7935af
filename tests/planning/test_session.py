"""`Session`: typed values in a state mapping, kept by reducers, stored as JSON-safe data."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from typing import Any

import pytest
from pydantic import BaseModel

from toolrun import ToolContext
from toolrun.planning import Plan, Session, register_kind
from toolrun.planning._session import STATE_KEY


class Counter(BaseModel):
    total: int = 0


def add(current: Counter | None, update: Counter) -> Counter:
    return Counter(total=(current.total if current is not None else 0) + update.total)


register_kind(Counter, key="tests.counter", reducer=add, history=2)


class Note(BaseModel):
    text: str


def test_latest_is_none_until_the_first_update() -> None:
    session = Session({})
    assert session[Plan].latest() is None
    assert session[Plan].history() == []
    assert session[Plan].revision == 0


def test_plan_updates_replace_the_latest() -> None:
    state: dict[str, Any] = {}
    channel = Session(state)[Plan]
    first = channel.update(Plan.create("One", ["a"]))
    second = channel.update(first.add_steps(["b"]))
    assert channel.latest() == second
    assert channel.history() == [second]  # plans keep no earlier versions: the state is copied per call
    assert channel.revision == 2
    assert list(state) == [STATE_KEY]
    assert list(state[STATE_KEY]) == ["toolrun.plan"]


def test_a_reducer_combines_updates_and_the_history_is_bounded() -> None:
    channel = Session({})[Counter]
    for n in (1, 2, 3, 4):
        channel.update(Counter(total=n))
    latest = channel.latest()
    assert latest is not None and latest.total == 10
    assert [c.total for c in channel.history()] == [3, 6, 10]  # history=2 earlier values + the latest
    assert channel.revision == 4


def test_unregistered_models_are_kept_under_their_qualified_name() -> None:
    state: dict[str, Any] = {}
    Session(state)[Note].update(Note(text="hi"))
    assert f"{Note.__module__}.{Note.__qualname__}" in state[STATE_KEY]
    note = Session(state)[Note].latest()
    assert note is not None and note.text == "hi"


def test_state_is_json_safe_and_survives_copy_and_json() -> None:
    state: dict[str, Any] = {}
    Session(state)[Plan].update(Plan.create("Trip", ["Book"]))
    restored = json.loads(json.dumps(state))
    assert Session(restored)[Plan].latest() == Session(state)[Plan].latest()
    snapshot = copy.deepcopy(state)
    Session(state)[Plan].update(Plan.create("Other", []))
    state.clear()
    state.update(snapshot)  # what the executor's rollback does
    plan = Session(state)[Plan].latest()
    assert plan is not None and plan.objective == "Trip"


def test_wrong_types_and_clashing_keys_are_refused() -> None:
    with pytest.raises(TypeError, match="Expected a Plan"):
        Session({})[Plan].update(Note(text="x"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="already used"):
        register_kind(Note, key="toolrun.plan")
    with pytest.raises(TypeError, match="Pydantic model"):
        register_kind(dict)  # type: ignore[type-var]


def test_clear_forgets_values_but_counts_on() -> None:
    channel = Session({})[Plan]
    channel.update(Plan.create("x", []))
    channel.clear()
    assert channel.latest() is None and channel.revision == 1


def test_a_context_without_state_has_no_session() -> None:
    with pytest.raises(ValueError, match="no session state"):
        Session.of(ToolContext())
    ctx: ToolContext[Any] = ToolContext(state={})
    Session.of(ctx)[Plan].update(Plan.create("x", []))
    assert ctx.state is not None and STATE_KEY in ctx.state


def test_writes_replace_the_top_level_key_and_change_nothing_in_place() -> None:
    state: dict[str, Any] = {}
    channel = Session(state)[Plan]
    channel.update(Plan.create("One", ["a"]))
    shallow = dict(state)  # what a shallow snapshot or per-call overlay would hold
    before = json.dumps(shallow)
    channel.update(Plan.create("Two", ["b"]))
    channel.clear()
    assert json.dumps(shallow) == before  # the earlier objects were not mutated
    assert state[STATE_KEY] is not shallow[STATE_KEY]
    state.update(shallow)  # a shallow rollback restores the earlier plan
    plan = Session(state)[Plan].latest()
    assert plan is not None and plan.objective == "One"


def test_importing_toolrun_registers_no_kind() -> None:
    """toolrun's own `Plan` kind is looked up on first use: nothing is added to the registry at import,
    yet its key is taken from the start and its values are stored under it."""
    script = """
import toolrun, toolrun.planning
from pydantic import BaseModel
from toolrun.planning import Plan, Session, _session, register_kind
assert _session._KINDS == {}, _session._KINDS
class Note(BaseModel):
    text: str
try:
    register_kind(Note, key="toolrun.plan")
except ValueError as exc:
    assert "already used by Plan" in str(exc), exc
else:
    raise AssertionError("the key of Plan was free")
state = {}
Session(state)[Plan].update(Plan.create("Trip", ["Book"]))
assert list(state["toolrun.session"]) == ["toolrun.plan"], state
assert _session._KINDS == {}, _session._KINDS
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
