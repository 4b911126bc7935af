"""Make a raw JSON Schema a callable tool's arguments schema: an object whose fields are listed at its root.

Real schemas often describe the arguments object indirectly: a root `$ref` into `$defs`, an `allOf` of
parts, or `anyOf`/`oneOf` alternatives. Taken as written, a root with no `properties` of its own and
toolrun's "unknown fields are refused" rule would refuse every field, and providers that read only the
root's `properties` (Gemini) would see no parameters at all. `callable_root` rewrites the root so that:

- a root `$ref` is replaced by its target (siblings kept, `$defs` kept for nested references);
- the fields of `allOf` parts are listed at the root (properties and `required` unioned; a property two
  parts describe keeps the first description at the root), and the parts themselves stay as declared: the
  validator checks each, MCP `tools/list` shows them as written, provider exports fold them;
- the fields of `anyOf`/`oneOf` alternatives are listed at the root (a field described differently by
  two alternatives gets `anyOf` of the descriptions; a field every alternative requires is required),
  and the alternatives themselves stay: the validator still checks that the arguments match them;
- unknown fields are refused over the union of the fields described anywhere, unless the schema (or one of
  its parts) explicitly allows other keys.

`close_objects` applies the same rule below the root: an object schema that lists `properties` and says
nothing about other keys refuses them, at every depth. Objects that take part in a composition (`allOf`
parts, alternatives beside their parent's own properties, definitions an `allOf` refers to) are left open,
since closing them would refuse their siblings' fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolrun.exceptions import SchemaError

__all__ = ["callable_root", "close_objects", "schema_nodes"]

_MAX_STEPS = 64
_OPENERS = ("additionalProperties", "patternProperties", "unevaluatedProperties")
_COMPOSITION = ("allOf", "anyOf", "oneOf", "$ref", "not", "if", "then", "else", "dependentSchemas")
_DEFS = ("$defs", "definitions")


def _resolve(root: Mapping[str, Any], ref: str) -> Any:
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None
    current: Any = root
    for raw in ref[2:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(current, Mapping) and token in current:
            current = current[token]
        else:
            return None
    return current


def _deref(root: Mapping[str, Any], schema: Any, name: str) -> Any:
    """`schema` with a `$ref` replaced by its target (siblings kept), a bounded number of times."""
    for _ in range(_MAX_STEPS):
        if not isinstance(schema, Mapping) or not isinstance(schema.get("$ref"), str):
            return schema
        ref = schema["$ref"]
        target = _resolve(root, ref)
        if not isinstance(target, Mapping) or target is schema:
            raise SchemaError(f"Tool {name!r}: $ref {ref!r} at the root of the parameters does not resolve.")
        siblings = {k: v for k, v in schema.items() if k != "$ref"}
        schema = {**{k: v for k, v in target.items() if k not in _DEFS}, **siblings}
    raise SchemaError(f"Tool {name!r}: the root $ref of the parameters never reaches a schema.")


def _opens(part: Mapping[str, Any]) -> bool:
    """Whether a schema explicitly allows keys beyond its properties."""
    extra = part.get("additionalProperties")
    return (extra is not None and extra is not False) or bool(part.get("patternProperties"))


def callable_root(schema: dict[str, Any], name: str) -> tuple[dict[str, Any], list[str]]:
    """The schema with its root made an object that lists its fields, and what was changed (see above)."""
    changes: list[str] = []
    if isinstance(schema.get("$ref"), str):
        defs = {k: schema[k] for k in _DEFS if k in schema}
        schema = {**_deref(schema, schema, name), **defs}
        changes.append("/: root $ref replaced by its target")
    root = schema
    open_ = _opens(root)
    props: dict[str, Any] = dict(root.get("properties") or {})
    required: list[str] = list(root.get("required") or [])

    parts = root.get("allOf")
    if isinstance(parts, list):
        # The parts stay as declared (the validator checks each; MCP `tools/list` shows them as written;
        # provider exports fold them): only their fields are listed at the root, so they can be sent.
        pending = list(parts)
        steps = 0
        while pending and steps < _MAX_STEPS * 4:
            steps += 1
            part = _deref(root, pending.pop(0), name)
            if not isinstance(part, Mapping):
                continue
            if isinstance(part.get("allOf"), list):
                pending = [*part["allOf"], {k: v for k, v in part.items() if k != "allOf"}, *pending]
                continue
            open_ = open_ or _opens(part)
            for field, sub in (part.get("properties") or {}).items():
                props.setdefault(field, sub)  # the first description; the allOf still applies them all
            required += [r for r in part.get("required") or () if isinstance(r, str) and r not in required]
        changes.append("/: fields of the allOf parts listed at the root")

    for key in ("anyOf", "oneOf"):
        branches = root.get(key)
        if not isinstance(branches, list) or not branches:
            continue
        seen: dict[str, list[Any]] = {}
        always: set[str] | None = None
        for raw in branches:
            branch = _deref(root, raw, name)
            if not isinstance(branch, Mapping):
                continue
            open_ = open_ or _opens(branch)
            for field, sub in (branch.get("properties") or {}).items():
                variants = seen.setdefault(field, [])
                if sub not in variants:
                    variants.append(sub)
            needed = {r for r in branch.get("required") or () if isinstance(r, str)}
            always = needed if always is None else always & needed
        for field, variants in seen.items():
            if field in props:
                continue  # the root's own description of the field applies to every alternative
            props[field] = variants[0] if len(variants) == 1 else {"anyOf": variants}
        required += sorted(r for r in always or () if r not in required and r in props)
        if seen:
            changes.append(f"/: fields of the {key} alternatives listed at the root")

    root["type"] = root.get("type", "object")
    root["properties"] = props
    if required:
        root["required"] = required
    if not open_ and "additionalProperties" not in root:
        root["additionalProperties"] = False
    return root, changes


def close_objects(schema: dict[str, Any], *, unless_open: bool = False) -> bool:
    """Refuse unknown keys in every nested object schema that lists `properties` and is silent about
    other keys (in place; the root is handled by `callable_root`). Walks iteratively, bounded.

    With `unless_open`, nothing is closed when some object explicitly allows other keys
    (`"additionalProperties": true`), and False is returned; True otherwise.
    """
    blocked: set[int] = set()
    if any(k in schema for k in _DEFS):  # definitions an allOf builds on must stay open
        composed_refs = {
            part["$ref"]
            for node in schema_nodes(schema)
            for part in node.get("allOf") or ()
            if isinstance(part, Mapping) and isinstance(part.get("$ref"), str)
        }
        blocked = {
            id(d) for k in _DEFS for n, d in (schema.get(k) or {}).items() if f"#/{k}/{n}" in composed_refs
        }
    candidates: list[dict[str, Any]] = []
    stack: list[tuple[Any, bool]] = [(schema, False)]
    count = 0
    while stack and count < 20_000:
        count += 1
        node, keep_open = stack.pop()
        if not isinstance(node, dict):
            continue
        if unless_open and node.get("additionalProperties") is True:
            return False
        props = node.get("properties")
        if (
            node is not schema
            and not keep_open
            and isinstance(props, Mapping)
            and id(node) not in blocked
            and not any(k in node for k in _OPENERS)
            and not any(k in node for k in _COMPOSITION)
        ):
            candidates.append(node)
        if isinstance(props, Mapping):
            stack.extend((v, False) for v in props.values())
        for key in ("patternProperties", *_DEFS):
            sub = node.get(key)
            if isinstance(sub, Mapping):
                stack.extend((v, False) for v in sub.values())
        for key in ("items", "additionalProperties", "contains", "then", "else"):
            if key in node:
                stack.append((node[key], False))
        for key in ("not", "if"):
            if key in node:
                stack.append((node[key], True))
        for v in node.get("prefixItems") or ():
            stack.append((v, False))
        for v in node.get("allOf") or ():
            stack.append((v, True))
        for key in ("anyOf", "oneOf"):
            for v in node.get(key) or ():
                stack.append((v, isinstance(props, Mapping)))
    for node in candidates:
        node["additionalProperties"] = False
    return True


def schema_nodes(schema: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    stack = [schema]
    while stack and len(out) < 20_000:
        node = stack.pop()
        if isinstance(node, dict):
            out.append(node)
            stack.extend(v for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            stack.extend(v for v in node if isinstance(v, dict | list))
    return out
