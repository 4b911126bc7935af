"""OpenAI's rules for the conformance checker: Chat Completions and Responses tools, the strict-mode schema
subset and its size limits, tool search and namespaces, ``allowed_tools``, and tool-result messages.

Sources: ``provider-schema-rules.md`` §1 (definitions), the OpenAI API reference (Chat Completions
messages, Responses ``function_call_output``, ``tool_search``, namespaces).
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
    SchemaRules,
    Severity,
    Split,
    deferred,
    is_container,
    is_object,
    join,
    key_text,
    required_names,
    show,
    words,
)
from toolrun.formats._schema import type_names

__all__ = ["OpenAIChatCheck", "OpenAIResponsesCheck"]


def _scalar_len(value: object) -> int:
    """Length of an enum/const value for OAI-L-STRLEN; containers count 0 (stringifying could recurse)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return len(str(value)) if value.bit_length() <= 256 else value.bit_length() * 30103 // 100000 + 1
    return len(str(value)) if isinstance(value, PRIMITIVES) else 0


class _OpenAIStrictRules(SchemaRules):
    """OpenAI Structured Outputs subset (§1.2) and its size limits (§1.3)."""

    BOOL_SCHEMA: ClassVar[Severity] = "error"
    UNRESOLVED_REF: ClassVar[Severity] = "error"
    TYPES = words("string number boolean integer object array null")
    FORMATS = words("date-time time date duration email hostname ipv4 ipv6 uuid")
    UNSUPPORTED = words("allOf not dependentRequired dependentSchemas if then else")
    FINE_TUNED_ONLY = frozenset(
        {"minLength", "maxLength"}
    )  # the only FT keys whose base-model status is unclear
    SUPPORTED = ANNOTATIONS | words(
        "type enum const anyOf properties required additionalProperties items $ref $defs definitions pattern "
        "format multipleOf maximum exclusiveMaximum minimum exclusiveMinimum minItems maxItems default"
    )
    MAX_PROPS, MAX_LEVELS, MAX_STRLEN, MAX_ENUM, OLD_MAX_ENUM = 5_000, 10, 120_000, 1_000, 500
    BIG_ENUM, BIG_ENUM_CHARS = 250, 15_000

    def __init__(self, report: Report, base: str) -> None:
        super().__init__(report, base)
        self.props = 0
        self.strlen = 0
        self.enum_values = 0
        self._depth_reported = False

    def visit(self, node: Node) -> None:
        super().visit(node)
        schema = node.schema
        assert isinstance(schema, Mapping)
        path = self.path(node.ptr)
        for key in schema:
            if key in self.UNSUPPORTED:
                self.report.error(
                    "OAI-S-UNSUPPORTED",
                    join(path, key),
                    f"'{key_text(key)}' is rejected in strict mode; rewrite it "
                    "(inline allOf, drop conditionals) or turn strict off.",
                )
            elif key in self.FINE_TUNED_ONLY:
                self.report.warn(
                    "OAI-S-FT",
                    join(path, key),
                    f"'{key_text(key)}' is rejected by fine-tuned models and not documented "
                    "for base models in strict mode; move the limit into the description.",
                )
            elif key not in self.SUPPORTED:
                self.report.warn(
                    "OAI-S-UNSUPPORTED",
                    join(path, key),
                    f"'{key_text(key)}' is not in the documented strict-mode subset; it may be rejected or "
                    "ignored.",
                )
        self._check_types(schema, path)
        if is_object(schema):
            self._check_object(schema, path)
        fmt = schema.get("format")
        if isinstance(fmt, str) and fmt not in self.FORMATS:
            self.report.error(
                "OAI-S-STRING",
                join(path, "format"),
                f"format {show(fmt)} is not supported in strict mode; use one of "
                f"{', '.join(sorted(self.FORMATS))} or drop it.",
            )
        if "default" in schema:
            self.report.warn(
                "OAI-S-DEFAULT",
                join(path, "default"),
                "'default' was rejected in strict mode ('default' is not permitted) and is still rejected by "
                "Azure OpenAI; state the default in the description instead.",
            )
        self._measure(node, schema, path)

    def _check_types(self, schema: Mapping[Any, Any], path: str) -> None:
        for name in type_names(schema):
            if name not in self.TYPES:
                self.report.error(
                    "OAI-S-TYPES", join(path, "type"), f"type {show(name)} is not supported in strict mode."
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
                join(path, "additionalProperties"),
                'strict mode requires "additionalProperties": false on every object.',
            )
        properties = schema.get("properties")
        if not isinstance(properties, Mapping):
            return
        required = required_names(schema)
        for name in properties:
            if name not in required:
                self.report.error(
                    "OAI-S-REQUIRED",
                    join(join(path, "properties"), name),
                    f"property {show(name)} is missing from 'required'; strict mode requires every property "
                    'there. Make it optional with a null union ("type": ["string", "null"]).',
                )
        for name in sorted(required - {key_text(k) for k in properties}):
            self.report.warn(
                "OAI-S-REQUIRED",
                join(path, "required"),
                f"'required' names {show(name)}, which is not a property.",
            )

    def _measure(self, node: Node, schema: Mapping[Any, Any], path: str) -> None:
        """Accumulate the §1.3 size counters for this node."""
        level = node.above + (1 if is_container(schema) else 0)
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
            self.strlen += sum(len(key_text(name)) for name in properties)
        for key in self.DEFS_KEYS:
            defs = schema.get(key)
            if isinstance(defs, Mapping):
                self.strlen += sum(len(key_text(name)) for name in defs)
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
                    join(path, "enum"),
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

    def external_ref(self, node: Node, ref: str) -> None:
        self.report.warn(
            "OAI-S-DEFS",
            self.path(join(node.ptr, "$ref")),
            f"$ref {show(ref)} is not a local reference; only local $ref into $defs/definitions "
            "is documented.",
        )


