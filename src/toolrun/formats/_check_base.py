"""The conformance checker's shared machinery: findings, the schema walker, and the provider base class.

``check`` (in ``_check``) picks a *provider* class (one per API, in ``_check_<provider>``: envelope, name,
which schemas to walk, request-level rules, result shapes) and hands each parameter schema to a *schema
rule set* built on ``SchemaRules``, an iterative, depth-bounded walker. The walker visits every schema node
once: ``$ref`` is never followed (``$defs`` entries are visited in place, so cycles cannot loop), nesting
past ``MAX_DEPTH`` is reported as ``SCHEMA-TOO-DEEP`` instead of descended, and non-object nodes are
reported, never trusted. Rule sets override ``visit`` (per node) and ``finish`` (whole-schema limits).

Rule IDs and severities follow ``provider-schema-rules.md``: ``"error"`` means the API rejects the request
(a MUST), ``"warning"`` means the request is accepted but degraded, or the sources disagree. IDs the
document does not define are generic: ``SCHEMA-TOO-DEEP``, ``SCHEMA-INVALID``, ``SCHEMA-REF-UNRESOLVED``,
``DESC-EMPTY``, ``REQ-DUP-NAME``, ``GEM-JS-IGNORED``, the ``MCP-*`` rules and the result rules ``RES-*``.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal
from urllib.parse import unquote

from toolrun.formats._schema import is_missing, resolve_pointer, type_names

__all__ = ["MAX_DEPTH", "Provider", "Report", "Result", "SchemaRules", "Split", "Violation"]

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


def words(text: str) -> frozenset[str]:
    """Keyword tables are written as space-separated words to stay readable."""
    return frozenset(text.split())


# Annotation keywords carry no validation meaning; strict subsets accept them.
ANNOTATIONS = words("title description $schema $id $comment examples deprecated readOnly writeOnly")
PRIMITIVES = (str, int, float, bool, type(None))


def show(value: object, limit: int = 80) -> str:
    """Render an untrusted value for a message: short, and never recursing into containers."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        text = "<large integer>"  # str() of huge ints raises ValueError (int_max_str_digits)
    elif isinstance(value, PRIMITIVES):
        text = repr(value)
    else:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def key_text(key: object) -> str:
    """A mapping key as text (JSON keys are strings; Python callers may pass anything hashable)."""
    return key if isinstance(key, str) else show(key)


def join(path: str, key: object) -> str:
    """Append one JSON-pointer token (escaping ``~`` and ``/`` per RFC 6901)."""
    return f"{path}/{key_text(key).replace('~', '~0').replace('/', '~1')}"


def is_object(schema: Mapping[Any, Any]) -> bool:
    return "object" in type_names(schema) or ("properties" in schema and "type" not in schema)


def is_container(schema: Mapping[Any, Any]) -> bool:
    types = type_names(schema)
    return "object" in types or "array" in types or any(k in schema for k in ("properties", "items"))


def required_names(schema: Mapping[Any, Any]) -> set[str]:
    value = schema.get("required")
    return {item for item in value if isinstance(item, str)} if isinstance(value, list) else set()


def free_form_paths(schema: Mapping[Any, Any]) -> list[str]:
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
                children.extend((sub, f"{ptr}/{key}/{key_text(n)}", depth + 1) for n, sub in value.items())
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), Mapping):
                children.append((node[key], f"{ptr}/{key}", depth + 1))
        for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            value = node.get(key)
            if isinstance(value, list):
                children.extend((sub, f"{ptr}/{key}/{i}", depth + 1) for i, sub in enumerate(value))
        stack.extend(reversed(children))
    return found


class Report:
    """Collects violations; one place that builds ``Violation`` objects."""

    def __init__(self) -> None:
        self.items: list[Violation] = []

    def error(self, rule: str, path: str, message: str) -> None:
        self.items.append(Violation(rule=rule, path=path, message=message, severity="error"))

    def warn(self, rule: str, path: str, message: str) -> None:
        self.items.append(Violation(rule=rule, path=path, message=message, severity="warning"))

    def add(self, rule: str, path: str, message: str, severity: Severity) -> None:
        self.items.append(Violation(rule=rule, path=path, message=message, severity=severity))

    # -- result shapes (``check_result``) --------------------------------------------------------------

    def string(self, holder: Any, key: str, path: str) -> str | None:
        value = holder.get(key) if isinstance(holder, Mapping) else None
        if not isinstance(value, str):
            self.error("RES-SHAPE", f"{path}/{key}", f"expected a string at {key!r}")
            return None
        return value

    def mapping(self, holder: Any, key: str, path: str) -> Mapping[str, Any] | None:
        value = holder.get(key) if isinstance(holder, Mapping) else None
        if not isinstance(value, Mapping):
            self.error("RES-SHAPE", f"{path}/{key}", f"expected an object at {key!r}")
            return None
        return value

    def base64(self, holder: Any, key: str, path: str) -> None:
        value = self.string(holder, key, path)
        if value is None:
            return
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            self.error("RES-DATA", f"{path}/{key}", "not valid base64")

    def url(self, holder: Any, key: str, path: str, data_prefix: str) -> None:
        value = self.string(holder, key, path)
        if value is None:
            return
        if value.startswith(("https://", "http://")):
            return
        if not value.startswith(data_prefix) or ";base64," not in value:
            self.error(
                "RES-DATA", f"{path}/{key}", f"expected an http(s) URL or a {data_prefix}...;base64, URL"
            )
            return
        try:
            base64.b64decode(value.split(";base64,", 1)[1], validate=True)
        except (binascii.Error, ValueError):
            self.error("RES-DATA", f"{path}/{key}", "the data URL's payload is not valid base64")

    def parts(self, value: Any, path: str, *, empty: bool = False) -> list[tuple[str, Mapping[str, Any]]]:
        if not isinstance(value, list) or not (value or empty):
            self.error("RES-SHAPE", path, "expected a non-empty list of parts")
            return []
        out = []
        for index, part in enumerate(value):
            where = f"{path}/{index}"
            if not isinstance(part, Mapping):
                self.error("RES-SHAPE", where, "expected an object")
                continue
            out.append((where, part))
        return out


