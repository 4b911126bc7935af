"""Google Gemini wire format (`"gemini"`): Gemini API / Vertex AI function calling.

Exports a FunctionDeclaration whose parameters `GeminiSchema` writes in the oldest safe subset of Gemini's
`Schema`, reads `functionCall` parts (making a stable id when Gemini sends none), and writes
`functionResponse` parts with their inline data. What the export writes and changes, rule by rule:
docs/formats.md, "Gemini".
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final

from toolrun.content import Audio, File, Image, Text, describe
from toolrun.exceptions import SchemaError
from toolrun.formats._base import (
    BaseFormat,
    Reader,
    ToolNames,
    error_payload,
    knows,
    original_name,
    shows_value,
    stable_id,
)
from toolrun.formats._content import has_content, lead_text
from toolrun.formats._schema import (
    METADATA,
    At,
    SchemaTransformer,
    bound_items,
    described,
    label,
    pop_tuple,
    positions,
    split_types,
    type_names,
    with_notes,
    words,
)
from toolrun.results import ToolResult
from toolrun.tools import Tool, ToolCall
from toolrun.tools._tool import PROVIDER_NAME_PATTERN

__all__ = ["GENERATED_ID_PREFIX", "GeminiFormat", "GeminiSchema", "gemini_name"]

GENERATED_ID_PREFIX: Final = "toolrun_gemini_"
"""Prefix of the ids made for Gemini calls that came without one."""

_SAFE_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_-]{0,62}$")
_NULL = {"type": "null"}


def gemini_name(name: str) -> str:
    """The name Gemini is shown for a tool exported (elsewhere) as `name`.

    Raises:
        SchemaError: `name` has characters no provider accepts (use a registry alias first).
    """
    if _SAFE_NAME.match(name):
        return name
    if not PROVIDER_NAME_PATTERN.match(name):
        raise SchemaError(
            f"Tool name {name!r} is not accepted by the gemini API. Export through a ToolRegistry, which "
            "gives such tools a provider-safe alias, or pass name=..."
        )
    safe = name if name[0].isalpha() or name[0] == "_" else f"_{name}"
    if len(safe) > 63:
        digest = hashlib.blake2b(name.encode(), digest_size=4).hexdigest()
        safe = f"{safe[:54]}_{digest}"
    return safe


def _is_null(schema: Any) -> bool:
    return (
        isinstance(schema, Mapping)
        and schema.get("type") == "null"
        and len(schema) <= 2
        and (len(schema) == 1 or "description" in schema)
    )


class GeminiSchema(SchemaTransformer):
    """Rewrites a JSON Schema into Gemini's OpenAPI-subset `Schema`, oldest safe field set (GEM-P-*)."""

    FIELDS: ClassVar[frozenset[str]] = words(
        "type format description nullable enum maxItems minItems properties required items"
    )
    FORMATS: ClassVar[dict[str, frozenset[str]]] = {
        "NUMBER": frozenset({"float", "double"}),
        "INTEGER": frozenset({"int32", "int64"}),
        "STRING": frozenset({"date-time"}),
    }
    SILENT: ClassVar[frozenset[str]] = METADATA | {"title"}

    def keep_ref(self, ref: str) -> bool:
        return False

    def keep_definitions(self, key: str, definitions: Mapping[str, Any], at: At) -> Mapping[str, Any] | None:
        return None

    def recursion_cut(self, node: dict[str, Any], at: At) -> dict[str, Any]:
        kept = {k: v for k, v in node.items() if k == "description"}
        return self._any(kept, ["(Nested deeper; not described here.)"], at)

    def unresolved(self, node: dict[str, Any], ref: str, at: At) -> dict[str, Any]:
        return self._any({k: v for k, v in node.items() if k == "description"}, [], at)

    # -- before the children: unions and type lists collapse to one schema ------------------------------

    def prepare(self, node: dict[str, Any], at: At) -> dict[str, Any]:
        if isinstance(node.get("allOf"), list):
            node = self.merge_all_of(node, at)
        if at.is_root and isinstance(node.get("properties"), Mapping):
            # Alternatives of the arguments object: their fields are the root's properties already; taking
            # the first alternative would make its fields required for every call.
            notes: list[str] = []
            self.root_alternatives(node, notes)
            if notes:
                node["description"] = with_notes(node.get("description"), notes)
        for key in ("anyOf", "oneOf"):
            if isinstance(node.get(key), list):
                node = self._collapse(node, key, at)
        names = type_names(node)
        if isinstance(node.get("type"), list):
            if "null" in names:
                node["nullable"] = True
            real = [t for t in names if t != "null"]
            if len(real) > 1:
                kept = split_types(node)[0]
                kept.update({k: node[k] for k in ("description", "nullable") if k in node})
                kept["description"] = with_notes(
                    node.get("description"), [f"Also accepts: {', '.join(real[1:])}."]
                )
                self.changes.append(f"{at.path or '/'}: type list {names} → {real[0]} (Gemini has one type)")
                node = kept
            else:
                node["type"] = real[0] if real else "null"
        return node

    def _collapse(self, node: dict[str, Any], key: str, at: At) -> dict[str, Any]:
        branches = node.pop(key)
        rest = [b for b in branches if not _is_null(b)]
        if len(rest) < len(branches):
            node["nullable"] = True
        if not rest:
            node.setdefault("type", "null")
            return node
        first = rest[0] if isinstance(rest[0], Mapping) else {}
        if len(rest) > 1:
            others = ", ".join(label(b) for b in rest[1:])
            node["description"] = with_notes(node.get("description"), [f"Also accepts: {others}."])
            self.changes.append(f"{at.path or '/'}: {key} → its first alternative (Gemini has no unions)")
        merged = {**first, **node}
        if "description" not in node and "description" in first:
            merged["description"] = first["description"]
        return merged

    # -- after the children -----------------------------------------------------------------------------

    def rewrite(self, node: dict[str, Any], at: At) -> dict[str, Any]:
        notes: list[str] = []
        for key in self.SILENT & node.keys():
            del node[key]
        if node.get("additionalProperties") is False:
            del node["additionalProperties"]
        self._literals(node, notes, at)
        names = type_names(node)
        kind = names[0].lower() if names else None
        if kind is None:
            if "properties" in node or "required" in node:
                kind = "object"
            elif "items" in node or "prefixItems" in node:
                kind = "array"
            elif "enum" in node:
                kind = "string"
            else:
                return self._any(node, notes, at)
        node["type"] = kind
        if kind == "object":
            self._object(node, notes, at)
        else:
            for key in ("properties", "required"):
                if node.pop(key, None) is not None:
                    self.changes.append(f"{at.path or '/'}: '{key}' dropped (only for OBJECT)")
        if kind == "array":
            self._array(node, notes, at)
        else:
            for key in ("items", "minItems", "maxItems", "prefixItems"):
                self.move(node, key, notes, at, why=" (only for ARRAY)")
        fmt = node.get("format")
        if fmt is not None and fmt not in self.FORMATS.get(kind.upper(), ()):
            self.move(node, "format", notes, at, why=" (format not in Gemini's list for this type)")
        for key in [k for k in node if k not in self.FIELDS]:
            self.move(node, key, notes, at, why=" (not a field of Gemini's Schema)")
        node["type"] = kind.upper()
        return described(node, notes)

    def _literals(self, node: dict[str, Any], notes: list[str], at: At) -> None:
        if "const" in node:
            value = node["const"]
            if isinstance(value, str) and "enum" not in node:
                node["enum"] = [node.pop("const")]
                node.setdefault("type", "string")
            else:
                self.move(node, "const", notes, at, why=" (Gemini has no const)")
                node.setdefault("type", _json_type(value))
        enum = node.get("enum")
        if not isinstance(enum, list):
            return
        if None in enum:
            node["nullable"] = True
            enum = node["enum"] = [v for v in enum if v is not None]
        kinds = {t.lower() for t in type_names(node)}
        if enum and all(isinstance(v, str) for v in enum) and kinds <= {"string"}:
            node["type"] = "string"
            return
        if enum:
            self.move(node, "enum", notes, at, why=" (Gemini enums are strings only)")
            if not kinds:
                found = {_json_type(v) for v in enum}
                node["type"] = found.pop() if len(found) == 1 else "string"
        else:
            del node["enum"]

    def _object(self, node: dict[str, Any], notes: list[str], at: At) -> None:
        self.drop_cut_properties(node, at)
        props = node.get("properties")
        extra = node.pop("additionalProperties", None)
        if extra is not None:
            notes.append(f"Other keys: {label(extra) if isinstance(extra, Mapping) else 'any'}.")
            self.changes.append(f"{at.path or '/'}: 'additionalProperties' moved into the description")
        if not isinstance(props, dict) or not props:
            node.pop("properties", None)
            node.pop("required", None)
            return
        required = node.get("required")
        kept = [r for r in required if r in props] if isinstance(required, list) else []
        if kept:
            node["required"] = kept
        else:
            node.pop("required", None)

    def _array(self, node: dict[str, Any], notes: list[str], at: At) -> None:
        tuple_ = pop_tuple(node)
        if tuple_ is not None:
            prefix, rest = tuple_
            node["items"] = prefix[0]
            notes.append(f"Items in order: {positions(prefix)}.")
            if rest is None or rest is False:
                bound_items(node, len(prefix))
            self.changes.append(f"{at.path or '/'}: tuple (prefixItems) → array typed by its first item")
        if not isinstance(node.get("items"), dict):
            node.pop("items", None)
            node["items"] = {"type": "STRING"}
            self.changes.append(f"{at.path or '/'}: array without item type → STRING items")

    def _any(self, node: dict[str, Any], notes: list[str], at: At) -> dict[str, Any]:
        for key in [k for k in node if k not in ("description", "nullable")]:
            self.move(node, key, notes, at)
        self.changes.append(f"{at.path or '/'}: any value → STRING")
        return described({"type": "STRING", **node}, notes)


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "string"


