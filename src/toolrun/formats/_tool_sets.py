"""Large tool sets the provider's way: deferred loading, tool search, namespaces, per-request subsets.

Providers now load tools on demand, so a request can carry hundreds of tools without paying for every
schema on every turn. What each API takes (checked by `check_request`, rules in `_check_<provider>`):

- defer a tool: `"defer_loading": true` on the function (OpenAI Responses) or the tool (Anthropic);
- the search that loads them: the hosted `{"type": "tool_search"}` (OpenAI Responses), the server tools
  `tool_search_tool_bm25_20251119` / `tool_search_tool_regex_20251119` (Anthropic);
- grouping: `{"type": "namespace", "name", "description", "tools": [...]}` (OpenAI Responses);
- a subset per request without changing `tools`: `tool_choice` `allowed_tools` (OpenAI Chat and Responses),
  `tool_config.function_calling_config.allowed_function_names` (Gemini); Anthropic has none;
- calls from generated code: `allowed_callers` naming a code execution tool (Anthropic).

`export_tool_set` decorates the plain definitions a format made; `tool_choice` builds the request fields
that pick a subset. An option a format cannot carry is refused with a `ValueError` naming the formats that
can (no silent drop: a deferred tool set sent to an API without tool search would cost every schema).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Literal

from toolrun.tools import Tool

__all__ = ["ANTHROPIC_SEARCH_TOOLS", "CODE_EXECUTION_TOOLS", "DeferLoading", "export_tool_set", "tool_choice"]

DeferLoading = bool | Collection[str]
"""`True`: defer every tool; a collection of registered names: defer those; `False`: load all."""

ANTHROPIC_SEARCH_TOOLS: Mapping[str, dict[str, str]] = {
    "bm25": {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"},
    "regex": {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"},
}
"""Anthropic's server-side tool search tools, by variant (natural-language BM25 or Python regex)."""

CODE_EXECUTION_TOOLS = frozenset(
    {"code_execution_20250825", "code_execution_20260120", "code_execution_20260521"}
)
"""Anthropic code execution tool versions that may call client tools (`allowed_callers`)."""

_SUPPORT = {
    "defer_loading": ("openai-responses", "anthropic"),
    "tool_search": ("openai-responses", "anthropic"),
    "namespaces": ("openai-responses",),
    "allowed_callers": ("anthropic",),
    "eager_input_streaming": ("anthropic",),
}


def _refuse(option: str, format: str) -> None:
    if format not in _SUPPORT[option]:
        formats = " and ".join(repr(f) for f in _SUPPORT[option])
        raise ValueError(f"{option} is not part of the {format!r} format; only {formats} take it.")


def _deferred(defer_loading: DeferLoading, tools: Sequence[Tool]) -> set[str]:
    """Registered names to defer (unknown names are refused: a typo would load a tool by mistake)."""
    if defer_loading is True:
        return {tool.name for tool in tools}
    if defer_loading is False:
        return set()
    if isinstance(defer_loading, str):
        raise TypeError("defer_loading takes True, False or a collection of tool names, not one string.")
    names = set(defer_loading)
    unknown = names - {tool.name for tool in tools}
    if unknown:
        raise ValueError(f"defer_loading names tools that are not in this set: {sorted(unknown)}.")
    return names