# --------------------------------------------------------------------------------------------------
# Schema walker
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Node:
    schema: object
    ptr: str  # JSON pointer relative to the schema root ("" = root)
    depth: int  # walk depth, bounded by MAX_DEPTH
    above: int  # object/array levels enclosing this node (OAI-L-DEPTH); its own level adds 1 if a container


class SchemaRules:
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

    def __init__(self, report: Report, base: str) -> None:
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
        stack = [Node(schema, "", 0, 0)]
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

    def children(self, node: Node) -> Iterator[Node]:
        schema = node.schema
        assert isinstance(schema, Mapping)
        own = node.above + (1 if is_container(schema) else 0)
        depth = node.depth + 1
        for key in self.MAP_KEYS:
            value = self.get(schema, key)
            if value is None:
                continue
            if not isinstance(value, Mapping):
                self.invalid(node, key, "must be an object mapping names to schemas")
                continue
            for name, sub in value.items():
                yield Node(sub, join(join(node.ptr, key), name), depth, own)
        additional = self.get(schema, "additionalProperties")
        if isinstance(additional, Mapping):
            yield Node(additional, join(node.ptr, "additionalProperties"), depth, own)
        elif additional is not None and not isinstance(additional, bool):
            self.invalid(node, "additionalProperties", "must be a boolean or a schema")
        items = self.get(schema, "items")
        if isinstance(items, list):  # draft-4 tuple form
            yield from (
                Node(sub, join(join(node.ptr, "items"), i), depth, own) for i, sub in enumerate(items)
            )
        elif items is not None:
            yield Node(items, join(node.ptr, "items"), depth, own)
        for key in ("prefixItems", *self.BRANCH_KEYS):
            value = self.get(schema, key)
            if value is None:
                continue
            if not isinstance(value, list):
                self.invalid(node, key, "must be a list of schemas")
                continue
            # Branches describe the same value, so they sit at the same data level (prefixItems does not).
            above = own if key == "prefixItems" else node.above
            yield from (Node(sub, join(join(node.ptr, key), i), depth, above) for i, sub in enumerate(value))
        for key in self.SINGLE_KEYS:
            if key in schema:
                yield Node(schema[key], join(node.ptr, key), depth, node.above)
        for key in self.DEFS_KEYS:
            value = self.get(schema, key)
            if value is None:
                continue
            if not isinstance(value, Mapping):
                self.invalid(node, key, "must be an object mapping names to schemas")
                continue
            for name, sub in value.items():
                yield Node(sub, join(join(node.ptr, key), name), depth, 0)

    def get(self, schema: Mapping[Any, Any], key: str) -> Any:
        """Look a keyword up (Gemini overrides this to accept snake_case spellings)."""
        return schema.get(key)

    # -- hooks ----------------------------------------------------------------------------------------

    def visit(self, node: Node) -> None:
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
                        self.path(join(node.ptr, "$ref")),
                        f"$ref {show(ref)} does not resolve inside this schema; add the $defs entry "
                        "or fix the pointer.",
                        self.UNRESOLVED_REF,
                    )
            elif not ref.startswith("#"):  # "#name" is a same-document anchor: local, but not a pointer
                self.external_ref(node, ref)

    def non_mapping(self, node: Node) -> None:
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

    def external_ref(self, node: Node, ref: str) -> None:
        """A ``$ref`` that is not a local JSON pointer; only strict subsets forbid it."""

    def finish(self) -> None:
        """Whole-schema checks after the walk (size limits, recursion)."""

    def invalid(self, node: Node, key: str, what: str) -> None:
        self.report.error("SCHEMA-INVALID", self.path(join(node.ptr, key)), f"'{key_text(key)}' {what}.")


# --------------------------------------------------------------------------------------------------
# Providers: envelope, names, which schema to walk with which rules; request-level rules; result shapes
# --------------------------------------------------------------------------------------------------


