"""Normalise the loose schema dialects found in the wild into valid JSON Schema, saying what changed.

BFCL/Gorilla function docs (and many hand-written tool specs) use Python type names (`"dict"`, `"float"`,
`"tuple"`, `"any"`), an `optional` flag, `"default": null` on types that cannot be null, and `required`
lists naming properties that do not exist. Each fix is recorded as a human-readable change.
"""

from __future__ import annotations

import copy
from typing import Any

from toolrun.exceptions import SchemaError

__all__ = ["normalize_schema"]

MAX_DEPTH = 64

_TYPE_MAP = {
    "dict": "object",
    "Dict": "object",
    "map": "object",
    "float": "number",
    "double": "number",
    "decimal": "number",
    "int": "integer",
    "long": "integer",
    "bool": "boolean",
    "str": "string",
    "text": "string",
    "list": "array",
    "tuple": "array",
    "set": "array",
    "none": "null",
    "NoneType": "null",
}
_JSON_TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
_ANY = frozenset({"any", "Any", "object_any", "mixed"})


def _map_type(value: str) -> str | None:
    """The JSON Schema type for a loose name, or None for 'any'."""
    if value in _JSON_TYPES:
        return value
    if value in _ANY:
        return None
    mapped = _TYPE_MAP.get(value) or _TYPE_MAP.get(value.lower())
    if mapped is None and value.lower() in _JSON_TYPES:
        mapped = value.lower()
    if mapped is None:
        raise SchemaError(f"Unknown type {value!r} in schema; use one of {sorted(_JSON_TYPES)}.")
    return mapped


def _type_admits_null(kind: Any) -> bool:
    return kind is None or kind == "null" or (isinstance(kind, list) and "null" in kind)


def _fix_node(node: dict[str, Any], where: str, changes: list[str]) -> None:
    kind = node.get("type")
    if isinstance(kind, str) and kind not in _JSON_TYPES:
        mapped = _map_type(kind)
        if mapped is None:
            del node["type"]
            changes.append(f"{where}: type {kind!r} → any type (no constraint)")
        else:
            node["type"] = mapped
            changes.append(f"{where}: type {kind!r} → {mapped!r}")
            if kind in ("tuple", "set") and isinstance(node.get("items"), list):
                node["prefixItems"] = node.pop("items")
                changes.append(f"{where}: tuple items → prefixItems")
    elif isinstance(kind, list):
        new: list[Any] = []
        for k in kind:
            mapped = _map_type(k) if isinstance(k, str) else k
            if mapped is None:  # 'any' inside a list of types widens to any type
                new = []
                break
            new.append(mapped)
        if new != kind:
            if new:
                node["type"] = new
            else:
                del node["type"]
            changes.append(f"{where}: type {kind!r} → {new or 'any type'!r}")
    if "optional" in node:
        node.pop("optional")
        changes.append(f"{where}: removed non-standard 'optional' flag")
    if "default" in node and node["default"] is None and not _type_admits_null(node.get("type")):
        del node["default"]
        changes.append(f"{where}: removed 'default: null' on non-nullable type {node.get('type')!r}")
    enum = node.get("enum")
    if node.get("type") == "string" and isinstance(enum, list) and any(not isinstance(v, str) for v in enum):
        node["enum"] = [v if isinstance(v, str) else str(v) for v in enum]
        changes.append(f"{where}: non-string enum values made strings")
    props = node.get("properties")
    if props is not None and not isinstance(props, dict):
        del node["properties"]
        changes.append(f"{where}: removed 'properties' that was not an object")
        props = None
    required = node.get("required")
    if isinstance(required, list) and isinstance(props, dict):
        kept = [r for r in required if r in props]
        optional = [
            name for name, sub in props.items() if isinstance(sub, dict) and sub.get("optional") is True
        ]
        kept = [r for r in kept if r not in optional]
        if kept != required:
            node["required"] = kept
            changes.append(f"{where}: required {required!r} → {kept!r} (names without a property removed)")
    elif required is not None and not isinstance(required, list):
        del node["required"]
        changes.append(f"{where}: removed 'required' that was not a list")


def normalize_schema(schema: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Return a fixed copy of `schema` and the list of changes made. Walks iteratively, at most 64 deep."""
    root = copy.deepcopy(schema)
    changes: list[str] = []
    stack: list[tuple[dict[str, Any], str, int]] = [(root, "$", 0)]
    while stack:
        node, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise SchemaError(f"Schema nested deeper than {MAX_DEPTH} levels at {where}.")
        # 'optional' on a property is read from the parent's view before the child drops it.
        _fix_node(node, where, changes)
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
    return root, changes
