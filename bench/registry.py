"""Register 1,000 distinct tools and export them to OpenAI format: toolrun beside plain Pydantic and peers.

Rows for toolrun:

* ``toolrun``: ``ToolRegistry.register(Tool.from_function(f))`` for each function, then
  ``registry.definitions("openai")``. Argument schemas are composed from per-type schemas (cached for the
  process, as in any long-running app) and validator models are built on first use.
* ``toolrun-cold``: the same with the per-type schema cache emptied first, so nothing carries over from
  earlier rounds.
* ``toolrun-eager``: ``toolrun-cold`` plus building every tool's validator model, i.e. the whole cost an
  app pays if the model ends up calling every one of its 1,000 tools.

Run: ``python bench/registry.py [--quick]`` (needs the ``bench`` extra for the peers).
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _floor_registry

from toolrun import Tool, ToolRegistry
from toolrun.tools import _function_schema


def register(functions: list[types.FunctionType]) -> tuple[Any, list[dict[str, Any]]]:
    registry = ToolRegistry()
    for fn in functions:
        registry.register(Tool.from_function(fn))
    return registry, registry.definitions("openai")


def register_cold(functions: list[types.FunctionType]) -> tuple[Any, list[dict[str, Any]]]:
    _function_schema._TYPE_SCHEMAS.clear()
    return register(functions)


def register_eager(functions: list[types.FunctionType]) -> tuple[Any, list[dict[str, Any]]]:
    registry, exported = register_cold(functions)
    for tool in registry:
        tool._make_validator()  # type: ignore[misc]  # build each validator model, as a first call would
    return registry, exported


if __name__ == "__main__":
    _floor_registry.run(
        toolrun={"toolrun": register, "toolrun-cold": register_cold, "toolrun-eager": register_eager}
    )
