"""Executor benchmark, peers' and floor's half: the cost of ONE tool call.

The tool is ``add(a: int, b: int) -> int`` ("Add two integers."). The arguments arrive as the JSON text a
model produces, ``'{"a": 1, "b": 2}'``, and the result must end up as the text the model will read
(``"3"``). Every candidate does the whole trip: parse -> validate -> await the async function -> render.

Every ``make_*`` does its setup once and returns the per-call op (``async () -> str``). Each op is run
once and checked to return ``"3"`` before it is timed. Where an agent loop builds a per-call envelope
(LangChain's ``ToolCall`` dict, the Agents SDK's ``ToolContext``, Pydantic AI's ``ToolCallPart``), the op
builds it too, because that is part of what one call costs in that library.

Second scenario, concurrency: 10,000 calls of a tool that does ``await asyncio.sleep(0.001)``, run at
concurrency 100 as 100 successive ``asyncio.gather`` batches of 100 calls (how an agent runs the
parallel tool calls of one model turn). Wall time per approach; the sleeps alone account for ~100 ms.

toolrun's half plugs in with :func:`run` (see ``bench/README.md``)::

    import _peers_executor

    def make_toolrun(fn: ToolFn) -> Op:  # fn is `add` or `slow_add`; the op must return "3"
        ...

    _peers_executor.run(toolrun={"toolrun": make_toolrun})

Run the peers alone: ``python bench/_peers_executor.py [--quick]``.
"""

# No ``from __future__ import annotations`` here: the tool functions keep real annotation objects, as
# most user code has. LangChain re-evaluates the tool function's type hints on every call, and string
# annotations make that measurably slower (~10% of its per-call time).

import asyncio
import inspect
import json
import os
import sys
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import _harness
import pydantic
from _harness import Candidate, Kind, Op

ToolFn = Callable[..., Awaitable[Any]]
"""An async tool function (``add`` or ``slow_add``)."""

ToolMaker = Callable[[ToolFn], Op | Awaitable[Op]]
"""Setup for one approach given the tool function; returns the per-call op."""

ARGS_JSON = '{"a": 1, "b": 2}'
"""The arguments exactly as the model sends them."""
EXPECTED = "3"
"""What the model must read back."""
CALL_ID = "call_0001"
TIMEOUT_S = 30.0
"""Per-tool timeout for the "+timeout" variants; large enough never to fire."""

CONCURRENCY_TOTAL = 10_000
CONCURRENCY = 100
SLEEP_S = 0.001


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def slow_add(a: int, b: int) -> int:
    """Add two integers."""
    await asyncio.sleep(SLEEP_S)
    return a + b


slow_add.__name__ = slow_add.__qualname__ = "add"  # same tool name for every library


# --------------------------------------------------------------------------------------------------------
# Floor: the same work with plain json + Pydantic and nothing else
# --------------------------------------------------------------------------------------------------------


def args_model(fn: ToolFn) -> type[pydantic.BaseModel]:
    """A Pydantic model of ``fn``'s parameters, built once with ``create_model``."""
    hints = typing.get_type_hints(fn)
    fields: dict[str, Any] = {
        name: (hints[name], ... if p.default is inspect.Parameter.empty else p.default)
        for name, p in inspect.signature(fn).parameters.items()
    }
    return pydantic.create_model(f"{fn.__name__}_args", **fields)


def floor_tool_runner(fn: ToolFn) -> Callable[[str], Awaitable[str]]:
    """``json.loads`` -> ``model_validate`` -> ``await fn(**fields)`` -> ``json.dumps``."""
    validate = args_model(fn).model_validate
    loads, dumps = json.loads, json.dumps

    async def run(arguments: str) -> str:
        args = validate(loads(arguments))
        return dumps(await fn(**args.__dict__))

    return run


def make_floor(fn: ToolFn = add) -> Op:
    run = floor_tool_runner(fn)

    async def call() -> str:
        return await run(ARGS_JSON)

    return call


