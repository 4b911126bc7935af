"""Anthropic's rules for the conformance checker: custom tools, the strict tool use subset and its request
totals, tool search and code execution entries (deferred loading, ``allowed_callers``), and ``tool_result``
blocks.

Sources: ``provider-schema-rules.md`` §2 (definitions), the Messages API reference (``tool_result``
content, image and document blocks, tool search and code execution tools).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from toolrun.formats._check_base import (
    ANNOTATIONS,
    PRIMITIVES,
    Node,
    Provider,
    Report,
    Result,
    SchemaRules,
    Severity,
    Split,
    deferred,
    is_object,
    join,
    key_text,
    required_names,
    show,
    words,
)
from toolrun.formats._schema import type_names
from toolrun.formats._tool_sets import ANTHROPIC_SEARCH_TOOLS, CODE_EXECUTION_TOOLS

__all__ = ["AnthropicCheck"]

_ANT_SEARCH_TYPES = frozenset(
    {t["type"] for t in ANTHROPIC_SEARCH_TOOLS.values()} | {"tool_search_tool_bm25", "tool_search_tool_regex"}
)
_ANT_CALLERS = CODE_EXECUTION_TOOLS | {"direct"}
_ANT_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


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


class _AnthropicStrictRules(SchemaRules):
    """Anthropic strict tool use subset (§2.2); also counts optional and union parameters (ANT-L-*)."""

    BOOL_SCHEMA: ClassVar[Severity] = "error"
    UNRESOLVED_REF: ClassVar[Severity] = "error"
    TYPES = words("object array string integer number boolean null")
    FORMATS = words("date-time time date duration email hostname uri ipv4 ipv6 uuid")
    UNSUPPORTED = words(
        "minimum maximum exclusiveMinimum exclusiveMaximum multipleOf minLength maxLength maxItems"
    )
    DROPPED = words("minProperties maxProperties uniqueItems")  # dropped by several SDK ports
    SUPPORTED = ANNOTATIONS | words(
        "type enum const anyOf allOf $ref $defs definitions default required properties additionalProperties "
        "items format pattern minItems"
    )
    MAX_OPTIONAL, MAX_UNIONS = 24, 16
    MAX_REF_SITES = 500  # recursion detection is quadratic in $ref sites; bound it for hostile input

    def __init__(self, report: Report, base: str) -> None:
        super().__init__(report, base)
        self.optional = 0
        self.unions = 0

    def visit(self, node: Node) -> None:
        super().visit(node)
        schema = node.schema
        assert isinstance(schema, Mapping)
        path = self.path(node.ptr)
        for key in schema:
            if key in self.UNSUPPORTED:
                self.report.error(
                    "ANT-S-UNSUPPORTED",
                    join(path, key),
                    f"'{key_text(key)}' is not supported by strict tool use; "
                    "move the constraint into the description and validate it yourself.",
                )
            elif key in self.DROPPED:
                self.report.warn(
                    "ANT-S-UNSUPPORTED",
                    join(path, key),
                    f"'{key_text(key)}' is dropped by Anthropic SDKs for strict schemas; do not rely on it.",
                )
            elif key not in self.SUPPORTED:
                self.report.warn(
                    "ANT-S-SUPPORTED",
                    join(path, key),
                    f"'{key_text(key)}' is not in the documented strict subset.",
                )
        for name in type_names(schema):
            if name not in self.TYPES:
                self.report.error(
                    "ANT-S-SUPPORTED", join(path, "type"), f"type {show(name)} is not a JSON type."
                )
        self._check_values(schema, path)
        if is_object(schema):
            if schema.get("additionalProperties") is not False:
                self.report.error(
                    "ANT-S-ADDPROPS",
                    join(path, "additionalProperties"),
                    'strict tool use requires "additionalProperties": false on every object.',
                )
            properties = schema.get("properties")
            if isinstance(properties, Mapping):
                required = required_names(schema)
                self.optional += sum(1 for name in properties if name not in required)
        types = schema.get("type")
        if "anyOf" in schema or (isinstance(types, list) and len(types) > 1):
            self.unions += 1

    def _check_values(self, schema: Mapping[Any, Any], path: str) -> None:
        fmt = schema.get("format")
        if isinstance(fmt, str) and fmt not in self.FORMATS:
            self.report.error(
                "ANT-S-SUPPORTED",
                join(path, "format"),
                f"format {show(fmt)} is not supported; use one of {', '.join(sorted(self.FORMATS))}.",
            )
        enum = schema.get("enum")
        if isinstance(enum, list):
            for i, value in enumerate(enum):
                if not isinstance(value, PRIMITIVES):
                    self.report.error(
                        "ANT-S-SUPPORTED",
                        join(join(path, "enum"), i),
                        "enum values must be primitives (string, number, boolean, null).",
                    )
                    break
        min_items = schema.get("minItems")
        if min_items is not None and min_items not in (0, 1):
            self.report.error(
                "ANT-S-SUPPORTED",
                join(path, "minItems"),
                f"minItems {show(min_items)} is not supported; only 0 or 1.",
            )
        pattern = schema.get("pattern")
        if isinstance(pattern, str) and (construct := _complex_regex(pattern)):
            self.report.error(
                "ANT-S-SUPPORTED",
                join(path, "pattern"),
                f"pattern uses {construct}; only simple regex is supported.",
            )
        all_of = schema.get("allOf")
        if isinstance(all_of, list) and any(isinstance(b, Mapping) and "$ref" in b for b in all_of):
            self.report.error(
                "ANT-S-SUPPORTED",
                join(path, "allOf"),
                "allOf combined with $ref is not supported; inline the referenced schema.",
            )

    def external_ref(self, node: Node, ref: str) -> None:
        self.report.error(
            "ANT-S-UNSUPPORTED",
            self.path(join(node.ptr, "$ref")),
            f"external $ref {show(ref)} is not supported; copy the schema into $defs.",
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
                        self.path(join(sites[here][0], "$ref")),
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
        token in SchemaRules.DEFS_KEYS and (i == 0 or tokens[i - 1] not in SchemaRules.MAP_KEYS)
        for i, token in enumerate(tokens)
    )


class AnthropicCheck(Provider):
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
                self.ENV_RULE, "/type", f"tool type {show(kind)} is not a custom tool; it was not checked."
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
                    join("/input_schema", key),
                    f"input_schema does not support '{key}' at the "
                    "top level; move the alternatives into a property.",
                )
        walker = self.walk(_AnthropicStrictRules if strict else SchemaRules, schema, "/input_schema")
        if isinstance(walker, _AnthropicStrictRules):
            self.result.optional, self.result.unions = walker.optional, walker.unions

    MAX_STRICT_TOOLS = 20

    @classmethod
    def request_limits(cls, results: Sequence[Result], report: Report) -> None:
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

    @classmethod
    def split_tools(cls, definitions: Sequence[Any], split: Split) -> None:
        """Take out the tool search and code execution server tools, then the rules that need the whole list.

        - ``ANT-DEFER-SEARCH`` (warning): a deferred tool, but no tool search tool. Anthropic accepts it: the
          application loads deferred tools itself by returning ``tool_reference`` blocks in a tool result (a
          search of its own, a capability loader). Recorded evidence, 21 requests answered 200
          (pydantic/pydantic-ai, ``tests/models/cassettes/test_anthropic/``): ``test_anthropic_deferred_
          capability_tool_callable_without_tool_search.yaml``, ``test_anthropic_deferred_capability_without_
          tool_search_across_models[*].yaml`` (five models), ``test_anthropic_explicit_tool_search_keeps_
          search_surface.yaml``. Without such a loader the deferred tools are never seen by the model, hence
          the warning.
        - ``ANT-DEFER-SEARCH-DEFERRED``: the tool search tool itself is deferred.
        - ``ANT-DEFER-ALL``: every tool is deferred (Anthropic rejects the request).
        - ``ANT-CALLERS-1``: ``allowed_callers`` names a code execution tool the request does not include;
          ``ANT-CALLERS-2``: a caller Anthropic does not know.
        - ``ANT-SERVER-1`` (warning): a server tool type this checker does not know (not checked further).
        """
        searches: list[int] = []
        executions: set[str] = set()
        waiting: list[str] = []
        callers: list[tuple[str, Any]] = []
        hidden = 0  # deferred server tools (an error of their own), counted for ANT-DEFER-ALL
        for i, definition in enumerate(definitions):
            if not isinstance(definition, Mapping):
                split.functions.append((f"/{i}", definition))
                continue
            kind = definition.get("type", "custom")
            if not isinstance(kind, str) and kind is not None:
                split.functions.append((f"/{i}", definition))  # an odd "type": the per-tool check reports it
                continue
            if kind in _ANT_SEARCH_TYPES:
                searches.append(i)
                if deferred(definition):
                    hidden += 1
                    split.error(
                        "ANT-DEFER-SEARCH-DEFERRED",
                        f"/{i}/defer_loading",
                        "the tool search tool cannot be deferred.",
                    )
                continue
            if kind in CODE_EXECUTION_TOOLS:
                executions.add(str(kind))
                continue
            if kind not in ("custom", None):
                split.warn("ANT-SERVER-1", f"/{i}/type", f"server tool type {kind!r} is not checked here.")
                continue
            split.functions.append((f"/{i}", definition))
            if deferred(definition):
                waiting.append(f"/{i}")
            if "allowed_callers" in definition:
                callers.append((f"/{i}/allowed_callers", definition["allowed_callers"]))
        if waiting and not searches:
            split.warn(
                "ANT-DEFER-SEARCH",
                f"{waiting[0]}/defer_loading",
                f"{len(waiting)} deferred tool(s) but no tool search tool (tool_search_tool_bm25_20251119 or "
                "tool_search_tool_regex_20251119): the model sees them only once a tool result of yours "
                "returns their `tool_reference` blocks.",
            )
        loaded = len(definitions) - len(waiting) - hidden
        if definitions and loaded == 0:
            split.error("ANT-DEFER-ALL", "", "every tool is deferred; at least one must be loaded.")
        for path, value in callers:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                split.error("ANT-CALLERS-2", path, "allowed_callers must be a list of strings.")
                continue
            for k, caller in enumerate(value):
                if caller not in _ANT_CALLERS:
                    split.error("ANT-CALLERS-2", f"{path}/{k}", f"unknown caller {caller!r}.")
                elif caller != "direct" and caller not in executions:
                    split.error(
                        "ANT-CALLERS-1",
                        f"{path}/{k}",
                        f"{caller!r} may call this tool, but the request has no {caller} tool.",
                    )

    @classmethod
    def check_result(cls, report: Report, message: Mapping[str, Any], followup: bool) -> None:
        """A ``tool_result`` block: text, image, document and search result blocks."""
        if message.get("type") != "tool_result":
            report.error("RES-SHAPE", "/type", "expected a 'tool_result' block")
        report.string(message, "tool_use_id", "")
        if "is_error" in message and not isinstance(message["is_error"], bool):
            report.error("RES-SHAPE", "/is_error", "is_error must be a boolean")
        content = message.get("content")
        if isinstance(content, str):
            return
        for where, part in report.parts(content, "/content"):
            kind = part.get("type")
            if kind == "text":
                report.string(part, "text", where)
            elif kind in ("image", "document"):
                source = report.mapping(part, "source", where)
                if source is None:
                    continue
                at = f"{where}/source"
                kind_of_source = source.get("type")
                if kind_of_source == "url":
                    report.url(source, "url", at, "https://")
                elif kind_of_source == "base64":
                    media = source.get("media_type")
                    allowed = _ANT_IMAGES if kind == "image" else frozenset({"application/pdf"})
                    if media not in allowed:
                        report.error(
                            "RES-MEDIA", f"{at}/media_type", f"{kind} base64 sources take {sorted(allowed)}"
                        )
                    report.base64(source, "data", at)
                elif kind_of_source == "text" and kind == "document":
                    if source.get("media_type") != "text/plain":
                        report.error("RES-MEDIA", f"{at}/media_type", "text document sources are text/plain")
                    report.string(source, "data", at)
                else:
                    report.error("RES-SHAPE", f"{at}/type", f"unknown {kind} source type {kind_of_source!r}")
            elif kind != "search_result":
                report.error("RES-PART", f"{where}/type", f"tool_result takes no {kind!r} block")
