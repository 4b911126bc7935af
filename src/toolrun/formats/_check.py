"""Conformance checker: does a tool definition meet a provider's documented rules?

Design. ``check`` picks a *provider* class (one per API: envelope, name, which schemas to walk) and hands
each parameter schema to a *schema rule set* (one small class per provider and mode) built on
``_SchemaRules``, an iterative, depth-bounded walker. The walker visits every schema node once: ``$ref``
is never followed (``$defs`` entries are visited in place, so cycles cannot loop), nesting past
``MAX_DEPTH`` is reported as ``SCHEMA-TOO-DEEP`` instead of descended, and non-object nodes are reported,
never trusted. Rule sets override ``visit`` (per node) and ``finish`` (whole-schema limits).

Rule IDs and severities follow ``provider-schema-rules.md``: ``"error"`` means the API rejects the request
(a MUST), ``"warning"`` means the request is accepted but degraded, or the sources disagree. IDs the
document does not define are generic: ``SCHEMA-TOO-DEEP``, ``SCHEMA-INVALID``, ``SCHEMA-REF-UNRESOLVED``,
``DESC-EMPTY``, ``REQ-DUP-NAME``, ``GEM-JS-IGNORED`` and the ``MCP-*`` rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal
from urllib.parse import unquote

from toolrun.exceptions import SchemaError
from toolrun.formats._schema import is_missing, resolve_pointer, type_names
from toolrun.tools import PROVIDER_NAME_PATTERN, Tool

__all__ = ["MAX_DEPTH", "PROVIDERS", "Violation", "check", "check_request"]

Severity = Literal["error", "warning"]

#: Schema nesting (in walk steps: properties, items, anyOf branches, ...) beyond which the walk stops.
MAX_DEPTH = 64


@dataclass(frozen=True, kw_only=True, slots=True)
class Violation:
    """One broken rule in a tool definition.

    Attributes:
        rule: Rule ID from ``provider-schema-rules.md`` (e.g. ``"OAI-S-ADDPROPS"``) or a generic ID.
        path: JSON pointer into the definition (in ``check_request``: into the list of definitions).
        message: What is wrong and how to fix it.
        severity: ``"error"`` when the provider rejects it (MUST); ``"warning"`` for SHOULD or unclear.
    """

    rule: str
    path: str
    message: str
    severity: Severity


# --------------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------------


def _words(text: str) -> frozenset[str]:
    """Keyword tables are written as space-separated words to stay readable."""
    return frozenset(text.split())


# Annotation keywords carry no validation meaning; strict subsets accept them.
_ANNOTATIONS = _words("title description $schema $id $comment examples deprecated readOnly writeOnly")
_PRIMITIVES = (str, int, float, bool, type(None))


def _show(value: object, limit: int = 80) -> str:
    """Render an untrusted value for a message: short, and never recursing into containers."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        text = "<large integer>"  # str() of huge ints raises ValueError (int_max_str_digits)
    elif isinstance(value, _PRIMITIVES):
        text = repr(value)
    else:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _key(key: object) -> str:
    """A mapping key as text (JSON keys are strings; Python callers may pass anything hashable)."""
    return key if isinstance(key, str) else _show(key)


def _join(path: str, key: object) -> str:
    """Append one JSON-pointer token (escaping ``~`` and ``/`` per RFC 6901)."""
    return f"{path}/{_key(key).replace('~', '~0').replace('/', '~1')}"


def _is_object(schema: Mapping[Any, Any]) -> bool:
    return "object" in type_names(schema) or ("properties" in schema and "type" not in schema)


def _is_container(schema: Mapping[Any, Any]) -> bool:
    types = type_names(schema)
    return "object" in types or "array" in types or any(k in schema for k in ("properties", "items"))


def _required(schema: Mapping[Any, Any]) -> set[str]:
    value = schema.get("required")
    return {item for item in value if isinstance(item, str)} if isinstance(value, list) else set()


def _scalar_len(value: object) -> int:
    """Length of an enum/const value for OAI-L-STRLEN; containers count 0 (stringifying could recurse)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return len(str(value)) if value.bit_length() <= 256 else value.bit_length() * 30103 // 100000 + 1
    return len(str(value)) if isinstance(value, _PRIMITIVES) else 0


def _complex_regex(pattern: str) -> str | None:
    """Name the first construct outside Anthropic's "simple regex" subset, or ``None``."""
    in_class = False
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            escaped = pattern[i + 1]
            # Inside a character class, \b means backspace and digits are octal: not the constructs we want.
            if not in_class:
                if escaped in "bB":
                    return "a word boundary (\\b)"
                if escaped in "123456789" or escaped == "k":
                    return "a backreference"
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif pattern.startswith(("(?=", "(?!", "(?<=", "(?<!"), i):
            return "a lookaround"
        elif pattern.startswith("(?P=", i):
            return "a backreference"
        i += 1
    return None


def _camel(key: object) -> str:
    """Gemini's proto JSON parser accepts snake_case field names too; compare them in camelCase."""
    text = _key(key)
    head, *rest = text.split("_")
    if not head or not rest:
        return text
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _free_form_paths(schema: Mapping[Any, Any]) -> list[str]:
    """Pointers of object schemas open to keys beyond their properties (bounded, iterative, in order)."""
    found: list[str] = []
    stack: list[tuple[object, str, int]] = [(schema, "", 0)]
    seen = 0
    while stack and seen < 20_000:
        node, ptr, depth = stack.pop()
        seen += 1
        if not isinstance(node, Mapping) or depth > MAX_DEPTH:
            continue
        kinds = node.get("type")
        is_object = (
            kinds == "object"
            or (isinstance(kinds, list) and "object" in kinds)
            or (kinds is None and "properties" in node)
        )
        if is_object and (
            node.get("additionalProperties", True) is not False or node.get("patternProperties")
        ):
            found.append(ptr)
        children: list[tuple[object, str, int]] = []
        for key in ("properties", "$defs", "definitions"):
            value = node.get(key)
            if isinstance(value, Mapping):
                children.extend((sub, f"{ptr}/{key}/{_key(n)}", depth + 1) for n, sub in value.items())
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), Mapping):
                children.append((node[key], f"{ptr}/{key}", depth + 1))
        for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            value = node.get(key)
            if isinstance(value, list):
                children.extend((sub, f"{ptr}/{key}/{i}", depth + 1) for i, sub in enumerate(value))
        stack.extend(reversed(children))
    return found


class _Report:
    """Collects violations; one place that builds ``Violation`` objects."""

    def __init__(self) -> None:
        self.items: list[Violation] = []

    def error(self, rule: str, path: str, message: str) -> None:
        self.items.append(Violation(rule=rule, path=path, message=message, severity="error"))

    def warn(self, rule: str, path: str, message: str) -> None:
        self.items.append(Violation(rule=rule, path=path, message=message, severity="warning"))

    def add(self, rule: str, path: str, message: str, severity: Severity) -> None:
        self.items.append(Violation(rule=rule, path=path, message=message, severity=severity))


# --------------------------------------------------------------------------------------------------
# Schema walker and per-provider schema rule sets
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Node:
    schema: object
    ptr: str  # JSON pointer relative to the schema root ("" = root)
    depth: int  # walk depth, bounded by MAX_DEPTH
    above: int  # object/array levels enclosing this node (OAI-L-DEPTH); its own level adds 1 if a container


