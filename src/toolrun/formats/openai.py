"""OpenAI wire formats: Chat Completions (`"openai"`) and the Responses API (`"openai-responses"`).

Each exports a tool's definition (plain, or strict for Structured Outputs with `OpenAIStrictSchema`), reads
the tool calls of a response, and writes tool results, with their images and files, as the API takes them.
What the export writes and changes, rule by rule: docs/formats.md, "OpenAI".
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from toolrun.content import Audio, File, Image, Text, describe
from toolrun.exceptions import SchemaError
from toolrun.formats._base import BaseFormat, Reader, ToolNames, original_name
from toolrun.formats._content import follows, has_content, is_text_file, parts, text_of
from toolrun.formats._schema import (
    METADATA,
    At,
    PlainSchema,
    SchemaTransformer,
    admits_null,
    bound_items,
    described,
    descriptive,
    iter_nodes,
    label,
    list_value,
    mapping_value,
    pop_tuple,
    positions,
    resolve_pointer,
    split_types,
    tuple_items,
    type_names,
    words,
)
from toolrun.results import ToolResult
from toolrun.tools import Tool, ToolCall

__all__ = ["OpenAIChatFormat", "OpenAIResponsesFormat", "OpenAIStrictSchema", "chat_call_id"]

_SCALARS = ("string", "number", "integer", "boolean")
_DEF_REF = re.compile(r"#/(\$defs|definitions)/[^/]+")
_COMPLEX_REGEX = re.compile(r"\(\?[=!<]|\\[1-9]|\\k<")


def any_value() -> dict[str, Any]:
    """Strict mode's stand-in for "any JSON value": a scalar, null, or an array of those."""
    scalars = [{"type": "string"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"}]
    return {"anyOf": [*scalars, {"type": "array", "items": {"anyOf": [dict(s) for s in scalars]}}]}


class OpenAIStrictSchema(SchemaTransformer):
    """Rewrites a schema into OpenAI's Structured Outputs subset (rules OAI-S-* and OAI-L-*)."""

    KEPT: ClassVar[frozenset[str]] = words(
        "type enum const anyOf properties required additionalProperties items $ref $defs definitions "
        "pattern format multipleOf maximum exclusiveMaximum minimum exclusiveMinimum minItems maxItems "
        "description title"
    )
    FORMATS: ClassVar[frozenset[str]] = frozenset(
        ["date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"]
    )
    MAX_LEVELS, MAX_PROPS, MAX_ENUM, MAX_STRLEN = 10, 5_000, 1_000, 120_000
    BIG_ENUM, BIG_ENUM_CHARS = 250, 15_000

    def __init__(self, schema: Mapping[str, Any]) -> None:
        super().__init__(schema)

    def keep_ref(self, ref: str) -> bool:
        # Strict mode resolves `#` and top-level definitions only; other pointers are inlined.
        if ref == "#":
            return True
        return bool(_DEF_REF.fullmatch(ref)) and isinstance(resolve_pointer(self.root, ref), Mapping | bool)

    def unresolved(self, node: dict[str, Any], ref: str, at: At) -> dict[str, Any]:
        return self._any(node, [], at)

    def recursion_cut(self, node: dict[str, Any], at: At) -> dict[str, Any]:
        return self._any(node, [], at)

    def prepare(self, node: dict[str, Any], at: At) -> dict[str, Any]:
        if isinstance(node.get("allOf"), list):
            node = self.merge_all_of(node, at)
        if isinstance(node.get("oneOf"), list) and "anyOf" not in node:
            node["anyOf"] = node.pop("oneOf")
            self.changes.append(f"{at.path or '/'}: oneOf → anyOf (strict mode has no oneOf)")
        return node

    def rewrite(self, node: dict[str, Any], at: At) -> dict[str, Any]:
        notes: list[str] = []
        for key in METADATA & node.keys():
            del node[key]
        if at.is_root:
            self.root_alternatives(node, notes)
        for key in ("allOf", "oneOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas"):
            self.move(node, key, notes, at)
        for key in ("default", "examples", "deprecated"):
            self.move(node, key, notes, at)

        if "$ref" in node:
            return self._ref(node, notes, at)
        names = type_names(node)
        if len([t for t in names if t != "null"]) > 1:
            return self._split(node, names, notes, at)
        if not names and "anyOf" not in node and "enum" not in node and "const" not in node:
            if any(k in node for k in ("properties", "additionalProperties", "required")):
                node["type"] = "object"
            elif any(k in node for k in ("items", "prefixItems")):
                node["type"] = "array"
            else:
                return self._any(node, notes, at)
            names = type_names(node)
        if "object" in names:
            self._object(node, notes, at)
        if "array" in names:
            self._array(node, notes, at)
        self._string(node, notes, at)
        for key in [k for k in node if k not in self.KEPT]:
            self.move(node, key, notes, at, why=" (not in the strict subset)")
        return described(node, notes)

    # -- pieces -----------------------------------------------------------------------------------------

    def _any(self, node: dict[str, Any], notes: list[str], at: At) -> dict[str, Any]:
        for key in [k for k in node if k not in ("description", "title")]:
            self.move(node, key, notes, at)
        self.changes.append(f"{at.path or '/'}: any value → scalar, null or array of scalars (strict mode)")
        self.findings.append(
            (
                "OAI-S-ANY",
                at.path,
                "any value is exported as a scalar, null or an array of scalars (strict mode has no 'any'): "
                "the model cannot send an object here. Type the parameter, or export with strict=False.",
            )
        )
        out = {**any_value(), **descriptive(node)}
        return described(out, notes)

    def _ref(self, node: dict[str, Any], notes: list[str], at: At) -> dict[str, Any]:
        ref = node.pop("$ref")
        for key in [k for k in node if k not in ("description", "title")]:
            self.move(node, key, notes, at, why=" (strict mode takes no keywords beside $ref)")
        if not node and not notes:
            return {"$ref": ref}
        return described({"anyOf": [{"$ref": ref}], **node}, notes)

    def _split(self, node: dict[str, Any], names: list[str], notes: list[str], at: At) -> dict[str, Any]:
        branches: list[dict[str, Any]] = [self.rewrite(b, at) for b in split_types(node)]
        if "null" in names:
            branches.append({"type": "null"})
        self.changes.append(f"{at.path or '/'}: type list {names} → anyOf")
        out = {"anyOf": branches, **descriptive(node)}
        return described(out, notes)

    def _object(self, node: dict[str, Any], notes: list[str], at: At) -> None:
        props = node["properties"] = mapping_value(node, "properties")
        extra = node.get("additionalProperties", True)  # JSON Schema objects are open unless closed
        if extra is not False or node.get("patternProperties"):
            # Strict mode could only close it, and then a model could send nothing but `{}` for its keys:
            # the tool is exported non-strict instead (see `OpenAIChatFormat.definition`).
            what = "its keys" if not props else "keys beyond its properties"
            self.free_form.append(at.path)
            self.changes.append(
                f"{at.path or '/'}: free-form object (strict mode cannot describe {what}: "
                f"{label(extra) if isinstance(extra, dict) else 'any'}); the tool is exported non-strict"
            )
        for key in ("patternProperties", "propertyNames", "minProperties", "maxProperties",
                    "unevaluatedProperties"):  # fmt: skip
            self.move(node, key, notes, at)
        required = list_value(node, "required")
        for name in [p for p in props if p not in required]:
            if at.is_root:
                props[name] = nullable(props[name])
                self.changes.append(f"{at.path}/properties/{name}: optional → required and nullable")
            else:
                self.changes.append(f"{at.path}/properties/{name}: optional nested property → required")
        node["required"] = list(props)
        node["additionalProperties"] = False

    def _array(self, node: dict[str, Any], notes: list[str], at: At) -> None:
        tuple_ = pop_tuple(node)
        if tuple_ is not None:
            prefix, rest = tuple_
            unique = tuple_items(prefix, rest)
            node["items"] = unique[0] if len(unique) == 1 else {"anyOf": unique}
            if len(unique) > 1:
                notes.append(f"Items in order: {positions(prefix)}.")
            if rest is None or rest is False:
                bound_items(node, len(prefix))
            self.changes.append(f"{at.path or '/'}: tuple (prefixItems) → array of {len(prefix)} items")
        if not isinstance(node.get("items"), dict):
            node.pop("items", None)
            node["items"] = any_value()
            self.changes.append(f"{at.path or '/'}: array without item type → items of any scalar")
        for key in ("uniqueItems", "contains", "minContains", "maxContains", "unevaluatedItems",
                    "additionalItems"):  # fmt: skip
            self.move(node, key, notes, at)

    def _string(self, node: dict[str, Any], notes: list[str], at: At) -> None:
        for key in ("minLength", "maxLength", "contentEncoding", "contentMediaType", "contentSchema"):
            self.move(node, key, notes, at, why=" (OAI-S-FT)" if key.endswith("Length") else "")
        fmt = node.get("format")
        if fmt is not None and fmt not in self.FORMATS:
            self.move(node, "format", notes, at, why=" (format not supported in strict mode)")
        pattern = node.get("pattern")
        if isinstance(pattern, str) and _COMPLEX_REGEX.search(pattern):
            self.move(node, "pattern", notes, at, why=" (lookaround/backreference)")

    # -- limits -----------------------------------------------------------------------------------------

    def finish(self, schema: dict[str, Any]) -> dict[str, Any]:
        props = strlen = enum_values = 0
        for node, level, path in iter_nodes(schema):
            if level > self.MAX_LEVELS:
                raise SchemaError(
                    f"schema nests {level} object/array levels at {path}; OpenAI strict mode allows "
                    f"{self.MAX_LEVELS} (OAI-L-DEPTH). Flatten it or export with strict=False."
                )
            if isinstance(node.get("properties"), dict):
                props += len(node["properties"])
                strlen += sum(len(name) for name in node["properties"])
            for key in ("$defs", "definitions"):
                if isinstance(node.get(key), dict):
                    strlen += sum(len(name) for name in node[key])
            if "const" in node:
                strlen += _length(node["const"])
            enum = node.get("enum")
            if isinstance(enum, list):
                enum_values += len(enum)
                chars = sum(_length(v) for v in enum)
                strlen += chars
                if len(enum) > self.BIG_ENUM and chars > self.BIG_ENUM_CHARS:
                    raise SchemaError(
                        f"string enum at {path} has {len(enum)} values totalling {chars} characters; OpenAI "
                        f"strict mode allows {self.BIG_ENUM_CHARS} (OAI-L-ENUMSTR). Export with strict=False."
                    )
        for what, count, limit, rule in (
            ("object properties", props, self.MAX_PROPS, "OAI-L-PROPS"),
            ("enum values", enum_values, self.MAX_ENUM, "OAI-L-ENUM"),
            ("characters of names and enum values", strlen, self.MAX_STRLEN, "OAI-L-STRLEN"),
        ):
            if count > limit:
                raise SchemaError(
                    f"schema has {count} {what}; OpenAI strict mode allows {limit} ({rule}). "
                    "Export with strict=False."
                )
        return schema


def _length(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    return len(str(value)) if isinstance(value, int | float | bool) or value is None else 0


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` widened to also accept `null` (unchanged if it already does)."""
    if admits_null(schema):
        return schema
    kind = schema.get("type")
    if (
        isinstance(kind, str)
        and kind in _SCALARS
        and not any(k in schema for k in ("anyOf", "$ref", "const"))
    ):
        out = {**schema, "type": [kind, "null"]}
        if isinstance(out.get("enum"), list):
            out["enum"] = [*out["enum"], None]
        return out
    if isinstance(schema.get("anyOf"), list) and not any(
        k in schema for k in ("type", "$ref", "enum", "const")
    ):
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    outer = descriptive(schema)
    inner = {k: v for k, v in schema.items() if k not in outer}
    return {"anyOf": [inner, {"type": "null"}], **outer}


# ----------------------------------------------------------------------------------------------------------


def chat_call_id(value: Any) -> str:
    """The id of one Chat Completions tool call: the id the server sent, or a fresh unique one.

    OpenAI always sends one; Google's OpenAI-compatible endpoint sends `"id": ""` and some local servers
    send none (or null). Those calls get a generated id (`call_<24 hex>`), unique, so each result still
    answers exactly one call. The one rule for every reader of Chat Completions tool calls (this format's
    `parse_tool_calls` and `OpenAIModel`).

    Raises:
        TypeError: the id is neither text (or a whole number, read as text) nor absent.
    """
    if value is None or value == "":
        return f"call_{uuid.uuid4().hex[:24]}"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise TypeError(f"a tool call id must be a string, got {type(value).__name__}")
    return value


def _arguments(reader: Reader, holder: Mapping[str, Any], path: str) -> str | Mapping[str, Any] | None:
    """`arguments` as sent: JSON text (kept undecoded), or an object (some OpenAI-compatible servers)."""
    value = holder.get("arguments")
    if value is not None and not isinstance(value, str | Mapping):
        reader.fail(f"{path}.arguments", f"expected JSON text, got {type(value).__name__}")
    return value


class _OpenAIBase(BaseFormat):
    plain = PlainSchema
    strict_transformer = OpenAIStrictSchema

    free_form_rule = "OAI-S-FREEFORM"


class OpenAIChatFormat(_OpenAIBase):
    """OpenAI Chat Completions: `tools`, `message.tool_calls`, `role: "tool"` messages."""

    name = "openai"
    schema_path = "/function/parameters"

    def definition(self, tool: Tool, *, strict: bool = False, name: str | None = None) -> dict[str, Any]:
        """`{"type": "function", "function": {"name", "description", "parameters", "strict"}}`.

        `strict` in the definition is false when a strict export is impossible (see `export`).
        """
        parameters, is_strict, _ = self.export(tool.parameters, strict=strict)
        function = {
            "name": self.wire_name(tool, name),
            "description": self.description(tool),
            "parameters": parameters,
            "strict": is_strict,
        }
        return {"type": "function", "function": function}

    def parse_tool_calls(
        self, response: Any, *, names: ToolNames | Mapping[str, str] | None = None
    ) -> list[ToolCall]:
        """Calls in a `ChatCompletion` (`choices[0].message.tool_calls`) or in a bare assistant message.

        `arguments` stays the JSON text the model wrote (decoding and validation are the executor's job).

        Raises:
            ToolCallParseError: the response is not a Chat Completions response or message.
        """
        reader = Reader(self.name)
        data = reader.data(response)
        if isinstance(data, Mapping) and "choices" in data:
            choices = reader.list(data["choices"], "choices")
            if not choices:
                return []
            choice = reader.mapping(choices[0], "choices[0]")
            base = "choices[0].message"
            message = reader.mapping(reader.field(choice, "message", "choices[0]"), base)
        elif isinstance(data, Mapping) and any(k in data for k in ("tool_calls", "role")):
            base, message = "message", data
        else:
            reader.fail("", "expected a Chat Completions response (with 'choices') or an assistant message")
        raw = message.get("tool_calls")
        if raw is None:
            return []
        calls = []
        for i, item in enumerate(reader.list(raw, f"{base}.tool_calls")):
            path = f"{base}.tool_calls[{i}]"
            call = reader.mapping(item, path)
            kind = call.get("type", "function")
            if kind != "function":
                reader.fail(
                    f"{path}.type", f"unsupported tool call type {kind!r}; only 'function' calls are read"
                )
            try:
                call_id = chat_call_id(call.get("id"))
            except TypeError as exc:
                reader.fail(f"{path}.id", str(exc))
            function = reader.mapping(reader.field(call, "function", path), f"{path}.function")
            wire = reader.string(function, "name", f"{path}.function")
            args = _arguments(reader, function, f"{path}.function")
            calls.append(ToolCall(id=call_id, name=original_name(wire, names), arguments=args))
        return calls

    def tool_result_message(
        self, result: ToolResult, *, name: str | None = None, tool: Tool | None = None
    ) -> dict[str, Any]:
        """`{"role": "tool", "tool_call_id", "content": result.render()}` (images and files of a result with
        content are notes here; `content_followups` carries them)."""
        return {"role": "tool", "tool_call_id": result.call_id, "content": result.render()}

    def content_followups(self, results: Sequence[ToolResult]) -> list[dict[str, Any]]:
        """One user message with the images, audio and files of this turn's results, each call's opened by
        a text part naming it; no message when no result has any."""
        blocks: list[dict[str, Any]] = []
        for result in results:
            if not has_content(result):
                continue
            own = [part for item in result.content if (part := _chat_part(item)) is not None]
            if own:
                blocks.append({"type": "text", "text": follows(result.call_id, result.tool_name)})
                blocks.extend(own)
        return [{"role": "user", "content": blocks}] if blocks else []


class OpenAIResponsesFormat(_OpenAIBase):
    """OpenAI Responses API: flat function tools, `function_call` and `function_call_output` items."""

    name = "openai-responses"
    schema_path = "/parameters"

    def definition(self, tool: Tool, *, strict: bool = False, name: str | None = None) -> dict[str, Any]:
        """`{"type": "function", "name", "description", "parameters", "strict"}` (`strict` always set;
        false when a strict export is impossible, see `export`)."""
        parameters, is_strict, _ = self.export(tool.parameters, strict=strict)
        return {
            "type": "function",
            "name": self.wire_name(tool, name),
            "description": self.description(tool),
            "parameters": parameters,
            "strict": is_strict,
        }

    def parse_tool_calls(
        self, response: Any, *, names: ToolNames | Mapping[str, str] | None = None
    ) -> list[ToolCall]:
        """Calls in a `Response` (`output[*]` items of type `function_call`), or in a list of items.

        The call's id is its `call_id` (what `function_call_output` answers), not the item `id`.

        Raises:
            ToolCallParseError: the response is not a Responses API response or item list.
        """
        reader = Reader(self.name)
        items = reader.typed_items(
            response, "output", "function_call", expected="a Responses API response or a list of output items"
        )
        calls = []
        for path, item in items:
            call_id = reader.string(item, "call_id", path)
            wire = reader.string(item, "name", path)
            args = _arguments(reader, item, path)
            calls.append(ToolCall(id=call_id, name=original_name(wire, names), arguments=args))
        return calls

    def tool_result_message(
        self, result: ToolResult, *, name: str | None = None, tool: Tool | None = None
    ) -> dict[str, Any]:
        """`{"type": "function_call_output", "call_id", "output": result.render()}`; for a result with
        content, `output` is a list of `input_text` / `input_image` / `input_file` parts."""
        if not has_content(result):
            return {"type": "function_call_output", "call_id": result.call_id, "output": result.render()}
        output = [_responses_part(item) for item in parts(result)]
        return {"type": "function_call_output", "call_id": result.call_id, "output": output}


_AUDIO_FORMATS = {"audio/wav": "wav", "audio/mpeg": "mp3"}


def _chat_part(item: Any) -> dict[str, Any] | None:
    """A Chat Completions user-message part for what a tool message cannot hold; None for what it did."""
    if isinstance(item, Image):
        return {"type": "image_url", "image_url": {"url": item.data_url()}}
    if isinstance(item, File) and item.data is not None:
        if is_text_file(item):
            return {"type": "text", "text": f"{item.name}:\n{text_of(item)}"}
        return {"type": "file", "file": {"filename": item.name, "file_data": item.data_url()}}
    if isinstance(item, Audio) and item.data is not None and item.media_type in _AUDIO_FORMATS:
        return {
            "type": "input_audio",
            "input_audio": {"data": item.base64(), "format": _AUDIO_FORMATS[item.media_type]},
        }
    return None  # text, resource links, files by URL: the tool message's text says all there is


def _responses_part(item: Any) -> dict[str, Any]:
    if isinstance(item, Text):
        return {"type": "input_text", "text": item.text}
    if isinstance(item, Image):
        return {"type": "input_image", "image_url": item.data_url(), "detail": "auto"}
    if isinstance(item, File):
        if is_text_file(item):
            return {"type": "input_text", "text": f"{item.name}:\n{text_of(item)}"}
        if item.data is not None:
            return {"type": "input_file", "filename": item.name, "file_data": item.data_url()}
        return {"type": "input_file", "filename": item.name, "file_url": item.url}
    return {"type": "input_text", "text": describe(item)}
