"""`check_decisions`: only `True`/`Approve(...)` approve and `False`/`Deny(...)` deny; anything else is
refused with an error that names the confirmation and what was given (cut to a readable length)."""

from __future__ import annotations

from typing import Any

import pytest

from toolrun.agent import Approve, Deny, InvalidDecisionError
from toolrun.agent._run import check_decisions

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