class _SchemaRules:
    """Structure-only rules (non-strict OpenAI/Anthropic, MCP) and the walk every rule set shares."""

    #: Keywords whose value maps names to sub-schemas that describe nested data.
    MAP_KEYS: ClassVar[tuple[str, ...]] = ("properties", "patternProperties", "dependentSchemas")
    #: Keywords whose value is a list of alternative/combined sub-schemas at the same data level.
    BRANCH_KEYS: ClassVar[tuple[str, ...]] = ("anyOf", "oneOf", "allOf")
    #: Keywords holding one sub-schema at the same data level.
    SINGLE_KEYS: ClassVar[tuple[str, ...]] = ("not", "if", "then", "else")
    #: Keywords mapping names to definitions (walked once each, in place; ``$ref`` is never followed).
    DEFS_KEYS: ClassVar[tuple[str, ...]] = ("$defs", "definitions")
    #: Severity of ``true``/``false`` used as a schema: valid JSON Schema, but not in strict subsets.
    BOOL_SCHEMA: ClassVar[Severity] = "warning"
    #: Severity of a local ``$ref`` that points nowhere.
    UNRESOLVED_REF: ClassVar[Severity] = "warning"
    #: Whether ``$ref`` is a JSON-Schema keyword in this dialect (Gemini's Schema spells it ``ref``).
    JSON_SCHEMA_REFS: ClassVar[bool] = True

    def __init__(self, report: _Report, base: str) -> None:
        self.report = report
        self.base = base
        self.root: object = None
        self.refs: list[tuple[str, str]] = []  # (pointer of the $ref node, local target without '#')
        self._too_deep = False

    def path(self, ptr: str) -> str:
        return self.base + ptr

    # -- driver -------------------------------------------------------------------------------------

    def walk(self, schema: object) -> None:
        """Visit every node of ``schema`` depth-first with an explicit stack (no recursion), then finish."""
        self.root = schema
        stack = [_Node(schema, "", 0, 0)]
        while stack:
            node = stack.pop()
            if node.depth > MAX_DEPTH:
                # One report per schema is enough; the rest of a hostile tree would only repeat it.
                if not self._too_deep:
                    self._too_deep = True
                    self.report.error(
                        "SCHEMA-TOO-DEEP",
                        self.path(node.ptr),
                        f"schema nests deeper than {MAX_DEPTH} levels; nothing below here was checked. "
                        "Flatten the schema or move shared parts into $defs.",
                    )
                continue
            if not isinstance(node.schema, Mapping):
                self.non_mapping(node)
                continue
            self.visit(node)
            # Reversed so that violations come out in document order.
            stack.extend(reversed(list(self.children(node))))
        self.finish()

    def children(self, node: _Node) -> Iterator[_Node]:
        schema = node.schema
        assert isinstance(schema, Mapping)
        own = node.above + (1 if _is_container(schema) else 0)
        depth = node.depth + 1
        for key in self.MAP_KEYS:
            value = self.get(schema, key)
            if value is None:
                continue
            if not isinstance(value, Mapping):
                self.invalid(node, key, "must be an object mapping names to schemas")
                continue
            for name, sub in value.items():
                yield _Node(sub, _join(_join(node.ptr, key), name), depth, own)
        additional = self.get(schema, "additionalProperties")
        if isinstance(additional, Mapping):
            yield _Node(additional, _join(node.ptr, "additionalProperties"), depth, own)
        elif additional is not None and not isinstance(additional, bool):
            self.invalid(node, "additionalProperties", "must be a boolean or a schema")
        items = self.get(schema, "items")
        if isinstance(items, list):  # draft-4 tuple form
            yield from (
                _Node(sub, _join(_join(node.ptr, "items"), i), depth, own) for i, sub in enumerate(items)
            )
        elif items is not None:
            yield _Node(items, _join(node.ptr, "items"), depth, own)
        for key in ("prefixItems", *self.BRANCH_KEYS):
            value = self.get(schema, key)
            if value is None:
                continue
            if not isinstance(value, list):
                self.invalid(node, key, "must be a list of schemas")
                continue
            # Branches describe the same value, so they sit at the same data level (prefixItems does not).
            above = own if key == "prefixItems" else node.above
            yield from (
                _Node(sub, _join(_join(node.ptr, key), i), depth, above) for i, sub in enumerate(value)
            )
        for key in self.SINGLE_KEYS:
            if key in schema:
                yield _Node(schema[key], _join(node.ptr, key), depth, node.above)
        for key in self.DEFS_KEYS:
            value = self.get(schema, key)
            if value is None:
                continue
            if not isinstance(value, Mapping):
                self.invalid(node, key, "must be an object mapping names to schemas")
                continue
            for name, sub in value.items():
                yield _Node(sub, _join(_join(node.ptr, key), name), depth, 0)

    def get(self, schema: Mapping[Any, Any], key: str) -> Any:
        """Look a keyword up (Gemini overrides this to accept snake_case spellings)."""
        return schema.get(key)

    # -- hooks ----------------------------------------------------------------------------------------

    def visit(self, node: _Node) -> None:
        """Check one mapping node. The base class checks only the shape of common keywords."""
        schema = node.schema
        assert isinstance(schema, Mapping)
        value = schema.get("type")
        if not (value is None or isinstance(value, str)) and not (
            isinstance(value, list) and all(isinstance(t, str) for t in value)
        ):
            self.invalid(node, "type", "must be a string or a list of strings")
        required = schema.get("required")
        if required is not None and not (
            isinstance(required, list) and all(isinstance(r, str) for r in required)
        ):
            self.invalid(node, "required", "must be a list of property names")
        if "enum" in schema and not isinstance(schema["enum"], list):
            self.invalid(node, "enum", "must be a list of values")
        for key in ("format", "pattern", "description"):
            if key in schema and not isinstance(schema[key], str):
                self.invalid(node, key, "must be a string")
        ref = schema.get("$ref") if self.JSON_SCHEMA_REFS else None
        if ref is not None:
            if not isinstance(ref, str):
                self.invalid(node, "$ref", "must be a string")
            elif ref == "#" or ref.startswith("#/"):
                self.refs.append((node.ptr, unquote(ref[1:])))
                if is_missing(resolve_pointer(self.root, ref)):
                    self.report.add(
                        "SCHEMA-REF-UNRESOLVED",
                        self.path(_join(node.ptr, "$ref")),
                        f"$ref {_show(ref)} does not resolve inside this schema; add the $defs entry "
                        "or fix the pointer.",
                        self.UNRESOLVED_REF,
                    )
            elif not ref.startswith("#"):  # "#name" is a same-document anchor: local, but not a pointer
                self.external_ref(node, ref)

    def non_mapping(self, node: _Node) -> None:
        """A schema position holds something other than an object."""
        if isinstance(node.schema, bool):
            self.report.add(
                "SCHEMA-INVALID",
                self.path(node.ptr),
                f"boolean schema `{str(node.schema).lower()}`: use an object schema "
                "(e.g. {} for 'anything'); providers' schema subsets expect objects.",
                self.BOOL_SCHEMA,
            )
        else:
            self.report.error(
                "SCHEMA-INVALID",
                self.path(node.ptr),
                f"expected a schema object here, found {type(node.schema).__name__}.",
            )

    def external_ref(self, node: _Node, ref: str) -> None:
        """A ``$ref`` that is not a local JSON pointer; only strict subsets forbid it."""

    def finish(self) -> None:
        """Whole-schema checks after the walk (size limits, recursion)."""

    def invalid(self, node: _Node, key: str, what: str) -> None:
        self.report.error("SCHEMA-INVALID", self.path(_join(node.ptr, key)), f"'{_key(key)}' {what}.")


