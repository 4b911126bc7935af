"""Anthropic Messages API wire format (`"anthropic"`).

Exports a tool's definition (plain, or strict tool use with `AnthropicStrictSchema` and its per-request
budgets), reads `tool_use` blocks, and writes `tool_result` blocks with their images and documents. What the
export writes and changes, rule by rule: docs/formats.md, "Anthropic".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from toolrun.content import File, Image, Text, describe
from toolrun.formats._base import BaseFormat, Reader, ToolNames, original_name
from toolrun.formats._content import has_content, is_text_file, parts, text_of
from toolrun.formats._schema import (
    DEFINITIONS,
    METADATA,
    At,
    PlainSchema,
    described,
    iter_nodes,
    label,
    mapping_value,
    pop_tuple,
    positions,
    resolve_pointer,
    tuple_items,
    type_names,
    with_notes,
    words,
)
from toolrun.results import ToolResult
from toolrun.tools import Tool, ToolCall

__all__ = ["AnthropicFormat", "AnthropicSchema", "AnthropicStrictSchema"]

_PRIMITIVES = (str, int, float, bool, type(None))
_DEF_REF = re.compile(r"#/(\$defs|definitions)/([^/]+)")
_COMPLEX_REGEX = re.compile(r"\(\?[=!<]|\(\?P=|\\[1-9bB]|\\k<")


class AnthropicSchema(PlainSchema):
    """Plain `input_schema`: unchanged, except no `anyOf`/`oneOf`/`allOf` at the top level (ANT-SCHEMA-2)."""


class AnthropicStrictSchema(AnthropicSchema):
    """Rewrites a schema into Anthropic's strict tool use subset (rules ANT-S-* and ANT-L-*)."""

    KEPT: ClassVar[frozenset[str]] = words(
        "type enum const anyOf $ref $defs definitions default required properties additionalProperties "
        "items format pattern minItems description title"
    )
    FORMATS: ClassVar[frozenset[str]] = frozenset(
        ["date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"]
    )
    MAX_OPTIONAL, MAX_UNIONS = 24, 16

    def __init__(self, schema: Mapping[str, Any]) -> None:
        super().__init__(schema)
        self._kept_refs = _acyclic_definition_refs(schema, self.max_nodes)

    # -- references: keep acyclic definitions, inline (and cut) recursive ones --------------------------

    def keep_ref(self, ref: str) -> bool:
        return ref in self._kept_refs

    def keep_definitions(self, key: str, definitions: Mapping[str, Any], at: At) -> Mapping[str, Any] | None:
        if not at.is_root:
            return None
        kept = {n: s for n, s in definitions.items() if f"#/{key}/{_escape(str(n))}" in self._kept_refs}
        return kept or None

    def recursion_cut(self, node: dict[str, Any], at: At) -> dict[str, Any]:
        kept = {k: v for k, v in node.items() if k in ("description", "title")}
        return self._any(kept, ["(Nested deeper; not described here.)"], at)

    def unresolved(self, node: dict[str, Any], ref: str, at: At) -> dict[str, Any]:
        return self._any({k: v for k, v in node.items() if k in ("description", "title")}, [], at)

    # -- nodes ------------------------------------------------------------------------------------------

    def prepare(self, node: dict[str, Any], at: At) -> dict[str, Any]:
        if isinstance(node.get("allOf"), list):
            node = self.merge_all_of(node, at)
        if isinstance(node.get("oneOf"), list) and "anyOf" not in node:
            node["anyOf"] = node.pop("oneOf")
        return node

    def rewrite(self, node: dict[str, Any], at: At) -> dict[str, Any]:
        node = super().rewrite(node, at)
        notes: list[str] = []
        for key in METADATA & node.keys():
            del node[key]
        for key in ("allOf", "oneOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas",
                    "examples", "deprecated"):  # fmt: skip
            self.move(node, key, notes, at)
        if isinstance(node.get("enum"), list) and not all(isinstance(v, _PRIMITIVES) for v in node["enum"]):
            self.move(node, "enum", notes, at, why=" (enum values must be primitives)")
        if "const" in node and not isinstance(node["const"], _PRIMITIVES):
            self.move(node, "const", notes, at, why=" (const must be a primitive)")
        names = type_names(node)
        if not names and not any(k in node for k in ("anyOf", "enum", "const", "$ref")):
            if any(k in node for k in ("properties", "additionalProperties", "required")):
                node["type"] = "object"
                names = ["object"]
            elif any(k in node for k in ("items", "prefixItems")):
                node["type"] = "array"
                names = ["array"]
            else:
                return self._any(node, notes, at)
        if "object" in names:
            self._object(node, notes, at)
        if "array" in names:
            self._array(node, notes, at)
        fmt = node.get("format")
        if fmt is not None and fmt not in self.FORMATS:
            self.move(node, "format", notes, at, why=" (format not supported in strict mode)")
        pattern = node.get("pattern")
        if isinstance(pattern, str) and _COMPLEX_REGEX.search(pattern):
            self.move(node, "pattern", notes, at, why=" (only simple regular expressions)")
        min_items = node.get("minItems")
        if min_items is not None and min_items not in (0, 1):
            self.move(node, "minItems", notes, at, why=" (only 0 or 1 in strict mode)")
        for key in [k for k in node if k not in self.KEPT]:
            self.move(node, key, notes, at, why=" (not in the strict subset)")
        return described(node, notes)

    def _any(self, node: dict[str, Any], notes: list[str], at: At) -> dict[str, Any]:
        for key in [k for k in node if k not in ("description", "title")]:
            self.move(node, key, notes, at)
        self.changes.append(f"{at.path or '/'}: any value → string (strict mode needs a type)")
        return described({"type": "string", **node}, notes)

    def _object(self, node: dict[str, Any], notes: list[str], at: At) -> None:
        self.drop_cut_properties(node, at)
        props = node["properties"] = mapping_value(node, "properties")
        extra = node.get("additionalProperties")
        if extra is not False or node.get("patternProperties"):
            # Closing it would let the model send only `{}` for its keys: the tool is exported non-strict.
            self.free_form.append(at.path)
            self.changes.append(f"{at.path or '/'}: free-form object; the tool is exported non-strict")
        node["additionalProperties"] = False
        for key in ("patternProperties", "propertyNames", "minProperties", "maxProperties",
                    "unevaluatedProperties"):  # fmt: skip
            self.move(node, key, notes, at)
        required = node.get("required")
        if isinstance(required, list):
            node["required"] = [r for r in required if r in props]
        required = node.get("required") or []
        for name, sub in props.items():
            if (
                name in required
                or not isinstance(sub, dict)
                or "default" not in sub
                or sub["default"] is not None
            ):
                continue
            narrowed = _without_null(sub)
            if narrowed is not None:
                props[name] = narrowed
                self.changes.append(
                    f"{at.path}/properties/{name}: optional with default null → null branch dropped"
                )

    def _array(self, node: dict[str, Any], notes: list[str], at: At) -> None:
        tuple_ = pop_tuple(node)
        if tuple_ is not None:
            prefix, rest = tuple_
            unique = tuple_items(prefix, rest)
            node["items"] = unique[0] if len(unique) == 1 else {"anyOf": unique}
            shown = f": {positions(prefix)}" if len(unique) > 1 else ""
            notes.append(f"Exactly {len(prefix)} items{shown}.")
            for key in ("minItems", "maxItems"):
                if node.get(key) == len(prefix):
                    del node[key]
            self.changes.append(f"{at.path or '/'}: tuple (prefixItems) → array, length in the description")
        for key in ("maxItems", "uniqueItems", "contains", "minContains", "maxContains", "unevaluatedItems",
                    "additionalItems"):  # fmt: skip
            self.move(node, key, notes, at)

    # -- budgets ----------------------------------------------------------------------------------------

    def finish(self, schema: dict[str, Any]) -> dict[str, Any]:
        objects: list[tuple[int, dict[str, Any]]] = []
        unions: list[tuple[int, dict[str, Any]]] = []
        for node, _level, path in iter_nodes(schema):
            depth = path.count("/")
            if node.get("type") == "object" and isinstance(node.get("properties"), dict):
                objects.append((depth, node))
            if "anyOf" in node or len(type_names(node)) > 1:
                unions.append((depth, node))
        optional = sum(len(set(n["properties"]) - set(n.get("required") or ())) for _, n in objects)
        for _, node in sorted(objects, key=lambda item: -item[0]):
            if optional <= self.MAX_OPTIONAL:
                break
            missing = [p for p in node["properties"] if p not in (node.get("required") or [])]
            take = missing[: optional - self.MAX_OPTIONAL]
            node["required"] = [*(node.get("required") or []), *take]
            optional -= len(take)
            self.changes.append(f"{len(take)} optional properties made required (ANT-L-OPTIONAL budget)")
        excess = len(unions) - self.MAX_UNIONS
        for _, node in sorted(unions, key=lambda item: -item[0])[: max(excess, 0)]:
            _collapse(node)
            self.changes.append("a union reduced to its first branch (ANT-L-UNION budget)")
        return schema


