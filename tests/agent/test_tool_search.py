"""The tool-search mode of `Agent`: the model sees `search_tools`, and what it finds is loaded into view."""

from __future__ import annotations

from typing import Any

import pytest

from toolrun import Agent, Tool, ToolCall, ToolContext, ToolExecutor, ToolRegistry, tool
from toolrun.agent import AgentRun, make_search_tool
from toolrun.agent._extras import SEARCH_TOOL_NAME, loaded_tools
from toolrun.models import ScriptedModel
from toolrun.planning import planning_section
from toolrun.prompts import Prompt


def many_tools(n: int = 200) -> list[Tool]:
    tools = [
        Tool.from_schema(
            f"tool_{i}_widget",
            f"Handles widget number {i} for the inventory.",
            {"type": "object", "properties": {"x": {"type": "integer"}}},
            lambda x=0: x,
        )
        for i in range(n)
    ]

    @tool
    def get_weather_forecast(city: str) -> str:
        """Weather forecast for a city."""
        return f"Sunny in {city}"

    @tool(destructive=True)
    def cancel_flight(booking: str) -> str:
        """Cancel a flight booking."""
        return f"cancelled {booking}"

    return [*tools, get_weather_forecast, cancel_flight]


def shown(model: ScriptedModel, request: int) -> list[str]:
    return model.requests[request].tools.names()


async def test_the_model_first_sees_only_search_tools_then_what_it_loaded() -> None:
    model = ScriptedModel(
        [
            ToolCall(name=SEARCH_TOOL_NAME, arguments={"query": "weather forecast", "k": 2}),
            ToolCall(name="get_weather_forecast", arguments={"city": "Oslo"}),
            "Sunny in Oslo.",
        ]
    )
    agent = Agent(model, many_tools(), tool_search=True)
    run = await agent.run("Weather in Oslo?")
    assert run.status == "completed", run.error
    assert shown(model, 0) == [SEARCH_TOOL_NAME]
    # k=2, but only one tool shares a word with the query; the rest of the 202 stay out of view.
    assert shown(model, 1) == ["get_weather_forecast", SEARCH_TOOL_NAME]
    found = run.tool_calls[0].result.value
    assert found["loaded"][0]["name"] == "get_weather_forecast"
    assert run.tool_calls[1].result.value == "Sunny in Oslo"
    assert loaded_tools(run.state)[0] == "get_weather_forecast"


async def test_loaded_tools_accumulate_and_survive_a_pause_in_json() -> None:
    script = [
        ToolCall(name=SEARCH_TOOL_NAME, arguments={"query": "weather forecast", "k": 1}),
        ToolCall(name=SEARCH_TOOL_NAME, arguments={"query": "cancel flight booking", "k": 1}),
        ToolCall(id="c1", name="cancel_flight", arguments={"booking": "B1"}),
        "Cancelled.",
    ]
    tools = many_tools()
    agent = Agent(ScriptedModel(script), tools, tool_search=True)
    ctx = ToolContext(user_id="u1")
    paused = await agent.run("Cancel B1", context=ctx)
    assert paused.status == "awaiting_confirmation"
    restored = AgentRun.from_json(paused.to_json())
    assert loaded_tools(restored.state) == ["get_weather_forecast", "cancel_flight"]

    model = ScriptedModel(script)
    resumed_agent = Agent(model, agent.tools, tool_search=True, executor=agent.executor)
    done = await resumed_agent.resume(restored, {restored.pending[0].confirmation_id: True}, context=ctx)
    assert done.status == "completed", done.error
    assert shown(model, 0) == ["get_weather_forecast", "cancel_flight", SEARCH_TOOL_NAME]


async def test_prompt_tools_stay_in_view_with_tool_search() -> None:
    model = ScriptedModel(["ok"])
    agent = Agent(model, many_tools(), prompt=Prompt([planning_section()]), tool_search=True)
    await agent.run("hi")
    assert shown(model, 0) == [
        "planning_setup_plan",
        "planning_add_step",
        "planning_update_step",
        "planning_read_plan",
        SEARCH_TOOL_NAME,
    ]


async def test_no_match_loads_nothing_and_says_so() -> None:
    model = ScriptedModel([ToolCall(name=SEARCH_TOOL_NAME, arguments={"query": "zebra quantum"}), "None."])
    run = await Agent(model, many_tools(), tool_search=True).run("?")
    assert run.tool_calls[0].result.value == {"loaded": [], "note": "No tool matched; try other words."}
    assert shown(model, 1) == [SEARCH_TOOL_NAME]


def test_a_caller_registry_is_never_changed_and_own_executors_need_the_search_tool() -> None:
    registry = ToolRegistry(many_tools(3))
    Agent(ScriptedModel(["x"]), registry, tool_search=True)
    assert SEARCH_TOOL_NAME not in registry
    with pytest.raises(ValueError, match="make_search_tool"):
        Agent(ScriptedModel(["x"]), registry, tool_search=True, executor=ToolExecutor(registry))
    registry.register(make_search_tool(registry))
    agent = Agent(ScriptedModel(["x"]), registry, tool_search=True, executor=ToolExecutor(registry))
    assert agent.tools is registry


async def test_k_is_bounded() -> None:
    search = make_search_tool(ToolRegistry(many_tools(50)))
    ctx: ToolContext[Any] = ToolContext(state={})
    result = await search.invoke({"query": "widget inventory", "k": 500}, ctx)
    assert len(result["loaded"]) == 20
    assert len(loaded_tools(ctx.state)) == 20


def test_tool_search_is_refused_in_planner_mode() -> None:
    with pytest.raises(ValueError, match="native tool calling"):
        Agent(ScriptedModel(["x"]), many_tools(3), tool_search=True, mode="planner")
