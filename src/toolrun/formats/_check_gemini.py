"""Gemini's rules for the conformance checker: ``FunctionDeclaration`` envelopes, the OpenAPI-subset
``parameters`` Schema and the JSON Schema ``parametersJsonSchema``, ``allowed_function_names``, and
``functionResponse`` parts.

Sources: ``provider-schema-rules.md`` §3 (definitions), the Gemini API ``FunctionResponse`` reference
(multimodal function responses) and ``FunctionCallingConfig``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from toolrun.formats._check_base import (
    ANNOTATIONS,
    Node,
    Provider,
    Report,
    SchemaRules,
    Severity,
    Split,
    join,
    key_text,
    show,
    words,
)

__all__ = ["GeminiCheck"]

_GEMINI_RESPONSE = frozenset({"image/png", "image/jpeg", "image/webp", "application/pdf", "text/plain"})


def _camel(key: object) -> str:
    """Gemini's proto JSON parser accepts snake_case field names too; compare them in camelCase."""
    text = key_text(key)
    head, *rest = text.split("_")
    if not head or not rest:
        return text
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


class _GeminiSchemaRules(SchemaRules):
    """Gemini ``parameters``: the OpenAPI 3.0 Schema subset (§3.2), oldest field set by default."""

    BOOL_SCHEMA: ClassVar[Severity] = "error"
    DEFS_KEYS: ClassVar[tuple[str, ...]] = ("$defs", "definitions", "defs")
    JSON_SCHEMA_REFS: ClassVar[bool] = False  # $ref is itself a rejected field here
    FIELDS = words(
        "type format description nullable enum maxItems minItems properties required propertyOrdering items"
    )
    NEWER_FIELDS = words(
        "title default minProperties maxProperties minimum maximum minLength maxLength pattern example "
        "anyOf ref defs"
    )
    # Newer Vertex references list additionalProperties, yet the Gemini API rejected it in 2025: fail closed.
    REJECTED = words(
        "additionalProperties const $schema $ref $defs oneOf allOf not exclusiveMinimum exclusiveMaximum "
        "multipleOf patternProperties uniqueItems prefixItems examples"
    )
    TYPES = words("STRING NUMBER INTEGER BOOLEAN ARRAY OBJECT NULL")
    FORMATS: ClassVar[dict[str, frozenset[str]]] = {
        "NUMBER": frozenset({"float", "double"}),
        "INTEGER": frozenset({"int32", "int64", "enum"}),  # "enum" for integer enums spelled as strings
        "STRING": frozenset({"enum", "date-time"}),
    }
    NEWER_STRING_FORMATS = words("email byte date password")  # the ones the newer references name

    def get(self, schema: Mapping[Any, Any], key: str) -> Any:
        for raw, value in schema.items():
            if raw == key or _camel(raw) == key:
                return value
        return None

    def visit(self, node: Node) -> None:
        super().visit(node)
        schema = node.schema
        assert isinstance(schema, Mapping)
        path = self.path(node.ptr)
        for raw in schema:
            key = _camel(raw)
            where = join(path, raw)
            if key in self.FIELDS or (key == "defs" and node.ptr == ""):
                continue
            if key in self.REJECTED:
                self.report.error(
                    "GEM-P-REJECTED",
                    where,
                    f"'{key_text(raw)}' is rejected (Unknown name … Cannot find field); drop it "
                    "or express it in the description.",
                )
            elif key == "defs":
                self.report.error("GEM-P-FIELDS", where, "'defs' is only allowed at the root schema.")
            elif key in self.NEWER_FIELDS:
                self.report.warn(
                    "GEM-P-FIELDS",
                    where,
                    f"'{key_text(raw)}' exists only in newer Vertex AI references; older Gemini API "
                    "endpoints reject it.",
                )
            else:
                self.report.error(
                    "GEM-P-FIELDS",
                    where,
                    f"'{key_text(raw)}' is not a field of Gemini's Schema "
                    "(Unknown name … Cannot find field).",
                )
        type_name = self._check_type(schema, path)
        self._check_enum(schema, path)
        self._check_format(schema, path, type_name)
        if isinstance(self.get(schema, "items"), list):
            self.report.error(
                "GEM-P-FIELDS", join(path, "items"), "'items' must be a single schema, not a list."
            )

    def _check_type(self, schema: Mapping[Any, Any], path: str) -> str | None:
        value = schema.get("type")
        nullable = self.get(schema, "nullable")
        if nullable is not None and not isinstance(nullable, bool):
            self.report.error("GEM-P-TYPE", join(path, "nullable"), "'nullable' must be true or false.")
        if value is None:
            return None
        if isinstance(value, list):
            self.report.error(
                "GEM-P-TYPE",
                join(path, "type"),
                "type must be a single value (a list fails with 'Proto field "
                'is not repeating, cannot start list\'); use "nullable": true instead of a null union.',
            )
            return None
        if not isinstance(value, str):
            return None  # already reported as SCHEMA-INVALID by the base walker
        if value.upper() not in self.TYPES:
            self.report.error(
                "GEM-P-TYPE",
                join(path, "type"),
                f"type {show(value)} is not one of {', '.join(sorted(self.TYPES))}.",
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
                    join(join(path, "enum"), i),
                    "enum values must be strings; for numbers use "
                    '{type: INTEGER, format: enum, enum: ["101", ...]} or list the values in the '
                    "description.",
                )
                return

    def _check_format(self, schema: Mapping[Any, Any], path: str, type_name: str | None) -> None:
        fmt = schema.get("format")
        if not isinstance(fmt, str):
            return  # absent, or already reported as SCHEMA-INVALID
        where = join(path, "format")
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
                f"string format {show(fmt)} is only in newer references; older endpoints "
                "answer \"only 'enum' and 'date-time' are supported for STRING type\".",
            )
        else:
            self.report.error(
                "GEM-P-FORMAT",
                where,
                f"format {show(fmt)} is not allowed for {type_name}; use one of "
                f"{', '.join(sorted(allowed))} or drop it.",
            )