class _OpenAIStrictRules(_SchemaRules):
    """OpenAI Structured Outputs subset (§1.2) and its size limits (§1.3)."""

    BOOL_SCHEMA: ClassVar[Severity] = "error"
    UNRESOLVED_REF: ClassVar[Severity] = "error"
    TYPES = _words("string number boolean integer object array null")
    FORMATS = _words("date-time time date duration email hostname ipv4 ipv6 uuid")
    UNSUPPORTED = _words("allOf not dependentRequired dependentSchemas if then else")
    FINE_TUNED_ONLY = frozenset(
        {"minLength", "maxLength"}
    )  # the only FT keys whose base-model status is unclear
    SUPPORTED = _ANNOTATIONS | _words(
        "type enum const anyOf properties required additionalProperties items $ref $defs definitions pattern "
        "format multipleOf maximum exclusiveMaximum minimum exclusiveMinimum minItems maxItems default"
    )
    MAX_PROPS, MAX_LEVELS, MAX_STRLEN, MAX_ENUM, OLD_MAX_ENUM = 5_000, 10, 120_000, 1_000, 500
    BIG_ENUM, BIG_ENUM_CHARS = 250, 15_000

    def __init__(self, report: _Report, base: str) -> None:
        super().__init__(report, base)
        self.props = 0
        self.strlen = 0
        self.enum_values = 0
        self._depth_reported = False

    def visit(self, node: _Node) -> None:
        super().visit(node)
        schema = node.schema
        assert isinstance(schema, Mapping)
        path = self.path(node.ptr)
        for key in schema:
            if key in self.UNSUPPORTED:
                self.report.error(
                    "OAI-S-UNSUPPORTED",
                    _join(path, key),
                    f"'{_key(key)}' is rejected in strict mode; rewrite it "
                    "(inline allOf, drop conditionals) or turn strict off.",
                )
            elif key in self.FINE_TUNED_ONLY:
                self.report.warn(
                    "OAI-S-FT",
                    _join(path, key),
                    f"'{_key(key)}' is rejected by fine-tuned models and not documented "
                    "for base models in strict mode; move the limit into the description.",
                )
            elif key not in self.SUPPORTED:
                self.report.warn(
                    "OAI-S-UNSUPPORTED",
                    _join(path, key),
                    f"'{_key(key)}' is not in the documented strict-mode subset; it may be rejected or "
                    "ignored.",
                )
        self._check_types(schema, path)
        if _is_object(schema):
            self._check_object(schema, path)
        fmt = schema.get("format")
        if isinstance(fmt, str) and fmt not in self.FORMATS:
            self.report.error(
                "OAI-S-STRING",
                _join(path, "format"),
                f"format {_show(fmt)} is not supported in strict mode; use one of "
                f"{', '.join(sorted(self.FORMATS))} or drop it.",
            )
        if "default" in schema:
            self.report.warn(
                "OAI-S-DEFAULT",
                _join(path, "default"),
                "'default' was rejected in strict mode ('default' is not permitted) and is still rejected by "
                "Azure OpenAI; state the default in the description instead.",
            )
        self._measure(node, schema, path)

    def _check_types(self, schema: Mapping[Any, Any], path: str) -> None:
        for name in type_names(schema):
            if name not in self.TYPES:
                self.report.error(
                    "OAI-S-TYPES", _join(path, "type"), f"type {_show(name)} is not supported in strict mode."
                )
        if "type" not in schema and not any(
            k in schema for k in ("enum", "const", "anyOf", "$ref", "allOf", "oneOf", "not")
        ):
            self.report.warn(
                "OAI-S-TYPES",
                path,
                "schema has no 'type' (nor enum/const/anyOf/$ref); strict mode expects one.",
            )

    def _check_object(self, schema: Mapping[Any, Any], path: str) -> None:
        if schema.get("additionalProperties") is not False:
            self.report.error(
                "OAI-S-ADDPROPS",
                _join(path, "additionalProperties"),
                'strict mode requires "additionalProperties": false on every object.',
            )
        properties = schema.get("properties")
        if not isinstance(properties, Mapping):
            return
        required = _required(schema)
        for name in properties:
            if name not in required:
                self.report.error(
                    "OAI-S-REQUIRED",
                    _join(_join(path, "properties"), name),
                    f"property {_show(name)} is missing from 'required'; strict mode requires every property "
                    'there. Make it optional with a null union ("type": ["string", "null"]).',
                )
        for name in sorted(required - {_key(k) for k in properties}):
            self.report.warn(
                "OAI-S-REQUIRED",
                _join(path, "required"),
                f"'required' names {_show(name)}, which is not a property.",
            )

    def _measure(self, node: _Node, schema: Mapping[Any, Any], path: str) -> None:
        """Accumulate the §1.3 size counters for this node."""
        level = node.above + (1 if _is_container(schema) else 0)
        if level > self.MAX_LEVELS and not self._depth_reported:
            self._depth_reported = True
            self.report.error(
                "OAI-L-DEPTH",
                path,
                f"object/array nesting reaches level {level}; strict mode allows {self.MAX_LEVELS} (older "
                "docs: 5). Array levels are counted too.",
            )
        properties = schema.get("properties")
        if isinstance(properties, Mapping):
            self.props += len(properties)
            self.strlen += sum(len(_key(name)) for name in properties)
        for key in self.DEFS_KEYS:
            defs = schema.get(key)
            if isinstance(defs, Mapping):
                self.strlen += sum(len(_key(name)) for name in defs)
        if "const" in schema:
            self.strlen += _scalar_len(schema["const"])
        enum = schema.get("enum")
        if isinstance(enum, list):
            self.enum_values += len(enum)
            lengths = [_scalar_len(value) for value in enum]
            self.strlen += sum(lengths)
            chars = sum(lengths)
            if (
                len(enum) > self.BIG_ENUM
                and all(isinstance(v, str) for v in enum)
                and chars > self.BIG_ENUM_CHARS
            ):
                self.report.error(
                    "OAI-L-ENUMSTR",
                    _join(path, "enum"),
                    f"string enum with {len(enum)} values totals {chars} characters; above {self.BIG_ENUM} "
                    f"values the limit is {self.BIG_ENUM_CHARS}.",
                )

    def finish(self) -> None:
        root = self.path("")
        if self.props > self.MAX_PROPS:
            self.report.error(
                "OAI-L-PROPS",
                root,
                f"{self.props} object properties in total; strict mode allows {self.MAX_PROPS}.",
            )
        if self.strlen > self.MAX_STRLEN:
            self.report.error(
                "OAI-L-STRLEN",
                root,
                f"property/definition names and enum/const values total {self.strlen} characters; "
                f"strict mode allows {self.MAX_STRLEN}.",
            )
        if self.enum_values > self.MAX_ENUM:
            self.report.error(
                "OAI-L-ENUM",
                root,
                f"{self.enum_values} enum values in total; strict mode allows {self.MAX_ENUM}.",
            )
        elif self.enum_values > self.OLD_MAX_ENUM:
            self.report.warn(
                "OAI-L-ENUM",
                root,
                f"{self.enum_values} enum values in total; an earlier limit of {self.OLD_MAX_ENUM} "
                "was reported.",
            )

    def external_ref(self, node: _Node, ref: str) -> None:
        self.report.warn(
            "OAI-S-DEFS",
            self.path(_join(node.ptr, "$ref")),
            f"$ref {_show(ref)} is not a local reference; only local $ref into $defs/definitions "
            "is documented.",
        )


