"""Request-level rules for large tool sets: deferred loading, tool search, namespaces, callers, subsets.

`check_request` (in `_check`) hands each request here first: entries that are not plain function tools
(OpenAI's hosted `tool_search` and `namespace` groups; Anthropic's tool search and code execution server
tools) are checked here and taken out, the functions inside a namespace are handed back to be checked as
any other function (with their own paths), and the rules that need the whole request run at the end.

Rule IDs (all `"error"` unless noted: the API rejects the request). A rule is an error only where the API
refuses the request; where recorded traffic shows the API accepting it, it is a warning at most.

- `OAI-DEFER-SEARCH`: a deferred function, but no `tool_search` tool (hosted, or `"execution": "client"`) in
  the request. The Responses API answers `Invalid Value: 'tools.defer_loading'. Deferred tools require
  tools.tool_search.` (quoted in pydantic/pydantic-ai `pydantic_ai_slim/pydantic_ai/models/openai.py`), and
  every recorded request it accepted with deferred functions carries one (pydantic/pydantic-ai
  `tests/models/cassettes/test_openai_tool_availability_delta/test_openai_live_delta_preserves_the_warmed_
  cache_prefix.yaml`, hosted; `test_openai_responses/test_openai_deferred_capability_keeps_native_tool_
  search.yaml` at 589b5d731, client-executed; vercel/ai `packages/openai/src/responses/__fixtures__/
  openai-*tool-search.*.json`, whose responses echo the request's tools).
- `OAI-DEFER-SEARCH-DEFERRED`: the `tool_search` tool itself is deferred.
- `OAI-NS-DESC`, `OAI-NS-EMPTY`: a namespace without a description, or without tools.
- `OAI-NS-DEFER` (warning): `defer_loading` on the namespace object (it applies to the functions inside).
- `OAI-ALLOWED-1`: `tool_choice.allowed_tools` names a function the request does not define.
- `ANT-DEFER-SEARCH` (warning): a deferred tool, but no tool search tool. Anthropic accepts it: the
  application loads deferred tools itself by returning `tool_reference` blocks in a tool result (a search
  of its own, a capability loader). Recorded evidence, 21 requests answered 200 (pydantic/pydantic-ai,
  `tests/models/cassettes/test_anthropic/`): `test_anthropic_deferred_capability_tool_callable_without_
  tool_search.yaml`, `test_anthropic_deferred_capability_without_tool_search_across_models[*].yaml` (five
  models), `test_anthropic_explicit_tool_search_keeps_search_surface.yaml`. Without such a loader the
  deferred tools are never seen by the model, hence the warning.
- `ANT-DEFER-SEARCH-DEFERRED`: the tool search tool itself is deferred.
- `ANT-DEFER-ALL`: every tool is deferred (Anthropic rejects the request).
- `ANT-CALLERS-1`: `allowed_callers` names a code execution tool the request does not include;
  `ANT-CALLERS-2`: a caller Anthropic does not know.
- `ANT-SERVER-1` (warning): a server tool type this checker does not know (not checked further).
- `GEM-ALLOWED-1`: `allowed_function_names` names an undeclared function; `GEM-ALLOWED-2`: they are set
  with a mode other than `ANY` or `VALIDATED`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolrun.formats._tool_sets import ANTHROPIC_SEARCH_TOOLS, CODE_EXECUTION_TOOLS

__all__ = ["Split", "split_request"]

_ANT_SEARCH_TYPES = frozenset(
    {t["type"] for t in ANTHROPIC_SEARCH_TOOLS.values()} | {"tool_search_tool_bm25", "tool_search_tool_regex"}
)
_ANT_CALLERS = CODE_EXECUTION_TOOLS | {"direct"}


@dataclass
class Split:
    """A request's tool list, split for checking."""

    functions: list[tuple[str, Any]] = field(default_factory=list)
    """(path prefix, definition) of every function tool, namespaced ones included."""
    problems: list[tuple[str, str, str, str]] = field(default_factory=list)
    """(rule, path, message, severity) found at the request level."""

    def error(self, rule: str, path: str, message: str) -> None:
        self.problems.append((rule, path, message, "error"))

    def warn(self, rule: str, path: str, message: str) -> None:
        self.problems.append((rule, path, message, "warning"))


def split_request(
    provider: str, definitions: Sequence[Any], tool_choice: Mapping[str, Any] | None = None
) -> Split:
    """The function tools of a request to check one by one, and the request-level problems."""
    split = Split()
    if provider == "openai-responses":
        _openai_responses(definitions, split)
    elif provider == "anthropic":
        _anthropic(definitions, split)
    else:
        split.functions = [(f"/{i}", d) for i, d in enumerate(definitions)]
    if tool_choice is not None:
        _choice(provider, split, tool_choice)
    return split


def _deferred(definition: Any) -> bool:
    return isinstance(definition, Mapping) and definition.get("defer_loading") is True


