"""Planning strategies (guidance text only) and the prompt section that carries the planning tools."""

from __future__ import annotations

from typing import Any, Literal

from toolrun.planning._plan import Plan
from toolrun.planning._session import Session
from toolrun.planning._tools import planning_tools
from toolrun.prompts import Section
from toolrun.tools import ToolCall, ToolContext

__all__ = ["STRATEGIES", "Strategy", "planning_section", "render_current_plan"]

Strategy = Literal["react", "plan_act_reflect", "goal_decompose_route_synthesise"]

_COMMON = (
    "Every planning tool returns the whole plan; trust it over your memory of earlier turns. Change one "
    "thing per call: plan updates in the same turn run one after the other."
)

STRATEGIES: dict[str, str] = {
    "react": (
        "Work in short cycles: think about the next action, take it with a tool, read the result, repeat. "
        "For a task with several steps, first record them with planning_setup_plan; mark a step "
        "in_progress when you start it and done when its result is in; add steps with planning_add_step "
        "when you discover more work. Answer the user once the plan is completed."
    ),
    "plan_act_reflect": (
        "Plan first: before any other tool, write the whole plan with planning_setup_plan. Then act on one "
        "step at a time (in_progress, then done). After each step, reflect: does the result change what "
        "is left? If so, add or retitle steps before you continue. Answer once the plan is completed, "
        "saying what was done."
    ),
    "goal_decompose_route_synthesise": (
        "State the goal as the plan's objective, decompose it into independent sub-goals (one step each, "
        "via planning_setup_plan), route each sub-goal to the tool best suited to it, and mark the step "
        "done with what you learnt. When every step is done (the plan is completed), synthesise the "
        "sub-results into one answer."
    ),
}
"""The guidance text of each strategy; strategies differ in nothing else."""


def render_current_plan(context: ToolContext[Any] | None) -> str:
    """The current plan of the context's session as text ("No plan yet." without one)."""
    if context is None or context.state is None:
        return "No plan yet."
    plan = Session.of(context)[Plan].latest()
    return "No plan yet." if plan is None else plan.render()


def planning_section(
    strategy: Strategy = "react", *, title: str = "Planning", key: str = "planning", enabled: bool = True
) -> Section:
    """The planning section: the strategy's guidance, the current plan, and the four planning tools.

    The plan is rendered from the session state on every render, so an `Agent` built with a `Prompt`
    holding this section shows the model the current plan on every request, whatever history trimming
    dropped.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"Unknown planning strategy {strategy!r}; choose one of {sorted(STRATEGIES)}.")
    guidance = f"{STRATEGIES[strategy]} {_COMMON}"

    def text(context: ToolContext[Any] | None) -> str:
        return f"{guidance}\n\nCurrent plan:\n{render_current_plan(context)}"

    return Section(
        title,
        text,
        key,
        tools=planning_tools(),
        enabled=enabled,
        examples=[
            ToolCall(
                name="planning_setup_plan",
                arguments={"objective": "Answer the user's question", "initial_steps": ["Look it up"]},
            ),
            ToolCall(name="planning_update_step", arguments={"step_id": 1, "status": "done"}),
        ],
    )
