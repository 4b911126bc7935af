"""Defining tools: `@tool`, `Tool.from_function`, `Tool.from_schema`, `Tool` subclasses, and their options."""

from toolrun.tools._context import ProgressThrottle, ToolBudget, ToolCall, ToolContext
from toolrun.tools._decorator import tool
from toolrun.tools._lenient import SchemaChange
from toolrun.tools._options import (
    OutputBudget,
    RateLimit,
    ToolExample,
    ToolOptions,
    ToolOptionsKwargs,
    parse_rate_limit,
)
from toolrun.tools._tool import NAME_PATTERN, PROVIDER_NAME_PATTERN, Tool

__all__ = [
    "NAME_PATTERN",
    "PROVIDER_NAME_PATTERN",
    "OutputBudget",
    "ProgressThrottle",
    "RateLimit",
    "SchemaChange",
    "Tool",
    "ToolBudget",
    "ToolCall",
    "ToolContext",
    "ToolExample",
    "ToolOptions",
    "ToolOptionsKwargs",
    "parse_rate_limit",
    "tool",
]
