"""Argument validators: turn what a model sent into keyword arguments, or into a list of problems.

Two engines behind one small protocol:

- `PydanticArguments` for tools built from Python signatures and Pydantic models. JSON text goes straight
  to `model_validate_json` (decoded and validated in one pass in Rust, with a recursion limit that stops
  nesting bombs).
- `JsonSchemaArguments` for raw JSON Schema tools, validated by the `jsonschema` library.

Both forbid unknown fields and treat `null` for an optional, non-nullable parameter as "use the default"
(strict OpenAI exports turn optional parameters into required nullable ones; a model then sends `null`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import pydantic_core
from pydantic import BaseModel, ValidationError

from toolrun.exceptions import ArgumentProblem, ArgumentsError

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError as JsonSchemaValidationError

__all__ = ["ArgumentsValidator", "JsonSchemaArguments", "PydanticArguments", "short_repr"]

_MAX_GIVEN = 80
_MAX_PROBLEMS = 20


class ArgumentsValidator(Protocol):
    def validate(self, arguments: str | Mapping[str, Any] | None) -> dict[str, Any]:
        """Keyword arguments for the handler, or raise `ArgumentsError` listing every problem."""
        ...


def short_repr(value: Any) -> str:
    """A bounded rendering of a value for an error message (never the whole of a huge input)."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = f"<{type(value).__name__}>"
    return text if len(text) <= _MAX_GIVEN else text[: _MAX_GIVEN - 1] + "…"


