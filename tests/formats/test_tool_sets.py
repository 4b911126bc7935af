"""Large tool sets the provider's way: deferred loading + tool search, namespaces, allowed subsets,
programmatic callers — exported by the registry, checked by the project's checker, and the provider's
responses (shaped as each API documents them) read back into calls that still pass every gate."""

from __future__ import annotations

from typing import Any

import pytest

from toolrun import ToolContext, ToolExecutor, ToolRegistry, tool
from toolrun.exceptions import ToolNotFoundError
from toolrun.formats import check_request, get_format


@tool(tags=["tasks"], examples=[{"input": {"title": "Buy milk"}}])
def create_task(title: str) -> dict[str, str]:
    """Create a task for the user.

    Args:
        title: What to do.
    """
    return {"title": title}


@tool(tags=["tasks"], destructive=True)
def delete_task(task_id: str) -> dict[str, str]:
    """Delete one of the user's tasks permanently.

    Args:
        task_id: The task's id.
    """
    return {"deleted": task_id}


@tool(tags=["weather"], read_only=True)
def forecast(city: str) -> str:
    """The weather forecast for a city.

    Args:
        city: The city.
    """
    return f"sun in {city}"


@tool
def clock() -> str:
    """The current time."""
    return "12:00"


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry([create_task, delete_task, forecast, clock])


def errors(definitions: list[dict[str, Any]], provider: str, **kw: Any) -> list[str]:
    return [v.rule for v in check_request(definitions, provider, **kw) if v.severity == "error"]


def test_openai_responses_defers_every_function_behind_the_hosted_search(registry: ToolRegistry) -> None:
    tools = registry.definitions("openai-responses", defer_loading=True)
    functions = [t for t in tools if t["type"] == "function"]
    assert len(functions) == 4 and all(t["defer_loading"] is True for t in functions)
    assert tools[-1] == {"type": "tool_search"}
    assert errors(tools, "openai-responses") == []
    # The plain export is untouched by the decorated one (both come from one cache).
    assert all("defer_loading" not in t for t in registry.definitions("openai-responses"))


def test_deferring_some_tools_by_name_keeps_the_rest_loaded(registry: ToolRegistry) -> None:
    tools = registry.definitions("anthropic", defer_loading=["forecast", "clock"])
    deferred = {t["name"] for t in tools if t.get("defer_loading")}
    assert deferred == {"forecast", "clock"}
    assert tools[-1] == {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
    assert errors(tools, "anthropic") == []
    regex = registry.definitions("anthropic", defer_loading=True, tool_search="regex")
    assert regex[-1]["type"] == "tool_search_tool_regex_20251119"
    assert errors(regex, "anthropic") == []


def test_namespaces_group_tools_by_tag_and_the_checker_walks_inside(registry: ToolRegistry) -> None:
    tools = registry.definitions(
        "openai-responses",
        defer_loading=True,
        namespaces={"tasks": "Manage the user's tasks", "weather": "Forecasts"},
    )
    top = {t.get("name", t["type"]): t for t in tools}
    assert {f["name"] for f in top["tasks"]["tools"]} == {"create_task", "delete_task"}
    assert [f["name"] for f in top["weather"]["tools"]] == ["forecast"]
    assert top["clock"]["type"] == "function" and top["tool_search"] == {"type": "tool_search"}
    assert errors(tools, "openai-responses") == []
    # A broken function inside a namespace is reported at its own path.
    top["tasks"]["tools"][0] = {**top["tasks"]["tools"][0], "name": "bad name!"}
    bad = [v for v in check_request(tools, "openai-responses") if v.severity == "error"]
    assert any(v.path.endswith("/tools/0/name") for v in bad), bad


def test_the_checker_knows_what_the_apis_refuse() -> None:
    fn = {
        "type": "function",
        "name": "f",
        "description": "Do f.",
        "parameters": {"type": "object"},
        "strict": False,
    }
    assert errors([{**fn, "defer_loading": True}], "openai-responses") == ["OAI-DEFER-SEARCH"]
    assert "OAI-DEFER-SEARCH-DEFERRED" in errors(
        [{**fn, "defer_loading": True}, {"type": "tool_search", "defer_loading": True}], "openai-responses"
    )
    namespace = {"type": "namespace", "name": "n", "description": "", "tools": []}
    assert set(errors([namespace], "openai-responses")) == {"OAI-NS-DESC", "OAI-NS-EMPTY"}
    ant = {"name": "f", "description": "Do f.", "input_schema": {"type": "object"}}
    assert errors([{**ant, "defer_loading": True}], "anthropic") == ["ANT-DEFER-ALL"]
    search = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
    assert errors([{**ant, "defer_loading": True}, search], "anthropic") == []
    assert errors([{**ant, "defer_loading": True}, {**search, "defer_loading": True}], "anthropic") == [
        "ANT-DEFER-SEARCH-DEFERRED",
        "ANT-DEFER-ALL",
    ]


def _ant(name: str, **extra: Any) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}
    return {"name": name, "description": f"Use {name}.", "input_schema": schema, **extra}


