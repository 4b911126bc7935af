"""Every rule of the planning tool suite, through the executor as a model's calls would go."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from toolrun import ErrorCode, ToolCall, ToolContext, ToolExecutor, ToolRegistry, ToolResult, tool
from toolrun.planning import STRATEGIES, Plan, Session, planning_section, planning_tools
from toolrun.planning._plan import MAX_TEXT
from toolrun.planning._tools import PLANNING_TOOL_NAMES
from toolrun.results import ToolError


@pytest.fixture
def executor() -> ToolExecutor:
    return ToolExecutor(ToolRegistry(planning_tools()))


@pytest.fixture
def ctx() -> ToolContext[Any]:
    return ToolContext(user_id="u1", state={})


async def call(executor: ToolExecutor, ctx: ToolContext[Any], name: str, **arguments: Any) -> ToolResult:
    return await executor.execute(ToolCall(name=name, arguments=arguments), ctx)


def ok(result: ToolResult) -> dict[str, Any]:
    assert result.status == "ok", result.render()
    assert isinstance(result.value, dict)
    return result.value


def code(result: ToolResult) -> str:
    assert result.status == "error" and result.error is not None, result.render()
    return result.error.code


def steps(plan: dict[str, Any]) -> list[tuple[int, str, str]]:
    return [(s["step_id"], s["title"], s["status"]) for s in plan["steps"]]


def latest(ctx: ToolContext[Any]) -> Plan:
    plan = Session.of(ctx)[Plan].latest()
    assert plan is not None
    return plan


# --------------------------------------------------------------------------------------------------------
# The suite as the seed names it


def test_the_suite_has_the_seed_names_and_parameters() -> None:
    tools = {t.name: t for t in planning_tools()}
    assert (
        tuple(tools)
        == PLANNING_TOOL_NAMES
        == (
            "planning_setup_plan",
            "planning_add_step",
            "planning_update_step",
            "planning_read_plan",
        )
    )
    params = {name: t.parameters for name, t in tools.items()}
    assert params["planning_setup_plan"]["required"] == ["objective"]
    assert list(params["planning_setup_plan"]["properties"]) == ["objective", "initial_steps"]
    assert params["planning_add_step"]["required"] == ["steps"]
    assert list(params["planning_update_step"]["properties"]) == ["step_id", "title", "status"]
    assert params["planning_update_step"]["required"] == ["step_id"]
    assert params["planning_read_plan"]["properties"] == {}
    # The writing tools run one at a time within a turn; reading changes nothing.
    assert [t.options.sequential for t in tools.values()] == [True, True, True, False]
    assert tools["planning_read_plan"].options.read_only


async def test_setup_plan_with_initial_steps_numbers_them_from_1(executor: ToolExecutor, ctx: Any) -> None:
    plan = ok(
        await call(executor, ctx, "planning_setup_plan", objective="Ship v1", initial_steps=["Build", "Test"])
    )
    assert plan == {
        "objective": "Ship v1",
        "status": "active",
        "steps": [
            {"step_id": 1, "title": "Build", "status": "pending"},
            {"step_id": 2, "title": "Test", "status": "pending"},
        ],
    }


async def test_setup_plan_initial_steps_default_to_none(executor: ToolExecutor, ctx: Any) -> None:
    assert ok(await call(executor, ctx, "planning_setup_plan", objective="Think"))["steps"] == []
    assert (
        ok(await call(executor, ctx, "planning_setup_plan", objective="Think", initial_steps=[]))["steps"]
        == []
    )


async def test_setup_replaces_the_plan_and_never_reuses_step_ids(executor: ToolExecutor, ctx: Any) -> None:
    ok(await call(executor, ctx, "planning_setup_plan", objective="Old", initial_steps=["a", "b"]))
    plan = ok(await call(executor, ctx, "planning_setup_plan", objective="New", initial_steps=["c"]))
    assert plan["objective"] == "New" and plan["status"] == "active"
    assert steps(plan) == [(3, "c", "pending")]
    # A stale id from the replaced plan fails loudly instead of changing another step.
    assert code(await call(executor, ctx, "planning_update_step", step_id=1, status="done")) == "UNKNOWN_STEP"


async def test_add_step_appends_with_increasing_ids(executor: ToolExecutor, ctx: Any) -> None:
    ok(await call(executor, ctx, "planning_setup_plan", objective="Trip", initial_steps=["Book flight"]))
    plan = ok(await call(executor, ctx, "planning_add_step", steps=["Book hotel", "Pack"]))
    assert steps(plan) == [
        (1, "Book flight", "pending"),
        (2, "Book hotel", "pending"),
        (3, "Pack", "pending"),
    ]
    plan = ok(await call(executor, ctx, "planning_add_step", steps=["Go"]))
    assert [s[0] for s in steps(plan)] == [1, 2, 3, 4]


async def test_update_step_status_and_title(executor: ToolExecutor, ctx: Any) -> None:
    ok(await call(executor, ctx, "planning_setup_plan", objective="Report", initial_steps=["Draft", "Send"]))
    plan = ok(await call(executor, ctx, "planning_update_step", step_id=1, status="in_progress"))
    assert steps(plan)[0] == (1, "Draft", "in_progress")
    plan = ok(await call(executor, ctx, "planning_update_step", step_id=2, title="Send to the team"))
    assert steps(plan)[1] == (2, "Send to the team", "pending")
    plan = ok(await call(executor, ctx, "planning_update_step", step_id=1, title="Write", status="done"))
    assert steps(plan)[0] == (1, "Write", "done")
    assert plan["status"] == "active"  # step 2 is not done yet


async def test_all_steps_done_completes_the_plan(executor: ToolExecutor, ctx: Any) -> None:
    ok(await call(executor, ctx, "planning_setup_plan", objective="Two", initial_steps=["a", "b"]))
    assert (
        ok(await call(executor, ctx, "planning_update_step", step_id=1, status="done"))["status"] == "active"
    )
    plan = ok(await call(executor, ctx, "planning_update_step", step_id=2, status="done"))
    assert plan["status"] == "completed"
    assert latest(ctx).status == "completed"


async def test_every_call_returns_the_whole_plan(executor: ToolExecutor, ctx: Any) -> None:
    results = [
        await call(executor, ctx, "planning_setup_plan", objective="O", initial_steps=["a"]),
        await call(executor, ctx, "planning_add_step", steps=["b"]),
        await call(executor, ctx, "planning_update_step", step_id=2, status="in_progress"),
        await call(executor, ctx, "planning_read_plan"),
    ]
    for result in results:
        value = ok(result)
        assert set(value) == {"objective", "status", "steps"}
    assert ok(results[-1]) == latest(ctx).to_public() == ok(results[-2])
    assert len(ok(results[-1])["steps"]) == 2


# --------------------------------------------------------------------------------------------------------
# Errors the model can act on


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("planning_add_step", {"steps": ["a"]}),
        ("planning_update_step", {"step_id": 1, "status": "done"}),
        ("planning_read_plan", {}),
    ],
)
async def test_no_plan_yet(executor: ToolExecutor, ctx: Any, name: str, arguments: dict[str, Any]) -> None:
    result = await call(executor, ctx, name, **arguments)
    assert code(result) == "NO_PLAN"
    assert result.error is not None and "planning_setup_plan" in (result.error.recover_action or "")


async def test_a_completed_plan_takes_no_more_steps_or_updates(executor: ToolExecutor, ctx: Any) -> None:
    ok(await call(executor, ctx, "planning_setup_plan", objective="One", initial_steps=["a"]))
    ok(await call(executor, ctx, "planning_update_step", step_id=1, status="done"))
    add = await call(executor, ctx, "planning_add_step", steps=["b"])
    update = await call(executor, ctx, "planning_update_step", step_id=1, status="pending")
    assert code(add) == code(update) == "PLAN_NOT_ACTIVE"
    assert add.error is not None and "One" in add.error.message  # the plan is shown with the error
    # Reading still works, and a new plan can be set up.
    assert ok(await call(executor, ctx, "planning_read_plan"))["status"] == "completed"
    assert ok(await call(executor, ctx, "planning_setup_plan", objective="Next"))["status"] == "active"


async def test_unknown_step(executor: ToolExecutor, ctx: Any) -> None:
    ok(await call(executor, ctx, "planning_setup_plan", objective="O", initial_steps=["a", "b"]))
    result = await call(executor, ctx, "planning_update_step", step_id=7, status="done")
    assert code(result) == "UNKNOWN_STEP"
    assert result.error is not None and "step ids: 1, 2" in result.error.message
    assert result.error.details["plan"] == latest(ctx).to_public()


@pytest.mark.parametrize("text", ["", "   ", "\n\t", "x" * (MAX_TEXT + 1)])
async def test_empty_or_too_long_text_is_refused_everywhere(
    executor: ToolExecutor, ctx: Any, text: str
) -> None:
    assert code(await call(executor, ctx, "planning_setup_plan", objective=text)) == "INVALID_TEXT"
    assert code(
        await call(executor, ctx, "planning_setup_plan", objective="O", initial_steps=["a", text])
    ) == ("INVALID_TEXT")
    assert Session.of(ctx)[Plan].latest() is None  # nothing was half-made
    ok(await call(executor, ctx, "planning_setup_plan", objective="O", initial_steps=["a"]))
    assert code(await call(executor, ctx, "planning_add_step", steps=["b", text])) == "INVALID_TEXT"
    assert code(await call(executor, ctx, "planning_update_step", step_id=1, title=text)) == "INVALID_TEXT"
    assert steps(latest(ctx).to_public()) == [(1, "a", "pending")]


async def test_text_limits_are_inclusive_and_trimmed(executor: ToolExecutor, ctx: Any) -> None:
    plan = ok(
        await call(executor, ctx, "planning_setup_plan", objective="x" * MAX_TEXT, initial_steps=[" a "])
    )
    assert len(plan["objective"]) == MAX_TEXT
    assert plan["steps"][0]["title"] == "a"
    assert ok(await call(executor, ctx, "planning_setup_plan", objective="y"))["objective"] == "y"


async def test_an_update_that_changes_nothing_is_refused(executor: ToolExecutor, ctx: Any) -> None:
    ok(await call(executor, ctx, "planning_setup_plan", objective="O", initial_steps=["a", "b"]))
    revision = Session.of(ctx)[Plan].revision
    assert code(await call(executor, ctx, "planning_update_step", step_id=1)) == "NO_CHANGE"
    assert code(await call(executor, ctx, "planning_update_step", step_id=1, status="pending")) == "NO_CHANGE"
    assert code(await call(executor, ctx, "planning_update_step", step_id=1, title="a")) == "NO_CHANGE"
    assert code(await call(executor, ctx, "planning_update_step", step_id=1, title=" a ")) == "NO_CHANGE"
    assert Session.of(ctx)[Plan].revision == revision  # refused updates write nothing


async def test_adding_no_steps_is_refused(executor: ToolExecutor, ctx: Any) -> None:
    ok(await call(executor, ctx, "planning_setup_plan", objective="O"))
    assert code(await call(executor, ctx, "planning_add_step", steps=[])) == "EMPTY_STEPS"


async def test_an_unknown_status_is_refused_by_the_schema(executor: ToolExecutor, ctx: Any) -> None:
    ok(await call(executor, ctx, "planning_setup_plan", objective="O", initial_steps=["a"]))
    result = await call(executor, ctx, "planning_update_step", step_id=1, status="finished")
    assert code(result) == ErrorCode.INVALID_ARGUMENTS
    with pytest.raises(ToolError) as err:
        latest(ctx).update_step(1, status="finished")
    assert err.value.code == "INVALID_STATUS"


async def test_without_session_state_the_tools_say_so(executor: ToolExecutor) -> None:
    result = await call(executor, ToolContext(), "planning_setup_plan", objective="O")
    assert code(result) == "NO_SESSION"


# --------------------------------------------------------------------------------------------------------
# Parallel writes, rollback


async def test_parallel_writes_in_one_turn_are_serialised_never_lost(
    executor: ToolExecutor, ctx: Any
) -> None:
    ok(await call(executor, ctx, "planning_setup_plan", objective="O", initial_steps=["a"]))
    turn = [
        ToolCall(name="planning_add_step", arguments={"steps": ["b"]}),
        ToolCall(name="planning_add_step", arguments={"steps": ["c", "d"]}),
        ToolCall(name="planning_update_step", arguments={"step_id": 1, "status": "done"}),
        ToolCall(name="planning_update_step", arguments={"step_id": 2, "status": "in_progress"}),
        ToolCall(name="planning_read_plan", arguments={}),
    ]
    results = await executor.execute_many(turn, ctx, max_concurrency=8)
    assert [r.status for r in results] == ["ok"] * 5
    # In the model's order, each seeing the plan the previous one left.
    assert [len(ok(r)["steps"]) for r in results[:2]] == [2, 4]
    assert steps(latest(ctx).to_public()) == [
        (1, "a", "done"),
        (2, "b", "in_progress"),
        (3, "c", "pending"),
        (4, "d", "pending"),
    ]
    assert Session.of(ctx)[Plan].revision == 5  # setup + four writes, none lost


async def test_concurrent_executes_outside_a_turn_lose_nothing(executor: ToolExecutor, ctx: Any) -> None:
    ok(await call(executor, ctx, "planning_setup_plan", objective="O"))
    results = await asyncio.gather(
        *(call(executor, ctx, "planning_add_step", steps=[f"s{i}"]) for i in range(20))
    )
    assert all(r.status == "ok" for r in results)
    plan = latest(ctx)
    assert sorted(s.title for s in plan.steps) == sorted(f"s{i}" for i in range(20))
    assert [s.step_id for s in plan.steps] == list(range(1, 21))


async def test_a_failing_tool_rolls_its_plan_changes_back(ctx: Any) -> None:
    @tool
    def replan_then_fail(*, ctx: ToolContext[Any]) -> None:
        """Change the plan, then fail."""
        session = Session.of(ctx)
        plan = session[Plan].latest()
        assert plan is not None
        session[Plan].update(plan.add_steps(["sneaky"]))
        raise RuntimeError("boom")

    executor = ToolExecutor(ToolRegistry([*planning_tools(), replan_then_fail]))
    ok(await call(executor, ctx, "planning_setup_plan", objective="O", initial_steps=["a"]))
    before = json.dumps(ctx.state, sort_keys=True)
    result = await call(executor, ctx, "replan_then_fail")
    assert result.status == "error"
    assert json.dumps(ctx.state, sort_keys=True) == before
    assert [s.title for s in latest(ctx).steps] == ["a"]


# --------------------------------------------------------------------------------------------------------
# Strategies change only the guidance text


def test_strategies_differ_only_in_guidance() -> None:
    assert set(STRATEGIES) == {"react", "plan_act_reflect", "goal_decompose_route_synthesise"}
    sections = {name: planning_section(name) for name in STRATEGIES}  # type: ignore[arg-type]
    texts = {name: s.render_text(None, {}) for name, s in sections.items()}
    assert len(set(texts.values())) == 3
    for name, text in texts.items():
        assert STRATEGIES[name] in text
        assert "Current plan:\nNo plan yet." in text
        # Everything but the guidance is the same.
        assert text.replace(STRATEGIES[name], "") == texts["react"].replace(STRATEGIES["react"], "")
    tool_names = {tuple(t.name for t in s.tools) for s in sections.values()}
    assert tool_names == {PLANNING_TOOL_NAMES}
    assert planning_section().render_text(None, {}) == texts["react"]  # react is the default
    with pytest.raises(ValueError, match="Unknown planning strategy"):
        planning_section("yolo")  # type: ignore[arg-type]


def test_the_section_shows_the_current_plan_of_the_context() -> None:
    ctx: ToolContext[Any] = ToolContext(state={})
    Session.of(ctx)[Plan].update(Plan.create("Bake bread", ["Knead", "Bake"]))
    text = planning_section().render_text(ctx, {})
    assert "Objective: Bake bread (active)" in text
    assert "[ ] 1. Knead (pending)" in text and "[ ] 2. Bake (pending)" in text