def make_floor_json(fn: ToolFn = add) -> Op:
    """Like the floor but validating the JSON text directly with ``model_validate_json``."""
    validate_json = args_model(fn).model_validate_json
    dumps = json.dumps

    async def call() -> str:
        args = validate_json(ARGS_JSON)
        return dumps(await fn(**args.__dict__))

    return call


# --------------------------------------------------------------------------------------------------------
# LangChain (langchain-core)
# --------------------------------------------------------------------------------------------------------


def make_langchain(fn: ToolFn = add) -> Op:
    """``StructuredTool.from_function(coroutine=fn)``; ``await tool.ainvoke(ToolCall)`` -> ``ToolMessage``.

    This is what an agent's tool node does: the model's ``arguments`` JSON is parsed into the AIMessage's
    ``tool_calls[i]["args"]``, and the ``ToolCall`` dict is passed to ``ainvoke``, which validates with
    the inferred ``args_schema``, runs the callback manager (no handlers configured; LangSmith tracing
    forced off), awaits the coroutine and wraps the stringified result in a ``ToolMessage``.
    langchain-core has no per-tool timeout option.
    """
    os.environ["LANGSMITH_TRACING"] = "false"
    os.environ["LANGCHAIN_TRACING_V2"] = "false"
    from langchain_core.tools import StructuredTool

    tool = StructuredTool.from_function(coroutine=fn)
    name = tool.name
    loads = json.loads

    async def call() -> str:
        message = await tool.ainvoke(
            {"name": name, "args": loads(ARGS_JSON), "id": CALL_ID, "type": "tool_call"}
        )
        return message.content

    return call


# --------------------------------------------------------------------------------------------------------
# OpenAI Agents SDK
# --------------------------------------------------------------------------------------------------------


def make_openai_agents(fn: ToolFn = add, *, timeout: float | None = None) -> Op:
    """``function_tool(fn)``; ``invoke_function_tool(function_tool=, context=ToolContext, arguments=json)``.

    ``agents.tool.invoke_function_tool`` is the wrapper around ``FunctionTool.on_invoke_tool`` that the
    runner uses (``_invoke_function_tool_with_metadata``): with no timeout it simply awaits
    ``on_invoke_tool(ctx, json_string)`` (JSON parse, Pydantic validation of the generated params model,
    call, output check, failure handling); with ``function_tool(timeout=...)`` (0.24 spells it
    ``timeout=``, stored as ``FunctionTool.timeout_seconds``) it runs the call as a task under
    ``asyncio.wait_for``. Calling ``on_invoke_tool`` directly would silently ignore the timeout.

    The ``ToolContext`` is built per call, as the runner does and as the SDK's tests do
    (``ToolContext(None, tool_name=..., tool_call_id=..., tool_arguments=...)``). The SDK turns a non-
    structured result into the model's text with ``str(output)`` (``ItemHelpers._convert_tool_output``).
    """
    from agents import function_tool
    from agents.tool import invoke_function_tool
    from agents.tool_context import ToolContext

    tool = function_tool(fn, timeout=timeout)
    name = tool.name

    async def call() -> str:
        ctx = ToolContext(None, tool_name=name, tool_call_id=CALL_ID, tool_arguments=ARGS_JSON)
        return str(await invoke_function_tool(function_tool=tool, context=ctx, arguments=ARGS_JSON))

    return call


def make_openai_agents_timeout(fn: ToolFn = add) -> Op:
    return make_openai_agents(fn, timeout=TIMEOUT_S)


# --------------------------------------------------------------------------------------------------------
# Pydantic AI
# --------------------------------------------------------------------------------------------------------


