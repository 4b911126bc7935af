"""toolrun: define a tool once, export it to any LLM provider, run the calls safely.

`import toolrun` is light: it imports no provider SDK, no web framework and no MCP. `Agent` and
`ToolExecutor` (with the model clients, retries, the planner's models and the process pool they bring)
are imported the first time they are used, through the module `__getattr__` below; defining tools and
a registry does not pay for them. `tests/test_public_api.py` pins what a bare `import toolrun` loads.
"""

from typing import TYPE_CHECKING, Any

from toolrun.exceptions import (
    ArgumentsError,
    SchemaError,
    ToolAlreadyExistsError,
    ToolDefinitionError,
    ToolNotFoundError,
    ToolrunError,
)
from toolrun.registry import ToolRegistry
from toolrun.results import ErrorCode, ToolError, ToolResult
from toolrun.tools import Tool, ToolCall, ToolContext, tool

if TYPE_CHECKING:
    from toolrun.agent import Agent
    from toolrun.runtime import ToolExecutor

__version__ = "0.1.0"

__all__ = [
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
]


# Public names imported on first use: name -> module that defines it.
_LAZY = {"Agent": "toolrun.agent", "ToolExecutor": "toolrun.runtime"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'toolrun' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
