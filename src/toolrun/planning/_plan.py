"""`Plan` and `PlanStep`, and the rules every change to a plan follows.

The rules (each one a `ToolError` the model can act on when broken):

- a plan has an objective and steps; objective and step titles are 1–500 characters (after trimming);
- step ids start at 1 and grow; an id is never reused in a session, not even by a plan that replaces
  another (a stale id then fails loudly instead of changing the wrong step);
- steps are `pending`, `in_progress` or `done`; when every step is `done` the plan is `completed`;
- only an `active` plan takes new steps or step updates; an update that changes nothing is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict

from toolrun.results import ToolError

__all__ = ["MAX_TEXT", "Plan", "PlanStatus", "PlanStep", "StepStatus"]

MAX_TEXT = 500
"""The longest objective or step title, in characters."""

PlanStatus = Literal["active", "completed"]
StepStatus = Literal["pending", "in_progress", "done"]
STEP_STATUSES: tuple[StepStatus, ...] = ("pending", "in_progress", "done")


class PlanStep(BaseModel):
    """One step of a plan."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    step_id: int
    """Its id: 1 for the first step ever made in the session, then one more for each new step."""
    title: str
    """What to do, 1–500 characters."""
    status: StepStatus = "pending"
    """`pending`, `in_progress` or `done`."""


class Plan(BaseModel):
    """A plan: an objective and its steps. Lives in session state (`Session.of(ctx)[Plan].latest()`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    objective: str
    """What the plan is for, 1–500 characters."""
    status: PlanStatus = "active"
    """`active`, or `completed` once every step is `done`."""
    steps: tuple[PlanStep, ...] = ()
    """The steps, in the order they were added."""
    next_step_id: int = 1
    """The id the next new step gets (ids are never reused)."""

    def to_public(self) -> dict[str, object]:
        """The plan as the planning tools return it (without the id counter)."""
        return self.model_dump(mode="json", exclude={"next_step_id"})

    def render(self) -> str:
        """The plan as a few lines of text, for prompts and error messages."""
        marks = {"pending": "[ ]", "in_progress": "[~]", "done": "[x]"}
        lines = [f"Objective: {self.objective} ({self.status})"]
        lines += [f"{marks[s.status]} {s.step_id}. {s.title} ({s.status})" for s in self.steps]
        if not self.steps:
            lines.append("(no steps yet)")
        return "\n".join(lines)

    # ----------------------------------------------------------------------------------------------------
    # Changes: each returns a new plan or raises a ToolError.

    @classmethod
    def create(cls, objective: str, titles: Iterable[str], *, previous: Plan | None = None) -> Plan:
        """A new active plan (replacing `previous`, whose step ids stay used)."""
        objective = check_text(objective, "objective")
        first = previous.next_step_id if previous is not None else 1
        steps = tuple(
            PlanStep(step_id=first + i, title=check_text(t, f"initial_steps[{i}]"))
            for i, t in enumerate(titles)
        )
        return cls(objective=objective, steps=steps, next_step_id=first + len(steps))

    def add_steps(self, titles: list[str]) -> Plan:
        """The plan with new pending steps at the end."""
        self._check_active("add steps to")
        if not titles:
            raise ToolError(
                "EMPTY_STEPS",
                "No steps were given to add.",
                recover_action="Pass at least one step title in `steps`.",
            )
        new = tuple(
            PlanStep(step_id=self.next_step_id + i, title=check_text(t, f"steps[{i}]"))
            for i, t in enumerate(titles)
        )
        return self.model_copy(
            update={"steps": self.steps + new, "next_step_id": self.next_step_id + len(new)}
        )

    def update_step(self, step_id: int, *, title: str | None = None, status: str | None = None) -> Plan:
        """The plan with one step changed; `completed` when every step is then `done`."""
        self._check_active("update a step of")
        index = next((i for i, s in enumerate(self.steps) if s.step_id == step_id), None)
        if index is None:
            ids = ", ".join(str(s.step_id) for s in self.steps) or "none"
            raise ToolError(
                "UNKNOWN_STEP",
                f"There is no step {step_id} in the plan (step ids: {ids}).\n{self.render()}",
                recover_action="Use a step_id from the plan above, or add the step first.",
                details={"plan": self.to_public()},
            )
        if title is None and status is None:
            raise ToolError(
                "NO_CHANGE",
                f"Nothing to update for step {step_id}: give a new title, a new status, or both.",
                recover_action="Pass `status` (pending, in_progress, done) and/or `title`.",
                details={"plan": self.to_public()},
            )
        if status is not None and status not in STEP_STATUSES:
            raise ToolError(
                "INVALID_STATUS",
                f"Unknown step status {status!r}; a step is one of: {', '.join(STEP_STATUSES)}.",
                recover_action="Use pending, in_progress or done.",
            )
        step = self.steps[index]
        changes: dict[str, str] = {}
        if title is not None:
            changes["title"] = check_text(title, "title")
        if status is not None:
            changes["status"] = status
        if all(getattr(step, k) == v for k, v in changes.items()):
            raise ToolError(
                "NO_CHANGE",
                f"Step {step_id} already has that {' and '.join(changes)}; nothing changed.\n{self.render()}",
                recover_action="Update a step only when its title or status really changes.",
                details={"plan": self.to_public()},
            )
        steps = list(self.steps)
        steps[index] = step.model_copy(update=changes)
        done = all(s.status == "done" for s in steps)
        return self.model_copy(update={"steps": tuple(steps), "status": "completed" if done else "active"})

    def _check_active(self, action: str) -> None:
        if self.status != "active":
            raise ToolError(
                "PLAN_NOT_ACTIVE",
                f"Cannot {action} a plan that is {self.status}.\n{self.render()}",
                recover_action="Start a new plan with planning_setup_plan if there is more to do.",
                details={"plan": self.to_public()},
            )


def check_text(value: str, field: str) -> str:
    """`value` trimmed, or a ToolError when it is empty or longer than `MAX_TEXT` characters."""
    text = value.strip()
    if not text:
        raise ToolError(
            "INVALID_TEXT",
            f"`{field}` is empty.",
            recover_action=f"Give `{field}` 1 to {MAX_TEXT} characters of text.",
            details={"field": field},
        )
    if len(text) > MAX_TEXT:
        raise ToolError(
            "INVALID_TEXT",
            f"`{field}` has {len(text)} characters; at most {MAX_TEXT} are allowed.",
            recover_action=f"Shorten `{field}` to {MAX_TEXT} characters or fewer.",
            details={"field": field},
        )
    return text