def make_pydantic_ai(fn: ToolFn = add, *, timeout: float | None = None) -> Op:
    """``FunctionToolset([Tool(fn)])`` -> ``ToolManager.for_run_step(RunContext)`` -> ``handle_call``.

    ``ToolManager.handle_call(ToolCallPart)`` is the manager's validate + execute path
    (``validate_tool_call`` then ``execute_tool_call``, the two steps the agent graph runs per call, minus
    the graph's tracing span): it validates the JSON ``args`` string with the tool's Pydantic validator,
    runs the capability hooks and calls the function (under ``anyio.fail_after`` when ``Tool(timeout=)``
    is set). The ``RunContext`` is built like Pydantic AI's own tests do (``deps=None``, ``TestModel()``,
    ``RunUsage()``, ``run_step=0``); one ``ToolManager`` serves every call, as within one run step. The
    model-visible text is ``ToolReturnPart(...).model_response_str()``, as the model adapters render it.

    ``for_run_step`` is async, so the setup happens on the first call (the verification call, untimed).
    """
    from pydantic_ai import FunctionToolset, RunContext, Tool, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.tool_manager import ToolManager
    from pydantic_ai.usage import RunUsage

    toolset = FunctionToolset([Tool(fn, timeout=timeout)])
    name = fn.__name__
    manager: ToolManager[None] | None = None

    async def call() -> str:
        nonlocal manager
        if manager is None:
            ctx = RunContext(
                deps=None, model=TestModel(), usage=RunUsage(), prompt=None, messages=[], run_step=0
            )
            manager = await ToolManager[None](toolset).for_run_step(ctx)
        result = await manager.handle_call(ToolCallPart(tool_name=name, args=ARGS_JSON, tool_call_id=CALL_ID))
        return ToolReturnPart(tool_name=name, content=result, tool_call_id=CALL_ID).model_response_str()

    return call


def make_pydantic_ai_timeout(fn: ToolFn = add) -> Op:
    return make_pydantic_ai(fn, timeout=TIMEOUT_S)


# --------------------------------------------------------------------------------------------------------
# FastMCP
# --------------------------------------------------------------------------------------------------------


def make_fastmcp(fn: ToolFn = add, *, timeout: float | None = None) -> Op:
    """``fastmcp.tools.FunctionTool.from_function(fn)``; ``await tool.run(arguments_dict)`` -> ``ToolResult``.

    ``Tool.run`` is what the server's ``tools/call`` handler reaches after its middleware chain: it
    validates the arguments with a cached ``TypeAdapter`` of the function, awaits it (under
    ``anyio.fail_after`` when ``from_function(timeout=)`` is set) and converts the result into MCP content
    blocks plus structured content. The JSON-RPC transport would have parsed the arguments, so the op
    does ``json.loads``; the model-visible text is the first ``TextContent``.
    """
    from fastmcp.tools import FunctionTool

    tool = FunctionTool.from_function(fn, timeout=timeout)
    loads = json.loads

    async def call() -> str:
        result = await tool.run(loads(ARGS_JSON))
        return result.content[0].text

    return call


def make_fastmcp_timeout(fn: ToolFn = add) -> Op:
    return make_fastmcp(fn, timeout=TIMEOUT_S)


# --------------------------------------------------------------------------------------------------------
# Registry of approaches
# --------------------------------------------------------------------------------------------------------

FLOORS: dict[str, ToolMaker] = {"floor": make_floor, "floor_json": make_floor_json}

PEERS: dict[str, ToolMaker] = {
    "langchain": make_langchain,
    "openai_agents": make_openai_agents,
    "openai_agents+timeout": make_openai_agents_timeout,
    "pydantic_ai": make_pydantic_ai,
    "pydantic_ai+timeout": make_pydantic_ai_timeout,
    "fastmcp": make_fastmcp,
    "fastmcp+timeout": make_fastmcp_timeout,
}

NOTES = {
    "floor": "json.loads -> model_validate -> await -> json.dumps",
    "floor_json": "model_validate_json -> await -> json.dumps",
    "langchain": "StructuredTool.ainvoke(ToolCall) -> ToolMessage.content",
    "openai_agents": "invoke_function_tool -> FunctionTool.on_invoke_tool(ToolContext, json) -> str()",
    "openai_agents+timeout": "same, function_tool(timeout=30): asyncio.wait_for(task)",
    "pydantic_ai": "ToolManager.handle_call(ToolCallPart) -> ToolReturnPart.model_response_str()",
    "pydantic_ai+timeout": "same, Tool(timeout=30): anyio.fail_after",
    "fastmcp": "FunctionTool.run(dict) -> ToolResult.content[0].text",
    "fastmcp+timeout": "same, from_function(timeout=30): anyio.fail_after",
}


