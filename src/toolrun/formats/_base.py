"""What every wire format shares: the `WireFormat` protocol, `ToolCallParseError`, and small helpers.

A wire format does three things for one provider API:

- `definition(tool, strict=..., name=...)`: one tool as that API's tool definition;
- `parse_tool_calls(response, names=...)`: the tool calls in that API's response, as `ToolCall`s;
- `tool_result_message(result)`: a `ToolResult` as the message (or content block) that answers a call.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar, NoReturn, Protocol, runtime_checkable

from toolrun.exceptions import SchemaError
from toolrun.formats._schema import SchemaTransformer
from toolrun.results import ToolResult
from toolrun.tools import Tool, ToolCall
from toolrun.tools._tool import PROVIDER_NAME_PATTERN

__all__ = ["BaseFormat", "ToolCallParseError", "ToolNames", "WireFormat"]


class ToolNames(Protocol):
    """What a format needs of a tool set to map provider-safe aliases: a registry or a view of one
    (`toolrun.registry.ToolSet`) fits. Structural, so the formats never import the registry (the registry
    sits above them and imports them)."""

    def wire_name(self, name: str) -> str: ...

    def original_name(self, wire_name: str) -> str: ...

    def __contains__(self, name: object) -> bool: ...

    def __iter__(self) -> Iterator[Tool]: ...


class ToolCallParseError(ValueError):
    """A provider response that cannot be read as tool calls: a missing key, a value of the wrong type.

    The message names the format, where in the response the problem is (e.g.
    `choices[0].message.tool_calls[1].function.name`) and what was expected.

    Attributes:
        format: The wire format that tried to read the response.
        path: Where in the response the problem is.
    """

    def __init__(self, format: str, path: str, problem: str) -> None:
        self.format = format
        self.path = path
        super().__init__(f"Cannot read {format} tool calls: {path or 'response'}: {problem}")


@runtime_checkable
class WireFormat(Protocol):
    """One provider API's tool definitions, tool calls and tool results."""

    name: str
    """The format's name, as `get_format` knows it (`"openai"`, `"anthropic"`, ...)."""

    def definition(self, tool: Tool, *, strict: bool = False, name: str | None = None) -> dict[str, Any]:
        """One tool as this API's tool definition.

        Args:
            tool: The tool to export.
            strict: Use the API's strict mode, where it has one.
            name: The name to show the provider (a registry passes its provider-safe alias).

        Raises:
            SchemaError: The tool cannot be expressed for this API: a name it rejects, or a schema beyond a
                hard limit (OpenAI strict-mode sizes, nesting, `$ref` expansion).
        """
        ...

    def parse_tool_calls(
        self, response: Any, *, names: ToolNames | Mapping[str, str] | None = None
    ) -> list[ToolCall]:
        """The tool calls in a response (the JSON body as a dict, or the official SDK's object).

        Args:
            response: What the API returned.
            names: Maps provider-safe aliases back to registered names: a registry (or view), or a mapping
                from wire name to registered name.

        Raises:
            ToolCallParseError: The response does not have this API's shape.
        """
        ...

    def tool_result_message(
        self, result: ToolResult, *, name: str | None = None, tool: Tool | None = None
    ) -> dict[str, Any]:
        """A result as the message (or content block) that answers its call in this API.

        Args:
            result: The executor's result; `result.call_id` must be the provider's call id.
            name: The name the model used for the call (Gemini echoes it); defaults to `result.tool_name`.
            tool: The tool that ran (MCP shapes `structuredContent` by its output schema).
        """
        ...

    def content_followups(self, results: Sequence[ToolResult]) -> list[dict[str, Any]]:
        """What to send after the results of one turn for the content their messages cannot hold."""
        ...


# --------------------------------------------------------------------------------------------------------
# Reading responses