class _AnthropicStrictRules(_SchemaRules):
    """Anthropic strict tool use subset (§2.2); also counts optional and union parameters (ANT-L-*)."""

    BOOL_SCHEMA: ClassVar[Severity] = "error"
    UNRESOLVED_REF: ClassVar[Severity] = "error"
    TYPES = _words("object array string integer number boolean null")
    FORMATS = _words("date-time time date duration email hostname uri ipv4 ipv6 uuid")
    UNSUPPORTED = _words(
        "minimum maximum exclusiveMinimum exclusiveMaximum multipleOf minLength maxLength maxItems"
    )
    DROPPED = _words("minProperties maxProperties uniqueItems")  # dropped by several SDK ports
    SUPPORTED = _ANNOTATIONS | _words(
        "type enum const anyOf allOf $ref $defs definitions default required properties additionalProperties "
        "items format pattern minItems"
    )
    MAX_OPTIONAL, MAX_UNIONS = 24, 16
    MAX_REF_SITES = 500  # recursion detection is quadratic in $ref sites; bound it for hostile input

    def __init__(self, report: _Report, base: str) -> None:
        super().__init__(report, base)
        self.optional = 0
        self.unions = 0

    def visit(self, node: _Node) -> None:
        super().visit(node)
        schema = node.schema
        assert isinstance(schema, Mapping)
        path = self.path(node.ptr)
        for key in schema:
            if key in self.UNSUPPORTED:
                self.report.error(
                    "ANT-S-UNSUPPORTED",
                    _join(path, key),
                    f"'{_key(key)}' is not supported by strict tool use; "
                    "move the constraint into the description and validate it yourself.",
                )
            elif key in self.DROPPED:
                self.report.warn(
                    "ANT-S-UNSUPPORTED",
                    _join(path, key),
                    f"'{_key(key)}' is dropped by Anthropic SDKs for strict schemas; do not rely on it.",
                )
            elif key not in self.SUPPORTED:
                self.report.warn(
                    "ANT-S-SUPPORTED",
                    _join(path, key),
                    f"'{_key(key)}' is not in the documented strict subset.",
                )
        for name in type_names(schema):
            if name not in self.TYPES:
                self.report.error(
                    "ANT-S-SUPPORTED", _join(path, "type"), f"type {_show(name)} is not a JSON type."
                )
        self._check_values(schema, path)
        if _is_object(schema):
            if schema.get("additionalProperties") is not False:
                self.report.error(
                    "ANT-S-ADDPROPS",
                    _join(path, "additionalProperties"),
                    'strict tool use requires "additionalProperties": false on every object.',
                )
            properties = schema.get("properties")
            if isinstance(properties, Mapping):
                required = _required(schema)
                self.optional += sum(1 for name in properties if name not in required)
        types = schema.get("type")
        if "anyOf" in schema or (isinstance(types, list) and len(types) > 1):
            self.unions += 1

    def _check_values(self, schema: Mapping[Any, Any], path: str) -> None:
        fmt = schema.get("format")
        if isinstance(fmt, str) and fmt not in self.FORMATS:
            self.report.error(
                "ANT-S-SUPPORTED",
                _join(path, "format"),
                f"format {_show(fmt)} is not supported; use one of {', '.join(sorted(self.FORMATS))}.",
            )
        enum = schema.get("enum")
        if isinstance(enum, list):
            for i, value in enumerate(enum):
                if not isinstance(value, _PRIMITIVES):
                    self.report.error(
                        "ANT-S-SUPPORTED",
                        _join(_join(path, "enum"), i),
                        "enum values must be primitives (string, number, boolean, null).",
                    )
                    break
        min_items = schema.get("minItems")
        if min_items is not None and min_items not in (0, 1):
            self.report.error(
                "ANT-S-SUPPORTED",
                _join(path, "minItems"),
                f"minItems {_show(min_items)} is not supported; only 0 or 1.",
            )
        pattern = schema.get("pattern")
        if isinstance(pattern, str) and (construct := _complex_regex(pattern)):
            self.report.error(
                "ANT-S-SUPPORTED",
                _join(path, "pattern"),
                f"pattern uses {construct}; only simple regex is supported.",
            )
        all_of = schema.get("allOf")
        if isinstance(all_of, list) and any(isinstance(b, Mapping) and "$ref" in b for b in all_of):
            self.report.error(
                "ANT-S-SUPPORTED",
                _join(path, "allOf"),
                "allOf combined with $ref is not supported; inline the referenced schema.",
            )

    def external_ref(self, node: _Node, ref: str) -> None:
        self.report.error(
            "ANT-S-UNSUPPORTED",
            self.path(_join(node.ptr, "$ref")),
            f"external $ref {_show(ref)} is not supported; copy the schema into $defs.",
        )

    def finish(self) -> None:
        root = self.path("")
        if self.optional > self.MAX_OPTIONAL:
            self.report.error(
                "ANT-L-OPTIONAL",
                root,
                f"{self.optional} optional parameters; strict tool use allows "
                f"{self.MAX_OPTIONAL} across all strict tools of a request.",
            )
        if self.unions > self.MAX_UNIONS:
            self.report.error(
                "ANT-L-UNION",
                root,
                f"{self.unions} parameters use anyOf or a type array; strict tool use "
                f"allows {self.MAX_UNIONS} across all strict tools of a request.",
            )
        self._check_recursion()

    def _check_recursion(self) -> None:
        """Report a ``$ref`` that closes a cycle (a schema that, expanded, contains itself)."""
        sites = self.refs
        if len(sites) > self.MAX_REF_SITES:
            self.report.warn(
                "ANT-S-UNSUPPORTED",
                self.path(""),
                f"{len(sites)} $ref sites: too many to check for recursion, which strict tool use rejects.",
            )
            return
        # Edge a -> b when ref a's target, once expanded, contains ref b. $defs inside the target are not
        # expanded (they only apply when referenced), hence the token check.
        edges = [[j for j, (loc, _) in enumerate(sites) if _applies(target, loc)] for _, target in sites]
        state = [0] * len(sites)  # 0 new, 1 on the DFS stack, 2 done
        for start in range(len(sites)):
            if state[start]:
                continue
            state[start] = 1
            stack = [(start, iter(edges[start]))]
            while stack:
                here, successors = stack[-1]
                nxt = next(successors, None)
                if nxt is None:
                    state[here] = 2
                    stack.pop()
                elif state[nxt] == 1:
                    self.report.error(
                        "ANT-S-UNSUPPORTED",
                        self.path(_join(sites[here][0], "$ref")),
                        "recursive schema: this $ref leads back to itself; strict tool use rejects "
                        "recursion. Unroll it to a fixed depth.",
                    )
                    return
                elif state[nxt] == 0:
                    state[nxt] = 1
                    stack.append((nxt, iter(edges[nxt])))


