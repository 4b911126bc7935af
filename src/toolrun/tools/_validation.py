"""Argument validators: turn what a model sent into keyword arguments, or into a list of problems.

Two engines behind one small protocol:

- `PydanticArguments` for tools built from Python signatures and Pydantic models. JSON text goes straight
  to `model_validate_json` (decoded and validated in one pass in Rust, with a recursion limit that stops
  nesting bombs).
- `JsonSchemaArguments` for raw JSON Schema tools, validated by the `jsonschema` library.

One policy for every way of defining a tool (docs/argument-validation.md):

- JSON types strictly: `"5"` is not an integer, `true` is not 1, `"yes"` is not a boolean. Strings that JSON
  has no type for are read as their type says (a date, a UUID, an enum value); an integer is a number, and
  an integral number (`5.0`) is an integer, as in JSON Schema.
- Non-finite numbers (`NaN`, `Infinity`, which JSON does not have) are refused.
- Unknown fields are refused at every depth, each with its path (`filter.stauts`), unless the schema (or a
  model with `extra="allow"`) explicitly allows other keys.
- `null` for an optional parameter means "use the default" (strict exports turn optional parameters into
  required nullable ones; a model then sends `null`), for a nullable parameter with a default too.
- A tool opts into lax coercion with `coerce=True` (Pydantic's lax mode: `"5"` → 5, `"yes"` → True).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol

import pydantic_core
from pydantic import BaseModel, ValidationError

from toolrun.exceptions import ArgumentProblem, ArgumentsError

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError as JsonSchemaValidationError

__all__ = ["ArgumentsValidator", "JsonSchemaArguments", "PydanticArguments", "may_hold_floats", "short_repr"]

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
        return pydantic_core.from_json(arguments, allow_inf_nan=False)
    except ValueError as exc:
        if "NaN" in arguments or "Infinity" in arguments:
            _refuse_non_finite(tool, arguments)
        raise ArgumentsError(tool, [_bad_json(str(exc))]) from None


def _refuse_non_finite(tool: str, text: str | bytes) -> None:
    """Raise `ArgumentsError` when `text` holds a NaN or Infinity number (strings that say so are fine)."""
    try:
        pydantic_core.from_json(text, allow_inf_nan=False)
    except ValueError:
        raise ArgumentsError(
            tool,
            [
                ArgumentProblem(
                    "",
                    "arguments hold a non-finite number (NaN or Infinity), which JSON does not have",
                    expected="finite numbers",
                )
            ],
        ) from None


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
    """Validates with a Pydantic model whose fields are the tool's parameters.

    The policy (see the module docstring): JSON types strictly (Pydantic's strict mode, JSON flavour: a
    date or an enum value as a string, an integer for a float), unless `strict=False` (the tool's `coerce`
    option, Pydantic's lax mode); non-finite numbers refused; unknown fields refused at every depth
    (`forbid_extra`; off only when a nested model explicitly allows extra keys).
    """

    __slots__ = (
        "_extra",
        "_fields",
        "_model",
        "_model_param",
        "_plain",
        "_renamed",
        "_scan",
        "_strict",
        "tool",
    )

    def __init__(
        self,
        tool: str,
        model: type[BaseModel],
        *,
        model_param: str | None = None,
        renamed: Mapping[str, str] | None = None,
        strict: bool = True,
        forbid_extra: bool = True,
        scan_floats: bool = True,
    ) -> None:
        self.tool = tool
        self._scan = scan_floats
        self._model = model
        self._model_param = model_param
        self._renamed = dict(renamed or {})
        self._plain = model_param is None and not self._renamed
        """The handler takes the model's fields as they are: `validate` returns a copy of its `__dict__`."""
        self._fields = sorted((f.alias or name) for name, f in model.model_fields.items())
        self._strict = strict
        self._extra: Literal["forbid"] | None = "forbid" if forbid_extra else None

    @property
    def model(self) -> type[BaseModel]:
        return self._model

    @property
    def forbid_extra(self) -> bool:
        return self._extra is not None

    @forbid_extra.setter
    def forbid_extra(self, value: bool) -> None:
        self._extra = "forbid" if value else None

    @property
    def scan_floats(self) -> bool:
        """Whether decoded objects are scanned for NaN/Infinity (only needed where a float may pass)."""
        return self._scan

    @scan_floats.setter
    def scan_floats(self, value: bool) -> None:
        self._scan = value

    def validate(self, arguments: str | Mapping[str, Any] | None) -> dict[str, Any]:
        try:
            if isinstance(arguments, str) and arguments and not arguments.isspace():
                text: str | bytes = arguments
                if "NaN" in text or "Infinity" in text:
                    _refuse_non_finite(self.tool, text)
            else:
                data = _decode(self.tool, arguments)
                if self._scan and not _finite(data):
                    _refuse_non_finite(self.tool, "NaN")
                try:
                    # A decoded object: Python's strict mode accepts a subset of what JSON's does (no
                    # date from a string, no tuple from a list), so it is tried first, and JSON decides.
                    instance = self._model.__pydantic_validator__.validate_python(
                        data, strict=self._strict, extra=self._extra
                    )
                    return self._arguments(instance)
                except ValidationError as exc:
                    if not self._strict:
                        raise
                    try:
                        text = pydantic_core.to_json(data)
                    except (pydantic_core.PydanticSerializationError, ValueError, RecursionError):
                        raise exc from None  # not JSON data: the Python-mode errors are the answer
            # The model's own validator, called directly: `model_validate_json` is a Python wrapper around
            # this same call (one frame less per tool call; the validator is read each time, so a
            # `model_rebuild()` is seen).
            instance = self._model.__pydantic_validator__.validate_json(
                text, strict=self._strict, extra=self._extra
            )
        except ValidationError as exc:
            retried = self._with_integral_floats(exc, arguments)
            if retried is None:
                raise ArgumentsError(self.tool, self._problems(exc)) from None
            instance = retried
        except RecursionError:
            raise ArgumentsError(
                self.tool,
                [ArgumentProblem("", "arguments are nested too deeply", expected="a shallower object")],
            ) from None
        if self._plain:  # `_arguments`'s common case inline: one frame less per call
            return dict(instance.__dict__)
        return self._arguments(instance)

    def _with_integral_floats(self, exc: ValidationError, arguments: Any) -> BaseModel | None:
        """The instance, when the only problems were integers written as `5.0` (an integer in JSON Schema's
        sense, which raw-schema tools accept too); None otherwise. Only on the error path."""
        errors = exc.errors(include_url=False)
        if not self._strict or not all(
            e["type"] == "int_type" and isinstance(e.get("input"), float) and e["input"].is_integer()
            for e in errors
        ):
            return None
        try:
            data = (
                pydantic_core.from_json(arguments) if isinstance(arguments, str) else _decode("", arguments)
            )
            data = _json_copy(data)
            for error in errors:
                _replace_at(data, tuple(error["loc"]), int(error["input"]))
            text = pydantic_core.to_json(data)
            return self._model.model_validate_json(text, strict=True, extra=self._extra)
        except (ValidationError, ValueError, KeyError, IndexError, TypeError, RecursionError):
            return None

    def _arguments(self, instance: BaseModel) -> dict[str, Any]:
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
        skipped = 0
        for err in exc.errors(include_url=False)[:_MAX_PROBLEMS]:
            kind = err["type"]
            loc = tuple(err["loc"])
            given = err.get("input")
            if kind == "int_type" and isinstance(given, float) and given.is_integer():
                skipped += 1
                continue  # `5.0` is an integer (JSON Schema's sense); not a problem when the rest is fixed
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
        extra = exc.error_count() - len(problems) - skipped
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
    """Validates against a raw JSON Schema with the `jsonschema` library (draft 2020-12).

    JSON types are checked as the schema says (`jsonschema` never coerces); with `coerce=True` (the tool's
    `coerce` option) strings that spell a number or a boolean are read as one first where the schema asks
    for that type, as Pydantic's lax mode would. Non-finite numbers are refused either way.
    """

    __slots__ = (
        "_coerce",
        "_defaults",
        "_integer_props",
        "_null_means_default",
        "_schema",
        "_validator",
        "tool",
    )

    def __init__(self, tool: str, schema: Mapping[str, Any], *, coerce: bool = False) -> None:
        # Imported here, not at the top: only raw-schema tools need `jsonschema` (see `toolrun/__init__`).
        from jsonschema import Draft202012Validator

        self.tool = tool
        self._validator = Draft202012Validator(schema)
        self._schema = schema
        self._coerce = coerce
        props: Mapping[str, Any] = schema.get("properties") or {}
        required = set(schema.get("required") or ())
        # Optional parameters: a null from the model means "not given" when the type cannot be null, or
        # when the parameter has a default other than null (strict exports make every optional parameter
        # nullable, and the model sends null for "not given").
        self._null_means_default = frozenset(
            name
            for name, sub in props.items()
            if name not in required
            and (
                not _admits_null(sub)
                or (isinstance(sub, Mapping) and "default" in sub and sub["default"] is not None)
            )
        )
        self._defaults = {
            name: sub["default"]
            for name, sub in props.items()
            if isinstance(sub, Mapping) and "default" in sub and name not in required
        }
        self._integer_props = tuple(
            name for name, sub in props.items() if isinstance(sub, Mapping) and _integer_only(sub.get("type"))
        )

    def validate(self, arguments: str | Mapping[str, Any] | None) -> dict[str, Any]:
        data = _decode(self.tool, arguments)
        if not isinstance(data, Mapping):
            raise ArgumentsError(self.tool, [_not_an_object(data)])
        if not isinstance(arguments, str) and not _finite(data):
            _refuse_non_finite(self.tool, "NaN")
        values = {k: v for k, v in data.items() if not (v is None and k in self._null_means_default)}
        if self._coerce:
            values = _coerced(values, self._schema, 0)
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
        if self._integer_props:
            # `5.0` is an integer in JSON Schema's sense: the handler gets 5, as a Python tool would.
            for name in self._integer_props:
                value = values.get(name)
                if type(value) is float and value.is_integer():
                    values[name] = int(value)
        return values


def may_hold_floats(schema: Mapping[str, Any]) -> bool:
    """Whether a value valid for `schema` may contain a float (a number, any value, a free-form object).

    When not, a decoded object's NaN or Infinity fails validation anyway, and the scan can be skipped.
    """
    stack: list[Any] = [schema]
    seen = 0
    while stack and seen < 10_000:
        seen += 1
        node = stack.pop()
        if not isinstance(node, Mapping):
            if node is True:
                return True
            continue
        kind = node.get("type")
        kinds = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else []
        if "number" in kinds:
            return True
        typing_keys = ("type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const", "properties", "items")
        if not any(k in node for k in typing_keys):
            return True  # any value
        if "object" in kinds and node.get("additionalProperties", not node.get("properties")) is True:
            return True
        for key in ("properties", "$defs", "definitions", "patternProperties"):
            sub = node.get(key)
            if isinstance(sub, Mapping):
                stack.extend(sub.values())
        for key in ("items", "additionalProperties", "not"):
            if isinstance(node.get(key), Mapping | bool) and key in node:
                stack.append(node[key])
        for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            stack.extend(node.get(key) or ())
    return bool(stack)


def _integer_only(kind: Any) -> bool:
    if kind == "integer":
        return True
    return isinstance(kind, list) and "integer" in kind and "number" not in kind


def _json_copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _json_copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_copy(v) for v in value]
    return value


