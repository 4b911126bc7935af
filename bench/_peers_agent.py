"""Agent benchmark, peers' and floor's half: one whole agent run with a scripted model.

The run: the user asks ``"what is 1+2"``; the scripted model's first turn asks for ONE tool call,
``add`` with arguments ``'{"a": 1, "b": 2}'``; the tool runs; the model's second turn answers ``"3"`` as
final text; the run returns that text. The scripted models are stateless (they answer with the final
text once the conversation ends with a tool result), so one agent object serves every run, and they
cost next to nothing, so what is timed is the framework's own loop: message/item bookkeeping, tool
lookup, validation, execution, hooks, result assembly.

Each ``make_*`` does its setup once and returns ``async () -> str`` (the final output). Before timing,
each op is run once and checked to return ``"3"`` AND to have run the tool exactly once.

* ``floor``: a hand-written loop over OpenAI-style chat message dicts with the executor floor
  (``json.loads`` -> ``model_validate`` -> ``await`` -> ``json.dumps``) as the tool runner.
* ``openai_agents``: ``Runner.run(agent, prompt)`` with our own small ``agents.Model`` subclass that
  returns scripted ``ModelResponse`` objects (like the SDK tests' ``FakeModel``); tracing disabled with
  ``set_tracing_disabled(True)``.
* ``pydantic_ai``: ``await Agent(FunctionModel(script), tools=[add]).run(prompt)``, the model being an
  ``async`` function (a sync one would be sent to a worker thread).

langchain-core and FastMCP have no agent loop of their own (LangChain's lives in ``langchain``/LangGraph,
not installed), so they are not in this scenario.

toolrun's half plugs in with :func:`run` (see ``bench/README.md``)::

    import _peers_agent

    def make_toolrun() -> Op:  # scripted model: PROMPT -> call TOOL_NAME(TOOL_ARGS_JSON) -> FINAL_TEXT
        ...                    # the tool must be _peers_agent.add (it counts its runs)

    _peers_agent.run(toolrun={"toolrun": make_toolrun})

Run the peers alone: ``python bench/_peers_agent.py [--quick]``.
"""

# No ``from __future__ import annotations``: the tool keeps real annotations (see _peers_executor.py).

import asyncio
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import _harness
from _harness import Kind, Op
from _peers_executor import floor_tool_runner

PROMPT = "what is 1+2"
TOOL_NAME = "add"
TOOL_ARGS_JSON = '{"a": 1, "b": 2}'
FINAL_TEXT = "3"
CALL_ID = "call_0001"

TOOL_RUNS = [0]
"""How many times :func:`add` ran (verification only; incrementing it costs ~30 ns)."""


async def add(a: int, b: int) -> int:
    """Add two integers."""
    TOOL_RUNS[0] += 1
    return a + b


# --------------------------------------------------------------------------------------------------------
# Floor: a minimal hand-written loop
# --------------------------------------------------------------------------------------------------------