class OpenAIChatCheck(Provider):
    """Chat Completions: ``{"type": "function", "function": {...}}``."""

    ENV_RULE = "OAI-ENV-1"
    NAME_RULE = "OAI-NAME-1"
    FREEFORM_RULE = "OAI-S-FREEFORM"
    MAX_TOOLS = ("OAI-TOOLS-1", 128)
    FUNCTION_KEYS = frozenset({"name", "description", "parameters", "strict"})
    FUNCTION_KEY: ClassVar[str | None] = "function"

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
        params, path = function["parameters"], join(base, "parameters")
        if not isinstance(params, Mapping):
            self.report.error("OAI-PARAMS-1", path, "'parameters' must be a JSON Schema object.")
            return
        root_union = [key for key in ("anyOf", "oneOf", "allOf") if key in params]
        if strict:
            if params.get("type") != "object":
                self.report.error(
                    "OAI-S-ROOT", join(path, "type"), 'strict mode needs a root "type": "object".'
                )
            if "anyOf" in params:
                self.report.error(
                    "OAI-S-ROOT", join(path, "anyOf"), "the root schema must not be anyOf in strict mode."
                )
        else:
            if params.get("type") != "object":
                self.report.warn(
                    "OAI-PARAMS-1", join(path, "type"), '\'parameters\' should be "type": "object".'
                )
            for key in root_union:
                self.report.warn(
                    "OAI-PARAMS-1",
                    join(path, key),
                    f"avoid '{key}' at the root; wrap alternatives in a property.",
                )
        self.walk(_OpenAIStrictRules if strict else SchemaRules, params, path)

    @classmethod
    def check_result(cls, report: Report, message: Mapping[str, Any], followup: bool) -> None:
        """A ``tool`` message (text parts only), or with ``followup`` the user message after tool messages."""
        if followup:
            if message.get("role") != "user":
                report.error("RES-SHAPE", "/role", "the message after tool messages must be a user message")
            for where, part in report.parts(message.get("content"), "/content"):
                kind = part.get("type")
                if kind == "text":
                    report.string(part, "text", where)
                elif kind == "image_url":
                    image = report.mapping(part, "image_url", where)
                    if image is not None:
                        report.url(image, "url", f"{where}/image_url", "data:image/")
                elif kind == "file":
                    file = report.mapping(part, "file", where)
                    if file is not None:
                        report.string(file, "filename", f"{where}/file")
                        report.url(file, "file_data", f"{where}/file", "data:")
                elif kind == "input_audio":
                    audio = report.mapping(part, "input_audio", where)
                    if audio is not None:
                        report.base64(audio, "data", f"{where}/input_audio")
                        if audio.get("format") not in ("wav", "mp3"):
                            report.error(
                                "RES-MEDIA", f"{where}/input_audio/format", "audio format must be wav or mp3"
                            )
                else:
                    report.error("RES-PART", f"{where}/type", f"a user message takes no {kind!r} part")
            return
        if message.get("role") != "tool":
            report.error("RES-SHAPE", "/role", "a tool result is a message with role 'tool'")
        report.string(message, "tool_call_id", "")
        content = message.get("content")
        if isinstance(content, str):
            return
        for where, part in report.parts(content, "/content"):
            if part.get("type") != "text":
                report.error("RES-PART", f"{where}/type", "tool messages take text parts only")
            report.string(part, "text", where)


