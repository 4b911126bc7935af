"""The public surface of `toolrun` is a contract: pin it, and keep `import toolrun` light."""

from __future__ import annotations

import subprocess
import sys

import toolrun

EXPECTED = {
    "Agent",
    "ArgumentsError",
    "ErrorCode",
    "SchemaError",
    "Tool",
    "ToolAlreadyExistsError",
    "ToolCall",
    "ToolContext",
    "ToolDefinitionError",
    "ToolError",
    "ToolExecutor",
    "ToolNotFoundError",
    "ToolRegistry",
    "ToolResult",
    "ToolrunError",
    "__version__",
    "tool",
}

ARCHITECTURE_NAMES = {
    "tool",
    "Tool",
    "ToolRegistry",
    "ToolCall",
    "ToolContext",
    "ToolResult",
    "ToolError",
    "ErrorCode",
    "ToolExecutor",
    "Agent",
    "ToolrunError",
    "ToolAlreadyExistsError",
}


def test_all_is_exactly_the_public_surface() -> None:
    assert set(toolrun.__all__) == EXPECTED
    for name in toolrun.__all__:
        assert getattr(toolrun, name) is not None


def test_architecture_contract_names_are_importable() -> None:
    assert set(toolrun.__all__) >= ARCHITECTURE_NAMES


def test_every_public_name_has_a_docstring() -> None:
    for name in toolrun.__all__:
        obj = getattr(toolrun, name)
        if callable(obj):
            assert obj.__doc__, name


def test_import_is_light() -> None:
    heavy = ["openai", "anthropic", "mcp", "fastapi", "starlette", "httpx", "sqlalchemy", "redis", "uvicorn"]
    heavy += ["toolrun.server", "toolrun.mcp", "toolrun.integrations", "toolrun.apps"]
    code = f"import sys, toolrun, json\nprint(json.dumps([m for m in {heavy!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_content_names_of_the_contract() -> None:
    from toolrun import content

    names = {"Text", "Image", "Audio", "File", "ResourceLink", "ToolOutput"}
    assert names <= set(content.__all__)
    for name in content.__all__:
        assert getattr(content, name) is not None
        obj = getattr(content, name)
        if isinstance(obj, type):
            assert obj.__doc__, name


PUBLIC_MODULES = (
    "toolrun",
    "toolrun.tools",
    "toolrun.registry",
    "toolrun.formats",
    "toolrun.runtime",
    "toolrun.models",
    "toolrun.agent",
    "toolrun.approvals",
    "toolrun.planning",
    "toolrun.prompts",
    "toolrun.store",
    "toolrun.mcp",
    "toolrun.search",
    "toolrun.content",
    "toolrun.results",
    "toolrun.exceptions",
)

# Internals that used to be exported: none of them is in a public module's `__all__`.
PRIVATE = {
    "toolrun.runtime": {
        "Artifact",
        "ArtifactStore",
        "InMemoryArtifactStore",
        "CacheStage",
        "CallNext",
        "ChainStep",
        "ConfirmationStage",
        "EventBus",
        "Invocation",
        "Middleware",
        "RateLimitStage",
        "RunStage",
        "canonical_json",
        "read_result_tool",
        "summarize_call",
    },
    "toolrun.models": {"ResponseLike", "repair_history", "clean_text", "message_from_dict", "TextDelta"},
    "toolrun.agent": {
        "CheckedCalls",
        "check_calls",
        "Plan",
        "PlannedCall",
        "SEARCH_TOOL_NAME",
        "loaded_tools",
        "PendingConfirmation",
    },
    "toolrun.tools": {
        "NAME_PATTERN",
        "PROVIDER_NAME_PATTERN",
        "OutputBudget",
        "ProgressThrottle",
        "parse_rate_limit",
    },
    "toolrun.planning": {
        "MAX_TEXT",
        "PLANNING_TOOL_NAMES",
        "planning_add_step",
        "planning_read_plan",
        "planning_setup_plan",
        "planning_update_step",
    },
    "toolrun.mcp": {"PRINCIPAL_SCOPE_KEY", "TASKS_EXTENSION", "TasksExtension", "TaskStore"},
}


def _exports() -> dict[str, dict[str, object]]:
    import importlib

    out: dict[str, dict[str, object]] = {}
    for name in PUBLIC_MODULES:
        module = importlib.import_module(name)
        out[name] = {n: getattr(module, n) for n in module.__all__}
    return out


def test_no_name_means_two_things_across_public_modules() -> None:
    seen: dict[str, tuple[str, object]] = {}
    clashes = []
    for module, names in _exports().items():
        for name, obj in names.items():
            if name in seen and seen[name][1] is not obj:
                clashes.append(f"{name}: {seen[name][0]} and {module}")
            seen.setdefault(name, (module, obj))
    assert clashes == []


def test_internals_are_not_exported() -> None:
    exports = _exports()
    for module, names in PRIVATE.items():
        assert names.isdisjoint(exports[module]), (module, names & set(exports[module]))


# Aliases that only toolrun's own modules imported: gone, the importers use the private home module.
REMOVED = {
    "toolrun.runtime": {"Artifact"},
    "toolrun.models": {"repair_history", "clean_text", "message_from_dict", "TextDelta"},
    "toolrun.tools": {"NAME_PATTERN", "PROVIDER_NAME_PATTERN", "OutputBudget", "ProgressThrottle"},
    "toolrun.agent": {"PendingConfirmation"},
    "toolrun.agent._planner": {"Plan"},
    "toolrun.agent._run": {"check_decisions"},
}


def test_internal_aliases_are_gone() -> None:
    import importlib

    for module, names in REMOVED.items():
        present = {name for name in names if hasattr(importlib.import_module(module), name)}
        assert present == set(), (module, present)


def test_every_exported_name_resolves() -> None:
    for module, names in _exports().items():
        for name, obj in names.items():
            assert obj is not None or name.isupper(), f"{module}.{name}"


def test_the_reference_pages_list_exactly_the_public_names() -> None:
    import importlib
    import re
    from pathlib import Path

    pages = Path(__file__).resolve().parents[1] / "docs" / "reference"
    targets = set()
    for page in pages.glob("*.md"):
        targets |= set(re.findall(r"^::: (toolrun(?:\.\w+)*)$", page.read_text(), re.M))
    homes = (
        "toolrun.tools",
        "toolrun.runtime",
        "toolrun.models",
        "toolrun.agent",
        "toolrun.approvals",
        "toolrun.planning",
    )
    for name in homes:
        module = importlib.import_module(name)
        listed = set()
        for target in targets:  # a name is listed once, under its home: the same object elsewhere counts
            owner, _, attr = target.rpartition(".")
            found = getattr(importlib.import_module(owner), attr, None)
            if owner == name or (found is not None and getattr(module, attr, None) is found):
                listed.add(attr)
        assert listed == set(module.__all__), (name, listed ^ set(module.__all__))
    for name in ("toolrun.prompts", "toolrun.mcp"):
        listed = {t.rpartition(".")[2] for t in targets if t.rpartition(".")[0] == name}
        assert listed == set(importlib.import_module(name).__all__), name