class Reader:
    """Typed access into a decoded response that raises `ToolCallParseError` naming the path."""

    def __init__(self, format: str) -> None:
        self.format = format

    def fail(self, path: str, problem: str) -> NoReturn:
        raise ToolCallParseError(self.format, path, problem)

    def data(self, value: Any, path: str = "") -> Any:
        """Plain data for a response: SDK objects (Pydantic models) are dumped; JSON passes through."""
        if isinstance(value, dict | list | str | int | float | bool) or value is None:
            return value
        dump = getattr(value, "model_dump", None)
        if callable(dump):
            try:
                return dump()
            except Exception as exc:  # an SDK object that cannot dump itself is unreadable, not a crash
                self.fail(path, f"cannot read {type(value).__name__} ({type(exc).__name__}: {exc})")
        if not isinstance(value, Mapping):
            self.fail(path, f"expected a JSON object or an SDK response object, got {type(value).__name__}")
        return dict(value)

    def mapping(self, value: Any, path: str, *, expected: str = "an object") -> Mapping[str, Any]:
        value = self.data(value, path)
        if not isinstance(value, Mapping):
            self.fail(path, f"expected {expected}, got {_kind(value)}")
        return value

    def list(self, value: Any, path: str) -> list[Any]:
        value = self.data(value, path)
        if not isinstance(value, list):
            self.fail(path, f"expected a list, got {_kind(value)}")
        return value

    def typed_items(
        self, response: Any, key: str, kind: str, *, expected: str
    ) -> Sequence[tuple[str, Mapping[str, Any]]]:
        """The objects of type `kind` in `response[key]`, or in `response` itself when it is a list, with
        their paths; every entry must be an object (`expected` names what `response` should be)."""
        data = self.data(response)
        if isinstance(data, list):
            base, entries = "", data
        else:
            holder = self.mapping(data, "", expected=expected)
            base, entries = key, self.list(self.field(holder, key, ""), key)
        found: list[tuple[str, Mapping[str, Any]]] = []
        for i, raw in enumerate(entries):
            path = f"{base}[{i}]"
            entry = self.mapping(raw, path)
            if entry.get("type") == kind:
                found.append((path, entry))
        return found

    def field(self, holder: Mapping[str, Any], key: str, path: str) -> Any:
        if key not in holder:
            self.fail(path, f"missing key {key!r}")
        return holder[key]

    def string(self, holder: Mapping[str, Any], key: str, path: str, *, empty: bool = False) -> str:
        where = f"{path}.{key}" if path else key
        value = self.field(holder, key, path)
        if not isinstance(value, str):
            self.fail(where, f"expected a string, got {_kind(value)}")
        if not empty and not value:
            self.fail(where, "expected a non-empty string")
        return value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number"}
    for kind, text in names.items():
        if isinstance(value, kind):
            return text
    if isinstance(value, float):
        return "a number"
    return type(value).__name__


def original_name(wire: str, names: ToolNames | Mapping[str, str] | None) -> str:
    """Map a provider-safe alias back to the registered name (unknown names pass through)."""
    if names is None:
        return wire
    if isinstance(names, Mapping):
        found = names.get(wire, wire)
        return found if isinstance(found, str) else wire
    return names.original_name(wire)


def knows(wire: str, names: ToolNames | Mapping[str, str] | None) -> bool:
    """Whether `names` knows `wire` as a registered name or alias."""
    if names is None:
        return False
    if isinstance(names, Mapping):
        return wire in names or wire in names.values()
    return wire in names


def stable_id(prefix: str, index: int, name: str, arguments: Any) -> str:
    """A call id that is the same every time the same response is read (for APIs that send none)."""
    try:
        text = json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        text = repr(type(arguments))
    digest = hashlib.blake2b(f"{index}\x00{name}\x00{text}".encode(), digest_size=6).hexdigest()
    return f"{prefix}{index}_{digest}"


# --------------------------------------------------------------------------------------------------------
# Writing definitions and results


