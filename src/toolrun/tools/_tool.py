"""`Tool`: one type behind every way of defining a tool.

```python
@tool                                    # a typed function (sync or async)
def add(a: int, b: int) -> int: ...

Tool.from_function(fn, destructive=True) # the same, without a decorator
Tool.from_schema("search", "Search the web.", {"type": "object", ...}, handler)   # raw JSON Schema

class DeleteTask(Tool, destructive=True):  # a class with a Pydantic `Params` model and a `run` method
    "Delete a task permanently."
    class Params(BaseModel):
        task_id: str
    async def run(self, params: Params, ctx: ToolContext) -> dict: ...
```
"""

from __future__ import annotations

import copy
import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Unpack

from pydantic import TypeAdapter, ValidationError

from toolrun.content import value_annotation
from toolrun.exceptions import ArgumentsError, SchemaError, ToolDefinitionError, ToolExampleError
from toolrun.tools._context import ToolContext
from toolrun.tools._function_schema import (
    annotated_target,
    build_function_schema,
    callable_name,
    clean_schema,
    is_async_callable,
    is_async_generator,
    is_context_annotation,
    refuse_sync_generator,
)
from toolrun.tools._lenient import normalize_schema
from toolrun.tools._options import ToolOptions, ToolOptionsKwargs, build_options
from toolrun.tools._raw_schema import callable_root, close_objects
from toolrun.tools._validation import ArgumentsValidator, JsonSchemaArguments

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

__all__ = ["NAME_PATTERN", "PROVIDER_NAME_PATTERN", "SubclassOptions", "Tool"]

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}$")
"""Names toolrun accepts. Names with `.`/`:` or over 64 characters get a provider-safe alias on export."""
PROVIDER_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""Names OpenAI, Anthropic and Gemini all accept as they are."""

_NONE_TYPES = (None, type(None), Any, inspect.Signature.empty)


class SubclassOptions(ToolOptionsKwargs, total=False):
    """What a `Tool` subclass's constructor takes: the tool options, and a name or description override."""

    name: str
    description: str


def suggest_name(name: object) -> str:
    """A name close to `name` that `NAME_PATTERN` accepts (for error messages; always valid itself)."""
    text = name if isinstance(name, str) else str(name)
    safe = re.sub(r"[^A-Za-z0-9_.:-]", "_", text)
    safe = re.sub(r"^[^A-Za-z0-9_]+", "", safe)[:128].strip("_") or "my_tool"
    return safe if NAME_PATTERN.match(safe) else "my_tool"


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise ToolDefinitionError(
            f"Invalid tool name {name!r}: use 1-128 characters of letters, digits, '_', '-', '.' or ':', "
            f"not starting with '-', '.' or ':' (pattern {NAME_PATTERN.pattern}), e.g. "
            f"{suggest_name(name)!r}. Names outside ^[a-zA-Z0-9_-]{{1,64}}$ (the pattern providers accept) "
            "get a provider-safe alias when exported through a ToolRegistry."
        )
    return name


def _check_description(name: str, description: str | None) -> str:
    text = (description or "").strip()
    if not text:
        raise ToolDefinitionError(
            f"Tool {name!r} has no description. The model chooses tools by their description: write a "
            "docstring (or pass description=...) saying what the tool does and when to use it."
        )
    return text


