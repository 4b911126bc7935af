"""MCP's rules for the conformance checker: ``Tool`` definitions (input and output schemas, names) and
``CallToolResult`` content blocks.

Source: the MCP specification 2025-06-18 (``Tool``, ``CallToolResult``, content blocks).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from toolrun.formats._check_base import Provider, Report, SchemaRules, show

__all__ = ["MCPCheck"]


class MCPCheck(Provider):
    """MCP ``Tool``: ``{"name", "description", "inputSchema", "outputSchema"?, "annotations"?}``."""

    ENV_RULE = "MCP-ENV-1"
    NAME_RULE = "MCP-NAME-1"
    NAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,128}")

    def name_rule(self, name: str, path: str) -> None:
        # The spec's naming rule is a SHOULD, so clients may still accept other names.
        if not self.NAME_RE.fullmatch(name):
            self.report.warn(
                self.NAME_RULE,
                path,
                f"name {show(name)} should be 1-128 characters of A-Z, a-z, 0-9, '_', '-', '.'.",
            )

    def envelope(self, definition: Mapping[Any, Any]) -> None:
        self.check_name(definition, "")
        self.check_description(definition, "")
        annotations = definition.get("annotations")
        if annotations is not None and not isinstance(annotations, Mapping):
            self.report.error(self.ENV_RULE, "/annotations", "'annotations' must be an object.")
        for key, required in (("inputSchema", True), ("outputSchema", False)):
            if key not in definition:
                if required:
                    self.report.error("MCP-SCHEMA-1", f"/{key}", f"the tool needs an '{key}'.")
                continue
            schema = definition[key]
            if not isinstance(schema, Mapping):
                self.report.error("MCP-SCHEMA-1", f"/{key}", f"'{key}' must be a JSON Schema object.")
                continue
            if schema.get("type") != "object":
                self.report.error("MCP-SCHEMA-1", f"/{key}/type", f'\'{key}\' must have "type": "object".')
            self.walk(SchemaRules, schema, f"/{key}")

    @classmethod
    def check_result(cls, report: Report, message: Mapping[str, Any], followup: bool) -> None:
        """A ``CallToolResult``: text, image, audio, resource and resource link blocks."""
        if "isError" in message and not isinstance(message["isError"], bool):
            report.error("RES-SHAPE", "/isError", "isError must be a boolean")
        if "structuredContent" in message and not isinstance(message["structuredContent"], Mapping):
            report.error("RES-SHAPE", "/structuredContent", "structuredContent must be an object")
        for where, block in report.parts(message.get("content"), "/content", empty=True):
            kind = block.get("type")
            if kind == "text":
                report.string(block, "text", where)
            elif kind in ("image", "audio"):
                report.string(block, "mimeType", where)
                report.base64(block, "data", where)
            elif kind == "resource":
                resource = report.mapping(block, "resource", where)
                if resource is not None:
                    report.string(resource, "uri", f"{where}/resource")
                    if "blob" in resource:
                        report.base64(resource, "blob", f"{where}/resource")
                    else:
                        report.string(resource, "text", f"{where}/resource")
            elif kind == "resource_link":
                report.string(block, "uri", where)
                report.string(block, "name", where)
            else:
                report.error("RES-PART", f"{where}/type", f"MCP has no {kind!r} content block")
