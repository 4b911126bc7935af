"""Schema transformers: one bounded walker, one subclass per provider dialect.

A tool's `parameters` is provider-neutral JSON Schema. Each provider accepts a different subset of it, so an
export copies the schema node by node through a `SchemaTransformer` whose subclass rewrites each node for one
dialect (OpenAI strict, Anthropic strict, Gemini's OpenAPI subset). Provider differences live in those
subclasses and nowhere else.

The walk is bounded because schemas are untrusted (MCP servers, users, data sets):

- nesting deeper than `MAX_DEPTH` schema levels raises `SchemaError` (never `RecursionError`);
- every node produced counts toward `MAX_NODES`, so a `$ref` fan-out that would expand exponentially
  stops with `SchemaError`;
- a `$ref` that is inlined is expanded at most `MAX_UNROLL` times along one path; deeper recursion is cut
  (see `SchemaTransformer.recursion_cut`).

Three rules every subclass follows, so that what a model sends under the exported schema still passes the
tool's own validator (`Tool.validate`, which always checks the *original* schema):

1. Prefer a *narrower* schema to a wider one when a construct cannot be expressed (first branch of a union,
   a closed object, a string for "any value"), and say so in `changes`.
2. A keyword the dialect does not accept is moved into the node's `description` as text ("Default: 10.",
   "Minimum: 1."), never silently dropped; only pure metadata (`$schema`, `$id`, `$comment`, ...) is dropped.
3. Only a parameter of the root object may be made nullable for an optional value: the validator reads
   `null` there as "use the default". Nested optional properties are never given a `null` they would reject.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final
from urllib.parse import unquote

from toolrun.exceptions import SchemaError

__all__ = [
    "MAX_DEPTH",
    "MAX_NODES",
    "MAX_UNROLL",
    "At",
    "PlainSchema",
    "SchemaTransformer",
    "admits_null",
    "bound_items",
    "described",
    "descriptive",
    "label",
    "list_value",
    "mapping_value",
    "pop_tuple",
    "positions",
    "resolve_pointer",
    "tuple_items",
    "type_names",
    "with_notes",
    "words",
]


def words(text: str) -> frozenset[str]:
    """A keyword table written as space-separated words."""
    return frozenset(text.split())


MAX_DEPTH: Final = 64
"""Schema nesting (properties, items, union branches, inlined `$ref`s) an export walks before giving up."""
MAX_NODES: Final = 20_000
"""Schema nodes one export may produce; stops `$ref` fan-outs that would expand exponentially."""
MAX_UNROLL: Final = 2
"""How many times an inlined recursive `$ref` is expanded along one path before the recursion is cut."""

# Keywords whose values are schemas, by shape.
SCHEMA_MAPS: Final = ("properties", "patternProperties", "dependentSchemas", "$defs", "definitions")
SCHEMA_LISTS: Final = ("anyOf", "oneOf", "allOf", "prefixItems")
SCHEMA_ONE: Final = ("items", "not", "if", "then", "else", "contains", "propertyNames", "contentSchema")
SCHEMA_OR_BOOL: Final = (
    "additionalProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
)
DEFINITIONS: Final = ("$defs", "definitions")

# Keywords by the instance type they constrain (used to split a `type` list into union branches).
OBJECT_KEYS: Final = words(
    "properties required additionalProperties patternProperties propertyNames minProperties maxProperties "
    "dependentRequired dependentSchemas unevaluatedProperties"
)
ARRAY_KEYS: Final = words(
    "items prefixItems minItems maxItems uniqueItems contains minContains maxContains unevaluatedItems "
    "additionalItems"
)
STRING_KEYS: Final = words("minLength maxLength pattern format contentEncoding contentMediaType")
NUMBER_KEYS: Final = words("minimum maximum exclusiveMinimum exclusiveMaximum multipleOf")
_TYPE_KEYS: Final = {
    "object": OBJECT_KEYS,
    "array": ARRAY_KEYS,
    "string": STRING_KEYS,
    "number": NUMBER_KEYS,
    "integer": NUMBER_KEYS,
}
METADATA: Final = words(
    "$schema $id $comment $anchor $dynamicAnchor $vocabulary discriminator readOnly writeOnly"
)
"""Keywords with no meaning for a model; dialects that reject them drop them without a note."""
TYPING_KEYS: Final = ("type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "not")
"""A node with none of these (nor object/array keywords) accepts any value."""

_MAX_SHOWN = 160


def show(value: Any) -> str:
    """A short JSON rendering of a value for description text."""
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=False, default=str)
    except (TypeError, ValueError, RecursionError):
        text = f"<{type(value).__name__}>"
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 1] + "…"


def _count(value: Any, noun: str) -> str:
    return f"{show(value)} {noun}" + ("" if value == 1 else "s")


_NOTES: Final[dict[str, Callable[[Any], str]]] = {
    "default": lambda v: f"Default: {show(v)}.",
    "minimum": lambda v: f"Minimum: {show(v)}.",
    "maximum": lambda v: f"Maximum: {show(v)}.",
    "exclusiveMinimum": lambda v: f"Greater than {show(v)}.",
    "exclusiveMaximum": lambda v: f"Less than {show(v)}.",
    "multipleOf": lambda v: f"A multiple of {show(v)}.",
    "minLength": lambda v: f"At least {_count(v, 'character')}.",
    "maxLength": lambda v: f"At most {_count(v, 'character')}.",
    "minItems": lambda v: f"At least {_count(v, 'item')}.",
    "maxItems": lambda v: f"At most {_count(v, 'item')}.",
    "minProperties": lambda v: f"At least {_count(v, 'key')}.",
    "maxProperties": lambda v: f"At most {_count(v, 'key')}.",
    "uniqueItems": lambda v: "Items must be unique." if v is True else f"uniqueItems: {show(v)}.",
    "pattern": lambda v: f"Must match the regular expression {v if isinstance(v, str) else show(v)}.",
    "format": lambda v: f"Format: {v if isinstance(v, str) else show(v)}.",
    "examples": lambda v: f"Examples: {', '.join(show(x) for x in v) if isinstance(v, list) else show(v)}.",
    "const": lambda v: f"Must be exactly {show(v)}.",
    "enum": lambda v: f"Allowed values: {', '.join(show(x) for x in v) if isinstance(v, list) else show(v)}.",
    "deprecated": lambda v: "Deprecated." if v is True else f"deprecated: {show(v)}.",
    "additionalProperties": lambda v: f"Other keys: {label(v) if isinstance(v, Mapping) else show(v)}.",
}


def note(key: str, value: Any) -> str | None:
    """The description sentence for a keyword moved out of a schema (None when it says nothing new).

    A `null` default says nothing a model does not already assume, so it gets no sentence.
    """
    if key == "default" and value is None:
        return None
    make = _NOTES.get(key)
    return make(value) if make is not None else f"{key}: {show(value)}."


def with_notes(description: Any, notes: list[str]) -> str | None:
    """`description` followed by `notes`, as sentences; None when both are empty."""
    text = description.strip() if isinstance(description, str) else ""
    if not notes:
        return text or None
    if text and text[-1] not in ".!?:)":
        text += "."
    return " ".join([text, *notes]) if text else " ".join(notes)


def described(node: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """`node`, changed in place, with `notes` added to its description (dropped when both are empty)."""
    text = with_notes(node.get("description"), notes)
    if text is None:
        node.pop("description", None)
    else:
        node["description"] = text
    return node


def type_names(schema: Mapping[str, Any]) -> list[str]:
    """The `type` keyword as a list of strings."""
    value = schema.get("type")
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [t for t in value if isinstance(t, str)]
    return []


def is_untyped(schema: Mapping[str, Any]) -> bool:
    """True for a node that accepts any value as far as its type is concerned (`{}`, only a description)."""
    return not any(k in schema for k in TYPING_KEYS) and not any(
        k in schema for k in ("properties", "items", "prefixItems", "additionalProperties")
    )


def admits_null(schema: Any, _depth: int = 0) -> bool:
    """Whether `null` is valid for this schema, judged from its type-bearing keywords (bounded)."""
    if not isinstance(schema, Mapping):
        return schema is not False
    if _depth > 8:
        return False
    if "null" in type_names(schema):
        return True
    if "type" in schema:
        return False
    enum = schema.get("enum")
    if isinstance(enum, list):
        return None in enum
    if "const" in schema:
        return schema["const"] is None
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list):
            return any(admits_null(b, _depth + 1) for b in branches)
    return "$ref" not in schema and not any(k in schema for k in ("properties", "items", "allOf", "not"))


def label(schema: Any, _depth: int = 0) -> str:
    """A few words naming what a schema accepts ("array of integer"), for description text."""
    if not isinstance(schema, Mapping) or _depth > 3:
        return "any value"
    if "const" in schema:
        return show(schema["const"])
    enum = schema.get("enum")
    if isinstance(enum, list):
        return "one of " + ", ".join(show(v) for v in enum[:12]) + (", …" if len(enum) > 12 else "")
    names = type_names(schema)
    if names:
        parts = []
        for name in names:
            if name == "array" and isinstance(schema.get("items"), Mapping):
                parts.append(f"array of {label(schema['items'], _depth + 1)}")
            else:
                parts.append(name.lower())
        return " or ".join(parts)
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            return " or ".join(label(b, _depth + 1) for b in branches[:6])
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return ref.rsplit("/", 1)[-1] or "a referenced schema"
    if "properties" in schema:
        return "object"
    return "any value"


_MISSING: Final = object()


def resolve_pointer(root: Any, ref: str) -> Any:
    """The value a local `#/...` JSON pointer designates in `root`, or `_MISSING`."""
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return _MISSING
    current = root
    for raw in ref[2:].split("/"):
        token = unquote(raw).replace("~1", "/").replace("~0", "~")
        if isinstance(current, Mapping) and token in current:
            current = current[token]
        elif isinstance(current, list) and token.isdigit() and int(token) < len(current):
            current = current[int(token)]
        else:
            return _MISSING
    return current


def descriptive(node: Mapping[str, Any]) -> dict[str, Any]:
    """The node's `title` and `description`, to carry over to a schema that replaces it."""
    return {key: node[key] for key in ("title", "description") if key in node}