class _GeminiJsonSchemaRules(SchemaRules):
    """Gemini ``parametersJsonSchema`` (§3.3): unsupported keywords are silently ignored, so warn only."""

    KNOWN = (
        ANNOTATIONS
        | _GeminiSchemaRules.FIELDS
        | (_GeminiSchemaRules.NEWER_FIELDS - {"ref", "defs"})
        | {"anyOf", "$ref", "$defs", "additionalProperties", "prefixItems", "const"}
    )

    def visit(self, node: Node) -> None:
        super().visit(node)
        schema = node.schema
        assert isinstance(schema, Mapping)
        for key in schema:
            if key not in self.KNOWN:
                self.report.warn(
                    "GEM-JS-IGNORED",
                    self.path(join(node.ptr, key)),
                    f"'{key_text(key)}' is not among the documented JSON Schema keywords; "
                    "Gemini may silently ignore it.",
                )


class GeminiCheck(Provider):
    """One Gemini ``FunctionDeclaration``."""

    ENV_RULE = "GEM-ENV-1"
    NAME_RULE = "GEM-NAME-1"
    MAX_TOOLS = ("GEM-TOOLS-1", 128)
    KEYS = words("name description parameters parametersJsonSchema response responseJsonSchema behavior")
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
                    self.ENV_RULE, join("", raw), f"'{key_text(raw)}' is not a FunctionDeclaration field."
                )
        self.check_name(definition, "")
        self.check_description(definition, "")
        params_key, json_key = fields.get("parameters"), fields.get("parametersJsonSchema")
        if params_key is not None and json_key is not None:
            self.report.error(
                "GEM-ENV-2",
                join("", json_key),
                "'parameters' and 'parametersJsonSchema' are mutually exclusive.",
            )
        if params_key is not None:
            self.parameters(definition[params_key], join("", params_key))
        if json_key is not None:
            self.json_parameters(definition[json_key], join("", json_key))

    def name_rule(self, name: str, path: str) -> None:
        if not self.LOOSE_NAME.fullmatch(name):
            self.report.error(
                self.NAME_RULE,
                path,
                f"name {show(name)} must start with a letter or '_' and use only a-z, A-Z, 0-9, '_', '-' "
                "(newer references also '.', ':'); at most 64 characters (128 in the newest reference).",
            )
        elif not self.SAFE_NAME.fullmatch(name):
            self.report.warn(
                self.NAME_RULE,
                path,
                f"name {show(name)} uses '.', ':' or more than 63 characters, which only newer "
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
            self.report.error("GEM-P-TYPE", join(path, "type"), "'parameters' must be of type OBJECT.")
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
            if not self.PARAM_NAME.fullmatch(key_text(name)):
                self.report.warn(
                    "GEM-PNAME-1",
                    join(join(path, "properties"), name),
                    f"parameter name {show(name)} should "
                    "start with a letter or '_' and use only a-z, A-Z, 0-9, '_' (max 64).",
                )

    @classmethod
    def check_choice(cls, choice: Mapping[str, Any], names: set[str], split: Split) -> None:
        """``GEM-ALLOWED-1``: ``allowed_function_names`` names an undeclared function; ``GEM-ALLOWED-2``:
        they are set with a mode other than ``ANY`` or ``VALIDATED``."""
        config = choice.get("tool_config", choice).get("function_calling_config", {})
        allowed = config.get("allowed_function_names") if isinstance(config, Mapping) else None
        if not allowed:
            return
        if config.get("mode") not in ("ANY", "VALIDATED"):
            split.error(
                "GEM-ALLOWED-2",
                "/tool_config/function_calling_config/mode",
                "allowed_function_names needs mode ANY or VALIDATED.",
            )
        for k, name in enumerate(allowed):
            if name not in names:
                split.error(
                    "GEM-ALLOWED-1",
                    f"/tool_config/function_calling_config/allowed_function_names/{k}",
                    f"{name!r} is not a declared function.",
                )

    @classmethod
    def check_result(cls, report: Report, message: Mapping[str, Any], followup: bool) -> None:
        """A ``functionResponse`` part, or with ``followup`` a part that follows it."""
        if followup:
            if not any(k in message for k in ("text", "inlineData", "fileData")):
                report.error("RES-PART", "", "a following part must be text, inlineData or fileData")
            if "inlineData" in message:
                blob = report.mapping(message, "inlineData", "")
                if blob is not None:
                    report.string(blob, "mimeType", "/inlineData")
                    report.base64(blob, "data", "/inlineData")
            return
        response = report.mapping(message, "functionResponse", "")
        if response is None:
            return
        report.string(response, "name", "/functionResponse")
        report.mapping(response, "response", "/functionResponse")
        if "parts" not in response:
            return
        for where, item in report.parts(response["parts"], "/functionResponse/parts"):
            blob = report.mapping(item, "inlineData", where)
            if blob is None:
                continue
            if blob.get("mimeType") not in _GEMINI_RESPONSE:
                report.error(
                    "RES-MEDIA",
                    f"{where}/inlineData/mimeType",
                    f"function responses take {sorted(_GEMINI_RESPONSE)}",
                )
            report.base64(blob, "data", f"{where}/inlineData")
