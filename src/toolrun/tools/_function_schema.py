"""Build a tool's schema from a Python signature and docstring.

The one place that reads a function: parameters become a Pydantic model (the validator) and a JSON Schema
(what providers see); a parameter typed `ToolContext` is injected, never shown; a single Pydantic-model
parameter may stand for the whole argument object; the return annotation gives an output type (for an
async generator, the item type of its `AsyncIterator[X]` annotation: the last value it yields is the result).
"""

from __future__ import annotations

import collections.abc
import functools
import inspect
import re
import sys
import types
import typing
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    WrapValidator,
    create_model,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined, to_jsonable_python

from toolrun.exceptions import ToolDefinitionError
from toolrun.tools._context import ToolContext
from toolrun.tools._docstrings import parse_docstring
from toolrun.tools._raw_schema import close_objects
from toolrun.tools._validation import PydanticArguments, may_hold_floats

__all__ = [
    "FunctionSchema",
    "annotated_target",
    "build_function_schema",
    "callable_name",
    "clean_schema",
    "copy_json",
    "is_async_callable",
    "is_async_generator",
    "is_context_annotation",
    "refuse_sync_generator",
    "yield_type",
]

_FORBID = ConfigDict(extra="forbid")
_NO_RETURN = inspect.Signature.empty


@dataclass(kw_only=True)
class FunctionSchema:
    """Everything toolrun learns from reading one function."""

    name: str
    """The function's name."""
    description: str
    """The docstring's text before its sections."""
    parameters: dict[str, Any]
    """The JSON Schema of the arguments object."""
    make_validator: Callable[[], PydanticArguments]
    """Builds the validator of a model's arguments (possibly on first use)."""
    context_param: str | None = None
    """The name of the parameter that receives the `ToolContext`, if any."""
    positional_only: tuple[str, ...] = ()
    """Parameters that must be passed by position, in order."""
    return_type: Any = _NO_RETURN
    """The return annotation (`inspect.Signature.empty` when there is none)."""
    param_descriptions: dict[str, str] = field(default_factory=dict)
    """Descriptions read from the docstring."""
    is_async: bool = False
    """Whether calling the handler gives an awaitable (or, for a generator, an async iterator)."""
    is_generator: bool = False
    """Whether the handler is an async generator function (its yields are partial results)."""


