"""The cases every door runs, and what each must come back as."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ._tools import HANG, LIMIT, OVERRUN, SLOW


@dataclass(frozen=True, kw_only=True)
class Case:
    id: str
    tool: str
    seconds: float
    expect: str
    """`"ok"`, `"timeout"` (stopped when asked) or `"abandoned"` (did not stop within the grace)."""
    value: Any = None
    idempotent: bool = False

    @property
    def arguments(self) -> dict[str, Any]:
        return {"seconds": self.seconds}


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What a door gave back for one call, in the door's own terms."""

    ok: bool
    text: str
    """What the model reads (the rendered result)."""
    code: str | None = None
    value: Any = None
    details: dict[str, Any] | None = None
    """The error's details where the door passes them on."""


SLOW_VALUES: dict[str, Any] = {
    "fetch_report": {"slept": SLOW, "connections": 1, "refused": True, "probed": False},
    "fetch_with_fallback": f"fallback after {SLOW}",
    "fetch_all": {"pages": 3, "extra_skipped": True},
    "read_in_thread": SLOW,
    "export_page": SLOW,
    "read_isolated": SLOW,
    "run_child": f"slept {SLOW}",
    "query_postgres": f"slept {SLOW}",
    "query_sqlite": int(SLOW * 50),
    "fan_out": [SLOW, SLOW, SLOW],
    "transfer": "transferred",
}
IN_THREADS = {"read_in_thread", "export_page"}
IDEMPOTENT = {"fetch_report", "transfer"}
"""An idempotent tool that stops in time is "safe to try again"; abandoned, it "may or may not have taken
effect": the wording tells the two apart at every door, also where the door passes no `details` on."""
ABANDONED = {"transfer"}


def _expect(tool: str) -> str:
    return "abandoned" if tool in ABANDONED else "timeout"


CASES: list[Case] = [
    Case(id=f"{tool}-slow", tool=tool, seconds=SLOW, expect="ok", value=value)
    for tool, value in SLOW_VALUES.items()
] + [
    Case(
        id=f"{tool}-timeout",
        tool=tool,
        seconds=OVERRUN if tool in IN_THREADS else HANG,
        expect=_expect(tool),
        idempotent=tool in IDEMPOTENT,
    )
    for tool in SLOW_VALUES
]


def check(case: Case, got: Outcome) -> list[str]:
    """What is wrong with `got` for `case` (empty when right)."""
    problems: list[str] = []
    if case.expect == "ok":
        if not got.ok:
            return [f"{case.id}: expected its result, got {got.text!r}"]
        value = got.value
        if isinstance(value, str) and not isinstance(case.value, str):
            value = json.loads(value)
        if value != case.value:
            problems.append(f"{case.id}: value {value!r} != {case.value!r}")
        return problems
    if got.ok or got.code != "TIMEOUT":
        return [f"{case.id}: expected TIMEOUT, got ok={got.ok} code={got.code} {got.text!r}"]
    if f"did not finish within {LIMIT:.3g} seconds" not in got.text:
        problems.append(f"{case.id}: the limit is not named: {got.text!r}")
    maybe = "may or may not have taken effect" in got.text
    if maybe != (case.expect == "abandoned" or not case.idempotent):
        problems.append(f"{case.id}: wrong wording for idempotent={case.idempotent}: {got.text!r}")
    if got.details is not None:
        if got.details.get("abandoned", False) is not (case.expect == "abandoned"):
            problems.append(f"{case.id}: details {got.details}")
        if got.details.get("timeout") != LIMIT:
            problems.append(f"{case.id}: details {got.details}")
    return problems


def groups(size: int) -> dict[str, list[Case]]:
    """The cases in model turns of at most `size` calls (an agent runs that many of one turn at once)."""
    return {f"group-{i}": CASES[i : i + size] for i in range(0, len(CASES), size)}