def _makers(fn: ToolFn, toolrun: Mapping[str, ToolMaker] | None) -> dict[str, tuple[Kind, Callable[[], Any]]]:
    makers: dict[str, tuple[Kind, Callable[[], Any]]] = {}
    for name, mk in FLOORS.items():
        makers[name] = ("floor", lambda mk=mk: mk(fn))
    for name, mk in (toolrun or {}).items():
        makers[name] = ("toolrun", lambda mk=mk: mk(fn))
    for name, mk in PEERS.items():
        makers[name] = ("peer", lambda mk=mk: mk(fn))
    return makers


def concurrent_op(call: Op, *, total: int = CONCURRENCY_TOTAL, concurrency: int = CONCURRENCY) -> Op:
    """One op = ``total`` calls, ``concurrency`` at a time (successive ``asyncio.gather`` batches)."""
    rounds = total // concurrency

    async def scenario() -> str:
        last: list[Any] = []
        for _ in range(rounds):
            last = await asyncio.gather(*[call() for _ in range(concurrency)])
        return last[-1]

    return scenario


async def main(
    settings: _harness.Settings, toolrun: Mapping[str, ToolMaker] | None = None
) -> dict[str, list[_harness.Result]]:
    """Both scenarios; returns the results by scenario name."""
    out: dict[str, list[_harness.Result]] = {}

    candidates = await _harness.build(
        _makers(add, toolrun), expected=EXPECTED, settings=settings, notes=NOTES
    )
    rows = await _harness.measure(candidates, settings)
    _harness.compare(
        rows,
        "floor",
        title=f"One tool call: add {ARGS_JSON} -> {EXPECTED!r} (median of {settings.rounds} rounds)",
        per="call",
        name="executor",
        settings=settings,
        extra={"args_json": ARGS_JSON},
    )
    out["executor"] = rows

    conc_settings = settings.scaled(rounds=9, quick_rounds=2)
    single = await _harness.build(_makers(slow_add, toolrun), expected=EXPECTED, settings=settings)
    candidates = [
        Candidate(name=c.name, op=concurrent_op(c.op), kind=c.kind, batch=1, note="") for c in single
    ]
    for c in candidates:  # verify the scenario itself once
        if await c.op() != EXPECTED:
            raise AssertionError(f"{c.name}: concurrency scenario returned a wrong answer")
    rows = await _harness.measure(candidates, conc_settings)
    _harness.compare(
        rows,
        "floor",
        title=(
            f"Concurrency: {CONCURRENCY_TOTAL:,} calls of a tool sleeping {SLEEP_S * 1e3:g} ms, "
            f"{CONCURRENCY} at a time (wall time, median of {conc_settings.rounds} rounds; "
            f"sleeping alone = {CONCURRENCY_TOTAL // CONCURRENCY * SLEEP_S * 1e3:g} ms)"
        ),
        unit="ms",
        per="run",
        name="concurrency",
        settings=conc_settings,
        extra={"total": CONCURRENCY_TOTAL, "concurrency": CONCURRENCY, "sleep_s": SLEEP_S},
    )
    out["concurrency"] = rows
    return out


def run(
    toolrun: Mapping[str, ToolMaker] | None = None, argv: Sequence[str] | None = None
) -> dict[str, list[_harness.Result]]:
    """Command-line entry point: parse flags, run both scenarios, print and write the tables."""
    settings = _harness.parse_args(argv, description=__doc__.splitlines()[0] if __doc__ else "")
    return asyncio.run(main(settings, toolrun))


if __name__ == "__main__":
    run(argv=sys.argv[1:])
