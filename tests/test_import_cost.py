"""`import toolrun` loads only what defining tools needs; the rest is imported by the path that uses it.

Each check runs a fresh interpreter (the test process has long since imported everything).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# Heavy or rarely needed modules a bare `import toolrun` must not load (bench/import_time.py measures it).
NOT_LOADED = [
    "jsonschema",  # only raw-schema tools validate with it
    "numpy",  # only tool search's bm25s engine
    "bm25s",
    "Stemmer",
    "multiprocessing",  # only isolation="process"
    "concurrent.futures",  # only the executor's thread pool
    "email.utils",  # only a provider's Retry-After header
    "toolrun.agent",
    "toolrun.models",
    "toolrun.planning",
    "toolrun.runtime",
    "sqlalchemy",
    "redis",
    "httpx",
    "openai",
    "anthropic",
    "mcp",
    "fastapi",
    "langchain_core",
    "langgraph",
]


def _loaded(code: str, names: list[str]) -> list[str]:
    script = f"{code}\nimport sys, json\nprint(json.dumps([m for m in {names!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    result: list[str] = json.loads(out.stdout)
    return result


def test_bare_import_loads_none_of_the_heavy_modules() -> None:
    assert _loaded("import toolrun", NOT_LOADED) == []


def test_defining_and_registering_a_tool_does_not_load_the_runtime_or_jsonschema() -> None:
    code = (
        "import toolrun\n"
        "@toolrun.tool\n"
        "def add(a: int, b: int) -> int:\n"
        "    '''Add two numbers.'''\n"
        "    return a + b\n"
        "reg = toolrun.ToolRegistry([add])\n"
        "assert reg.get('add').validate({'a': 1, 'b': 2}) == {'a': 1, 'b': 2}\n"
    )
    assert _loaded(code, ["jsonschema", "toolrun.agent", "toolrun.runtime"]) == []


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("from toolrun import ToolExecutor", ["toolrun.runtime"]),
        ("from toolrun import Agent", ["toolrun.agent", "toolrun.models"]),
        (
            "import toolrun; toolrun.Tool.from_schema('t', 'A tool.', {'type': 'object'}, lambda: 1)",
            ["jsonschema"],
        ),
    ],
)
def test_the_lazy_names_load_their_module_on_first_use(code: str, expected: list[str]) -> None:
    assert _loaded(code, expected) == expected


def test_lazy_names_resolve_to_the_defining_module_and_unknown_names_raise() -> None:
    code = (
        "import toolrun, toolrun.agent, toolrun.runtime\n"
        "assert toolrun.Agent is toolrun.agent.Agent\n"
        "assert toolrun.ToolExecutor is toolrun.runtime.ToolExecutor\n"
        "assert 'Agent' in dir(toolrun) and 'ToolExecutor' in dir(toolrun)\n"
        "try:\n"
        "    toolrun.NoSuchName\n"
        "except AttributeError as exc:\n"
        "    assert 'NoSuchName' in str(exc)\n"
        "else:\n"
        "    raise SystemExit('no AttributeError')\n"
    )
    assert _loaded(code, []) == []
