"""Defining tools: `@tool`, `Tool.from_function`, `Tool.from_schema`, `Tool` subclasses, and their options."""

from toolrun.tools._context import ToolBudget, ToolCall, ToolContext
from toolrun.tools._decorator import tool
from toolrun.tools._lenient import SchemaChange
from toolrun.tools._options import RateLimit, ToolExample, ToolOptions, ToolOptionsKwargs
from toolrun.tools._tool import Tool

__all__ = [
    "RateLimit",
    "SchemaChange",
    "Tool",
    "ToolBudget",
    "ToolCall",
    "ToolContext",
    "ToolExample",
    "ToolOptions",
    "ToolOptionsKwargs",
    "tool",
]