class OpenAIResponsesCheck(OpenAIChatCheck):
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

    FUNCTION_KEY = None

    @classmethod
    def split_tools(cls, definitions: Sequence[Any], split: Split) -> None:
        """Take out the hosted ``tool_search`` entries and ``namespace`` groups (whose functions are checked
        as any other, with their own paths), then the rules that need the whole list.

        - ``OAI-DEFER-SEARCH``: a deferred function, but no ``tool_search`` tool (hosted, or
          ``"execution": "client"``) in the request. The Responses API answers ``Invalid Value:
          'tools.defer_loading'. Deferred tools require tools.tool_search.`` (quoted in pydantic/pydantic-ai
          ``pydantic_ai_slim/pydantic_ai/models/openai.py``), and every recorded request it accepted with
          deferred functions carries one (pydantic/pydantic-ai ``tests/models/cassettes/test_openai_tool_
          availability_delta/test_openai_live_delta_preserves_the_warmed_cache_prefix.yaml``, hosted;
          ``test_openai_responses/test_openai_deferred_capability_keeps_native_tool_search.yaml`` at
          589b5d731, client-executed; vercel/ai ``packages/openai/src/responses/__fixtures__/
          openai-*tool-search.*.json``, whose responses echo the request's tools).
        - ``OAI-DEFER-SEARCH-DEFERRED``: the ``tool_search`` tool itself is deferred.
        - ``OAI-NS-DESC``, ``OAI-NS-EMPTY``: a namespace without a description, or without tools.
        - ``OAI-NS-DEFER`` (warning): ``defer_loading`` on the namespace object (it applies to the
          functions inside).
        """
        searches: list[tuple[int, Mapping[str, Any]]] = []
        waiting: list[str] = []
        for i, definition in enumerate(definitions):
            kind = definition.get("type") if isinstance(definition, Mapping) else None
            if kind == "tool_search":
                searches.append((i, definition))
            elif kind == "namespace" and isinstance(definition, Mapping):
                if (
                    not isinstance(definition.get("description"), str)
                    or not definition["description"].strip()
                ):
                    split.error("OAI-NS-DESC", f"/{i}/description", "a namespace needs a description.")
                if "defer_loading" in definition:
                    split.warn(
                        "OAI-NS-DEFER",
                        f"/{i}/defer_loading",
                        "defer_loading applies to the functions inside a namespace, not to the namespace.",
                    )
                members = definition.get("tools")
                if not isinstance(members, list) or not members:
                    split.error("OAI-NS-EMPTY", f"/{i}/tools", "a namespace needs a non-empty 'tools' list.")
                    continue
                for j, member in enumerate(members):
                    split.functions.append((f"/{i}/tools/{j}", member))
                    if deferred(member):
                        waiting.append(f"/{i}/tools/{j}")
            else:
                split.functions.append((f"/{i}", definition))
                if deferred(definition):
                    waiting.append(f"/{i}")
        for i, search in searches:
            if deferred(search):
                split.error(
                    "OAI-DEFER-SEARCH-DEFERRED",
                    f"/{i}/defer_loading",
                    "the tool_search tool cannot be deferred.",
                )
        if waiting and not searches:
            split.error(
                "OAI-DEFER-SEARCH",
                f"{waiting[0]}/defer_loading",
                f"{len(waiting)} deferred function(s) but no tool_search tool: they could never be loaded. "
                'Add {"type": "tool_search"}.',
            )

    @classmethod
    def allowed_tools(cls, picked: Mapping[str, Any]) -> Any:
        return picked.get("tools")

    @classmethod
    def allowed_name(cls, entry: Any) -> Any:
        return entry.get("name")

    @classmethod
    def check_result(cls, report: Report, message: Mapping[str, Any], followup: bool) -> None:
        """A ``function_call_output`` item: text, image and file parts."""
        if message.get("type") != "function_call_output":
            report.error("RES-SHAPE", "/type", "expected a 'function_call_output' item")
        report.string(message, "call_id", "")
        output = message.get("output")
        if isinstance(output, str):
            return
        for where, part in report.parts(output, "/output"):
            kind = part.get("type")
            if kind == "input_text":
                report.string(part, "text", where)
            elif kind == "input_image":
                if "file_id" not in part:
                    report.url(part, "image_url", where, "data:image/")
                if part.get("detail", "auto") not in ("low", "high", "auto"):
                    report.error("RES-SHAPE", f"{where}/detail", "detail must be low, high or auto")
            elif kind == "input_file":
                if not any(k in part for k in ("file_data", "file_id", "file_url")):
                    report.error("RES-SHAPE", where, "input_file needs file_data, file_id or file_url")
                if "file_data" in part:
                    report.url(part, "file_data", where, "data:")
                    report.string(part, "filename", where)
            else:
                report.error("RES-PART", f"{where}/type", f"function_call_output takes no {kind!r} part")
