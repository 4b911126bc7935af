"""What `Agent` adds on top of its loop: prompts that re-render per request, and the tool-search mode.

**Prompt.** `Agent(model, prompt=prompt)` takes its tools from the prompt and its instructions from
`prompt.render(ctx)` before every model request (native mode), so sections whose text depends on the
session state (the current plan) are always current, whatever history trimming dropped. Any object with
a `tools` list and a `render(context)` that returns something with `instructions` will do
(`toolrun.prompts.Prompt` is one).

**Tool search.** `Agent(model, big_registry, tool_search=True)`: the model first sees only the
`search_tools` meta-tool (and the prompt's tools, if any). Each `search_tools(query)` call ranks the agent's
tools with `ToolSet.search` and loads the matches into the visible set, which is kept in the run's state
(so a paused run resumes with the same tools in view, and a failed call's changes are rolled back).
Loaded tools stay visible for the rest of the run. A call to a tool the model was not shown still runs:
visibility saves tokens, it is not access control (roles and allowlists are).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from toolrun.registry import ToolRegistry, ToolSet
from toolrun.runtime import ToolExecutor
from toolrun.tools import Tool, ToolContext

__all__ = [
    "LOADED_TOOLS_KEY",
    "SEARCH_TOOL_NAME",
    "PromptSource",
    "compose",
    "loaded_tools",
    "make_search_tool",
    "visible_tools",
]

SEARCH_TOOL_NAME = "search_tools"
LOADED_TOOLS_KEY = "toolrun.agent.loaded_tools"
"""Where the names of the tools loaded by `search_tools` are kept in the run's state."""
MAX_SEARCH_K = 20


class RenderedInstructions(Protocol):
    @property
    def instructions(self) -> str: ...


@runtime_checkable
class PromptSource(Protocol):
    """What `Agent(prompt=...)` needs: the tools, and instructions rendered for a context."""

    @property
    def tools(self) -> list[Tool]: ...

    def render(self, context: ToolContext[Any] | None = None) -> RenderedInstructions: ...


def loaded_tools(state: dict[str, Any] | None) -> list[str]:
    """The names `search_tools` has loaded into view so far (in the order they were loaded)."""
    names = (state or {}).get(LOADED_TOOLS_KEY)
    return list(names) if isinstance(names, list) else []


def make_search_tool(pool: ToolSet, *, default_k: int = 5) -> Tool:
    """The `search_tools` meta-tool over `pool`: finds tools and loads them into the run's visible set.

    Register it in the executor's registry when you give an `Agent` your own executor with
    `tool_search=True`.
    """

    async def search_tools(query: str, k: int = default_k, *, ctx: ToolContext[Any]) -> dict[str, Any]:
        """Find tools for a task and make them available. Describe what you need in plain words
        (e.g. "convert currency" or "weather forecast for a city"); the best matches are loaded and can be
        called from your next turn on. Call it again with other words if none fits.

        Args:
            query: What the tool should do.
            k: How many tools to load (1-20).
        """
        k = max(1, min(int(k), MAX_SEARCH_K))
        found = [t for t in pool.search(query, k + 1) if t.name != SEARCH_TOOL_NAME][:k]
        if ctx.state is not None:
            names = loaded_tools(ctx.state)
            names += [t.name for t in found if t.name not in names]
            ctx.state[LOADED_TOOLS_KEY] = names
        return {
            "loaded": [{"name": pool.wire_name(t.name), "description": t.description} for t in found],
            "note": "These tools can be called now." if found else "No tool matched; try other words.",
        }

    return Tool.from_function(search_tools, name=SEARCH_TOOL_NAME, sequential=True)


def visible_tools(tools: ToolSet, pinned: Sequence[str], state: dict[str, Any] | None) -> ToolSet:
    """The tools the model is shown this request in tool-search mode."""
    return tools.filter(allow=[SEARCH_TOOL_NAME, *pinned, *loaded_tools(state)])


def compose(
    tools: ToolSet,
    executor: ToolExecutor | None,
    prompt: PromptSource | None,
    tool_search: bool,
    instructions: str | None,
) -> tuple[ToolSet, list[str], str | None]:
    """The agent's tools, the names always in view (the prompt's), and its initial instructions."""
    pinned: list[str] = []
    if prompt is not None:
        if instructions is not None:
            raise ValueError("Pass instructions or a prompt, not both: the prompt renders the instructions.")
        pinned = [t.name for t in prompt.tools]
        instructions = prompt.render(None).instructions
    if executor is None and (prompt is not None or tool_search):
        # A new registry: the caller's is never changed. Duplicate names fail here, as anywhere.
        combined = ToolRegistry([*tools.tools(), *(prompt.tools if prompt is not None else ())])
        if tool_search:
            combined.register(make_search_tool(combined))
        return combined, pinned, instructions
    if executor is not None:
        needed = [*pinned, *([SEARCH_TOOL_NAME] if tool_search else [])]
        missing = [n for n in needed if n not in tools or n not in executor.registry]
        if missing:
            raise ValueError(
                f"With your own executor, its registry and the agent's tools must hold {missing} (the "
                "prompt's tools; for tool_search, toolrun.agent.make_search_tool(tools)), "
                "or pass no executor."
            )
    return tools, pinned, instructions