def mapping_value(node: Mapping[str, Any], key: str) -> dict[str, Any]:
    """`node[key]` when it is an object, else an empty one."""
    value = node.get(key)
    return value if isinstance(value, dict) else {}


def list_value(node: Mapping[str, Any], key: str) -> list[Any]:
    """`node[key]` when it is a list, else an empty one."""
    value = node.get(key)
    return value if isinstance(value, list) else []


def is_missing(value: Any) -> bool:
    return value is _MISSING


def clone(value: Any) -> Any:
    """A deep copy of a JSON value (enum, default, examples), refusing absurd nesting."""
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    try:
        return copy.deepcopy(value)
    except RecursionError:
        raise SchemaError(
            "a value in the schema (default, enum, example) is nested too deeply to copy"
        ) from None


def split_types(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One schema per non-null entry of a `type` list, each with only the keywords that apply to it.

    `{"type": ["string", "array"], "items": {...}, "maxLength": 3}` becomes
    `[{"type": "string", "maxLength": 3}, {"type": "array", "items": {...}}]`. A `null` entry is left out;
    callers add a null branch themselves when they need one.
    """
    typed = {k for keys in _TYPE_KEYS.values() for k in keys}
    common = {k: v for k, v in node.items() if k not in typed and k not in ("type", "description", "title")}
    branches = []
    for name in type_names(node):
        if name == "null":
            continue
        own = _TYPE_KEYS.get(name, frozenset())
        branch = {"type": name, **{k: v for k, v in node.items() if k in own}, **common}
        if isinstance(branch.get("enum"), list):
            branch["enum"] = [v for v in branch["enum"] if _fits(v, name)]
        branches.append(branch)
    return branches


def pop_tuple(node: dict[str, Any]) -> tuple[list[Any], Any] | None:
    """Take a tuple's keywords out of `node`: its item schemas in order, and what may follow them.

    The item schemas are `prefixItems`, or an old-style `items` list; what may follow is the `items` left
    beside `prefixItems` (None when absent). Returns None when `node` is no tuple; an empty or malformed
    `prefixItems` (or `items` list) is still taken out.
    """
    prefix = node.pop("prefixItems", None)
    if isinstance(node.get("items"), list):
        prefix = node.pop("items")
    if not isinstance(prefix, list) or not prefix:
        return None
    return prefix, node.pop("items", None)


def tuple_items(prefix: list[Any], rest: Any) -> list[Any]:
    """The distinct schemas a tuple's items may take, in order: `prefix`, then `rest` when it is a schema."""
    unique: list[Any] = []
    for item in [*prefix, *([rest] if isinstance(rest, dict) else [])]:
        if item not in unique:
            unique.append(item)
    return unique


def bound_items(node: dict[str, Any], count: int) -> None:
    """Limit an array `node` to exactly `count` items (a closed tuple), keeping bounds that are stricter."""
    node["minItems"] = max(node.get("minItems", 0), count)
    node["maxItems"] = min(node.get("maxItems", count), count)


def positions(prefix: list[Any]) -> str:
    """A tuple's item schemas by position, for description text ("1: integer; 2: string")."""
    return "; ".join(f"{i + 1}: {label(p)}" for i, p in enumerate(prefix))


def _fits(value: Any, type_name: str) -> bool:
    checks: dict[str, Callable[[Any], bool]] = {
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
        "array": lambda v: isinstance(v, list),
        "object": lambda v: isinstance(v, dict),
    }
    check = checks.get(type_name)
    return check(value) if check is not None else True


def iter_nodes(schema: Any) -> Iterator[tuple[dict[str, Any], int, str]]:
    """Every mapping node of an *exported* schema with its container level and pointer (iterative).

    The level counts enclosing object/array nodes (the node's own included when it is one); union branches
    share their parent's level; `$defs` entries start again at 0. Exports are already bounded, so this walk
    needs no depth limit of its own, but it is iterative anyway.
    """
    stack: list[tuple[Any, int, str]] = [(schema, 0, "")]
    while stack:
        node, above, path = stack.pop()
        if not isinstance(node, dict):
            continue
        container = (
            bool({"object", "array"} & set(type_names(node))) or "properties" in node or "items" in node
        )
        level = above + (1 if container else 0)
        yield node, level, path
        children: list[tuple[Any, int, str]] = []
        for key in SCHEMA_MAPS:
            value = node.get(key)
            if isinstance(value, dict):
                start = 0 if key in DEFINITIONS else level
                children.extend((sub, start, f"{path}/{key}/{name}") for name, sub in value.items())
        for key in ("items", "additionalProperties", *SCHEMA_ONE[1:]):
            if isinstance(node.get(key), dict):
                children.append((node[key], level, f"{path}/{key}"))
        for key in SCHEMA_LISTS:
            value = node.get(key)
            if isinstance(value, list):
                start = level if key == "prefixItems" else above
                children.extend((sub, start, f"{path}/{key}/{i}") for i, sub in enumerate(value))
        stack.extend(reversed(children))


@dataclass(frozen=True, slots=True)
class At:
    """Where a node sits in the schema being transformed."""

    path: str = ""
    """JSON pointer into the original schema ("" for the root)."""
    depth: int = 0
    """Schema nesting so far, inlined `$ref`s included (bounded by `MAX_DEPTH`)."""
    via: str = ""
    """The keyword that led here: "properties", "items", "anyOf", ...; "" at the root."""
    parameter: bool = False
    """The node is a parameter: a property of the root object."""

    @property
    def is_root(self) -> bool:
        return self.via == "" and self.depth == 0

    def child(self, via: str, key: str | int | None = None) -> At:
        path = f"{self.path}/{via}" if key is None else f"{self.path}/{via}/{_escape(key)}"
        return At(path=path, depth=self.depth + 1, via=via, parameter=via == "properties" and self.is_root)

    def inlined(self) -> At:
        return At(path=self.path, depth=self.depth + 1, via=self.via or "$ref", parameter=self.parameter)


def _escape(key: str | int) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


class SchemaTransformer:
    """Copies a JSON Schema for one provider dialect, node by node, within fixed bounds.

    The base class copies faithfully: it only turns boolean schemas into objects (`true` → `{}`,
    `false` → `{"not": {}}`; `additionalProperties` and friends keep their booleans). Subclasses override:

    - `keep_ref(ref)`: keep a `$ref` as written (default) or inline its target.
    - `keep_definitions(key, definitions, at)`: which `$defs` entries the output keeps.
    - `prepare(node, at)`: reshape a node before its children are walked (merge `allOf`, collapse unions).
    - `rewrite(node, at)`: reshape a node after its children were walked (the dialect's rules).
    - `recursion_cut(node, at)` / `unresolved(node, ref, at)`: what replaces a cut or dangling `$ref`.
    - `finish(schema)`: whole-schema limits and budgets on the result.

    `changes` lists, for developers, what the export changed in ways a reader of the original would not
    expect (text moved into descriptions is listed too).
    """

    max_depth: ClassVar[int] = MAX_DEPTH
    max_nodes: ClassVar[int] = MAX_NODES
    max_unroll: ClassVar[int] = MAX_UNROLL

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.root = schema
        self.changes: list[str] = []
        self.findings: list[tuple[str, str, str]] = []
        """Losses a checker reports as warnings: (rule, JSON pointer into the exported schema, message)."""
        self.free_form: list[str] = []
        """Pointers of objects whose keys a strict dialect cannot describe (`dict[str, X]`, free-form)."""
        self._nodes = 0
        self._inlining: list[str] = []
        self._cuts: list[dict[str, Any]] = []  # kept alive so that their ids stay unique

    def transform(self) -> dict[str, Any]:
        """The exported schema (a new object; the input is never modified)."""
        try:
            result = self.walk(self.root, At())
        except RecursionError:  # a guard: the walk is depth-bounded well below Python's limit
            raise SchemaError(f"schema nests too deeply to export (limit {self.max_depth} levels)") from None
        return self.finish(result)

    # -- the walk ---------------------------------------------------------------------------------------

    def walk(self, schema: Any, at: At) -> dict[str, Any]:
        """Copy one node and everything below it."""
        if at.depth > self.max_depth:
            raise SchemaError(
                f"schema nests deeper than {self.max_depth} levels at {at.path or '/'}; flatten it or move "
                "repeated parts into $defs"
            )
        self._nodes += 1
        if self._nodes > self.max_nodes:
            raise SchemaError(
                f"schema expands to more than {self.max_nodes} nodes (a $ref fan-out?); simplify it"
            )
        if isinstance(schema, bool):
            schema = {} if schema else {"not": {}}
        if not isinstance(schema, Mapping):
            raise SchemaError(f"expected a schema object at {at.path or '/'}, found {type(schema).__name__}")
        node = {str(k): v for k, v in schema.items()}
        ref = node.get("$ref")
        if isinstance(ref, str) and not self.keep_ref(ref):
            return self._inline(node, ref, at)
        node = self.prepare(node, at)
        ref = node.get("$ref")
        if isinstance(ref, str) and not self.keep_ref(ref):  # prepare() merged a `$ref` branch in
            return self.walk(node, at.inlined())
        out: dict[str, Any] = {}
        for key, value in node.items():
            copied = self._child(key, value, at)
            if copied is not _MISSING:
                out[key] = copied
        return self.rewrite(out, at)

    def _child(self, key: str, value: Any, at: At) -> Any:
        if key in DEFINITIONS and isinstance(value, Mapping):
            kept = self.keep_definitions(key, value, at)
            if kept is None:
                return _MISSING
            return {str(n): self.walk(sub, at.child(key, str(n))) for n, sub in kept.items()}
        if key in SCHEMA_MAPS and isinstance(value, Mapping):
            return {str(n): self.walk(sub, at.child(key, str(n))) for n, sub in value.items()}
        if key in SCHEMA_LISTS and isinstance(value, list):
            return [self.walk(sub, at.child(key, i)) for i, sub in enumerate(value)]
        if key == "items" and isinstance(value, list):  # draft-4 tuple form
            return [self.walk(sub, at.child(key, i)) for i, sub in enumerate(value)]
        if key in SCHEMA_ONE and isinstance(value, Mapping | bool):
            return self.walk(value, at.child(key))
        if key in SCHEMA_OR_BOOL and isinstance(value, Mapping):
            return self.walk(value, at.child(key))
        return clone(value)

    def _inline(self, node: dict[str, Any], ref: str, at: At) -> dict[str, Any]:
        target = resolve_pointer(self.root, ref)
        if target is _MISSING or not isinstance(target, Mapping | bool):
            self.changes.append(f"{at.path or '/'}: $ref {ref!r} does not resolve inside the schema")
            return self.unresolved(node, ref, at)
        if self._inlining.count(ref) >= self.max_unroll:
            self.changes.append(
                f"{at.path or '/'}: recursive $ref {ref!r} cut after {self.max_unroll} levels"
            )
            cut = self.recursion_cut(node, at)
            self._cuts.append(cut)
            return cut
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        if isinstance(target, bool):
            base: dict[str, Any] = {} if target else {"not": {}}
        else:
            base = {str(k): v for k, v in target.items() if k not in DEFINITIONS}
        self._inlining.append(ref)
        try:
            return self.walk({**base, **siblings}, at.inlined())
        finally:
            self._inlining.pop()

    # -- hooks ------------------------------------------------------------------------------------------

    def keep_ref(self, ref: str) -> bool:
        """Whether a `$ref` stays as written (True) or is replaced by its target (False)."""
        return True

    def keep_definitions(self, key: str, definitions: Mapping[str, Any], at: At) -> Mapping[str, Any] | None:
        """The `$defs`/`definitions` entries to keep (None drops the keyword)."""
        return definitions

    def prepare(self, node: dict[str, Any], at: At) -> dict[str, Any]:
        """Reshape a node (still in the original dialect) before its children are walked."""
        return node

    def rewrite(self, node: dict[str, Any], at: At) -> dict[str, Any]:
        """Reshape a copied node whose children are already transformed."""
        return node

    def recursion_cut(self, node: dict[str, Any], at: At) -> dict[str, Any]:
        """What stands in for a recursive `$ref` expanded `max_unroll` times already."""
        raise SchemaError(f"recursive $ref at {at.path or '/'} cannot be inlined")

    def unresolved(self, node: dict[str, Any], ref: str, at: At) -> dict[str, Any]:
        """What stands in for a `$ref` that must be inlined but does not resolve."""
        raise SchemaError(f"$ref {ref!r} at {at.path or '/'} does not resolve inside the schema")

    def finish(self, schema: dict[str, Any]) -> dict[str, Any]:
        """Whole-schema checks and budgets on the transformed root."""
        return schema

    # -- helpers for subclasses -------------------------------------------------------------------------

    def is_cut(self, schema: Any) -> bool:
        """Whether `schema` is (or offers only through a union or its items) a cut recursive `$ref`."""
        if not isinstance(schema, dict):
            return False
        ids = {id(cut) for cut in self._cuts}
        if id(schema) in ids or id(schema.get("items")) in ids:
            return True
        branches = schema.get("anyOf")
        return isinstance(branches, list) and any(id(b) in ids for b in branches)

    def drop_cut_properties(self, node: dict[str, Any], at: At) -> None:
        """Leave out optional properties that only lead into a cut recursion (a model may omit them)."""
        props = node.get("properties")
        if not isinstance(props, dict):
            return
        required = list_value(node, "required")
        for name in [n for n, sub in props.items() if n not in required and self.is_cut(sub)]:
            del props[name]
            self.changes.append(f"{at.path or '/'}/properties/{name}: optional recursion left out at the cut")

    def root_alternatives(self, node: dict[str, Any], notes: list[str]) -> None:
        """State the root's `anyOf`/`oneOf`/`allOf` in its description (providers take no root unions).

        The tool's validator still enforces them; the fields they describe are listed in the root's
        `properties` already (`Tool.from_schema`). A checker finding says the provider sees them as text.
        """
        for key in ("anyOf", "oneOf", "allOf"):
            if key not in node:
                continue
            branches = node.pop(key)
            # What was said about the alternatives' own nodes no longer applies: they are text now.
            self.free_form = [p for p in self.free_form if not p.startswith(f"/{key}/")]
            self.findings = [f for f in self.findings if not f[1].startswith(f"/{key}/")]
            if isinstance(branches, list):
                joined = "; ".join(self.alternative(b) for b in branches)
            else:
                joined = label(branches)
            word = "all" if key == "allOf" else "one"
            notes.append(f"Must match {word} of: {joined}.")
            self.changes.append(f"/: top-level '{key}' moved into the description")
            self.findings.append(
                (
                    "SCHEMA-ROOT-UNION",
                    "",
                    f"the root '{key}' cannot be sent to this provider as a schema: its alternatives are "
                    "stated in the description, every field is listed as a property, and the tool's "
                    "validator still enforces them.",
                )
            )

    def alternative(self, branch: Any) -> str:
        """A few words naming an object alternative by its fields ("fields a (required), b")."""
        branch = self.resolve(branch)
        props = branch.get("properties") if isinstance(branch, Mapping) else None
        if not isinstance(props, Mapping) or not props:
            return label(branch)
        required = set(list_value(branch, "required")) if isinstance(branch, dict) else set()
        return "fields " + ", ".join(f"{n} (required)" if n in required else str(n) for n in props)

    def move(self, node: dict[str, Any], key: str, notes: list[str], at: At, *, why: str = "") -> None:
        """Take `key` out of `node` and keep its meaning as a description sentence."""
        if key not in node:
            return
        value = node.pop(key)
        text = note(key, value)
        if text is not None:
            notes.append(text)
        self.changes.append(f"{at.path or '/'}: '{key}' moved into the description{why}")

    def resolve(self, schema: Any) -> Any:
        """A `$ref` node replaced by its target merged with its siblings (one step; others unchanged)."""
        if not isinstance(schema, Mapping) or not isinstance(schema.get("$ref"), str):
            return schema
        target = resolve_pointer(self.root, schema["$ref"])
        if not isinstance(target, Mapping):
            return schema
        siblings = {k: v for k, v in schema.items() if k != "$ref"}
        return {**{k: v for k, v in target.items() if k not in DEFINITIONS}, **siblings}

    def merge_all_of(self, node: dict[str, Any], at: At) -> dict[str, Any]:
        """Fold `allOf` branches into the node (properties and required are unioned; a property two
        branches describe differently becomes the `allOf` of both descriptions).

        Branches that are `$ref`s are resolved first (one step; a branch that is itself an `allOf` is folded
        in turn, a bounded number of times). Keywords that conflict with what the node already says cannot
        be folded: they stay in a smaller `allOf` for the subclass to handle.
        """
        merged = {k: v for k, v in node.items() if k != "allOf"}
        pending = list(node.get("allOf") or [])
        leftover: list[Any] = []
        rounds = 0
        while pending and rounds < 64:
            rounds += 1
            branch = self.resolve(pending.pop(0))
            if branch is True or branch == {}:
                continue
            if not isinstance(branch, Mapping) or isinstance(branch.get("$ref"), str):
                leftover.append(branch)
                continue
            if isinstance(branch.get("allOf"), list):
                pending = [*branch["allOf"], {k: v for k, v in branch.items() if k != "allOf"}, *pending]
                continue
            conflict: dict[str, Any] = {}
            for key, value in branch.items():
                if key == "properties" and isinstance(value, Mapping):
                    props = dict(merged.get("properties") or {})
                    for name, sub in value.items():
                        if name in props and props[name] != sub:
                            # Both branches constrain the property: it must meet both, which is the
                            # property's own `allOf` (folded in turn when the walk reaches it). Left as a
                            # separate `{"properties": ...}` fragment, it would read as an open object.
                            props[name] = {"allOf": [props[name], sub]}
                        else:
                            props[name] = sub
                    merged["properties"] = props
                elif key == "required" and isinstance(value, list):
                    have = list(merged.get("required") or [])
                    merged["required"] = have + [r for r in value if r not in have]
                elif key in ("description", "title") or key in METADATA:
                    merged.setdefault(key, value)
                elif key not in merged or merged[key] == value:
                    merged[key] = value
                elif key == "additionalProperties":
                    continue  # each branch closes only over its own properties; the merge is wider
                else:
                    conflict[key] = value
            if conflict:
                leftover.append(conflict)
        if leftover:
            merged["allOf"] = leftover
        self.changes.append(f"{at.path or '/'}: allOf folded into one schema")
        return merged


class PlainSchema(SchemaTransformer):
    """A faithful copy whose root is a plain object schema.

    Providers reject (Anthropic, ANT-SCHEMA-2) or advise against (OpenAI, OAI-PARAMS-1) `anyOf`, `oneOf` and
    `allOf` at the top level of a tool's parameters: a top-level `allOf` is folded into the root, and
    `anyOf`/`oneOf` alternatives are stated in the root's description (the tool's validator still enforces
    them). Everything below the root is copied as it is.
    """

    def prepare(self, node: dict[str, Any], at: At) -> dict[str, Any]:
        if at.is_root and isinstance(node.get("allOf"), list):
            node = self.merge_all_of(node, at)
        return node

    def rewrite(self, node: dict[str, Any], at: At) -> dict[str, Any]:
        if not at.is_root:
            return node
        notes: list[str] = []
        self.root_alternatives(node, notes)
        if notes:
            node["description"] = with_notes(node.get("description"), notes)
        return node
