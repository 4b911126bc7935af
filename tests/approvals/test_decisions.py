"""The decision grammar: only `True`/`Approve(...)` approve and `False`/`Deny(...)` deny; anything else is
refused with an error that names the confirmation and what was given (cut to a readable length). One JSON
form carries a decision, and reads back only what it wrote."""

from __future__ import annotations

from typing import Any

import pytest

import toolrun.agent
import toolrun.approvals
from toolrun.approvals import Approve, Deny, InvalidDecisionError
from toolrun.approvals._decisions import check_decision, check_decisions, decode_decision, encode_decision

RULE = "must be True (approve) or False (deny) (or Approve(...) / Deny(...)), not "


def refused(value: Any, confirmation_id: Any = "conf_1") -> InvalidDecisionError:
    with pytest.raises(InvalidDecisionError) as info:
        check_decisions({"conf_ok": True, confirmation_id: value})
    return info.value


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("no", "str 'no'"),
        (1, "int 1"),
        (None, "NoneType None"),
        ({"approve": False}, "dict {'approve': False}"),
        ("x" * 58, "str '" + "x" * 58 + "'"),  # a repr of 60 characters is shown whole
        ("x" * 59, "str '" + "x" * 56 + "..."),  # one more is cut to 57 and marked
    ],
)
def test_a_loose_decision_is_refused_naming_the_confirmation_and_the_value(value: Any, shown: str) -> None:
    error = refused(value)
    assert str(error) == f"The decision for confirmation 'conf_1' {RULE}{shown}. Nothing was run."
    assert error.confirmation_id == "conf_1" and isinstance(error, ValueError)


def test_the_confirmation_id_is_named_as_text() -> None:
    error = refused("yes", confirmation_id=7)
    assert error.confirmation_id == "7" and str(error).startswith("The decision for confirmation '7' ")


@pytest.mark.parametrize(
    "approvals", [{}, {"a": True, "b": False}, {"a": Approve(), "b": Deny(reason="why")}]
)
def test_booleans_and_decision_objects_pass(approvals: dict[str, Any]) -> None:
    check_decisions(approvals)


def test_approvals_must_be_a_mapping() -> None:
    with pytest.raises(TypeError) as info:
        check_decisions(["conf_1"])  # type: ignore[arg-type]
    assert str(info.value) == "approvals must be a mapping of confirmation id to a decision, not ['conf_1']."


def test_the_agent_exports_the_same_objects() -> None:
    for name in ("Approve", "Deny", "InvalidDecisionError"):
        assert getattr(toolrun.agent, name) is getattr(toolrun.approvals, name)


def test_a_decision_reads_as_approve_or_deny() -> None:
    assert check_decision("c", True) == Approve() and check_decision("c", False) == Deny()
    edited = Approve(arguments={"a": 1})
    assert check_decision("c", edited) is edited
    assert isinstance(check_decision("c", Deny(reason="no")), Deny)
    with pytest.raises(InvalidDecisionError):
        check_decision("c", "true")


@pytest.mark.parametrize(
    ("decision", "wire"),
    [
        (True, True),
        (Approve(), True),
        (False, False),
        (Deny(), False),
        (Approve(arguments={"to": "b", "n": [1]}), {"approve": True, "arguments": {"to": "b", "n": [1]}}),
        (Deny(reason="not today"), {"approve": False, "reason": "not today"}),
    ],
)
def test_the_json_form_of_a_decision_and_back(decision: Any, wire: Any) -> None:
    assert encode_decision("c", decision) == wire
    back = decode_decision(wire)
    assert (
        back == decision or (back is True and decision == Approve()) or (back is False and decision == Deny())
    )


@pytest.mark.parametrize(
    ("decision", "problem"),
    [
        ("yes", "must be True (approve) or False (deny) (or Approve(...) / Deny(...)), not str 'yes'"),
        (Approve(arguments=["a"]), "has edited arguments that are not a JSON object"),  # type: ignore[arg-type]
        (Approve(arguments={"when": object()}), "has edited arguments that are not JSON data"),
        (Deny(reason=5), "has a reason that is not text"),  # type: ignore[arg-type]
    ],
)
def test_what_has_no_json_form_is_refused_before_anything_is_sent(decision: Any, problem: str) -> None:
    with pytest.raises(InvalidDecisionError) as info:
        encode_decision("conf_9", decision)
    assert str(info.value) == f"The decision for confirmation 'conf_9' {problem}. Nothing was run."
    assert info.value.confirmation_id == "conf_9"


@pytest.mark.parametrize(
    "wire",
    [
        None,
        "true",
        1,
        {"approve": True},
        {"approve": "yes", "arguments": {}},
        {"approve": True, "arguments": {}, "extra": 1},
        {"approve": True, "arguments": [1]},
        {"approve": False, "reason": 5},
        {"approve": False, "reason": "x", "arguments": {}},
    ],
)
def test_only_what_encode_writes_decodes(wire: Any) -> None:
    assert decode_decision(wire) is None