def _without_null(schema: dict[str, Any]) -> dict[str, Any] | None:
    """`schema` without its null alternative, or None if it has no separable one."""
    kind = schema.get("type")
    if isinstance(kind, list) and "null" in kind and len(kind) > 1:
        rest = [t for t in kind if t != "null"]
        out = {k: v for k, v in schema.items() if k != "default"}
        out["type"] = rest[0] if len(rest) == 1 else rest
        if isinstance(out.get("enum"), list):
            out["enum"] = [v for v in out["enum"] if v is not None]
        return out
    branches = schema.get("anyOf")
    if isinstance(branches, list) and "type" not in schema:
        rest = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null" and len(b) == 1)]
        if len(rest) == len(branches) or not rest:
            return None
        out = {k: v for k, v in schema.items() if k not in ("anyOf", "default")}
        if len(rest) == 1 and isinstance(rest[0], dict) and not (rest[0].keys() & out.keys()):
            return {**rest[0], **out}
        return {**out, "anyOf": rest}
    return None


def _collapse(node: dict[str, Any]) -> None:
    """Reduce a union node in place to its first non-null alternative; name the others in the description."""
    kind = node.get("type")
    if isinstance(kind, list) and len(kind) > 1:
        keep = next((t for t in kind if t != "null"), kind[0])
        others = [t for t in kind if t != keep]
        node["type"] = keep
        if isinstance(node.get("enum"), list) and keep != "null":
            node["enum"] = [v for v in node["enum"] if v is not None]
        node["description"] = with_notes(node.get("description"), [f"(Also accepts {', '.join(others)}.)"])
    branches = node.get("anyOf")
    if isinstance(branches, list) and branches:
        real = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
        first = (real or branches)[0]
        others = [label(b) for b in branches if b is not first]
        del node["anyOf"]
        if isinstance(first, dict):
            for key, value in first.items():
                if key == "description":
                    continue
                node.setdefault(key, value)
            if "description" in first and "description" not in node:
                node["description"] = first["description"]
        if others:
            node["description"] = with_notes(
                node.get("description"), [f"(Also accepts {', '.join(others)}.)"]
            )


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _acyclic_definition_refs(root: Mapping[str, Any], budget: int) -> frozenset[str]:
    """The `#/$defs/X` (and `#/definitions/X`) refs whose target can never lead back to itself.

    Every `$ref` target is a node of the graph (a definition, `#`, or any other pointer); an edge leads from a
    target to each `$ref` found inside it. A definition on a cycle is recursive and must be inlined; the rest
    can stay as `$ref`s. Scanning stops after `budget` nodes (then nothing is kept: everything is inlined).
    """
    scanned = 0

    def refs_in(node: Any) -> set[str]:
        nonlocal scanned
        found: set[str] = set()
        stack = [node]
        while stack:
            item = stack.pop()
            scanned += 1
            if scanned > budget:
                raise _TooBig
            if isinstance(item, Mapping):
                ref = item.get("$ref")
                if isinstance(ref, str):
                    found.add(ref)
                stack.extend(v for k, v in item.items() if k not in DEFINITIONS or item is node)
            elif isinstance(item, list):
                stack.extend(item)
        return found

    candidates = {
        f"#/{key}/{_escape(str(name))}"
        for key in DEFINITIONS
        if isinstance(root.get(key), Mapping)
        for name in root[key]
    }
    try:
        edges: dict[str, set[str]] = {}
        pending = list(candidates)
        while pending:
            ref = pending.pop()
            if ref in edges:
                continue
            target = resolve_pointer(root, ref)
            body = (
                {k: v for k, v in target.items() if k not in DEFINITIONS}
                if isinstance(target, Mapping)
                else {}
            )
            edges[ref] = refs_in(body)
            pending.extend(r for r in edges[ref] if r not in edges and r.startswith("#"))
            if len(edges) > 1_000:
                raise _TooBig
    except _TooBig:
        return frozenset()

    def reaches_itself(start: str) -> bool:
        seen: set[str] = set()
        stack = list(edges.get(start, ()))
        while stack:
            ref = stack.pop()
            if ref == start:
                return True
            if ref in seen:
                continue
            seen.add(ref)
            stack.extend(edges.get(ref, ()))
        return False

    return frozenset(
        ref
        for ref in candidates
        if _DEF_REF.fullmatch(ref)
        and isinstance(resolve_pointer(root, ref), Mapping)
        and not reaches_itself(ref)
    )


