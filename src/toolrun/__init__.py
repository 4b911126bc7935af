"""toolrun: define a tool once, export it to any LLM provider, run the calls safely.

`import toolrun` is light: it imports no provider SDK, no web framework and no MCP.
"""

from toolrun.agent import Agent
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
from toolrun.runtime import ToolExecutor
from toolrun.tools import Tool, ToolCall, ToolContext, tool

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