class BaseFormat:
    """Shared machinery of the concrete formats: choosing the name and the schema transformer."""

    name: str
    plain: ClassVar[type[SchemaTransformer]] = SchemaTransformer
    """Transformer for the plain (non-strict) export."""
    strict_transformer: ClassVar[type[SchemaTransformer] | None] = None
    """Transformer for strict mode; None when the API has no strict mode (then `strict` is ignored)."""
    name_pattern: ClassVar[re.Pattern[str]] = PROVIDER_NAME_PATTERN
    """Names the API accepts as they are."""
    schema_path: ClassVar[str] = "/parameters"
    """JSON pointer of the parameters schema inside a definition (for checker findings)."""

    free_form_rule: ClassVar[str] = "SCHEMA-FREEFORM"
    """Checker rule naming a free-form object that made a strict export fall back to the plain one."""

    def export(
        self, parameters: Mapping[str, Any], *, strict: bool
    ) -> tuple[dict[str, Any], bool, list[tuple[str, str, str]]]:
        """The parameters schema, whether it is strict, and what the export loses (checker findings).

        A strict export that meets a free-form object (`dict[str, X]`, `list[dict]`, an object open to
        other keys) falls back to the plain schema, not strict: strict mode would close the object and the
        model could then send only `{}` for it. A finding names each such parameter (`free_form_rule`).
        """
        transformer = self.transformer(parameters, strict=strict)
        schema = transformer.transform()
        if not (strict and self.strict_transformer is not None):
            return schema, False, transformer.findings
        if not transformer.free_form:
            return schema, True, transformer.findings
        findings = [
            (
                self.free_form_rule,
                path,
                f"{path or 'the arguments object'} is a free-form object (keys strict mode cannot describe): "
                "the tool is exported non-strict, since in strict mode the model could send only {} for it. "
                "Give it fixed properties to keep strict mode.",
            )
            for path in transformer.free_form
        ]
        plain = self.transformer(parameters, strict=False)
        return plain.transform(), False, findings + plain.findings

    def findings(self, tool: Tool, *, strict: bool) -> list[tuple[str, str, str]]:
        """What exporting `tool` loses that a checker reports: (rule, pointer into the schema, message)."""
        return self.export(tool.parameters, strict=strict)[2]

    def wire_name(self, tool: Tool, name: str | None) -> str:
        """The name to send: `name` if given, else the tool's; refused if the API would reject it."""
        chosen = name if name is not None else tool.name
        if not self.name_pattern.match(chosen):
            hint = re.sub(r"[^a-zA-Z0-9_-]", "_", chosen)[:64]
            raise SchemaError(
                f"Tool name {chosen!r} is not accepted by the {self.name} API (allowed: "
                f"{self.name_pattern.pattern}). Export through a ToolRegistry, which gives such tools a "
                f"provider-safe alias, or pass name=..., e.g. {hint!r}."
            )
        return chosen

    def schema(self, parameters: Mapping[str, Any], *, strict: bool) -> dict[str, Any]:
        """The parameters schema in this API's dialect."""
        return self.transformer(parameters, strict=strict).transform()

    def transformer(self, parameters: Mapping[str, Any], *, strict: bool) -> SchemaTransformer:
        """The transformer that exports `parameters` (its `changes` say what the export changed)."""
        kind = self.strict_transformer if strict and self.strict_transformer is not None else self.plain
        return kind(parameters)

    def description(self, tool: Tool) -> str:
        """The tool's description for a format with no field for an output schema: with
        `include_return_schema=True`, the output schema follows it as compact JSON."""
        schema = tool.output_schema if tool.options.include_return_schema else None
        if schema is None:
            return tool.description
        text = json.dumps(schema, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        return f"{tool.description}\n\nReturns JSON matching this schema: {text}"

    def content_followups(self, results: Sequence[ToolResult]) -> list[dict[str, Any]]:
        """What this API needs *after* the results of one turn to carry the content their result messages
        cannot hold (see `ToolResult.content`): empty for most formats. Chat Completions gives one user
        message, Gemini extra parts of the same user turn."""
        return []

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def error_payload(result: ToolResult) -> dict[str, Any]:
    """The error of a failed result as a small JSON object for APIs that take structured responses."""
    err = result.error
    if err is None:
        return {"message": result.render()}
    payload: dict[str, Any] = {"code": err.code, "message": err.message}
    if err.recover_action:
        payload["recover_action"] = err.recover_action
    if err.retryable:
        payload["retryable"] = True
    return payload


def shows_value(result: ToolResult) -> bool:
    """Whether the model sees `result.value` as it is (not an error, a pause, a message, a hidden value)."""
    return result.status == "ok" and result.message is None and not result.exclude_value_from_context