def _applies(target: str, loc: str) -> bool:
    """Whether the node at ``loc`` is part of the schema that ``target`` expands to."""
    if loc == target:
        return True
    if not loc.startswith(target + "/"):
        return False
    # Definitions below the target only apply when referenced; a property that happens to be called
    # "$defs" (the token after "properties") is ordinary content.
    tokens = loc[len(target) + 1 :].split("/")
    return not any(
        token in _SchemaRules.DEFS_KEYS and (i == 0 or tokens[i - 1] not in _SchemaRules.MAP_KEYS)
        for i, token in enumerate(tokens)
    )


class _GeminiSchemaRules(_SchemaRules):
    """Gemini ``parameters``: the OpenAPI 3.0 Schema subset (§3.2), oldest field set by default."""

    BOOL_SCHEMA: ClassVar[Severity] = "error"
    DEFS_KEYS: ClassVar[tuple[str, ...]] = ("$defs", "definitions", "defs")
    JSON_SCHEMA_REFS: ClassVar[bool] = False  # $ref is itself a rejected field here
    FIELDS = _words(
        "type format description nullable enum maxItems minItems properties required propertyOrdering items"
    )
    NEWER_FIELDS = _words(
        "title default minProperties maxProperties minimum maximum minLength maxLength pattern example "
        "anyOf ref defs"
    )
    # Newer Vertex references list additionalProperties, yet the Gemini API rejected it in 2025: fail closed.
    REJECTED = _words(
        "additionalProperties const $schema $ref $defs oneOf allOf not exclusiveMinimum exclusiveMaximum "
        "multipleOf patternProperties uniqueItems prefixItems examples"
    )
    TYPES = _words("STRING NUMBER INTEGER BOOLEAN ARRAY OBJECT NULL")
    FORMATS: ClassVar[dict[str, frozenset[str]]] = {
        "NUMBER": frozenset({"float", "double"}),
        "INTEGER": frozenset({"int32", "int64", "enum"}),  # "enum" for integer enums spelled as strings
        "STRING": frozenset({"enum", "date-time"}),
    }
    NEWER_STRING_FORMATS = _words("email byte date password")  # the ones the newer references name

    def get(self, schema: Mapping[Any, Any], key: str) -> Any:
        for raw, value in schema.items():
            if raw == key or _camel(raw) == key:
                return value
        return None

    def visit(self, node: _Node) -> None:
        super().visit(node)
        schema = node.schema
        assert isinstance(schema, Mapping)
        path = self.path(node.ptr)
        for raw in schema:
            key = _camel(raw)
            where = _join(path, raw)
            if key in self.FIELDS or (key == "defs" and node.ptr == ""):
                continue
            if key in self.REJECTED:
                self.report.error(
                    "GEM-P-REJECTED",
                    where,
                    f"'{_key(raw)}' is rejected (Unknown name … Cannot find field); drop it "
                    "or express it in the description.",
                )
            elif key == "defs":
                self.report.error("GEM-P-FIELDS", where, "'defs' is only allowed at the root schema.")
            elif key in self.NEWER_FIELDS:
                self.report.warn(
                    "GEM-P-FIELDS",
                    where,
                    f"'{_key(raw)}' exists only in newer Vertex AI references; older Gemini API "
                    "endpoints reject it.",
                )
            else:
                self.report.error(
                    "GEM-P-FIELDS",
                    where,
                    f"'{_key(raw)}' is not a field of Gemini's Schema (Unknown name … Cannot find field).",
                )
        type_name = self._check_type(schema, path)
        self._check_enum(schema, path)
        self._check_format(schema, path, type_name)
        if isinstance(self.get(schema, "items"), list):
            self.report.error(
                "GEM-P-FIELDS", _join(path, "items"), "'items' must be a single schema, not a list."
            )

    def _check_type(self, schema: Mapping[Any, Any], path: str) -> str | None:
        value = schema.get("type")
        nullable = self.get(schema, "nullable")
        if nullable is not None and not isinstance(nullable, bool):
            self.report.error("GEM-P-TYPE", _join(path, "nullable"), "'nullable' must be true or false.")
        if value is None:
            return None
        if isinstance(value, list):
            self.report.error(
                "GEM-P-TYPE",
                _join(path, "type"),
                "type must be a single value (a list fails with 'Proto field "
                'is not repeating, cannot start list\'); use "nullable": true instead of a null union.',
            )
            return None
        if not isinstance(value, str):
            return None  # already reported as SCHEMA-INVALID by the base walker
        if value.upper() not in self.TYPES:
            self.report.error(
                "GEM-P-TYPE",
                _join(path, "type"),
                f"type {_show(value)} is not one of {', '.join(sorted(self.TYPES))}.",
            )
            return None
        return value.upper()

    def _check_enum(self, schema: Mapping[Any, Any], path: str) -> None:
        enum = schema.get("enum")
        if not isinstance(enum, list):
            return
        for i, value in enumerate(enum):
            if not isinstance(value, str):
                self.report.error(
                    "GEM-P-ENUM",
                    _join(_join(path, "enum"), i),
                    "enum values must be strings; for numbers use "
                    '{type: INTEGER, format: enum, enum: ["101", ...]} or list the values in the '
                    "description.",
                )
                return

    def _check_format(self, schema: Mapping[Any, Any], path: str, type_name: str | None) -> None:
        fmt = schema.get("format")
        if not isinstance(fmt, str):
            return  # absent, or already reported as SCHEMA-INVALID
        where = _join(path, "format")
        allowed = self.FORMATS.get(type_name or "")
        if allowed is None:
            self.report.warn(
                "GEM-P-FORMAT", where, f"'format' has no documented meaning for type {type_name}."
            )
        elif fmt in allowed:
            return
        elif type_name == "STRING" and fmt in self.NEWER_STRING_FORMATS:
            self.report.warn(
                "GEM-P-FORMAT",
                where,
                f"string format {_show(fmt)} is only in newer references; older endpoints "
                "answer \"only 'enum' and 'date-time' are supported for STRING type\".",
            )
        else:
            self.report.error(
                "GEM-P-FORMAT",
                where,
                f"format {_show(fmt)} is not allowed for {type_name}; use one of "
                f"{', '.join(sorted(allowed))} or drop it.",
            )