class _TooBig(Exception):
    pass


class AnthropicFormat(BaseFormat):
    """Anthropic Messages API: custom tools, `tool_use` blocks, `tool_result` blocks."""

    name = "anthropic"
    schema_path = "/input_schema"
    free_form_rule = "ANT-S-FREEFORM"
    plain = AnthropicSchema
    strict_transformer = AnthropicStrictSchema

    def definition(self, tool: Tool, *, strict: bool = False, name: str | None = None) -> dict[str, Any]:
        """`{"name", "description", "input_schema"}`, plus `"strict": true` and `input_examples` if any."""
        schema, is_strict, _ = self.export(tool.parameters, strict=strict)
        out: dict[str, Any] = {
            "name": self.wire_name(tool, name),
            "description": self.description(tool),
            "input_schema": schema,
        }
        if is_strict:
            out["strict"] = True
        if tool.options.examples:
            out["input_examples"] = [dict(example.input) for example in tool.options.examples]
        return out

    def parse_tool_calls(
        self, response: Any, *, names: ToolNames | Mapping[str, str] | None = None
    ) -> list[ToolCall]:
        """Calls in a `Message` (`content[*]` blocks of type `tool_use`), or in a list of content blocks.

        `arguments` is the block's `input` object as sent.

        Raises:
            ToolCallParseError: the response is not a Messages API message or content list.
        """
        reader = Reader(self.name)
        blocks = reader.typed_items(
            response, "content", "tool_use", expected="a Messages API message or a list of content blocks"
        )
        calls = []
        for path, block in blocks:
            call_id = reader.string(block, "id", path)
            wire = reader.string(block, "name", path)
            arguments = block.get("input", {})
            if not isinstance(arguments, Mapping):
                reader.fail(
                    f"{path}.input", f"expected an object of arguments, got {type(arguments).__name__}"
                )
            calls.append(ToolCall(id=call_id, name=original_name(wire, names), arguments=dict(arguments)))
        return calls

    def tool_result_message(
        self, result: ToolResult, *, name: str | None = None, tool: Tool | None = None
    ) -> dict[str, Any]:
        """A `tool_result` content block for the next user message; `is_error` only for failed calls.

        A call waiting for confirmation is not an error: its text says the action has not run. A result
        with content has a list of `text`, `image` and `document` blocks as its `content`.
        """
        content: Any = result.render() if not has_content(result) else [_block(i) for i in parts(result)]
        return {
            "type": "tool_result",
            "tool_use_id": result.call_id,
            "content": content,
            "is_error": result.status == "error",
        }


def _block(item: Any) -> dict[str, Any]:
    if isinstance(item, Text):
        return {"type": "text", "text": item.text}
    if isinstance(item, Image):
        if item.data is None:
            return {"type": "image", "source": {"type": "url", "url": item.url}}
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": item.media_type, "data": item.base64()},
        }
    if isinstance(item, File):
        if is_text_file(item):
            source = {"type": "text", "media_type": "text/plain", "data": text_of(item)}
            return {"type": "document", "source": source, "title": item.name}
        if item.media_type == "application/pdf" and item.data is not None:
            source = {"type": "base64", "media_type": "application/pdf", "data": item.base64()}
            return {"type": "document", "source": source, "title": item.name}
        if item.data is None and (item.media_type in (None, "application/pdf")):
            return {"type": "document", "source": {"type": "url", "url": item.url}, "title": item.name}
    return {"type": "text", "text": describe(item)}