def _replace_at(data: Any, loc: tuple[str | int, ...], value: Any) -> None:
    """Set `value` at the validation error location `loc` in decoded JSON `data`."""
    for part in loc[:-1]:
        data = data[part]
    data[loc[-1]] = value


def _finite(value: Any) -> bool:
    """False when `value` holds a NaN or infinite float (a decoded object; iterative; on the hot path)."""
    stack = [value]
    isfinite = math.isfinite
    budget = 100_000
    while stack and budget:
        budget -= 1
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif kind is float:
            if not isfinite(item):
                return False
        elif kind is str or kind is int or kind is bool or item is None:
            continue
        elif isinstance(item, float):
            if not isfinite(item):
                return False
        elif isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return True


_INT_TEXT = re.compile(r"^\s*[+-]?\d+(?:_\d+)*\s*$")
_TRUE = frozenset({"true", "yes", "on", "1", "t", "y"})
_FALSE = frozenset({"false", "no", "off", "0", "f", "n"})


def _coerced(value: Any, schema: Any, depth: int) -> Any:
    """`value` with strings (and 0/1, true/false) read as the scalar type the schema asks for (lax mode)."""
    if not isinstance(schema, Mapping) or depth > 32:
        return value
    kinds = schema.get("type")
    names = {kinds} if isinstance(kinds, str) else set(kinds) if isinstance(kinds, list) else set()
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        return {k: _coerced(v, props.get(k), depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_coerced(v, schema.get("items"), depth + 1) for v in value]
    if isinstance(value, str) and not names & {"string"}:
        text = value.strip().lower()
        if "integer" in names and _INT_TEXT.match(value):
            return int(value.replace("_", ""))
        if "number" in names:
            try:
                number = float(value)
            except ValueError:
                number = math.nan
            if math.isfinite(number):
                return number
        if "boolean" in names and text in _TRUE | _FALSE:
            return text in _TRUE
    if isinstance(value, bool) and "integer" in names and "boolean" not in names:
        return int(value)
    if (
        isinstance(value, int)
        and not isinstance(value, bool)
        and value in (0, 1)
        and "boolean" in names
        and not names & {"integer", "number"}
    ):
        return bool(value)
    return value


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
