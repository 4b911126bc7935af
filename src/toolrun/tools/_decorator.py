"""The `@tool` decorator: with or without parentheses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Unpack, overload

from toolrun.tools._options import ToolOptionsKwargs
from toolrun.tools._tool import Tool

__all__ = ["tool"]


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    flatten_model: bool = True,
    **options: Unpack[ToolOptionsKwargs],
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    flatten_model: bool = True,
    **options: Unpack[ToolOptionsKwargs],
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a tool of a typed function (sync or async). Use as `@tool` or `@tool(destructive=True, ...)`.

    The name comes from the function, the description and per-parameter descriptions from its docstring
    (Google, NumPy or Sphinx style), the parameters schema from its annotations. A parameter typed
    `ToolContext` is injected at run time and never shown to the model. The result is still callable
    like the original function.

    Args:
        fn: The function (when used without parentheses).
        name: Overrides the function's name.
        description: Overrides the docstring.
        flatten_model: When the only parameter is a Pydantic model, its fields are the arguments.
        **options: `read_only`, `destructive`, `idempotent`, `open_world`, `private`,
            `requires_confirmation`, `timeout`, `retries`, `rate_limit`, `cache_ttl`, `cache_scope`, `roles`,
            `tags`, `sequential`, `examples`, `coerce`, `title` (see `ToolOptions`; typed by
            `ToolOptionsKwargs`, so a misspelt option is a type error).
    """

    def decorate(func: Callable[..., Any]) -> Tool:
        return Tool.from_function(
            func, name=name, description=description, flatten_model=flatten_model, **options
        )

    if fn is not None:
        return decorate(fn)
    return decorate