def export_tool_set(
    format: str,
    tools: Sequence[Tool],
    definitions: Sequence[dict[str, Any]],
    *,
    defer_loading: DeferLoading = False,
    tool_search: str | None = None,
    namespaces: Mapping[str, str] | None = None,
    allowed_callers: Sequence[str] | None = None,
    eager_input_streaming: bool | None = None,
) -> list[dict[str, Any]]:
    """The request's `tools` list: `definitions` (one per tool, in order) with the large-set options.

    Args:
        format: The wire format the definitions are in.
        tools: The tools, in the order of `definitions`.
        definitions: What `format.definition` made for each tool (not changed: copies are decorated).
        defer_loading: Tools the provider loads only when its tool search finds them.
        tool_search: The search tool to add: `"hosted"` (OpenAI Responses; the default there when any
            tool is deferred), `"bm25"` or `"regex"` (Anthropic; `"bm25"` by default when deferring), or
            `"none"` to add none (you bring your own client-side search).
        namespaces: OpenAI Responses: namespace name → description; a tool whose tags include a
            namespace's name is listed inside it (its first such tag), the rest stay top level.
        allowed_callers: Anthropic: who may call the tools, e.g. `["direct", "code_execution_20250825"]`
            for programmatic tool calling (toolrun's gates apply to those calls as to any other).
        eager_input_streaming: Anthropic: stream each tool's input as it is generated.
    """
    options = {
        "defer_loading": defer_loading is not False,
        "tool_search": tool_search is not None,
        "namespaces": bool(namespaces),
        "allowed_callers": allowed_callers is not None,
        "eager_input_streaming": eager_input_streaming is not None,
    }
    for option, given in options.items():
        if given:
            _refuse(option, format)
    deferred = _deferred(defer_loading, tools)
    out = [dict(definition) for definition in definitions]
    if format == "anthropic":
        for tool, definition in zip(tools, out, strict=True):
            if tool.name in deferred:
                definition["defer_loading"] = True
            if allowed_callers is not None:
                definition["allowed_callers"] = list(allowed_callers)
            if eager_input_streaming is not None:
                definition["eager_input_streaming"] = eager_input_streaming
        variant = tool_search or ("bm25" if deferred else "none")
        if variant != "none":
            if variant not in ANTHROPIC_SEARCH_TOOLS:
                raise ValueError(
                    f"tool_search for 'anthropic' is 'bm25', 'regex' or 'none', not {variant!r}."
                )
            out.append(dict(ANTHROPIC_SEARCH_TOOLS[variant]))
        return out
    if format == "openai-responses":
        for tool, definition in zip(tools, out, strict=True):
            if tool.name in deferred:
                definition["defer_loading"] = True
        if namespaces:
            out = _namespaced(tools, out, namespaces)
        variant = tool_search or ("hosted" if deferred else "none")
        if variant == "hosted":
            out.append({"type": "tool_search"})
        elif variant != "none":
            raise ValueError(f"tool_search for 'openai-responses' is 'hosted' or 'none', not {variant!r}.")
        return out
    return out


def _namespaced(
    tools: Sequence[Tool], definitions: list[dict[str, Any]], namespaces: Mapping[str, str]
) -> list[dict[str, Any]]:
    for name, description in namespaces.items():
        if not isinstance(description, str) or not description.strip():
            raise ValueError(
                f"namespace {name!r} needs a description: the model sees only it until it searches."
            )
    groups: dict[str, list[dict[str, Any]]] = {name: [] for name in namespaces}
    top: list[dict[str, Any]] = []
    for tool, definition in zip(tools, definitions, strict=True):
        home = next((tag for tag in sorted(tool.options.tags) if tag in groups), None)
        (groups[home] if home is not None else top).append(definition)
    for name, members in groups.items():
        if members:
            top.append({"type": "namespace", "name": name, "description": namespaces[name], "tools": members})
    return top


def tool_choice(
    format: str,
    wire_names: Sequence[str],
    *,
    required: bool = False,
    parallel: bool | None = None,
) -> dict[str, Any]:
    """Request fields that let the model call only `wire_names` this turn, keeping the full `tools` list
    (and so the provider's prompt cache) unchanged.

    Args:
        format: The wire format.
        wire_names: The names (as sent to the provider) the model may call.
        required: The model must call one of them (else it may also answer in text).
        parallel: Whether the model may call several tools in one turn (`None`: the API's default).

    Returns:
        The fields to merge into the request body: `tool_choice` (+ `parallel_tool_calls`) for OpenAI,
        `tool_config` for Gemini. Anthropic has no allowed-subset choice: the subset is sent as the
        `tools` list instead, so the returned `tool_choice` only carries `required` and `parallel`.
    """
    names = list(dict.fromkeys(wire_names))
    mode: Literal["auto", "required"] = "required" if required else "auto"
    if format == "openai-responses":
        out: dict[str, Any] = {
            "tool_choice": {
                "type": "allowed_tools",
                "mode": mode,
                "tools": [{"type": "function", "name": n} for n in names],
            }
        }
    elif format == "openai":
        tools = [{"type": "function", "function": {"name": n}} for n in names]
        out = {"tool_choice": {"type": "allowed_tools", "allowed_tools": {"mode": mode, "tools": tools}}}
    elif format == "gemini":
        # `allowed_function_names` is refused in AUTO mode; VALIDATED lets the model answer in text too.
        config: dict[str, Any] = {"mode": "ANY" if required else "VALIDATED", "allowed_function_names": names}
        out = {"tool_config": {"function_calling_config": config}}
        if parallel is not None:
            raise ValueError("Gemini has no switch for parallel function calls.")
        return out
    elif format == "anthropic":
        choice: dict[str, Any] = {"type": "any" if required else "auto"}
        if parallel is False:
            choice["disable_parallel_tool_use"] = True
        return {"tool_choice": choice}
    else:
        raise ValueError(f"{format!r} has no per-request tool choice.")
    if parallel is not None:
        out["parallel_tool_calls"] = parallel
    return out
