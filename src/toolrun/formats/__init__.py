"""Wire formats: tool definitions, tool calls and tool results in each provider's own JSON.

```python
from toolrun.formats import get_format, definitions, check

fmt = get_format("anthropic")       # or "openai", "openai-responses", "gemini", "mcp"
tools = definitions(registry, "openai", strict=True)
calls = fmt.parse_tool_calls(response, names=registry)     # list[ToolCall]
message = fmt.tool_result_message(result)                  # dict to append to the conversation
problems = check(tools[0], "openai", strict=True)          # list[Violation]; empty when it conforms
after = fmt.content_followups(results)                     # Chat Completions / Gemini: images after results
check_result(message, "anthropic")                         # a result message against the documented shape
```

| format | definition | calls read from | result written as |
| --- | --- | --- | --- |
| `openai` | `{"type": "function", "function": {...}}` | `choices[0].message.tool_calls` | `role: "tool"` |
| `openai-responses` | flat `{"type": "function", "name", ...}` | `output[*]` `function_call` | item |
| `anthropic` | `{"name", "description", "input_schema"}` | `content[*]` `tool_use` | `tool_result` block |
| `gemini` | one FunctionDeclaration | `candidates[0].content.parts` | `functionResponse` part |
| `mcp` | MCP `Tool` | `tools/call` params | `CallToolResult` |

(`openai` and `openai-responses` live in `toolrun.formats.openai`; the others in modules of their name.)

`strict=True` selects the provider's strict mode (OpenAI Structured Outputs, Anthropic strict tool use);
Gemini and MCP have none and give their plain definition. Every definition these formats produce passes
`check` for its provider with no error. Each module's docstring lists what its export changes; the only
checker *warnings* an export can still draw are:

- `GEM-PNAME-1`: a parameter name Gemini dislikes (e.g. `first-name`); parameters are never renamed, since
  the tool's validator knows them by their names;
- `MCP-NAME-1`: a tool name with `:` (allowed by toolrun, a SHOULD-not in the MCP spec);
- `OAI-L-ENUM`: 501 to 1,000 enum values in one strict schema (an older, undocumented OpenAI limit);
- `SCHEMA-REF-UNRESOLVED`: a plain export of a schema whose `$ref` points nowhere (copied as it is; the
  strict and Gemini exports replace it).
- `OAI-S-FREEFORM` / `ANT-S-FREEFORM`: a strict export of a tool with a free-form object (`dict[str, X]`,
  `list[dict]`, an object open to other keys) is not strict (strict mode could only close the object, and
  the model could then send only `{}`); the warning names each such object.

`check(tool, provider, strict=...)` also takes a `Tool`: it exports it, checks the definition, and reports
what the export had to give up: `SCHEMA-ROOT-UNION` (root `anyOf`/`oneOf`/`allOf` alternatives stated in
the description; every field they describe is a property and the validator still enforces them), the
FREEFORM warnings above, and `OAI-S-ANY` (a value of any type narrowed to scalars in OpenAI strict mode).

A schema that cannot be expressed at all (OpenAI strict-mode size limits, nesting beyond 64 levels, a `$ref`
fan-out beyond 20,000 nodes) raises `toolrun.exceptions.SchemaError` instead of producing a definition the
provider would reject.
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