def _openai_responses(definitions: Sequence[Any], split: Split) -> None:
    searches: list[tuple[int, Mapping[str, Any]]] = []
    deferred: list[str] = []
    for i, definition in enumerate(definitions):
        kind = definition.get("type") if isinstance(definition, Mapping) else None
        if kind == "tool_search":
            searches.append((i, definition))
        elif kind == "namespace" and isinstance(definition, Mapping):
            if not isinstance(definition.get("description"), str) or not definition["description"].strip():
                split.error("OAI-NS-DESC", f"/{i}/description", "a namespace needs a description.")
            if "defer_loading" in definition:
                split.warn(
                    "OAI-NS-DEFER",
                    f"/{i}/defer_loading",
                    "defer_loading applies to the functions inside a namespace, not to the namespace.",
                )
            members = definition.get("tools")
            if not isinstance(members, list) or not members:
                split.error("OAI-NS-EMPTY", f"/{i}/tools", "a namespace needs a non-empty 'tools' list.")
                continue
            for j, member in enumerate(members):
                split.functions.append((f"/{i}/tools/{j}", member))
                if _deferred(member):
                    deferred.append(f"/{i}/tools/{j}")
        else:
            split.functions.append((f"/{i}", definition))
            if _deferred(definition):
                deferred.append(f"/{i}")
    for i, search in searches:
        if _deferred(search):
            split.error(
                "OAI-DEFER-SEARCH-DEFERRED", f"/{i}/defer_loading", "the tool_search tool cannot be deferred."
            )
    if deferred and not searches:
        split.error(
            "OAI-DEFER-SEARCH",
            f"{deferred[0]}/defer_loading",
            f"{len(deferred)} deferred function(s) but no tool_search tool: they could never be loaded. "
            'Add {"type": "tool_search"}.',
        )


def _anthropic(definitions: Sequence[Any], split: Split) -> None:
    searches: list[int] = []
    executions: set[str] = set()
    deferred: list[str] = []
    callers: list[tuple[str, Any]] = []
    hidden = 0  # deferred server tools (an error of their own), counted for ANT-DEFER-ALL
    for i, definition in enumerate(definitions):
        if not isinstance(definition, Mapping):
            split.functions.append((f"/{i}", definition))
            continue
        kind = definition.get("type", "custom")
        if not isinstance(kind, str) and kind is not None:
            split.functions.append((f"/{i}", definition))  # an odd "type": the per-tool check reports it
            continue
        if kind in _ANT_SEARCH_TYPES:
            searches.append(i)
            if _deferred(definition):
                hidden += 1
                split.error(
                    "ANT-DEFER-SEARCH-DEFERRED",
                    f"/{i}/defer_loading",
                    "the tool search tool cannot be deferred.",
                )
            continue
        if kind in CODE_EXECUTION_TOOLS:
            executions.add(str(kind))
            continue
        if kind not in ("custom", None):
            split.warn("ANT-SERVER-1", f"/{i}/type", f"server tool type {kind!r} is not checked here.")
            continue
        split.functions.append((f"/{i}", definition))
        if _deferred(definition):
            deferred.append(f"/{i}")
        if "allowed_callers" in definition:
            callers.append((f"/{i}/allowed_callers", definition["allowed_callers"]))
    if deferred and not searches:
        split.warn(
            "ANT-DEFER-SEARCH",
            f"{deferred[0]}/defer_loading",
            f"{len(deferred)} deferred tool(s) but no tool search tool (tool_search_tool_bm25_20251119 or "
            "tool_search_tool_regex_20251119): the model sees them only once a tool result of yours "
            "returns their `tool_reference` blocks.",
        )
    loaded = len(definitions) - len(deferred) - hidden
    if definitions and loaded == 0:
        split.error("ANT-DEFER-ALL", "", "every tool is deferred; at least one must be loaded.")
    for path, value in callers:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            split.error("ANT-CALLERS-2", path, "allowed_callers must be a list of strings.")
            continue
        for k, caller in enumerate(value):
            if caller not in _ANT_CALLERS:
                split.error("ANT-CALLERS-2", f"{path}/{k}", f"unknown caller {caller!r}.")
            elif caller != "direct" and caller not in executions:
                split.error(
                    "ANT-CALLERS-1",
                    f"{path}/{k}",
                    f"{caller!r} may call this tool, but the request has no {caller} tool.",
                )


def _names(provider: str, split: Split) -> set[str]:
    names: set[str] = set()
    for _, definition in split.functions:
        if not isinstance(definition, Mapping):
            continue
        holder = definition.get("function") if provider == "openai" else definition
        if isinstance(holder, Mapping) and isinstance(holder.get("name"), str):
            names.add(holder["name"])
    return names


def _choice(provider: str, split: Split, choice: Mapping[str, Any]) -> None:
    names = _names(provider, split)
    if provider == "gemini":
        config = choice.get("tool_config", choice).get("function_calling_config", {})
        allowed = config.get("allowed_function_names") if isinstance(config, Mapping) else None
        if not allowed:
            return
        if config.get("mode") not in ("ANY", "VALIDATED"):
            split.error(
                "GEM-ALLOWED-2",
                "/tool_config/function_calling_config/mode",
                "allowed_function_names needs mode ANY or VALIDATED.",
            )
        for k, name in enumerate(allowed):
            if name not in names:
                split.error(
                    "GEM-ALLOWED-1",
                    f"/tool_config/function_calling_config/allowed_function_names/{k}",
                    f"{name!r} is not a declared function.",
                )
        return
    picked = choice.get("tool_choice", choice)
    if not isinstance(picked, Mapping) or picked.get("type") != "allowed_tools":
        return
    tools = (
        picked.get("tools")
        if provider == "openai-responses"
        else picked.get("allowed_tools", {}).get("tools")
    )
    for k, entry in enumerate(tools or []):
        name = entry.get("name") if provider == "openai-responses" else entry.get("function", {}).get("name")
        if entry.get("type") == "function" and name not in names:
            split.error(
                "OAI-ALLOWED-1", f"/tool_choice/tools/{k}", f"{name!r} is not a function of this request."
            )