class _GeminiJsonSchemaRules(_SchemaRules):
    """Gemini ``parametersJsonSchema`` (§3.3): unsupported keywords are silently ignored, so warn only."""

    KNOWN = (
        _ANNOTATIONS
        | _GeminiSchemaRules.FIELDS
        | (_GeminiSchemaRules.NEWER_FIELDS - {"ref", "defs"})
        | {"anyOf", "$ref", "$defs", "additionalProperties", "prefixItems", "const"}
    )

    def visit(self, node: _Node) -> None:
        super().visit(node)
        schema = node.schema
        assert isinstance(schema, Mapping)
        for key in schema:
            if key not in self.KNOWN:
                self.report.warn(
                    "GEM-JS-IGNORED",
                    self.path(_join(node.ptr, key)),
                    f"'{_key(key)}' is not among the documented JSON Schema keywords; Gemini may silently "
                    "ignore it.",
                )


# --------------------------------------------------------------------------------------------------
# Providers: envelope, names, which schema to walk with which rules
# --------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Result:
    """One checked definition plus what ``check_request`` needs for request-level limits."""

    violations: list[Violation]
    name: str | None = None
    name_path: str = "/name"
    strict: bool = False
    optional: int = 0
    unions: int = 0


class _Provider:
    """Base: runs the envelope check, then the schema rule sets; subclasses fill in ``envelope``."""

    ENV_RULE: ClassVar[str]
    NAME_RULE: ClassVar[str]
    NAME_RE: ClassVar[re.Pattern[str]] = re.compile(r"[a-zA-Z0-9_-]{1,64}")
    NAME_HINT: ClassVar[str] = "1-64 characters of a-z, A-Z, 0-9, '_' and '-' (no dots or spaces)"
    MAX_TOOLS: ClassVar[tuple[str, int] | None] = None  # (rule, limit) for check_request
    FREEFORM_RULE: ClassVar[str] = "SCHEMA-FREEFORM"
    NOT_STRICT: ClassVar[bool | None] = False  # how a definition says "not strict" (Anthropic: no flag)

    def __init__(self, *, strict: bool) -> None:
        self.strict = strict
        self.report = _Report()
        self.result = _Result(self.report.items)

    def run(self, definition: object) -> _Result:
        if not isinstance(definition, Mapping):
            self.report.error(
                self.ENV_RULE, "", f"a tool definition must be an object, not {type(definition).__name__}."
            )
        else:
            self.envelope(definition)
        return self.result

    def envelope(self, definition: Mapping[Any, Any]) -> None:
        raise NotImplementedError

    # -- shared pieces ------------------------------------------------------------------------------

    def check_name(self, holder: Mapping[Any, Any], base: str) -> None:
        path = _join(base, "name")
        self.result.name_path = path
        name = holder.get("name")
        if not isinstance(name, str):
            self.report.error(self.NAME_RULE, path, "the tool needs a string 'name'.")
            return
        self.result.name = name
        self.name_rule(name, path)

    def name_rule(self, name: str, path: str) -> None:
        if not self.NAME_RE.fullmatch(name):
            self.report.error(self.NAME_RULE, path, f"name {_show(name)} must be {self.NAME_HINT}.")

    def check_description(self, holder: Mapping[Any, Any], base: str) -> None:
        path = _join(base, "description")
        description = holder.get("description")
        if description is not None and not isinstance(description, str):
            self.report.error(self.ENV_RULE, path, "'description' must be a string.")
        elif not description or not description.strip():
            self.report.warn(
                "DESC-EMPTY", path, "the tool has no description; models pick and fill tools by it. Add one."
            )

    def check_strict_flag(self, holder: Mapping[Any, Any], base: str, schema_key: str | None = None) -> bool:
        """Validate the ``strict`` field; the check is strict if the caller or the definition asks.

        A definition the caller wants strict but that says it is not (OpenAI ``"strict": false``; Anthropic:
        no ``strict``), and whose schema has free-form objects, is a strict export that fell back to a plain
        one (strict mode could only close those objects): each object is reported (``FREEFORM_RULE``) and
        the rest is checked as the plain definition it is.
        """
        flag = holder.get("strict")
        if flag is not None and not isinstance(flag, bool):
            self.report.error(self.ENV_RULE, _join(base, "strict"), "'strict' must be true or false.")
        strict = self.strict or flag is True
        schema = holder.get(schema_key) if schema_key is not None else None
        if self.strict and flag is self.NOT_STRICT and isinstance(schema, Mapping):
            where = _join(base, schema_key)
            for ptr in _free_form_paths(schema):
                strict = False
                self.report.warn(
                    self.FREEFORM_RULE,
                    where + ptr,
                    "a free-form object (keys strict mode cannot describe, e.g. dict[str, X]): the tool is "
                    "not strict, since in strict mode the model could send only {} here. Give the object "
                    "fixed properties to make the tool strict.",
                )
        self.result.strict = strict
        return strict

    def unknown_keys(
        self, holder: Mapping[Any, Any], base: str, known: frozenset[str], severity: Severity
    ) -> None:
        for key in holder:
            if key not in known:
                self.report.add(
                    self.ENV_RULE,
                    _join(base, key),
                    f"unknown field '{_key(key)}' in the tool definition.",
                    severity,
                )

    def walk(self, rules: type[_SchemaRules], schema: object, path: str) -> _SchemaRules:
        walker = rules(self.report, path)
        walker.walk(schema)
        return walker

    @classmethod
    def request_limits(cls, results: Sequence[_Result], report: _Report) -> None:
        """Request-level limits beyond the tool count (Anthropic overrides)."""


class _OpenAIChat(_Provider):
    """Chat Completions: ``{"type": "function", "function": {...}}``."""

    ENV_RULE = "OAI-ENV-1"
    NAME_RULE = "OAI-NAME-1"
    FREEFORM_RULE = "OAI-S-FREEFORM"
    MAX_TOOLS = ("OAI-TOOLS-1", 128)
    FUNCTION_KEYS = frozenset({"name", "description", "parameters", "strict"})

    def envelope(self, definition: Mapping[Any, Any]) -> None:
        if definition.get("type") != "function":
            self.report.error(self.ENV_RULE, "/type", 'the tool needs "type": "function".')
        function = definition.get("function")
        if not isinstance(function, Mapping):
            hint = " (this looks like a Responses API tool)" if "name" in definition else ""
            self.report.error(
                self.ENV_RULE, "/function", f"'function' must be an object holding name and parameters{hint}."
            )
            return
        self.unknown_keys(definition, "", frozenset({"type", "function"}), "warning")
        self.function(function, "/function")

    def function(self, function: Mapping[Any, Any], base: str) -> None:
        self.check_name(function, base)
        self.check_description(function, base)
        strict = self.check_strict_flag(function, base, "parameters")
        self.unknown_keys(function, base, self.FUNCTION_KEYS, "warning")
        if "parameters" not in function:
            return  # an omitted schema means "no parameters" (OAI-PARAMS-1)
        params, path = function["parameters"], _join(base, "parameters")
        if not isinstance(params, Mapping):
            self.report.error("OAI-PARAMS-1", path, "'parameters' must be a JSON Schema object.")
            return
        root_union = [key for key in ("anyOf", "oneOf", "allOf") if key in params]
        if strict:
            if params.get("type") != "object":
                self.report.error(
                    "OAI-S-ROOT", _join(path, "type"), 'strict mode needs a root "type": "object".'
                )
            if "anyOf" in params:
                self.report.error(
                    "OAI-S-ROOT", _join(path, "anyOf"), "the root schema must not be anyOf in strict mode."
                )
        else:
            if params.get("type") != "object":
                self.report.warn(
                    "OAI-PARAMS-1", _join(path, "type"), '\'parameters\' should be "type": "object".'
                )
            for key in root_union:
                self.report.warn(
                    "OAI-PARAMS-1",
                    _join(path, key),
                    f"avoid '{key}' at the root; wrap alternatives in a property.",
                )
        self.walk(_OpenAIStrictRules if strict else _SchemaRules, params, path)