async def floor_model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The scripted model for the floor, speaking OpenAI chat-completions message dicts."""
    if messages[-1]["role"] == "tool":
        return {"role": "assistant", "content": FINAL_TEXT}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": CALL_ID, "type": "function", "function": {"name": TOOL_NAME, "arguments": TOOL_ARGS_JSON}}
        ],
    }


def make_floor() -> Op:
    tools: dict[str, Callable[[str], Awaitable[str]]] = {TOOL_NAME: floor_tool_runner(add)}

    async def run() -> str:
        messages: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]
        for _ in range(10):
            reply = await floor_model(messages)
            messages.append(reply)
            calls = reply.get("tool_calls")
            if not calls:
                return reply["content"]
            for call in calls:
                fn = call["function"]
                output = await tools[fn["name"]](fn["arguments"])
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": output})
        raise RuntimeError("too many turns")

    return run


# --------------------------------------------------------------------------------------------------------
# OpenAI Agents SDK
# --------------------------------------------------------------------------------------------------------


def make_openai_agents() -> Op:
    """``Runner.run(agent, PROMPT)`` with a scripted ``agents.Model``; returns ``result.final_output``."""
    from agents import Agent, Model, ModelResponse, Runner, Usage, function_tool, set_tracing_disabled
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    set_tracing_disabled(True)

    def _is_tool_output(item: Any) -> bool:
        kind = item.get("type") if isinstance(item, dict) else getattr(item, "type", None)
        return kind == "function_call_output"

    class ScriptedModel(Model):
        """Turn 1: call ``add``; once the input ends with the tool's output: answer ``FINAL_TEXT``."""

        async def get_response(
            self,
            system_instructions: Any,
            input: Any,
            model_settings: Any,
            tools: Any,
            output_schema: Any,
            handoffs: Any,
            tracing: Any,
            *,
            previous_response_id: Any,
            conversation_id: Any,
            prompt: Any,
        ) -> Any:
            if isinstance(input, list) and input and _is_tool_output(input[-1]):
                output: list[Any] = [
                    ResponseOutputMessage(
                        id="msg_1",
                        type="message",
                        role="assistant",
                        status="completed",
                        content=[ResponseOutputText(type="output_text", text=FINAL_TEXT, annotations=[])],
                    )
                ]
            else:
                output = [
                    ResponseFunctionToolCall(
                        id="fc_1",
                        call_id=CALL_ID,
                        type="function_call",
                        name=TOOL_NAME,
                        arguments=TOOL_ARGS_JSON,
                    )
                ]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the benchmark does not stream")

    agent = Agent(name="bench", model=ScriptedModel(), tools=[function_tool(add)])

    async def run() -> str:
        result = await Runner.run(agent, PROMPT)
        return result.final_output

    return run


# --------------------------------------------------------------------------------------------------------
# Pydantic AI
# --------------------------------------------------------------------------------------------------------


def make_pydantic_ai() -> Op:
    """``await Agent(FunctionModel(script), tools=[add]).run(PROMPT)``; returns ``result.output``."""
    from pydantic_ai import Agent, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    async def script(messages: list[Any], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts):
            return ModelResponse(parts=[TextPart(FINAL_TEXT)])
        return ModelResponse(
            parts=[ToolCallPart(tool_name=TOOL_NAME, args=TOOL_ARGS_JSON, tool_call_id=CALL_ID)]
        )

    agent = Agent(FunctionModel(script), tools=[add])

    async def run() -> str:
        result = await agent.run(PROMPT)
        return result.output

    return run


# --------------------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------------------

PEERS: dict[str, Callable[[], Op]] = {"openai_agents": make_openai_agents, "pydantic_ai": make_pydantic_ai}

NOTES = {
    "floor": "hand-written loop over chat dicts + executor floor",
    "openai_agents": "Runner.run(Agent(model=ScriptedModel(), tools=[function_tool(add)]))",
    "pydantic_ai": "Agent(FunctionModel(async script), tools=[add]).run()",
}


async def main(
    settings: _harness.Settings, toolrun: Mapping[str, Callable[[], Any]] | None = None
) -> list[Any]:
    makers: dict[str, tuple[Kind, Callable[[], Any]]] = {"floor": ("floor", make_floor)}
    makers.update({name: ("toolrun", mk) for name, mk in (toolrun or {}).items()})
    makers.update({name: ("peer", mk) for name, mk in PEERS.items()})
    candidates = await _harness.build(makers, expected=FINAL_TEXT, settings=settings, notes=NOTES)
    for c in candidates:
        TOOL_RUNS[0] = 0
        got = await c.op()
        if got != FINAL_TEXT or TOOL_RUNS[0] != 1:
            raise AssertionError(f"{c.name}: returned {got!r} after running the tool {TOOL_RUNS[0]} times")
    rows = await _harness.measure(candidates, settings)
    _harness.compare(
        rows,
        "floor",
        title=f"One agent run: prompt -> add(1, 2) -> final text (median of {settings.rounds} rounds)",
        unit="ms",
        per="run",
        name="agent",
        settings=settings,
    )
    return rows


def run(
    toolrun: Mapping[str, Callable[[], Any]] | None = None, argv: Sequence[str] | None = None
) -> list[Any]:
    """Command-line entry point: parse flags, run, print and write the table."""
    settings = _harness.parse_args(
        argv, description="One agent run with a scripted model", rounds=31, target_ms=50.0
    )
    return asyncio.run(main(settings, toolrun))


if __name__ == "__main__":
    run(argv=sys.argv[1:])
