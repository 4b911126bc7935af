"""Wire formats: tool definitions, tool calls and tool results in each provider's own JSON.

```python
from toolrun.formats import get_format, definitions, check

fmt = get_format("anthropic")       # or "openai", "openai-responses", "gemini", "mcp"
tools = definitions(registry, "openai", strict=True)
calls = fmt.parse_tool_calls(response, names=registry)     # list[ToolCall]
message = fmt.tool_result_message(result)                  # dict to append to the conversation
problems = check(tools[0], "openai", strict=True)          # list[Violation]; empty when it conforms
```

Every definition these formats produce passes `check` for its provider with no error; a schema that cannot
be expressed at all raises `toolrun.exceptions.SchemaError`. The table of formats, what each export
changes, and the checker warnings an export can still draw: docs/formats.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from toolrun.exceptions import UnknownFormatError
from toolrun.formats._base import ToolCallParseError, ToolNames, WireFormat
from toolrun.formats._check import Violation, check, check_request, check_result
from toolrun.formats.anthropic import AnthropicFormat
from toolrun.formats.gemini import GeminiFormat
from toolrun.formats.mcp import MCPFormat
from toolrun.formats.openai import OpenAIChatFormat, OpenAIResponsesFormat
from toolrun.tools import Tool

__all__ = [
    "FORMATS",
    "AnthropicFormat",
    "GeminiFormat",
    "MCPFormat",
    "OpenAIChatFormat",
    "OpenAIResponsesFormat",
    "ToolCallParseError",
    "Violation",
    "WireFormat",
    "check",
    "check_request",
    "check_result",
    "definitions",
    "get_format",
]

FORMATS: Mapping[str, WireFormat] = MappingProxyType(
    {
        fmt.name: fmt
        for fmt in (
            OpenAIChatFormat(),
            OpenAIResponsesFormat(),
            AnthropicFormat(),
            GeminiFormat(),
            MCPFormat(),
        )
    }
)
"""Every wire format by name."""


def get_format(name: str) -> WireFormat:
    """The wire format called `name`.

    Raises:
        UnknownFormatError: no format has that name; the message lists the known ones.
    """
    try:
        return FORMATS[name]
    except (KeyError, TypeError):
        known = ", ".join(repr(n) for n in FORMATS)
        raise UnknownFormatError(f"Unknown wire format {name!r}; known formats: {known}.") from None


def definitions(
    tools: Iterable[Tool] | ToolNames, format: str, *, strict: bool = False
) -> list[dict[str, Any]]:
    """Tool definitions for one provider.

    Args:
        tools: Tools, or a registry (or view) — then each tool is shown under its provider-safe alias.
        format: A format name (see `FORMATS`).
        strict: The provider's strict mode, where it has one.

    Raises:
        UnknownFormatError: `format` is not known.
        SchemaError: a tool cannot be expressed for that provider (a name it rejects when `tools` is not
            a registry, or a schema beyond a hard strict-mode limit).
    """
    fmt = get_format(format)
    wire_name = getattr(tools, "wire_name", None)
    return [
        fmt.definition(tool, strict=strict, name=wire_name(tool.name) if callable(wire_name) else None)
        for tool in tools
    ]