class _OpenAIResponses(_OpenAIChat):
    """Responses API: flat ``{"type": "function", "name", ..., "parameters", "strict"}``."""

    FUNCTION_KEYS = frozenset(
        {
            "type",
            "name",
            "description",
            "parameters",
            "strict",
            "defer_loading",
            "allowed_callers",
            "output_schema",
        }
    )

    def envelope(self, definition: Mapping[Any, Any]) -> None:
        if definition.get("type") != "function":
            self.report.error(self.ENV_RULE, "/type", 'the tool needs "type": "function".')
        if "function" in definition:
            self.report.error(
                self.ENV_RULE,
                "/function",
                "the Responses API takes a flat tool (name, parameters at the top "
                "level), not a Chat Completions 'function' wrapper.",
            )
            return
        if "strict" not in definition:
            self.report.warn(
                "OAI-STRICT-DEFAULT",
                "/strict",
                "'strict' is not set; the Responses API documents the default as "
                "true (Chat Completions: false). Set it explicitly.",
            )
        self.function(definition, "")


class _Anthropic(_Provider):
    """Messages API custom tool: ``{"name", "description", "input_schema", "strict"?}``."""

    ENV_RULE = "ANT-ENV-1"
    NAME_RULE = "ANT-NAME-1"
    FREEFORM_RULE = "ANT-S-FREEFORM"
    NOT_STRICT = None
    KEYS = frozenset(
        {
            "name",
            "description",
            "input_schema",
            "strict",
            "input_examples",
            "cache_control",
            "type",
            "defer_loading",
            "allowed_callers",
            "eager_input_streaming",
        }
    )

    def envelope(self, definition: Mapping[Any, Any]) -> None:
        kind = definition.get("type", "custom")
        if kind != "custom":
            self.report.warn(
                self.ENV_RULE, "/type", f"tool type {_show(kind)} is not a custom tool; it was not checked."
            )
            return
        self.check_name(definition, "")
        self.check_description(definition, "")
        strict = self.check_strict_flag(definition, "", "input_schema")
        self.unknown_keys(definition, "", self.KEYS, "warning")
        if "input_schema" not in definition:
            self.report.error(self.ENV_RULE, "/input_schema", "custom tools need an 'input_schema'.")
            return
        schema = definition["input_schema"]
        if not isinstance(schema, Mapping):
            self.report.error("ANT-SCHEMA-1", "/input_schema", "'input_schema' must be a JSON Schema object.")
            return
        if schema.get("type") != "object":
            self.report.error(
                "ANT-SCHEMA-1", "/input_schema/type", '\'input_schema\' needs "type": "object".'
            )
        for key in ("oneOf", "allOf", "anyOf"):
            if key in schema:
                self.report.error(
                    "ANT-SCHEMA-2",
                    _join("/input_schema", key),
                    f"input_schema does not support '{key}' at the "
                    "top level; move the alternatives into a property.",
                )
        walker = self.walk(_AnthropicStrictRules if strict else _SchemaRules, schema, "/input_schema")
        if isinstance(walker, _AnthropicStrictRules):
            self.result.optional, self.result.unions = walker.optional, walker.unions

    MAX_STRICT_TOOLS = 20

    @classmethod
    def request_limits(cls, results: Sequence[_Result], report: _Report) -> None:
        strict = [r for r in results if r.strict]
        if len(strict) > cls.MAX_STRICT_TOOLS:
            report.error(
                "ANT-L-TOOLS",
                "",
                f"{len(strict)} strict tools; a request may have at most {cls.MAX_STRICT_TOOLS}.",
            )
        # Per-definition excess is already reported by check(); report the request total only when it is new.
        for rule, total, limit in (
            ("ANT-L-OPTIONAL", sum(r.optional for r in strict), _AnthropicStrictRules.MAX_OPTIONAL),
            ("ANT-L-UNION", sum(r.unions for r in strict), _AnthropicStrictRules.MAX_UNIONS),
        ):
            already = any(v.rule == rule for r in strict for v in r.violations)
            if total > limit and not already:
                report.error(rule, "", f"strict tools of this request total {total}; the limit is {limit}.")


class _Gemini(_Provider):
    """One Gemini ``FunctionDeclaration``."""

    ENV_RULE = "GEM-ENV-1"
    NAME_RULE = "GEM-NAME-1"
    MAX_TOOLS = ("GEM-TOOLS-1", 128)
    KEYS = _words("name description parameters parametersJsonSchema response responseJsonSchema behavior")
    # Newest references allow '.', ':' and 128 characters; the safe intersection is stricter.
    LOOSE_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_.:-]{0,127}")
    SAFE_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_-]{0,62}")
    PARAM_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]{0,63}")

    def envelope(self, definition: Mapping[Any, Any]) -> None:
        if "functionDeclarations" in definition or "function_declarations" in definition:
            self.report.error(self.ENV_RULE, "", "pass one FunctionDeclaration, not a whole Tool.")
            return
        fields = {_camel(key): key for key in definition}
        for key, raw in fields.items():
            if key not in self.KEYS:
                self.report.error(
                    self.ENV_RULE, _join("", raw), f"'{_key(raw)}' is not a FunctionDeclaration field."
                )
        self.check_name(definition, "")
        self.check_description(definition, "")
        params_key, json_key = fields.get("parameters"), fields.get("parametersJsonSchema")
        if params_key is not None and json_key is not None:
            self.report.error(
                "GEM-ENV-2",
                _join("", json_key),
                "'parameters' and 'parametersJsonSchema' are mutually exclusive.",
            )
        if params_key is not None:
            self.parameters(definition[params_key], _join("", params_key))
        if json_key is not None:
            self.json_parameters(definition[json_key], _join("", json_key))

    def name_rule(self, name: str, path: str) -> None:
        if not self.LOOSE_NAME.fullmatch(name):
            self.report.error(
                self.NAME_RULE,
                path,
                f"name {_show(name)} must start with a letter or '_' and use only a-z, A-Z, 0-9, '_', '-' "
                "(newer references also '.', ':'); at most 64 characters (128 in the newest reference).",
            )
        elif not self.SAFE_NAME.fullmatch(name):
            self.report.warn(
                self.NAME_RULE,
                path,
                f"name {_show(name)} uses '.', ':' or more than 63 characters, which only newer "
                "references allow.",
            )

    def parameters(self, schema: object, path: str) -> None:
        if not isinstance(schema, Mapping):
            self.report.error(self.ENV_RULE, path, "'parameters' must be a Schema object.")
            return
        kind = schema.get("type")
        if kind is None:
            self.report.warn("GEM-P-TYPE", path, "'parameters' should declare type OBJECT.")
        elif isinstance(kind, str) and kind.upper() in _GeminiSchemaRules.TYPES and kind.upper() != "OBJECT":
            # Unknown or malformed types are reported by the schema walk; this is about the root's kind.
            self.report.error("GEM-P-TYPE", _join(path, "type"), "'parameters' must be of type OBJECT.")
        self.walk(_GeminiSchemaRules, schema, path)
        self.parameter_names(schema, path)

    def json_parameters(self, schema: object, path: str) -> None:
        if not isinstance(schema, Mapping) or schema.get("type") != "object":
            self.report.error(
                "GEM-ENV-2", path, '\'parametersJsonSchema\' must be an object schema ("type": "object").'
            )
            if not isinstance(schema, Mapping):
                return
        self.walk(_GeminiJsonSchemaRules, schema, path)
        self.parameter_names(schema, path)

    def parameter_names(self, schema: Mapping[Any, Any], path: str) -> None:
        """GEM-PNAME-1 concerns the function's parameters, i.e. the root's properties."""
        properties = schema.get("properties")
        if not isinstance(properties, Mapping):
            return
        for name in properties:
            if not self.PARAM_NAME.fullmatch(_key(name)):
                self.report.warn(
                    "GEM-PNAME-1",
                    _join(_join(path, "properties"), name),
                    f"parameter name {_show(name)} should "
                    "start with a letter or '_' and use only a-z, A-Z, 0-9, '_' (max 64).",
                )