@dataclass
class Split:
    """A request's tool list, split for checking."""

    functions: list[tuple[str, Any]] = field(default_factory=list)
    """(path prefix, definition) of every function tool, namespaced ones included."""
    problems: list[tuple[str, str, str, str]] = field(default_factory=list)
    """(rule, path, message, severity) found at the request level."""

    def error(self, rule: str, path: str, message: str) -> None:
        self.problems.append((rule, path, message, "error"))

    def warn(self, rule: str, path: str, message: str) -> None:
        self.problems.append((rule, path, message, "warning"))


def deferred(definition: Any) -> bool:
    """Whether a tool entry asks to be loaded later (``"defer_loading": true``)."""
    return isinstance(definition, Mapping) and definition.get("defer_loading") is True


@dataclass(slots=True)
class Result:
    """One checked definition plus what ``check_request`` needs for request-level limits."""

    violations: list[Violation]
    name: str | None = None
    name_path: str = "/name"
    strict: bool = False
    optional: int = 0
    unions: int = 0


class Provider:
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
        self.report = Report()
        self.result = Result(self.report.items)

    def run(self, definition: object) -> Result:
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
        path = join(base, "name")
        self.result.name_path = path
        name = holder.get("name")
        if not isinstance(name, str):
            self.report.error(self.NAME_RULE, path, "the tool needs a string 'name'.")
            return
        self.result.name = name
        self.name_rule(name, path)

    def name_rule(self, name: str, path: str) -> None:
        if not self.NAME_RE.fullmatch(name):
            self.report.error(self.NAME_RULE, path, f"name {show(name)} must be {self.NAME_HINT}.")

    def check_description(self, holder: Mapping[Any, Any], base: str) -> None:
        path = join(base, "description")
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
            self.report.error(self.ENV_RULE, join(base, "strict"), "'strict' must be true or false.")
        strict = self.strict or flag is True
        schema = holder.get(schema_key) if schema_key is not None else None
        if self.strict and flag is self.NOT_STRICT and isinstance(schema, Mapping):
            where = join(base, schema_key)
            for ptr in free_form_paths(schema):
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
                    join(base, key),
                    f"unknown field '{key_text(key)}' in the tool definition.",
                    severity,
                )

    def walk(self, rules: type[SchemaRules], schema: object, path: str) -> SchemaRules:
        walker = rules(self.report, path)
        walker.walk(schema)
        return walker

    @classmethod
    def request_limits(cls, results: Sequence[Result], report: Report) -> None:
        """Request-level limits beyond the tool count (Anthropic overrides)."""

    # -- request level: tool sets and tool_choice -------------------------------------------------------

    #: The key wrapping a function's fields in a tool entry (Chat Completions: ``"function"``), if any.
    FUNCTION_KEY: ClassVar[str | None] = None

    @classmethod
    def split_tools(cls, definitions: Sequence[Any], split: Split) -> None:
        """Sort the request's entries: function tools to check one by one, and request-level problems.

        Providers with hosted or grouping entries (OpenAI Responses, Anthropic) override this; here every
        entry is a function tool.
        """
        split.functions = [(f"/{i}", d) for i, d in enumerate(definitions)]

    @classmethod
    def function_names(cls, split: Split) -> set[str]:
        names: set[str] = set()
        for _, definition in split.functions:
            if not isinstance(definition, Mapping):
                continue
            holder = definition.get(cls.FUNCTION_KEY) if cls.FUNCTION_KEY else definition
            if isinstance(holder, Mapping) and isinstance(holder.get("name"), str):
                names.add(holder["name"])
        return names

    @classmethod
    def check_choice(cls, choice: Mapping[str, Any], names: set[str], split: Split) -> None:
        """``OAI-ALLOWED-1``: an ``allowed_tools`` choice names a function the request does not define.

        This is the Chat Completions form; Anthropic and MCP have no subset form of their own, so one
        written this way is read this way. Responses and Gemini override.
        """
        picked = choice.get("tool_choice", choice)
        if not isinstance(picked, Mapping) or picked.get("type") != "allowed_tools":
            return
        for k, entry in enumerate(cls.allowed_tools(picked) or []):
            name = cls.allowed_name(entry)
            if entry.get("type") == "function" and name not in names:
                split.error(
                    "OAI-ALLOWED-1", f"/tool_choice/tools/{k}", f"{name!r} is not a function of this request."
                )

    @classmethod
    def allowed_tools(cls, picked: Mapping[str, Any]) -> Any:
        return picked.get("allowed_tools", {}).get("tools")

    @classmethod
    def allowed_name(cls, entry: Any) -> Any:
        return entry.get("function", {}).get("name")

    # -- results ---------------------------------------------------------------------------------------

    @classmethod
    def check_result(cls, report: Report, message: Mapping[str, Any], followup: bool) -> None:
        """Check a tool-result message (or, with ``followup``, one item that follows it)."""
        raise NotImplementedError
