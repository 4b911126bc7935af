"""The planning tool suite: `planning_setup_plan`, `planning_add_step`, `planning_update_step`,
`planning_read_plan`.

Every call returns the whole plan (models lose track of a plan they only see in pieces). The plan lives in
session state (`Session.of(ctx)[Plan]`), so the executor's snapshot and rollback cover it and a paused
run's JSON keeps it.

The three writing tools are `sequential`: when a model sends several plan changes in one turn,
`execute_many` runs them one after the other, in the model's order, each seeing the plan the one before
left. No write is lost to another (each reads and writes with no await in between).
"""

from __future__ import annotations

from typing import Any, Literal

from toolrun.planning._plan import Plan
from toolrun.planning._session import Session
from toolrun.results import ToolError
from toolrun.tools import Tool, ToolContext, tool

__all__ = ["PLANNING_TOOL_NAMES", "planning_tools"]

PLANNING_TOOL_NAMES = (
    "planning_setup_plan",
    "planning_add_step",
    "planning_update_step",
    "planning_read_plan",
)


def _session(ctx: ToolContext[Any]) -> Session:
    try:
        return Session.of(ctx)
    except ValueError as exc:
        raise ToolError(
            "NO_SESSION", "Planning needs session state, and this call has none.", details={"why": str(exc)}
        ) from None


def _current(session: Session) -> Plan:
    plan = session[Plan].latest()
    if plan is None:
        raise ToolError(
            "NO_PLAN",
            "There is no plan yet.",
            recover_action="Create one with planning_setup_plan(objective, initial_steps).",
        )
    return plan


@tool(
    sequential=True,
    examples=[
        {
            "input": {
                "objective": "Publish the quarterly report",
                "initial_steps": ["Collect the figures", "Write the summary", "Send it to the team"],
            }
        }
    ],
)
async def planning_setup_plan(
    objective: str, initial_steps: list[str] | None = None, *, ctx: ToolContext[Any]
) -> dict[str, Any]:
    """Create the plan for the current task, replacing any existing plan. Returns the whole plan.

    Use it once at the start of a task with several steps, or to start over when the task changes.

    Args:
        objective: What the plan achieves, 1-500 characters.
        initial_steps: Step titles in order (each 1-500 characters); they start as pending.
    """
    session = _session(ctx)
    channel = session[Plan]
    plan = Plan.create(objective, initial_steps or [], previous=channel.latest())
    return channel.update(plan).to_public()


@tool(sequential=True, examples=[{"input": {"steps": ["Proofread the summary"]}}])
async def planning_add_step(steps: list[str], *, ctx: ToolContext[Any]) -> dict[str, Any]:
    """Add steps at the end of the active plan. Returns the whole plan.

    Args:
        steps: Step titles in order (each 1-500 characters); they start as pending.
    """
    session = _session(ctx)
    return session[Plan].update(_current(session).add_steps(steps)).to_public()


@tool(sequential=True, examples=[{"input": {"step_id": 1, "status": "done"}}])
async def planning_update_step(
    step_id: int,
    title: str | None = None,
    status: Literal["pending", "in_progress", "done"] | None = None,
    *,
    ctx: ToolContext[Any],
) -> dict[str, Any]:
    """Change a step's status and/or title. When every step is done the plan is completed.
    Returns the whole plan.

    Args:
        step_id: The id of the step, as in the plan.
        title: A new title, 1-500 characters.
        status: The new status: pending, in_progress or done.
    """
    session = _session(ctx)
    plan = _current(session).update_step(step_id, title=title, status=status)
    return session[Plan].update(plan).to_public()


@tool(read_only=True)
async def planning_read_plan(*, ctx: ToolContext[Any]) -> dict[str, Any]:
    """Show the current plan: objective, status and every step with its id and status."""
    return _current(_session(ctx)).to_public()


def planning_tools() -> list[Tool]:
    """The four planning tools, in the order a model meets them."""
    return [planning_setup_plan, planning_add_step, planning_update_step, planning_read_plan]