class _MCP(_Provider):
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
                f"name {_show(name)} should be 1-128 characters of A-Z, a-z, 0-9, '_', '-', '.'.",
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
            self.walk(_SchemaRules, schema, f"/{key}")


_PROVIDERS: dict[str, type[_Provider]] = {
    "openai": _OpenAIChat,
    "openai-responses": _OpenAIResponses,
    "anthropic": _Anthropic,
    "gemini": _Gemini,
    "mcp": _MCP,
}
#: Provider names accepted by ``check`` and ``check_request``.
PROVIDERS = tuple(_PROVIDERS)


def _provider(provider: str) -> type[_Provider]:
    try:
        return _PROVIDERS[provider]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown provider {_show(provider)}; expected one of {', '.join(PROVIDERS)}"
        ) from None


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------


def check(definition: Mapping[str, Any] | Tool, provider: str, *, strict: bool = False) -> list[Violation]:
    """Check one tool definition against a provider's rules.

    Args:
        definition: The tool exactly as it would be sent: a Chat Completions tool (``"openai"``), a flat
            Responses tool (``"openai-responses"``), an Anthropic custom tool, one Gemini
            FunctionDeclaration, or an MCP Tool. Untrusted input is fine: nothing is followed or
            recursed into without a bound. Or a `Tool`: it is exported for the provider and checked, and
            what the export had to give up is reported too, as warnings (`SCHEMA-ROOT-UNION`: root
            alternatives stated in the description; `OAI-S-FREEFORM`/`ANT-S-FREEFORM`: a free-form object
            that made a strict export non-strict; `OAI-S-ANY`: "any value" narrowed to scalars).
        provider: One of ``"openai"``, ``"openai-responses"``, ``"anthropic"``, ``"gemini"``, ``"mcp"``.
        strict: Apply the strict-mode subset and size limits (OpenAI, Anthropic). A definition that says
            ``"strict": true`` is checked as strict regardless. Ignored for Gemini and MCP.

    Returns:
        The violations found, in document order; empty when the definition conforms.

    Raises:
        ValueError: If ``provider`` is unknown.
    """
    if isinstance(definition, Tool):
        return _check_tool(definition, provider, strict=strict)
    return _provider(provider)(strict=strict).run(definition).violations


def _check_tool(tool: Tool, provider: str, *, strict: bool) -> list[Violation]:
    from toolrun.formats import get_format  # the formats package imports this module

    _provider(provider)  # an unknown provider is a ValueError, as for definitions
    fmt = get_format(provider)
    name = (
        tool.name
        if PROVIDER_NAME_PATTERN.match(tool.name)
        else re.sub(r"[^a-zA-Z0-9_-]", "_", tool.name)[:64]
    )
    try:
        definition = fmt.definition(tool, strict=strict, name=name)
        losses = getattr(fmt, "findings", None)
        findings: list[tuple[str, str, str]] = losses(tool, strict=strict) if callable(losses) else []
    except SchemaError as exc:
        return [Violation(rule="EXPORT-1", path="", message=str(exc), severity="error")]
    violations = _provider(provider)(strict=strict).run(definition).violations
    reported = {(v.rule, v.path) for v in violations}
    base = getattr(fmt, "schema_path", "")
    for rule, ptr, message in findings:
        if (rule, base + ptr) not in reported:
            violations.append(Violation(rule=rule, path=base + ptr, message=message, severity="warning"))
    return violations


def check_request(
    definitions: Sequence[Mapping[str, Any]],
    provider: str,
    *,
    strict: bool = False,
    tool_choice: Mapping[str, Any] | None = None,
) -> list[Violation]:
    """Check the tool list of one request: every definition plus request-level limits.

    Paths are prefixed with the definition's index (``"/3/function/name"``; a function inside an OpenAI
    namespace: ``"/3/tools/0/name"``); request-level violations (tool counts, Anthropic's strict totals)
    have the path ``""``. The large-tool-set entries and rules (tool search, deferred loading, namespaces,
    ``allowed_callers``, allowed subsets) are in ``_check_tool_sets``.

    Args:
        definitions: The ``tools`` list (for Gemini: the function declarations).
        provider: As for :func:`check`.
        strict: As for :func:`check`, applied to every definition.
        tool_choice: The request's fields that pick a subset, when it has them: ``{"tool_choice": ...}``
            (OpenAI) or ``{"tool_config": ...}`` (Gemini), e.g. what `ToolRegistry.tool_choice` made.

    Returns:
        All violations: per definition, then ``REQ-DUP-NAME``, the tool-set rules and the request limits.

    Raises:
        ValueError: If ``provider`` is unknown.
    """
    from toolrun.formats._check_tool_sets import split_request

    cls = _provider(provider)
    split = split_request(provider, definitions, tool_choice)
    results = [cls(strict=strict).run(definition) for _, definition in split.functions]
    violations = [
        replace(violation, path=f"{prefix}{violation.path}")
        for (prefix, _), result in zip(split.functions, results, strict=True)
        for violation in result.violations
    ]
    report = _Report()
    seen: dict[str, str] = {}
    for (prefix, _), result in zip(split.functions, results, strict=True):
        if result.name is None:
            continue
        if result.name in seen:
            report.error(
                "REQ-DUP-NAME",
                f"{prefix}{result.name_path}",
                f"tool name {_show(result.name)} is already used by definition {seen[result.name]}; "
                "names must be unique.",
            )
        else:
            seen[result.name] = prefix.lstrip("/")
    for rule, path, message, severity in split.problems:
        report.add(rule, path, message, severity)  # type: ignore[arg-type]
    if cls.MAX_TOOLS is not None and len(results) > cls.MAX_TOOLS[1]:
        rule, limit = cls.MAX_TOOLS
        report.error(rule, "", f"{len(results)} tools in one request; at most {limit} are supported.")
    cls.request_limits(results, report)
    return violations + report.items