class GeminiFormat(BaseFormat):
    """Gemini API function calling: FunctionDeclarations, `functionCall` parts, `functionResponse` parts."""

    name = "gemini"
    plain = GeminiSchema

    def wire_name(self, tool: Tool, name: str | None) -> str:
        return gemini_name(name if name is not None else tool.name)

    def definition(self, tool: Tool, *, strict: bool = False, name: str | None = None) -> dict[str, Any]:
        """One FunctionDeclaration: `{"name", "description", "parameters"?}` (`strict` has no effect)."""
        out: dict[str, Any] = {"name": self.wire_name(tool, name), "description": self.description(tool)}
        parameters = self.schema(tool.parameters, strict=False)
        if parameters.get("properties"):
            out["parameters"] = parameters
        return out

    def parse_tool_calls(
        self, response: Any, *, names: ToolNames | Mapping[str, str] | None = None
    ) -> list[ToolCall]:
        """Calls in a `GenerateContentResponse` (`candidates[0].content.parts[*].functionCall`).

        Also reads a `Content` (`{"parts": [...]}`) or a list of parts, in camelCase (REST JSON) or
        snake_case (`function_call`, as the google-genai SDK dumps it). `arguments` is the call's `args`
        object; a call without `id` gets a stable one (see the module docs).

        Raises:
            ToolCallParseError: the response is not a Gemini response, content or part list.
        """
        reader = Reader(self.name)
        data = reader.data(response)
        if isinstance(data, list):
            base, parts = "", data
        else:
            holder = reader.mapping(data, "", expected="a Gemini response, a Content or a list of parts")
            if "candidates" in holder:
                candidates = reader.list(holder["candidates"], "candidates")
                if not candidates:
                    return []
                candidate = reader.mapping(candidates[0], "candidates[0]")
                content = candidate.get("content")
                if content is None:  # e.g. finishReason SAFETY: no content, no calls
                    return []
                holder = reader.mapping(content, "candidates[0].content")
                base = "candidates[0].content.parts"
            else:
                base = "parts"
            raw_parts = holder.get("parts")
            if raw_parts is None:
                if base == "parts":
                    reader.fail(
                        "", "expected a Gemini response (with 'candidates') or content (with 'parts')"
                    )
                return []
            parts = reader.list(raw_parts, base)
        calls: list[ToolCall] = []
        for i, raw in enumerate(parts):
            path = f"{base}[{i}]"
            part = reader.mapping(raw, path)
            key = "functionCall" if "functionCall" in part else "function_call"
            if part.get(key) is None:
                continue
            path = f"{path}.{key}"
            call = reader.mapping(part[key], path)
            wire = reader.string(call, "name", path)
            args = call.get("args")
            if args is None:
                args = {}
            if not isinstance(args, Mapping):
                reader.fail(f"{path}.args", f"expected an object of arguments, got {type(args).__name__}")
            call_id = call.get("id")
            if not isinstance(call_id, str) or not call_id:
                call_id = stable_id(GENERATED_ID_PREFIX, len(calls), wire, args)
            calls.append(ToolCall(id=call_id, name=self._registered(wire, names), arguments=dict(args)))
        return calls

    def _registered(self, wire: str, names: ToolNames | Mapping[str, str] | None) -> str:
        """The registered name for a Gemini function name (undoing `gemini_name` where needed)."""
        if names is None:
            return wire[1:] if re.match(r"^_\d", wire) else wire
        if knows(wire, names):
            return original_name(wire, names)
        exported = list(names) if isinstance(names, Mapping) else [names.wire_name(t.name) for t in names]
        for candidate in exported:
            try:
                if gemini_name(candidate) == wire:
                    return original_name(candidate, names)
            except SchemaError:
                continue
        return wire

    def tool_result_message(
        self, result: ToolResult, *, name: str | None = None, tool: Tool | None = None
    ) -> dict[str, Any]:
        """`{"functionResponse": {"name", "response", "id"?}}`.

        `response` is `{"output": value}` for a successful call (the rendered text when the result carries a
        message or hides its value), `{"error": {"code", "message", ...}}` for a failed one, and
        `{"output": text}` saying the action has NOT run for a call waiting for confirmation.

        Args:
            result: The result to send back.
            name: The function name the model called; defaults to `result.tool_name` made Gemini-safe.
            tool: Unused.
        """
        rich = has_content(result)
        if result.status == "error":
            response: dict[str, Any] = {"error": error_payload(result)}
        elif shows_value(result):
            response = {"output": result.value}
        elif rich:
            response = {"output": lead_text(result)}
        else:
            response = {"output": result.render()}
        function_response: dict[str, Any] = {
            "name": self._result_name(name or result.tool_name),
            "response": response,
        }
        if rich:
            texts = [item.text for item in result.content if isinstance(item, Text)]
            if texts:
                response["text"] = "\n".join(texts)
            inline = [_inline(item) for item in result.content if _in_response(item)]
            if inline:
                function_response["parts"] = inline
        if result.call_id and not result.call_id.startswith(GENERATED_ID_PREFIX):
            function_response["id"] = result.call_id
        return {"functionResponse": function_response}

    def content_followups(self, results: Sequence[ToolResult]) -> list[dict[str, Any]]:
        """Parts for the same user turn, after the function responses: the content items a function
        response cannot hold (audio, GIFs, items by URL, resource links as text), each call's opened by a
        text part naming it."""
        out: list[dict[str, Any]] = []
        for result in results:
            if not has_content(result):
                continue
            rest = [item for item in result.content if not isinstance(item, Text) and not _in_response(item)]
            if rest:
                out.append(
                    {"text": f"Content returned by the tool call {result.call_id} ({result.tool_name}):"}
                )
                out.extend(_user_part(item) for item in rest)
        return out

    @staticmethod
    def _result_name(name: str) -> str:
        try:
            return gemini_name(name)
        except SchemaError:
            return gemini_name(re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:64] or "_")


_RESPONSE_TYPES = frozenset({"image/png", "image/jpeg", "image/webp", "application/pdf", "text/plain"})


def _in_response(item: Any) -> bool:
    """Whether Gemini takes the item inside a `functionResponse` (inline bytes of the types it lists)."""
    return isinstance(item, Image | File) and item.data is not None and item.media_type in _RESPONSE_TYPES


def _inline(item: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"mimeType": item.media_type, "data": item.base64()}
    if isinstance(item, File):
        data["displayName"] = item.name
    return {"inlineData": data}


def _user_part(item: Any) -> dict[str, Any]:
    if isinstance(item, Image | File | Audio):
        if item.data is not None:
            return _inline(item)
        return {"fileData": {"mimeType": item.media_type or "application/octet-stream", "fileUri": item.url}}
    return {"text": describe(item)}