def _oai(name: str, **extra: Any) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}
    return {
        "type": "function",
        "name": name,
        "description": f"Use {name}.",
        "parameters": schema,
        "strict": False,
        **extra,
    }


# Request shapes the APIs answered (our own minimal requests, mirroring recorded ones; see `split_tools` in
# toolrun/formats/_check_openai.py and _check_anthropic.py for the recordings):
# (provider, tools, errors, warnings).
ACCEPTED_SHAPES = [
    # Anthropic 200: a loader tool, a deferred tool, no tool search tool; the loader's tool result returns a
    # `tool_reference` block and the model then calls the deferred tool.
    ("anthropic", [_ant("load_capability"), _ant("lookup", defer_loading=True)], [], ["ANT-DEFER-SEARCH"]),
    # Anthropic 200: the application's own search function instead of a server search tool.
    (
        "anthropic",
        [
            _ant("load_capability"),
            _ant("search_tools"),
            _ant("a", defer_loading=True),
            _ant("b", defer_loading=True),
        ],
        [],
        ["ANT-DEFER-SEARCH"],
    ),
    # Anthropic 200: the server's bm25 search.
    (
        "anthropic",
        [
            _ant("load_capability"),
            {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"},
            _ant("lookup", defer_loading=True),
        ],
        [],
        [],
    ),
    # OpenAI Responses 200: a client-executed tool_search loads the deferred function.
    (
        "openai-responses",
        [
            {"type": "tool_search", "execution": "client"},
            _oai("load_capability"),
            _oai("lookup", defer_loading=True),
        ],
        [],
        [],
    ),
]


@pytest.mark.parametrize(("provider", "tools", "expected_errors", "expected_warnings"), ACCEPTED_SHAPES)
def test_requests_the_apis_accepted_are_no_errors(
    provider: str, tools: list[dict[str, Any]], expected_errors: list[str], expected_warnings: list[str]
) -> None:
    found = check_request(tools, provider)
    assert [v.rule for v in found if v.severity == "error"] == expected_errors
    assert [v.rule for v in found if v.severity == "warning"] == expected_warnings


def test_requests_the_apis_refuse_stay_errors() -> None:
    # OpenAI: "Invalid Value: 'tools.defer_loading'. Deferred tools require tools.tool_search."
    assert errors([_oai("load_capability"), _oai("lookup", defer_loading=True)], "openai-responses") == [
        "OAI-DEFER-SEARCH"
    ]
    # Anthropic rejects a request whose tools are all deferred.
    assert errors([_ant("lookup", defer_loading=True)], "anthropic") == ["ANT-DEFER-ALL"]


def test_programmatic_callers_need_the_code_execution_tool(registry: ToolRegistry) -> None:
    tools = registry.definitions("anthropic", allowed_callers=["direct", "code_execution_20250825"])
    assert all(t["allowed_callers"] == ["direct", "code_execution_20250825"] for t in tools)
    assert set(errors(tools, "anthropic")) == {"ANT-CALLERS-1"}  # no code execution tool in the request
    with_exec = [*tools, {"type": "code_execution_20250825", "name": "code_execution"}]
    assert errors(with_exec, "anthropic") == []
    odd = registry.definitions("anthropic", allowed_callers=["python"])
    assert "ANT-CALLERS-2" in errors(odd, "anthropic")


def test_examples_and_eager_input_streaming_reach_anthropic(registry: ToolRegistry) -> None:
    tools = {t["name"]: t for t in registry.definitions("anthropic", eager_input_streaming=True)}
    assert tools["create_task"]["input_examples"] == [{"title": "Buy milk"}]
    assert all(t["eager_input_streaming"] is True for t in tools.values())
    assert errors(list(tools.values()), "anthropic") == []


def test_options_a_format_cannot_carry_are_refused(registry: ToolRegistry) -> None:
    with pytest.raises(ValueError, match="only 'openai-responses' and 'anthropic'"):
        registry.definitions("openai", defer_loading=True)
    with pytest.raises(ValueError, match="namespaces is not part of the 'anthropic' format"):
        registry.definitions("anthropic", namespaces={"tasks": "Tasks"})
    with pytest.raises(ValueError, match="not in this set"):
        registry.definitions("anthropic", defer_loading=["forcast"])
    with pytest.raises(ValueError, match="needs a description"):
        registry.definitions("openai-responses", namespaces={"tasks": " "})
    with pytest.raises(ValueError, match="'bm25', 'regex' or 'none'"):
        registry.definitions("anthropic", defer_loading=True, tool_search="hosted")


def test_an_allowed_subset_per_request_for_each_api(registry: ToolRegistry) -> None:
    responses = registry.tool_choice("openai-responses", ["forecast", "clock"], parallel=False)
    assert responses == {
        "tool_choice": {
            "type": "allowed_tools",
            "mode": "auto",
            "tools": [{"type": "function", "name": "forecast"}, {"type": "function", "name": "clock"}],
        },
        "parallel_tool_calls": False,
    }
    full = registry.definitions("openai-responses")
    assert errors(full, "openai-responses", tool_choice=responses) == []
    chat = registry.tool_choice("openai", ["forecast"], required=True)
    assert chat["tool_choice"]["allowed_tools"] == {
        "mode": "required",
        "tools": [{"type": "function", "function": {"name": "forecast"}}],
    }
    assert errors(registry.definitions("openai"), "openai", tool_choice=chat) == []
    gemini = registry.tool_choice("gemini", ["forecast"], required=True)
    assert gemini["tool_config"]["function_calling_config"] == {
        "mode": "ANY",
        "allowed_function_names": ["forecast"],
    }
    assert errors(registry.definitions("gemini"), "gemini", tool_choice=gemini) == []
    assert registry.tool_choice("anthropic", ["clock"], parallel=False) == {
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": True}
    }
    with pytest.raises(ToolNotFoundError):
        registry.tool_choice("openai-responses", ["forcast"])
    # A hand-written choice naming a function the request lacks, or the wrong Gemini mode, is caught.
    wrong = {
        "tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "x"}]}
    }
    assert errors(full, "openai-responses", tool_choice=wrong) == ["OAI-ALLOWED-1"]
    auto = {"tool_config": {"function_calling_config": {"mode": "AUTO", "allowed_function_names": ["nope"]}}}
    assert errors(registry.definitions("gemini"), "gemini", tool_choice=auto) == [
        "GEM-ALLOWED-2",
        "GEM-ALLOWED-1",
    ]


async def test_responses_read_back_from_tool_search_and_namespaces(registry: ToolRegistry) -> None:
    """A Responses output as the API documents it with hosted tool search: the search call and its
    output are the provider's own; only the function call (inside a namespace) is the client's."""
    response = {
        "output": [
            {
                "type": "tool_search_call",
                "id": "ts_1",
                "status": "completed",
                "arguments": {"query": "delete task"},
            },
            {"type": "tool_search_output", "id": "tso_1", "status": "completed", "tools": []},
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "namespace": "tasks",
                "name": "delete_task",
                "arguments": '{"task_id": "t1"}',
                "status": "completed",
            },
        ]
    }
    [call] = get_format("openai-responses").parse_tool_calls(response, names=registry)
    assert (call.id, call.name) == ("call_1", "delete_task")
    result = await ToolExecutor(registry).execute(call, ToolContext(user_id="u1"))
    assert result.status == "confirmation_required"  # deferred or not, the destructive gate holds


async def test_calls_from_generated_code_go_through_every_gate(registry: ToolRegistry) -> None:
    """Anthropic programmatic tool calling: the code execution tool calls a client tool; the call comes as
    a `tool_use` block with a `caller`, beside the server's own blocks, and runs through the executor."""
    message = {
        "content": [
            {
                "type": "server_tool_use",
                "id": "srvtoolu_1",
                "name": "code_execution",
                "input": {"code": "..."},
            },
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "delete_task",
                "input": {"task_id": "t9"},
                "caller": {"type": "code_execution_20250825", "tool_id": "srvtoolu_1"},
            },
            {
                "type": "tool_use",
                "id": "toolu_2",
                "name": "create_task",
                "input": {"title": 5},
                "caller": {"type": "code_execution_20250825", "tool_id": "srvtoolu_1"},
            },
        ]
    }
    calls = get_format("anthropic").parse_tool_calls(message, names=registry)
    assert [c.name for c in calls] == ["delete_task", "create_task"]
    executor = ToolExecutor(registry)
    held, invalid = await executor.execute_many(calls, ToolContext(user_id="u1"))
    assert held.status == "confirmation_required"
    assert invalid.error is not None and invalid.error.code == "INVALID_ARGUMENTS"