def is_context_annotation(annotation: Any) -> bool:
    """True for `ToolContext`, `ToolContext[Deps]`, and optional forms of them."""
    if annotation is ToolContext or get_origin(annotation) is ToolContext:
        return True
    if isinstance(annotation, type) and issubclass(annotation, ToolContext):
        return True
    origin = get_origin(annotation)
    if origin is Annotated:
        return is_context_annotation(get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        args = [a for a in get_args(annotation) if a is not type(None)]
        return len(args) == 1 and is_context_annotation(args[0])
    return False


def _admits_none(annotation: Any) -> bool:
    if annotation is Any or annotation is None or annotation is type(None) or annotation is object:
        return True
    origin = get_origin(annotation)
    if origin is Annotated:
        return _admits_none(get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        return any(_admits_none(a) for a in get_args(annotation))
    if origin is typing.Literal:
        return None in get_args(annotation)
    return False


def _null_means_default(default: Any, factory: Callable[[], Any] | None) -> WrapValidator:
    """A `null` from the model for an optional, non-nullable parameter means "use the default"."""

    def validate(value: Any, handler: Callable[[Any], Any]) -> Any:
        if value is None:
            return factory() if factory is not None else default
        return handler(value)

    return WrapValidator(validate)


def _has_description(annotation: Any) -> bool:
    if get_origin(annotation) is not Annotated:
        return False
    return any(isinstance(m, FieldInfo) and m.description for m in get_args(annotation)[1:])


def _single_model(params: list[inspect.Parameter], hints: Mapping[str, Any]) -> str | None:
    if len(params) != 1:
        return None
    annotation = hints.get(params[0].name)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return params[0].name
    return None


def _strict_model(model: type[BaseModel]) -> type[BaseModel]:
    """The user's own model (a subclass of it), made to reject unknown fields unless it says otherwise,
    and to read `null` for an optional, non-nullable field as "use the default" like plain parameters."""
    nullable_defaults = frozenset(
        name
        for name, info in model.model_fields.items()
        if not info.is_required()
        and (
            not _admits_none(info.annotation) or info.default is not None or info.default_factory is not None
        )
    )
    keeps_extra = model.model_config.get("extra") in ("forbid", "allow")
    if keeps_extra and not nullable_defaults:
        return model
    aliases = {name: (info.alias or name) for name, info in model.model_fields.items()}
    keys = frozenset(aliases[n] for n in nullable_defaults) | nullable_defaults

    def drop_nulls(cls: type[BaseModel], data: Any) -> Any:
        if isinstance(data, dict) and keys:
            return {k: v for k, v in data.items() if not (v is None and k in keys)}
        return data

    namespace: dict[str, Any] = {
        "__doc__": model.__doc__,
        "__module__": model.__module__,
        "_toolrun_null_means_default": model_validator(mode="before")(classmethod(drop_nulls)),  # type: ignore[arg-type]
    }
    if not keeps_extra:
        namespace["model_config"] = _FORBID
    return type(model.__name__, (model,), namespace)


def callable_name(fn: Callable[..., Any]) -> str | None:
    """The default tool name of a callable: a function's name, a partial's function's, an object's class."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    name = getattr(fn, "__name__", None)
    if isinstance(name, str):
        return name
    return re.sub(r"(?<!^)(?=[A-Z])", "_", type(fn).__name__).lower()


def annotated_target(fn: Callable[..., Any]) -> tuple[Callable[..., Any], Any]:
    """What holds the annotations of `fn` and what holds its docstring.

    A `functools.partial` is read through to its function; a callable object through its `__call__`
    (its docstring is the class's, or the method's when the class has none).
    """
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.isfunction(fn) or inspect.ismethod(fn) or inspect.isbuiltin(fn) or isinstance(fn, type):
        return fn, fn
    call = getattr(fn, "__call__", None)  # noqa: B004
    if call is None:
        return fn, fn
    doc_owner: Any = type(fn) if type(fn).__doc__ else call
    return call, doc_owner


def is_async_generator(fn: Callable[..., Any]) -> bool:
    """Whether calling `fn` (a function, partial or callable object) gives an async generator."""
    target, _ = annotated_target(fn)
    return inspect.isasyncgenfunction(fn) or inspect.isasyncgenfunction(target)


_ASYNC_ITERATORS = (
    collections.abc.AsyncIterator,
    collections.abc.AsyncGenerator,
    collections.abc.AsyncIterable,
)


def yield_type(name: str, annotation: Any) -> Any:
    """The result type of an async generator tool: `X` of `AsyncIterator[X]` (also `AsyncGenerator[X, None]`,
    `AsyncIterable[X]`); no annotation (or `Any`) declares none. Anything else cannot be what an async
    generator returns, and is refused rather than checked against values it never describes."""
    if annotation is _NO_RETURN or annotation is Any:
        return annotation
    target = annotation
    if get_origin(target) is Annotated:
        target = get_args(target)[0]
    if target in _ASYNC_ITERATORS:
        return Any
    if get_origin(target) in _ASYNC_ITERATORS:
        args = get_args(target)
        return args[0] if args else Any
    raise ToolDefinitionError(
        f"Tool {name!r} is an async generator function annotated {annotation!r}; annotate it "
        "`-> AsyncIterator[X]` where X is the type of what it yields (the last value yielded is the result)."
    )


def refuse_sync_generator(name: str, fn: Callable[..., Any]) -> None:
    """A sync generator function cannot be a tool: it would hand the executor a generator object, not a
    result. Said at definition time, with the two ways out."""
    target, _ = annotated_target(fn)
    if inspect.isgeneratorfunction(fn) or inspect.isgeneratorfunction(target):
        raise ToolDefinitionError(
            f"Tool {name!r}: {fn!r} is a (sync) generator function. Make it an async generator "
            "(`async def ... -> AsyncIterator[X]`: each yield is a partial result, the last one the "
            "result), or return a list of the items."
        )


def is_async_callable(fn: Callable[..., Any]) -> bool:
    """Whether calling `fn` (a function, partial or callable object) gives an awaitable."""
    target, _ = annotated_target(fn)
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(target)


def build_function_schema(
    fn: Callable[..., Any],
    *,
    name: str,
    flatten_model: bool = True,
    annotations: Mapping[str, Any] | None = None,
    coerce: bool = False,
) -> FunctionSchema:
    """Read `fn` into a `FunctionSchema`; raise `ToolDefinitionError` for anything a tool cannot take.

    `fn` may be a function, a method, a `functools.partial` (its bound arguments are not shown to the
    model, which cannot override them) or a callable object. `annotations` fill in parameters that have
    none (a `Tool` subclass's unannotated `run(self, params)` reads its `Params` class).
    """
    generator = is_async_generator(fn)
    refuse_sync_generator(name, fn)
    target, doc_owner = annotated_target(fn)
    try:
        signature = inspect.signature(fn)
        hints = _type_hints(target)
    except (NameError, TypeError) as exc:
        raise ToolDefinitionError(
            f"Tool {name!r}: cannot read the type annotations of {fn!r} ({exc}). Make every annotation "
            "importable at module level (avoid names defined only under TYPE_CHECKING)."
        ) from exc
    if annotations:
        hints = {**{k: v for k, v in annotations.items() if k not in hints}, **hints}
    bound = frozenset(fn.keywords) if isinstance(fn, functools.partial) else frozenset()
    doc = parse_docstring(inspect.getdoc(doc_owner))
    context_param: str | None = None
    params: list[inspect.Parameter] = []
    for param in signature.parameters.values():
        if param.name in bound:
            continue  # bound by the developer with functools.partial: never the model's to set
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            star = "*" if param.kind is param.VAR_POSITIONAL else "**"
            raise ToolDefinitionError(
                f"Tool {name!r}: parameter {star}{param.name} is not supported; a model sends named "
                "arguments only. Declare each parameter explicitly (or take one Pydantic model)."
            )
        annotation = hints.get(param.name, Any)
        if is_context_annotation(annotation):
            if context_param is not None:
                raise ToolDefinitionError(f"Tool {name!r}: only one parameter may take the ToolContext.")
            context_param = param.name
            continue
        params.append(param)

    positional_only = tuple(p.name for p in params if p.kind is p.POSITIONAL_ONLY)
    model_param = _single_model(params, hints) if flatten_model else None
    make_validator: Callable[[], PydanticArguments]
    policy = _Policy(strict=not coerce)
    if model_param is not None:
        model = _strict_model(hints[model_param])
        parameters = model_json_schema(name, model)
        policy.forbid_extra = _closes(parameters)
        policy.scan_floats = may_hold_floats(parameters)
        ready = PydanticArguments(
            name,
            model,
            model_param=model_param,
            strict=policy.strict,
            forbid_extra=policy.forbid_extra,
            scan_floats=policy.scan_floats,
        )
        make_validator = lambda: ready  # noqa: E731
    else:
        composed = _compose_schema(name, params, hints, doc.params)
        if composed is not None:
            # The validator model is built on first use: registering and exporting many tools stays cheap.
            parameters = composed  # its objects are closed already (see `_type_schema`)
            policy.scan_floats = may_hold_floats(parameters)
            make_validator = lambda: _arguments_model(name, params, hints, doc.params, policy)  # noqa: E731
        else:
            eager = _arguments_model(name, params, hints, doc.params, policy)
            parameters = model_json_schema(name, eager.model)
            policy.forbid_extra = eager.forbid_extra = _closes(parameters)
            eager.scan_floats = may_hold_floats(parameters)
            make_validator = lambda: eager  # noqa: E731

    return FunctionSchema(
        name=callable_name(fn) or name,
        description=doc.description,
        parameters=parameters,
        make_validator=make_validator,
        context_param=context_param,
        positional_only=positional_only,
        return_type=yield_type(name, hints.get("return", _NO_RETURN))
        if generator
        else hints.get("return", _NO_RETURN),
        param_descriptions=doc.params,
        is_async=generator or is_async_callable(fn),
        is_generator=generator,
    )


@dataclass
class _Policy:
    strict: bool = True
    forbid_extra: bool = True
    scan_floats: bool = True


def _closes(parameters: dict[str, Any]) -> bool:
    """Close the exported schema's nested objects as the validator will; False when some nested object
    explicitly allows other keys (a model with `extra="allow"`): then each model's own setting holds."""
    return close_objects(parameters, unless_open=True)


def _arguments_model(
    name: str,
    params: list[inspect.Parameter],
    hints: Mapping[str, Any],
    descriptions: Mapping[str, str],
    policy: _Policy | None = None,
) -> PydanticArguments:
    """The Pydantic model that validates a model's arguments, one field per parameter."""
    renamed: dict[str, str] = {}
    fields: dict[str, Any] = {}
    for index, param in enumerate(params):
        annotation = hints.get(param.name, Any)
        default = param.default
        factory: Any = None
        given: FieldInfo | None = None
        if isinstance(default, FieldInfo):
            given = default
            default = given.default
            factory = given.default_factory
        optional = (default is not param.empty and default is not PydanticUndefined) or factory is not None
        if optional and (not _admits_none(annotation) or default is not None or factory is not None):
            # `null` from a model means "not given" (strict exports make optional parameters nullable), also
            # for a nullable parameter whose default is not None (`Optional[str] = "bob"`).
            annotation = Annotated[annotation, _null_means_default(default, factory)]
        extra: dict[str, Any] = {}
        has_desc = (given is not None and given.description) or _has_description(annotation)
        if not has_desc and param.name in descriptions:
            extra["description"] = descriptions[param.name]
        field_name = param.name
        if field_name.startswith("_") or hasattr(BaseModel, field_name):
            field_name = f"p{index}_{param.name.strip('_') or 'arg'}"
            extra["alias"] = param.name
            renamed[field_name] = param.name
        if given is not None:
            # Extra attributes ride in Annotated; Pydantic merges them under the given Field.
            if extra:
                annotation = Annotated[annotation, Field(**extra)]
            field_info = given
        elif default is param.empty:
            field_info = Field(**extra)
        else:
            field_info = Field(default=default, **extra)
        fields[field_name] = (annotation, field_info)
    try:
        model = create_model(f"{_model_name(name)}Arguments", __config__=_FORBID, **fields)
    except Exception as exc:  # Pydantic raises several types for unsupported annotations
        raise ToolDefinitionError(f"Tool {name!r}: cannot build a schema for its parameters: {exc}") from exc
    policy = policy or _Policy()
    return PydanticArguments(
        name,
        model,
        renamed=renamed,
        strict=policy.strict,
        forbid_extra=policy.forbid_extra,
        scan_floats=policy.scan_floats,
    )


_MISSING = object()
_TYPE_SCHEMAS: dict[Any, dict[str, Any] | None] = {}
_TYPE_SCHEMA_CACHE_SIZE = 4096


def _type_schema(name: str, annotation: Any) -> dict[str, Any] | None:
    """Pydantic's own JSON Schema for one annotation, cached; None when it needs `$defs` (not composable)."""
    try:
        cached = _TYPE_SCHEMAS.get(annotation, _MISSING)
    except TypeError:  # unhashable annotation metadata
        return None
    if cached is not _MISSING:
        return cached  # type: ignore[return-value]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            schema: dict[str, Any] | None = TypeAdapter(annotation).json_schema()
    except Exception as exc:
        raise ToolDefinitionError(
            f"Tool {name!r}: cannot build a schema for type {annotation!r}: {exc}"
        ) from exc
    if schema is not None and ("$defs" in schema or "$ref" in str(schema)):
        schema = None
    elif schema is not None:
        clean_schema(schema)
        # Objects refuse unknown keys at every depth, as the validator will (done once per type, here);
        # a type with an object that explicitly allows other keys is not composed (its model decides).
        if not close_objects({"properties": {"": schema}}, unless_open=True):
            schema = None
    if len(_TYPE_SCHEMAS) < _TYPE_SCHEMA_CACHE_SIZE:
        _TYPE_SCHEMAS[annotation] = schema
    return schema


def copy_json(value: Any) -> Any:
    """A deep copy of JSON-shaped data (dicts, lists, scalars); several times faster than `deepcopy`."""
    if isinstance(value, dict):
        return {k: copy_json(v) if isinstance(v, dict | list) else v for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) if isinstance(v, dict | list) else v for v in value]
    return value


def _compose_schema(
    name: str, params: list[inspect.Parameter], hints: Mapping[str, Any], descriptions: Mapping[str, str]
) -> dict[str, Any] | None:
    """The arguments schema, composed from per-type schemas, exactly as the model would give it.

    Returns None when composing is not exact (a `Field(...)` default, a type with `$defs`, a default
    with no JSON form); the caller then builds the model eagerly and asks it for the schema.
    """
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in params:
        if isinstance(param.default, FieldInfo):
            return None
        base = _type_schema(name, hints.get(param.name, Any))  # enums and models are inlined, not $ref
        if base is None:
            return None
        prop = copy_json(base)  # the cached type schema is shared: each tool gets its own nested dicts
        if param.default is param.empty:
            required.append(param.name)
        else:
            try:
                prop["default"] = to_jsonable_python(param.default)
            except Exception:
                return None
        annotation = hints.get(param.name, Any)
        if param.name in descriptions and not _has_description(annotation):
            prop["description"] = descriptions[param.name]  # the parameter's words beat its type's docstring
        properties[param.name] = dict(sorted(prop.items()))
    schema: dict[str, Any] = {"additionalProperties": False, "properties": properties}
    if required:
        schema["required"] = required
    schema["type"] = "object"
    return schema


def _type_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """Annotations resolved; names local to the function defining the tool are found too.

    With `from __future__ import annotations` a type defined inside a function (a test, a factory) is
    only a string; like Pydantic, look it up in the enclosing frames' locals when the globals lack it.
    """
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except NameError:
        localns: dict[str, Any] = {}
        owner = getattr(fn, "__self__", None)
        if owner is not None:  # a method: names in its class body (e.g. a nested `Params` model)
            for klass in type(owner).__mro__:
                for key, value in vars(klass).items():
                    localns.setdefault(key, value)
        frame: types.FrameType | None = sys._getframe(1)
        for _ in range(12):
            if frame is None:
                break
            for key, value in frame.f_locals.items():
                localns.setdefault(key, value)
            frame = frame.f_back
        return typing.get_type_hints(fn, localns=localns, include_extras=True)


def _model_name(name: str) -> str:
    return (
        "".join(part.capitalize() for part in name.replace("-", "_").replace(".", "_").split("_")) or "Tool"
    )


def model_json_schema(name: str, model: type[BaseModel]) -> dict[str, Any]:
    """The arguments schema of `model`, cleaned of Pydantic's titles."""
    try:
        with warnings.catch_warnings():
            # A default that cannot be shown in JSON is left out of the schema; that is fine here.
            warnings.simplefilter("ignore")
            schema = model.model_json_schema(by_alias=True)
    except Exception as exc:
        raise ToolDefinitionError(
            f"Tool {name!r}: cannot express its parameters as JSON Schema: {exc}"
        ) from exc
    clean_schema(schema)
    schema.setdefault("properties", {})
    return schema


_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_SUBSCHEMA_ONE = ("items", "additionalProperties", "not", "contains")


def clean_schema(schema: dict[str, Any]) -> None:
    """Drop the `title` keywords Pydantic adds to every model and field (noise for a model), in place.

    Only `title` keywords are removed: a *property* called "title" is kept. Walks iteratively.
    """
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node.get("title"), str):
            del node["title"]
        for key in _SUBSCHEMA_LISTS:
            for sub in node.get(key, ()) or ():
                if isinstance(sub, dict):
                    stack.append(sub)
        for key in _SUBSCHEMA_MAPS:
            mapping = node.get(key)
            if isinstance(mapping, dict):
                stack.extend(v for v in mapping.values() if isinstance(v, dict))
        for key in _SUBSCHEMA_ONE:
            sub = node.get(key)
            if isinstance(sub, dict):
                stack.append(sub)