class Tool:
    """A tool a model can call: a name, a description, a parameters schema, options, and a handler.

    Build one with `@tool`, `Tool.from_function`, `Tool.from_schema`, or by subclassing with a `Params`
    model and a `run` method. All of them give the same type.
    """

    name: str
    """The registered name (may contain `.`; a provider-safe alias is used on export)."""
    description: str
    """What the tool does and when to use it; shown to the model."""
    parameters: dict[str, Any]
    """The JSON Schema of the arguments object, provider-neutral."""
    options: ToolOptions
    """Annotations and policies."""
    lenient_changes: tuple[str, ...]
    """What `from_schema(..., lenient=True)` changed to make the schema valid JSON Schema: `SchemaChange`s
    (strings reading "$.path: what changed", with `path`, `kind`, `before` and `after` attributes)."""

    # Subclass API: set these on a subclass, or pass options as class keywords.
    _class_options: ClassVar[dict[str, Any]] = {}

    _fn: Callable[..., Any]
    _validator: ArgumentsValidator
    _make_validator: Callable[[], ArgumentsValidator] | None
    _context_param: str | None
    _positional_only: tuple[str, ...]
    _is_async: bool
    _is_generator: bool
    _return_type: Any
    _declared_output_schema: dict[str, Any] | None

    def __init_subclass__(cls, **options: Unpack[ToolOptionsKwargs]) -> None:
        super().__init_subclass__()
        cls._class_options = {**cls._class_options, **options}

    def __init__(self, **options: Unpack[SubclassOptions]) -> None:
        """For subclasses: build the tool from the class's `run` method, docstring and options."""
        cls = type(self)
        run = getattr(self, "run", None)
        if cls is Tool or run is None:
            raise ToolDefinitionError(
                "Tool() is not built directly: use @tool, Tool.from_function, Tool.from_schema, or a "
                "subclass that defines run(self, params, ctx)."
            )
        default_name = re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()
        given: dict[str, Any] = dict(options)
        name = given.pop("name", None) or cls.__dict__.get("name") or default_name
        description = given.pop("description", None) or cls.__dict__.get("description") or inspect.getdoc(cls)
        if cls.__doc__ is None and description == inspect.getdoc(Tool):
            description = None
        self._init_from_function(
            run,
            name=name,
            description=description,
            annotations=_params_annotation(cls, run),
            **{**cls._class_options, **given},
        )

    # ----------------------------------------------------------------------------------------------------
    # Constructors

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        flatten_model: bool = True,
        **options: Unpack[ToolOptionsKwargs],
    ) -> Tool:
        """A tool from a typed Python function (sync or async).

        Args:
            fn: The handler. Each parameter becomes an argument; one typed `ToolContext` is injected.
            name: The tool name; defaults to the function's name.
            description: Defaults to the docstring's text before its sections.
            flatten_model: When the only parameter is a Pydantic model, its fields are the arguments.
            **options: Tool options (`read_only`, `destructive`, `timeout`, `rate_limit`, ...).
        """
        if not callable(fn):
            raise ToolDefinitionError(f"Tool.from_function needs a callable, got {type(fn).__name__}.")
        self = cls.__new__(cls)
        self._init_from_function(
            fn, name=name, description=description, flatten_model=flatten_model, **options
        )
        return self

    @classmethod
    def from_schema(
        cls,
        name: str,
        description: str,
        parameters: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        handler: Callable[..., Any] | None = None,
        *,
        output_schema: Mapping[str, Any] | None = None,
        lenient: bool = False,
        **options: Unpack[ToolOptionsKwargs],
    ) -> Tool:
        """A tool from a raw JSON Schema, validated with the `jsonschema` library.

        Args:
            name: The tool name.
            description: What the tool does and when to use it.
            parameters: A JSON Schema for the arguments object (`{"type": "object", ...}`).
            handler: Called with the validated arguments as keyword arguments (plus a `ToolContext`
                parameter if it declares one). Without a handler the tool can be exported and validated,
                but running it fails with a clear error. An async generator handler reports each value it
                yields as progress, and its last one is the result (see `Tool.is_generator`).
            output_schema: JSON Schema of the result, if known.
            lenient: Accept loose dialects found in the wild (BFCL/Gorilla `"dict"`, `"float"`, `"any"`,
                `optional` flags, `"list[str]"`, `"required": true` on a property, a list of parameter specs,
                ...; see `toolrun.tools._lenient`) and normalise them; `tool.lenient_changes` lists what
                changed, one `SchemaChange` per rewrite.
            **options: Tool options.
        """
        name = _check_name(name)
        changes: tuple[str, ...] = ()
        schema: dict[str, Any]
        if lenient:  # works on a copy of its own
            schema, change_list = normalize_schema(parameters if parameters is not None else {})
            changes = tuple(change_list)
        else:
            # A copy of its own: tools built from one dict must not share (and edit) each other's schemas.
            if parameters is not None and not isinstance(parameters, Mapping):
                raise SchemaError(
                    f"Tool {name!r}: the parameters schema must be a JSON object, got "
                    f"{type(parameters).__name__} (pass lenient=True to read a list of parameter specs)."
                )
            try:
                schema = copy.deepcopy(dict(parameters)) if parameters is not None else {}
            except RecursionError:
                raise SchemaError(
                    f"Tool {name!r}: the parameters schema is nested too deeply to copy."
                ) from None
        if any(key in schema for key in ("$ref", "allOf", "anyOf", "oneOf")):
            # The arguments described indirectly: list them at the root, or no field could be sent.
            schema, root_changes = callable_root(schema, name)
            changes += tuple(root_changes)
        schema.setdefault("type", "object")
        if schema.get("type") != "object":
            raise SchemaError(
                f"Tool {name!r}: the parameters schema must describe an object (type 'object'), got "
                f"type {schema.get('type')!r}. Wrap a single value in an object with one property."
            )
        schema.setdefault("properties", {})
        # Unknown parameters are rejected unless the schema explicitly allows them. Below the root the
        # arguments are validated as the schema says: a nested object that lists `properties` and is silent
        # about other keys takes other keys, as JSON Schema (and the server behind an MCP tool) would
        # (BFCL's `data: {param1, param2}` called with `email` and `name`). The exported schema closes such
        # objects all the same: a strict export needs it, and a model that sends the listed keys only is
        # always accepted.
        if not schema.get("patternProperties"):
            schema.setdefault("additionalProperties", False)
        validated = copy.deepcopy(schema)
        close_objects(schema)
        # Imported here: only raw-schema tools need `jsonschema` (~100 ms), so `import toolrun` skips it.
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError as JsonSchemaSchemaError

        try:
            Draft202012Validator.check_schema(schema)
        except JsonSchemaSchemaError as exc:
            hint = " (pass lenient=True to normalise loose dialects)" if not lenient else ""
            raise SchemaError(f"Tool {name!r}: invalid JSON Schema{hint}: {exc.message}") from exc
        except RecursionError:  # schemas from users and MCP servers are untrusted
            raise SchemaError(
                f"Tool {name!r}: the parameters schema is nested too deeply to check."
            ) from None
        if output_schema is not None:
            try:
                Draft202012Validator.check_schema(dict(output_schema))
            except JsonSchemaSchemaError as exc:
                raise SchemaError(f"Tool {name!r}: invalid output schema: {exc.message}") from exc

        self = cls.__new__(cls)
        self.name = name
        self.description = _check_description(name, description)
        self.parameters = schema
        self.lenient_changes = changes
        self.options = build_options(name, dict(options))
        self._validator = JsonSchemaArguments(name, validated, coerce=self.options.coerce)
        self._make_validator = None
        self._declared_output_schema = dict(output_schema) if output_schema is not None else None
        self._return_type = inspect.Signature.empty
        self._positional_only = ()
        if handler is None:
            self._fn = _no_handler(name)
            self._context_param = None
            self._is_async = False
            self._is_generator = False
        else:
            if not callable(handler):
                raise ToolDefinitionError(f"Tool {name!r}: the handler must be callable, got {handler!r}.")
            refuse_sync_generator(name, handler)
            self._fn = handler
            self._context_param = _find_context_param(handler)
            self._is_generator = is_async_generator(handler)
            self._is_async = self._is_generator or is_async_callable(handler)
        self._check_examples()
        return self

    def _init_from_function(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None,
        description: str | None,
        flatten_model: bool = True,
        annotations: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> None:
        name = _check_name(name if name is not None else callable_name(fn))
        built = build_options(name, options)
        schema = build_function_schema(
            fn, name=name, flatten_model=flatten_model, annotations=annotations, coerce=built.coerce
        )
        self.name = name
        self.description = _check_description(
            name, description if description is not None else schema.description
        )
        self.parameters = schema.parameters
        self.lenient_changes = ()
        self._fn = fn
        self._make_validator = schema.make_validator
        self._context_param = schema.context_param
        self._positional_only = schema.positional_only
        self._is_async = schema.is_async
        self._is_generator = schema.is_generator
        self._return_type = value_annotation(schema.return_type)
        self._declared_output_schema = None
        self.options = built
        self._check_examples()

    # ----------------------------------------------------------------------------------------------------
    # Using a tool

    @property
    def handler(self) -> Callable[..., Any]:
        """The function that runs the tool."""
        return self._fn

    @property
    def is_async(self) -> bool:
        """Whether the handler is a coroutine function (else the executor runs it in a worker thread)."""
        return self._is_async

    @property
    def is_generator(self) -> bool:
        """Whether the handler is an async generator function: each value it yields is a partial result
        (reported as progress while it runs), and the last one is the tool's result."""
        return self._is_generator

    @property
    def takes_context(self) -> bool:
        return self._context_param is not None

    def validate(self, arguments: str | Mapping[str, Any] | None) -> dict[str, Any]:
        """Validate a model's arguments (a JSON string or a mapping) into the handler's keyword arguments.

        Raises:
            ArgumentsError: listing every problem with its field path, what was expected and what was given.
        """
        return self._arguments_validator().validate(arguments)

    def _arguments_validator(self) -> ArgumentsValidator:
        """The validator behind `validate` (built on first use)."""
        try:
            return self._validator
        except AttributeError:  # built on first use (see `_function_schema`)
            validator = self._validator = self._make_validator()  # type: ignore[misc]
            return validator

    def invoke(self, arguments: Mapping[str, Any], context: ToolContext[Any] | None = None) -> Any:
        """Call the handler with validated arguments. Returns an awaitable for async handlers, an async
        iterator for async generator handlers (see `is_generator`).

        This is the bare call: no timeout, no gates. Use `ToolExecutor` to run calls from a model.
        """
        if self._context_param is None and not self._positional_only:
            return self._fn(**arguments)
        kwargs = dict(arguments)
        if self._context_param is not None:
            kwargs[self._context_param] = context if context is not None else ToolContext()
        if self._positional_only:
            args = [kwargs.pop(n) for n in self._positional_only if n in kwargs]
            return self._fn(*args, **kwargs)
        return self._fn(**kwargs)

    def direct_handler(self) -> Callable[..., Any] | None:
        """The handler, when `invoke(arguments, context)` is exactly `handler(**arguments)` (it takes no
        context and no positional-only parameters, and `invoke` is not overridden); else None. The executor
        then calls it without the `invoke` frame."""
        if self._overrides("invoke") or self._context_param is not None or self._positional_only:
            return None
        return self._fn

    def _overrides(self, method: str) -> bool:
        """Whether this tool replaces `Tool.<method>` (in a subclass, or on the instance itself). The
        executor takes shortcuts around `invoke` and `validate` only for tools that do not."""
        return getattr(type(self), method) is not getattr(Tool, method) or method in getattr(
            self, "__dict__", {}
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly, as if it were not a tool."""
        return self._fn(*args, **kwargs)

    # ----------------------------------------------------------------------------------------------------
    # Output

    @cached_property
    def output_schema(self) -> dict[str, Any] | None:
        """JSON Schema of the result: declared, or from the return annotation; None when unknown."""
        if self._declared_output_schema is not None:
            return self._declared_output_schema
        if self._return_type in _NONE_TYPES:
            return None
        try:
            schema = self._output_adapter.json_schema(mode="serialization")
        except Exception:  # an annotation Pydantic can validate but not describe
            return None
        clean_schema(schema)
        return schema

    @cached_property
    def _output_adapter(self) -> TypeAdapter[Any]:
        return TypeAdapter(self._return_type)

    @cached_property
    def _output_validator(self) -> Draft202012Validator | None:
        if self._declared_output_schema is None:
            return None
        from jsonschema import Draft202012Validator

        return Draft202012Validator(self._declared_output_schema)

    @property
    def has_output_type(self) -> bool:
        return self._declared_output_schema is not None or self._return_type not in _NONE_TYPES

    def output_problems(self, value: Any) -> list[str]:
        """What is wrong with `value` as this tool's result; empty when it fits (or nothing is declared)."""
        validator = self._output_validator
        if validator is not None:
            return [e.message for e in validator.iter_errors(value)][:10]
        if self._return_type in _NONE_TYPES:
            return []
        try:
            self._output_adapter.validate_python(value)
        except ValidationError as exc:
            return [f"{'.'.join(map(str, e['loc'])) or 'result'}: {e['msg']}" for e in exc.errors()][:10]
        return []

    # ----------------------------------------------------------------------------------------------------

    def definition(self) -> dict[str, Any]:
        """The provider-neutral definition: name, description, parameters (and output schema if known)."""
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
        }
        if self.output_schema is not None:
            out["output_schema"] = self.output_schema
        return out

    def _check_examples(self) -> None:
        for index, example in enumerate(self.options.examples):
            try:
                self.validate(dict(example.input))
            except ArgumentsError as exc:
                raise ToolExampleError(
                    f"Tool {self.name!r}: example {index} does not match the parameters:\n{exc.render()}"
                ) from None
            if example.output is not None and self.has_output_type:
                problems = self.output_problems(example.output)
                if problems:
                    raise ToolExampleError(
                        f"Tool {self.name!r}: example {index} output does not match the return type: "
                        + "; ".join(problems)
                    )

    def __repr__(self) -> str:
        return f"<Tool {getattr(self, 'name', '?')!r}>"


def _params_annotation(cls: type, run: Callable[..., Any]) -> dict[str, Any] | None:
    """`{first parameter: cls.Params}` when `run(self, params)` leaves that parameter unannotated."""
    params_model = getattr(cls, "Params", None)
    if not isinstance(params_model, type):
        return None
    try:
        first = next(iter(inspect.signature(run).parameters.values()), None)
    except (TypeError, ValueError):
        return None
    if first is None or first.annotation is not inspect.Parameter.empty:
        return None
    return {first.name: params_model}


def _find_context_param(handler: Callable[..., Any]) -> str | None:
    try:
        hints = inspect.get_annotations(annotated_target(handler)[0], eval_str=True)
    except Exception:
        hints = {}
    for param_name, annotation in hints.items():
        if param_name != "return" and is_context_annotation(annotation):
            return param_name
    return None


def _no_handler(name: str) -> Callable[..., Any]:
    def missing(**_: Any) -> Any:
        raise NotImplementedError(f"Tool {name!r} was defined from a schema without a handler.")

    return missing