def _path(loc: tuple[str | int, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _decode(tool: str, arguments: str | Mapping[str, Any] | None) -> Any:
    """Decode text arguments; empty text and None both mean 'no arguments'."""
    if arguments is None:
        return {}
    if isinstance(arguments, Mapping):
        return arguments
    if not isinstance(arguments, str):  # bytes, lists, numbers: not an arguments object
        raise ArgumentsError(tool, [_not_an_object(arguments)])
    if not arguments or arguments.isspace():
        return {}
    try:
        return pydantic_core.from_json(arguments)
    except ValueError as exc:
        raise ArgumentsError(tool, [_bad_json(str(exc))]) from None


def _bad_json(detail: str) -> ArgumentProblem:
    detail = detail.split(" [type=")[0]
    return ArgumentProblem(
        "", f"arguments are not valid JSON ({detail})", expected="a JSON object of arguments"
    )


def _not_an_object(value: Any) -> ArgumentProblem:
    return ArgumentProblem(
        "",
        "arguments must be a JSON object",
        expected="object",
        given=f"{type(value).__name__} {short_repr(value)}",
    )


_EXPECTED_BY_TYPE = {
    "int_parsing": "integer",
    "int_type": "integer",
    "int_from_float": "integer",
    "float_parsing": "number",
    "float_type": "number",
    "bool_parsing": "boolean",
    "bool_type": "boolean",
    "string_type": "string",
    "list_type": "array",
    "dict_type": "object",
    "model_type": "object",
    "model_attributes_type": "object",
    "date_parsing": "date (YYYY-MM-DD)",
    "date_from_datetime_parsing": "date (YYYY-MM-DD)",
    "datetime_parsing": "date-time (ISO 8601)",
    "datetime_from_date_parsing": "date-time (ISO 8601)",
    "uuid_parsing": "UUID",
    "missing": "a value (required)",
}


class PydanticArguments:
    """Validates with a Pydantic model whose fields are the tool's parameters."""

    __slots__ = ("_fields", "_model", "_model_param", "_renamed", "tool")

    def __init__(
        self,
        tool: str,
        model: type[BaseModel],
        *,
        model_param: str | None = None,
        renamed: Mapping[str, str] | None = None,
    ) -> None:
        self.tool = tool
        self._model = model
        self._model_param = model_param
        self._renamed = dict(renamed or {})
        self._fields = sorted((f.alias or name) for name, f in model.model_fields.items())

    @property
    def model(self) -> type[BaseModel]:
        return self._model

    def validate(self, arguments: str | Mapping[str, Any] | None) -> dict[str, Any]:
        try:
            if isinstance(arguments, str) and arguments and not arguments.isspace():
                instance = self._model.model_validate_json(arguments)
            else:
                instance = self._model.model_validate(_decode(self.tool, arguments))
        except ValidationError as exc:
            raise ArgumentsError(self.tool, self._problems(exc)) from None
        except RecursionError:
            raise ArgumentsError(
                self.tool,
                [ArgumentProblem("", "arguments are nested too deeply", expected="a shallower object")],
            ) from None
        if self._model_param is not None:
            return {self._model_param: instance}
        values = instance.__dict__
        if self._renamed:
            return {self._renamed.get(k, k): v for k, v in values.items()}
        return dict(values)

    def validate_model(self, arguments: str | Mapping[str, Any] | None) -> BaseModel:
        """Validate and return the model instance itself (for class-based tools)."""
        kwargs = self.validate(arguments)
        if self._model_param is not None:
            result: BaseModel = kwargs[self._model_param]
            return result
        return self._model.model_construct(**kwargs)

    def _problems(self, exc: ValidationError) -> list[ArgumentProblem]:
        problems: list[ArgumentProblem] = []
        for err in exc.errors(include_url=False)[:_MAX_PROBLEMS]:
            kind = err["type"]
            loc = tuple(err["loc"])
            if kind == "json_invalid":
                problems.append(_bad_json(str(err.get("ctx", {}).get("error", err["msg"]))))
                continue
            if not loc and kind in ("model_type", "dict_type", "model_attributes_type"):
                problems.append(_not_an_object(err.get("input")))
                continue
            path = _path(loc)
            if kind == "extra_forbidden":
                field = str(loc[-1]) if loc else path
                allowed = ", ".join(self._fields) if len(loc) == 1 else None
                message = f"unknown field {field!r}"
                if allowed is not None:
                    message += f"; allowed fields: {allowed}" if allowed else "; this tool takes no arguments"
                problems.append(ArgumentProblem(path, message))
                continue
            if kind == "missing":
                problems.append(ArgumentProblem(path, "required field is missing", expected="a value"))
                continue
            ctx = err.get("ctx") or {}
            expected = ctx.get("expected") or _EXPECTED_BY_TYPE.get(kind)
            problems.append(
                ArgumentProblem(
                    path,
                    err["msg"][0].lower() + err["msg"][1:] if err["msg"] else kind,
                    expected=str(expected) if expected is not None else None,
                    given=short_repr(err.get("input")),
                )
            )
        extra = exc.error_count() - len(problems)
        if extra > 0:
            problems.append(ArgumentProblem("", f"and {extra} more problem(s) not listed"))
        return problems


def _admits_null(schema: Any) -> bool:
    if not isinstance(schema, Mapping):
        return True
    kind = schema.get("type")
    if kind is None and "anyOf" not in schema and "oneOf" not in schema and "enum" not in schema:
        return "$ref" not in schema and "const" not in schema
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if "enum" in schema and None in schema["enum"]:
        return True
    return any(_admits_null(s) for key in ("anyOf", "oneOf") for s in schema.get(key, ()) or ())


class JsonSchemaArguments:
    """Validates against a raw JSON Schema with the `jsonschema` library (draft 2020-12)."""

    __slots__ = ("_defaults", "_null_means_default", "_validator", "tool")

    def __init__(self, tool: str, schema: Mapping[str, Any]) -> None:
        # Imported here, not at the top: only raw-schema tools need `jsonschema` (see `toolrun/__init__`).
        from jsonschema import Draft202012Validator

        self.tool = tool
        self._validator = Draft202012Validator(schema)
        props: Mapping[str, Any] = schema.get("properties") or {}
        required = set(schema.get("required") or ())
        # Optional parameters whose type cannot be null: a null from the model means "not given".
        self._null_means_default = frozenset(
            name for name, sub in props.items() if name not in required and not _admits_null(sub)
        )
        self._defaults = {
            name: sub["default"]
            for name, sub in props.items()
            if isinstance(sub, Mapping) and "default" in sub and name not in required
        }

    def validate(self, arguments: str | Mapping[str, Any] | None) -> dict[str, Any]:
        data = _decode(self.tool, arguments)
        if not isinstance(data, Mapping):
            raise ArgumentsError(self.tool, [_not_an_object(data)])
        values = {k: v for k, v in data.items() if not (v is None and k in self._null_means_default)}
        try:
            errors = sorted(self._validator.iter_errors(values), key=lambda e: list(e.absolute_path))
        except RecursionError:
            raise ArgumentsError(
                self.tool,
                [ArgumentProblem("", "arguments are nested too deeply", expected="a shallower object")],
            ) from None
        if errors:
            raise ArgumentsError(self.tool, [_jsonschema_problem(e) for e in errors[:_MAX_PROBLEMS]])
        for name, default in self._defaults.items():
            if name not in values:
                values[name] = default
        return values


_ADDITIONAL_RE = re.compile(r"\((.*) (?:was|were) unexpected\)")


def _jsonschema_problem(err: JsonSchemaValidationError) -> ArgumentProblem:
    path = _path(tuple(err.absolute_path))
    validator = str(err.validator)
    if validator == "required":
        missing = err.message.split("'")[1] if "'" in err.message else err.message
        sub = f"{path}.{missing}" if path else missing
        return ArgumentProblem(sub, "required field is missing", expected="a value")
    if validator == "additionalProperties":
        match = _ADDITIONAL_RE.search(err.message)
        names = match.group(1) if match else "some fields"
        allowed = sorted((err.schema.get("properties") or {}) if isinstance(err.schema, Mapping) else ())
        return ArgumentProblem(
            path, f"unknown field(s) {names}; allowed fields: {', '.join(allowed) or '(none)'}"
        )
    expected_value: Callable[[], str] = lambda: short_repr(err.validator_value)  # noqa: E731
    expected = {
        "type": lambda: str(err.validator_value),
        "enum": lambda: "one of " + short_repr(err.validator_value),
        "const": expected_value,
    }.get(validator, lambda: f"{validator} {short_repr(err.validator_value)}")()
    message = err.message if len(err.message) <= 200 else err.message[:199] + "…"
    return ArgumentProblem(path, message, expected=expected, given=short_repr(err.instance))
