"""Normalise the loose schema dialects found in the wild into valid JSON Schema, saying what changed.

Function docs in public data sets and tool catalogues (BFCL/Gorilla, xLAM/APIGen, ToolBench/RapidAPI,
API-Bank, Glaive, OpenAPI-derived specs, hand-written tool specs) bend JSON Schema in recurring ways: type
names and expressions (`"dict"`, `"List[int]"`, `"str, optional"`), `required` and `optional` flags on
properties, OpenAPI's `nullable`, enums and defaults written as text, properties given as lists or bare type
names, tuples. Each is rewritten to its evident meaning and reported as a `SchemaChange` (a `str` that
reads "$.path: what changed", with the path, kind, value before and after as attributes). The kinds, with
examples: docs/argument-validation.md, "Lenient loading of real-world function docs".

The walk is iterative and refuses nesting deeper than `MAX_DEPTH` levels (the input is untrusted).
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from toolrun.exceptions import SchemaError

__all__ = ["MAX_DEPTH", "SchemaChange", "normalize_schema"]

MAX_DEPTH = 64

_JSON_TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
_NAMES_BY_TYPE = {
    "object": "dict map mapping hashmap treemap linkedhashmap json jsonobject record struct obj",
    "number": "float double decimal real float32 float64 bigdecimal num numeric",
    "integer": "int long short byte int8 int16 int32 int64 uint bigint biginteger",
    "boolean": "bool boolean",
    "string": "str string text char character varchar enum",
    "array": "list tuple set array arraylist sequence iterable collection vector jsonarray",
    "null": "none nonetype null nil void",
}
_NAMES = {name: kind for kind, names in _NAMES_BY_TYPE.items() for name in names.split()}
_FORMATS = {
    "date": "date",
    "datetime": "date-time",
    "date-time": "date-time",
    "timestamp": "date-time",
    "time": "time",
    "uuid": "uuid",
    "email": "email",
    "url": "uri",
    "uri": "uri",
    "path": "path",
    "filepath": "path",
    "binary": "binary",
    "bytes": "binary",
}
_ANY = frozenset(
    ["any", "object_any", "mixed", "callable", "function", "func", "unknown", "type", "typing.any"]
)
_PLURALS = {
    plural: plural[:-1] for plural in ("strings", "integers", "numbers", "booleans", "objects", "ints")
}
_PLURALS.update({p: p[:-1] for p in ("floats", "dicts", "lists")})
_NUMBER_KEYWORDS = [
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
]
_SPEC_KEYS = frozenset(
    ["type", "description", "enum", "default", "items", "properties", "required", "optional", "format"]
)


class SchemaChange(str):
    """One rewrite `normalize_schema` made: reads as `"$.path: what changed"`.

    Attributes:
        path: Where, as `$` (the root) followed by `.property` and `[]` (array items) steps.
        kind: Which quirk (see the module docstring's table), e.g. `"type-name"`, `"required-flag"`.
        before: The value as written (None when a keyword was added).
        after: The value after the rewrite (None when a keyword was removed).
    """

    path: str
    kind: str
    before: Any
    after: Any

    def __new__(cls, path: str, kind: str, text: str, before: Any = None, after: Any = None) -> SchemaChange:
        self = super().__new__(cls, f"{path}: {text}")
        self.path, self.kind, self.before, self.after = path, kind, before, after
        return self

    def as_dict(self) -> dict[str, Any]:
        """The change as plain data (for a JSON report)."""
        return {"path": self.path, "kind": self.kind, "before": self.before, "after": self.after,
                "message": str(self)}  # fmt: skip


def _split_top(text: str, seps: tuple[str, ...]) -> list[str]:
    """`text` split at separators outside brackets."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        ch = text[i]
        if ch in "[(<{":
            depth += 1
        elif ch in "])>}":
            depth -= 1
        elif depth == 0:
            for sep in seps:
                if text.startswith(sep, i):
                    parts.append(text[start:i])
                    start = i + len(sep)
                    i = start - 1
                    break
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _parse_type(text: str, depth: int = 0) -> tuple[dict[str, Any] | None, bool]:
    """A schema for a loose type expression, and whether it says "optional"; None schema means any type."""
    t = text.strip()
    optional = False
    m = re.fullmatch(r"(.*?)\s*[,(]\s*optional\s*\)?", t, re.IGNORECASE)
    if m:
        t, optional = m.group(1).strip(), True
    if depth > 8 or not t:
        return None, optional
    m = re.fullmatch(r"optional\s*[\[<](.*)[\]>]", t, re.IGNORECASE)
    if m:
        inner, _ = _parse_type(m.group(1), depth + 1)
        return _with_null(inner), optional
    m = re.fullmatch(r"union\s*\[(.*)\]", t, re.IGNORECASE)
    parts = _split_top(m.group(1), (",",)) if m else _split_top(t, ("|", " or "))
    if len(parts) > 1:
        nullable = any(p.lower() in ("none", "null", "nonetype", "nil") for p in parts)
        schemas = [
            _parse_type(p, depth + 1)[0] for p in parts if p.lower() not in ("none", "null", "nonetype")
        ]
        if any(s is None for s in schemas):
            return None, optional
        typed = [s for s in schemas if s is not None]
        if all(set(s) == {"type"} and isinstance(s["type"], str) for s in typed):
            kinds = list(dict.fromkeys(s["type"] for s in typed)) + (["null"] if nullable else [])
            return {"type": kinds[0] if len(kinds) == 1 else kinds}, optional
        out: dict[str, Any] = {"anyOf": typed + ([{"type": "null"}] if nullable else [])}
        return (typed[0] if len(typed) == 1 and not nullable else out), optional
    return _parse_single(t, depth), optional


def _parse_single(t: str, depth: int) -> dict[str, Any] | None:
    lower = t.lower().strip()
    m = re.fullmatch(
        r"(?:array|list|sequence|set|tuple|iterable|collection|arraylist|vector)\s*(?:of|<|\[)\s*(.*?)\s*[\]>]?",
        lower,
    )
    if m and m.group(1):
        inner = m.group(1)
        if lower.startswith("tuple") and "," in inner:
            items = [_parse_type(p, depth + 1)[0] or {} for p in _split_top(inner, (",",)) if p != "..."]
            if not inner.rstrip().endswith("..."):
                return {"type": "array", "prefixItems": items, "minItems": len(items), "maxItems": len(items)}
        inner = _PLURALS.get(inner.strip(), inner)
        item, _ = _parse_type(inner.split(",")[0], depth + 1)
        return {"type": "array", "items": item or {}}
    m = re.fullmatch(r"(.+?)\s*\[\s*\]", lower)
    if m:
        item, _ = _parse_type(m.group(1), depth + 1)
        return {"type": "array", "items": item or {}}
    m = re.fullmatch(r"(?:dict|map|mapping|hashmap|object|record)\s*[\[<]\s*[^,]+,\s*(.*?)\s*[\]>]", lower)
    if m:
        value, _ = _parse_type(m.group(1), depth + 1)
        return {"type": "object"} if value is None else {"type": "object", "additionalProperties": value}
    m = re.fullmatch(r"([a-z_.]+)\s*\((.*)\)", lower)  # "number (float)", "string (date)"
    if m:
        outer = _parse_single(m.group(1), depth + 1)
        inner = _FORMATS.get(m.group(2).strip())
        if outer is not None and inner is not None and outer.get("type") == "string":
            return {**outer, "format": inner}
        return outer
    name = lower.removeprefix("typing.").removeprefix("java.lang.").removeprefix("java.util.")
    if name in _JSON_TYPES:
        return {"type": name}
    if name in _NAMES:
        return {"type": _NAMES[name]}
    if name in _FORMATS:
        return {"type": "string", "format": _FORMATS[name]}
    if name in _ANY:
        return None
    generic = re.fullmatch(r"([a-z]+)\s*[\[<].*[\]>]", name)  # List[...] forms not caught above, e.g. Set<>
    if generic and generic.group(1) in _NAMES:
        return {"type": _NAMES[generic.group(1)]}
    return None


def _with_null(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    if schema is None:
        return None
    kind = schema.get("type")
    if isinstance(kind, str):
        return {**schema, "type": [kind, "null"]} if kind != "null" else schema
    if isinstance(kind, list):
        return {**schema, "type": [*kind, "null"]} if "null" not in kind else schema
    return {"anyOf": [schema, {"type": "null"}]}


def _admits_null(kind: Any) -> bool:
    return kind is None or kind == "null" or (isinstance(kind, list) and "null" in kind)


def _number(value: Any) -> Any:
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            try:
                return float(text)
            except ValueError:
                return value
    return value


class _Normalizer:
    def __init__(self) -> None:
        self.changes: list[SchemaChange] = []

    def note(self, path: str, kind: str, text: str, before: Any = None, after: Any = None) -> None:
        self.changes.append(SchemaChange(path, kind, text, before, after))

    # -- shapes -----------------------------------------------------------------------------------------

    def spec_list(self, specs: list[Any], where: str) -> dict[str, Any]:
        """`[{"name": "a", "type": "str", "required": true}, ...]` (API-Bank, ToolBench) as an object."""
        props: dict[str, Any] = {}
        required: list[str] = []
        for spec in specs:
            if isinstance(spec, dict) and isinstance(spec.get("name"), str):
                sub = {k: v for k, v in spec.items() if k != "name"}
                if sub.pop("required", False) is True:
                    required.append(spec["name"])
                props[spec["name"]] = sub
        self.note(where, "object-shape", "list of parameter specs → properties", None, sorted(props))
        out: dict[str, Any] = {"type": "object", "properties": props}
        if required:
            out["required"] = required
        return out

    def root(self, schema: Any) -> dict[str, Any]:
        if isinstance(schema, list):
            return self.spec_list(schema, "$")
        if not isinstance(schema, dict):
            raise SchemaError(f"The parameters schema must be an object, got {type(schema).__name__}.")
        looks_flat = (
            schema
            and "properties" not in schema
            and not isinstance(schema.get("type"), str)
            and all(isinstance(v, dict) and set(v) & _SPEC_KEYS for v in schema.values())
        )
        if looks_flat:  # xLAM/APIGen: {"name": {"type": "str", "description": ...}, ...}
            self.note("$", "object-shape", "a map of parameter specs → properties", None, sorted(schema))
            return {"type": "object", "properties": dict(schema)}
        return schema

    # -- one node ---------------------------------------------------------------------------------------

    def node(self, node: dict[str, Any], where: str) -> None:
        self.types(node, where)
        if isinstance(node.get("optional"), bool):  # read by the parent (`lift_flags`), then removed
            self.note(where, "optional", "removed non-standard 'optional' flag")
        if node.get("nullable") is True:
            del node["nullable"]
            before = node.get("type")
            if "type" in node and not _admits_null(before):
                node["type"] = [before, "null"] if isinstance(before, str) else [*(before or []), "null"]
                if isinstance(node.get("enum"), list) and None not in node["enum"]:
                    node["enum"].append(None)
                self.note(
                    where, "nullable", f"'nullable: true' → type {node['type']!r}", before, node["type"]
                )
            else:
                self.note(where, "nullable", "removed 'nullable: true' (the type already admits null)")
        elif "nullable" in node and not isinstance(node["nullable"], dict):
            del node["nullable"]
            self.note(where, "nullable", "removed 'nullable: false'")
        self.enum(node, where)
        self.default(node, where)
        for key in _NUMBER_KEYWORDS:
            value = node.get(key)
            if isinstance(value, str):
                number = _number(value)
                if isinstance(number, int | float):
                    node[key] = number
                    self.note(where, "number-keyword", f"{key} {value!r} → {number!r}", value, number)
                else:
                    del node[key]
                    self.note(where, "number-keyword", f"removed {key} {value!r} (not a number)", value)
        examples = node.get("examples")
        if examples is not None and not isinstance(examples, list):
            node["examples"] = [examples]
            self.note(where, "examples", "examples made a list", examples, node["examples"])
        if "description" in node and not isinstance(node["description"], str):
            node["description"] = str(node["description"])
            self.note(where, "description", "description made a string")
        items = node.get("items")
        if isinstance(items, str):
            parsed, _ = _parse_type(items)
            node["items"] = parsed or {}
            self.note(where, "items", f"items {items!r} → {node['items']!r}", items, node["items"])
        elif isinstance(items, list) and items and all(isinstance(i, str) for i in items):
            schemas = [(_parse_type(i)[0] or {}) for i in items]
            node["items"] = schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
            self.note(where, "items", f"items {items!r} → {node['items']!r}", items, node["items"])
        self.array_enum(node, where)
        extra = node.get("additionalProperties")
        if isinstance(extra, str):
            parsed, _ = _parse_type(extra)
            node["additionalProperties"] = parsed if parsed is not None else True
            self.note(
                where, "type-name", f"additionalProperties {extra!r} → {node['additionalProperties']!r}"
            )
        self.properties(node, where)

    def types(self, node: dict[str, Any], where: str) -> None:
        kind = node.get("type")
        if (kind is None and "type" in node) or kind == "":
            del node["type"]
            self.note(where, "type-any", f"type {kind!r} → any type (no constraint)", kind)
            return
        if isinstance(kind, str) and kind not in _JSON_TYPES:
            parsed, optional = _parse_type(kind)
            if optional:
                node["optional"] = True  # read by the parent, then removed
            if parsed is None:
                del node["type"]
                self.note(where, "type-any", f"type {kind!r} → any type (no constraint)", kind)
                return
            items = node.get("items")
            if (
                kind.strip().lower() in ("tuple", "set")
                and isinstance(items, list)
                and not all(isinstance(i, str) for i in items)
            ):
                node["prefixItems"] = node.pop("items")
                self.note(where, "tuple", "tuple items → prefixItems")
            for key, value in parsed.items():
                if key == "type" or key not in node:
                    node[key] = value
            simple = set(parsed) == {"type"} and isinstance(parsed["type"], str)
            what = "type-name" if simple else "type-format" if "format" in parsed else "type-expression"
            after = parsed["type"] if simple else parsed
            self.note(where, what, f"type {kind!r} → {after!r}", kind, after)
        elif isinstance(kind, list):
            new: list[Any] = []
            for k in kind:
                parsed = _parse_type(k)[0] if isinstance(k, str) else None
                if parsed is None or not isinstance(parsed.get("type"), str):
                    new = []
                    break
                if parsed["type"] not in new:
                    new.append(parsed["type"])
            if new != kind:
                if new:
                    node["type"] = new if len(new) > 1 else new[0]
                else:
                    del node["type"]
                self.note(where, "type-list", f"type {kind!r} → {new or 'any type'!r}", kind, new or None)
        elif kind is not None and not isinstance(kind, str | list):
            del node["type"]
            self.note(where, "type-any", f"type {kind!r} → any type (no constraint)", kind)

    def enum(self, node: dict[str, Any], where: str) -> None:
        enum = node.get("enum")
        if isinstance(enum, str):
            values = [v.strip() for v in re.split(r"[|,]", enum) if v.strip()]
            node["enum"] = values
            self.note(where, "enum-string", f"enum {enum!r} → {values!r}", enum, values)
        elif enum is not None and not isinstance(enum, list):
            node["enum"] = [enum]
            self.note(where, "enum-string", "enum made a list", enum, [enum])
        enum = node.get("enum")
        if (
            node.get("type") == "string"
            and isinstance(enum, list)
            and any(not isinstance(v, str) for v in enum)
        ):
            node["enum"] = [v if isinstance(v, str) else str(v) for v in enum]
            self.note(where, "enum-values", "non-string enum values made strings", enum, node["enum"])
        elif node.get("type") in ("integer", "number") and isinstance(enum, list):
            numbers = [_number(v) for v in enum]
            if numbers != enum and all(isinstance(v, int | float) for v in numbers):
                node["enum"] = numbers
                self.note(
                    where, "enum-values", "numeric enum values written as text made numbers", enum, numbers
                )

    def array_enum(self, node: dict[str, Any], where: str) -> None:
        """An `enum` of scalars on an array lists the allowed items (BFCL live functions, many hand-written
        specs): read literally no list equals a string, and every valid call would be refused."""
        enum, items = node.get("enum"), node.get("items", {})
        if (
            node.get("type") != "array"
            or not isinstance(enum, list)
            or not enum
            or any(isinstance(v, list) for v in enum)  # a list among them: an enum of whole arrays
            or not isinstance(items, dict)
        ):
            return
        del node["enum"]
        node["items"] = items if "enum" in items else {**items, "enum": enum}
        self.note(where, "enum-items", "array-level enum of items → items.enum", enum, node["items"])

    def default(self, node: dict[str, Any], where: str) -> None:
        if "default" not in node:
            return
        value, kind = node["default"], node.get("type")
        if value is None and not _admits_null(kind):
            del node["default"]
            self.note(where, "default", f"removed 'default: null' on non-nullable type {kind!r}", None)
            return
        kinds = {kind} if isinstance(kind, str) else set(kind) if isinstance(kind, list) else set()
        if not isinstance(value, str) or "string" in kinds or not kinds:
            return
        text = value.strip().lower()
        new: Any = value
        if kinds & {"integer", "number"}:
            new = _number(value)
            if isinstance(new, float) and "number" not in kinds:
                new = int(new) if new.is_integer() else value
        if new is value and "boolean" in kinds and text in ("true", "false"):
            new = text == "true"
        if new is value and "null" in kinds and text in ("none", "null"):
            new = None
        if new is value and kinds & {"array", "object"}:
            try:
                decoded = json.loads(value)
            except ValueError:
                decoded = value
            if isinstance(decoded, list | dict):
                new = decoded
        if new is not value:
            node["default"] = new
            self.note(where, "default", f"default {value!r} → {new!r}", value, new)
        else:
            del node["default"]
            self.note(where, "default", f"removed default {value!r} (not a {'/'.join(sorted(kinds))})", value)

    def properties(self, node: dict[str, Any], where: str) -> None:
        props = node.get("properties")
        if isinstance(props, list):
            shaped = self.spec_list(props, where)
            node["properties"] = props = shaped["properties"]
            node["required"] = [*(node.get("required") or []), *shaped.get("required", [])]
        if props is not None and not isinstance(props, dict):
            del node["properties"]
            self.note(where, "object-shape", "removed 'properties' that was not an object")
            props = None
        if isinstance(props, dict):
            if "type" not in node:
                node["type"] = "object"
                self.note(
                    where, "object-shape", "'properties' without a type → type 'object'", None, "object"
                )
            for name, sub in list(props.items()):
                if isinstance(sub, str):
                    parsed, _ = _parse_type(sub)
                    props[name] = parsed or {}
                    self.note(f"{where}.{name}", "object-shape", f"bare type {sub!r} → {props[name]!r}", sub)
        required = node.get("required")
        if isinstance(required, str):
            names = [r.strip() for r in re.split(r"[,\s]+", required) if r.strip()]
            node["required"] = names
            self.note(where, "required-string", f"required {required!r} → {names!r}", required, names)
        elif isinstance(required, bool):
            pass  # a flag on a property: its parent reads it (see `lift_flags`)
        elif required is not None and not isinstance(required, list):
            del node["required"]
            self.note(where, "required-string", "removed 'required' that was not a list", required)

    def lift_flags(self, node: dict[str, Any], where: str) -> None:
        """Per-property `required`/`optional` flags and object-level `optional` lists, into `required`."""
        props = node.get("properties")
        if not isinstance(props, dict):
            return
        required = node.get("required")
        original = list(required) if isinstance(required, list) else []
        names = list(original)
        for name, sub in props.items():
            if not isinstance(sub, dict):
                continue
            flag = sub.get("required")
            if isinstance(flag, bool):
                del sub["required"]
                if flag and name not in names:
                    names.append(name)
                self.note(
                    f"{where}.{name}", "required-flag", f"'required: {str(flag).lower()}' → parent's required"
                )
            if sub.get("optional") is True and name in names:
                names.remove(name)
        optional = node.get("optional")
        if isinstance(optional, list):
            del node["optional"]
            names = [n for n in names if n not in optional]
            self.note(where, "optional", f"'optional' list {optional!r} → not required", optional)
        kept = [r for r in names if isinstance(r, str) and r in props]
        dropped = [r for r in names if r not in kept]
        if dropped:
            text = f"required {names!r} → {kept!r} (names without a property removed)"
            self.note(where, "required-unknown", text, names, kept)
        if kept != original or "required" in node:
            if kept:
                node["required"] = kept
            else:
                node.pop("required", None)


def normalize_schema(schema: Any) -> tuple[dict[str, Any], list[SchemaChange]]:
    """Return a fixed copy of `schema` and the changes made. Walks iteratively, at most 64 levels deep."""
    try:
        copied = copy.deepcopy(schema)
    except RecursionError:
        raise SchemaError("The parameters schema is nested too deeply to copy.") from None
    work = _Normalizer()
    root = work.root(copied)
    # Pre-order: each node is fixed before its children are queued (a property's bare type string becomes a
    # schema first); post-order: required flags are lifted once the children have been read.
    order: list[tuple[dict[str, Any], str]] = []
    stack: list[tuple[dict[str, Any], str, int]] = [(root, "$", 0)]
    while stack:
        node, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise SchemaError(f"Schema nested deeper than {MAX_DEPTH} levels at {where}.")
        work.node(node, where)
        order.append((node, where))
        for name, sub in (node.get("properties") or {}).items():
            if isinstance(sub, dict):
                stack.append((sub, f"{where}.{name}", depth + 1))
        items = node.get("items")
        if isinstance(items, dict):
            stack.append((items, f"{where}[]", depth + 1))
        for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            for i, sub in enumerate(node.get(key) or ()):
                if isinstance(sub, dict):
                    stack.append((sub, f"{where}.{key}[{i}]", depth + 1))
        additional = node.get("additionalProperties")
        if isinstance(additional, dict):
            stack.append((additional, f"{where}.additionalProperties", depth + 1))
        for defs in ("$defs", "definitions"):
            for name, sub in (node.get(defs) or {}).items():
                if isinstance(sub, dict):
                    stack.append((sub, f"{where}.{defs}.{name}", depth + 1))
    for node, where in order:
        work.lift_flags(node, where)
    for node, where in order:
        if "optional" in node and not isinstance(node["optional"], dict):
            del node["optional"]
        if isinstance(node.get("required"), bool):
            del node["required"]
            work.note(where, "required-flag", "removed a 'required' flag that has no parent object")
    return root, work.changes
