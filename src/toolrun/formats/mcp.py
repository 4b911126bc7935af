"""Model Context Protocol wire format (`"mcp"`): `tools/list` entries, `tools/call`, `CallToolResult`.

MCP takes plain JSON Schema, so the export keeps the tool's parameters as they are; an output schema that
is not an object is wrapped, and the tool's options become `annotations`. What it writes: docs/formats.md,
"MCP".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolrun.content import Audio, File, Image, ResourceLink, Text
from toolrun.formats._base import BaseFormat, Reader, ToolNames, original_name, stable_id
from toolrun.formats._content import has_content, is_text_file, parts, text_of
from toolrun.formats._schema import SchemaTransformer
from toolrun.results import ToolResult
from toolrun.tools import Tool, ToolCall
from toolrun.tools._tool import NAME_PATTERN

__all__ = ["MCPFormat", "content_block", "output_schema"]

_DEFS = ("$defs", "definitions")


def output_schema(tool: Tool) -> tuple[dict[str, Any], bool] | None:
    """The tool's MCP `outputSchema` and whether results are wrapped under `"result"`; None if unknown."""
    schema = tool.output_schema
    if schema is None:
        return None
    copied = SchemaTransformer(schema).transform()
    if copied.get("type") == "object":
        return copied, False
    wrapper: dict[str, Any] = {
        "type": "object",
        "properties": {"result": {k: v for k, v in copied.items() if k not in _DEFS}},
        "required": ["result"],
    }
    for key in _DEFS:  # `$ref`s resolve from the root, so definitions move up with it
        if key in copied:
            wrapper[key] = copied[key]
    return wrapper, True


def structured_content(value: Any, tool: Tool | None) -> dict[str, Any] | None:
    """`structuredContent` for a successful call's value, or None when there is none to send."""
    wrapped = False
    if tool is not None and tool.output_schema is not None:
        wrapped = tool.output_schema.get("type") != "object"
    if wrapped:
        return {"result": value}
    return value if isinstance(value, dict) else None


class MCPFormat(BaseFormat):
    """MCP: `Tool` definitions, `tools/call` requests and `CallToolResult`s."""

    name = "mcp"
    schema_path = "/inputSchema"
    name_pattern = NAME_PATTERN

    def definition(self, tool: Tool, *, strict: bool = False, name: str | None = None) -> dict[str, Any]:
        """An MCP `Tool`: name, description, inputSchema, outputSchema (when known), annotations."""
        out: dict[str, Any] = {
            "name": self.wire_name(tool, name),
            "description": tool.description,
            "inputSchema": self.schema(tool.parameters, strict=False),
        }
        output = output_schema(tool)
        if output is not None:
            out["outputSchema"] = output[0]
        options = tool.options
        annotations: dict[str, Any] = {
            "readOnlyHint": options.read_only,
            "destructiveHint": options.destructive,
            "idempotentHint": options.effective_idempotent,
        }
        if options.open_world is not None:
            annotations["openWorldHint"] = options.open_world
        if options.title:
            annotations["title"] = options.title
        out["annotations"] = annotations
        return out

    def parse_tool_calls(
        self, response: Any, *, names: ToolNames | Mapping[str, str] | None = None
    ) -> list[ToolCall]:
        """The call in a `tools/call` request: its `params` (`{"name", "arguments"}`) or the whole JSON-RPC
        request. Always one call; its id is the JSON-RPC id (or a stable one made from the params).

        Raises:
            ToolCallParseError: not a `tools/call` request or params object.
        """
        reader = Reader(self.name)
        message = reader.mapping(response, "", expected="a tools/call request or its params")
        request_id: Any = None
        if "method" in message or "jsonrpc" in message:
            method = message.get("method")
            if method != "tools/call":
                reader.fail("method", f"expected 'tools/call', got {method!r}")
            request_id = message.get("id")
            base, params = "params", reader.mapping(reader.field(message, "params", ""), "params")
        else:
            base, params = "", message
        wire = reader.string(params, "name", base)
        arguments = params.get("arguments")
        if arguments is not None and not isinstance(arguments, Mapping):
            where = f"{base}.arguments" if base else "arguments"
            reader.fail(where, f"expected an object of arguments, got {type(arguments).__name__}")
        if isinstance(request_id, str | int) and not isinstance(request_id, bool):
            call_id = str(request_id)
        else:
            call_id = stable_id("toolrun_mcp_", 0, wire, arguments)
        args = dict(arguments) if arguments is not None else None
        return [ToolCall(id=call_id, name=original_name(wire, names), arguments=args)]

    def tool_result_message(
        self, result: ToolResult, *, name: str | None = None, tool: Tool | None = None
    ) -> dict[str, Any]:
        """A `CallToolResult`: the rendered text, `structuredContent` for successful calls, `isError`.

        `structuredContent` is the value when it is a JSON object, or `{"result": value}` when `tool` has an
        output schema that is not an object (matching the wrapped `outputSchema`). A hidden value
        (`exclude_value_from_context`), a failure or a pending confirmation carries none.

        Args:
            result: The result to send back.
            name: Unused.
            tool: The tool that ran; needed to wrap non-object results as its `outputSchema` says.
        """
        if has_content(result):
            blocks = [content_block(item, result.call_id, index) for index, item in enumerate(parts(result))]
        else:
            blocks = [{"type": "text", "text": result.render()}]
        out: dict[str, Any] = {"content": blocks, "isError": result.status == "error"}
        if result.status == "ok" and not result.exclude_value_from_context:
            structured = structured_content(result.value, tool)
            if structured is not None:
                out["structuredContent"] = structured
        return out


def content_block(
    item: Text | Image | Audio | File | ResourceLink, call_id: str, index: int
) -> dict[str, Any]:
    """One content item as an MCP content block (see the module docstring)."""
    if isinstance(item, Text):
        return {"type": "text", "text": item.text}
    if isinstance(item, ResourceLink):
        return _link(item.uri, item.name, item.media_type, item.description)
    if item.data is None:
        name = item.name if isinstance(item, File) else item.kind
        return _link(item.url or "", name, item.media_type, None)
    if isinstance(item, Image | Audio):
        return {"type": item.kind, "data": item.base64(), "mimeType": item.media_type}
    resource: dict[str, Any] = {
        "uri": f"toolrun:result/{call_id}/{index}/{item.name}",
        "mimeType": item.media_type,
    }
    if is_text_file(item):
        resource["text"] = text_of(item)
    else:
        resource["blob"] = item.base64()
    return {"type": "resource", "resource": resource}


def _link(uri: str, name: str, media_type: str | None, description: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "resource_link", "uri": uri, "name": name}
    if media_type is not None:
        out["mimeType"] = media_type
    if description is not None:
        out["description"] = description
    return out
