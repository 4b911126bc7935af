"""The seed's tool contract, `handler(args: dict, user_context: dict) -> result`, on a toolrun registry.

The seed registered tools in a dict (a second tool of the same name silently replaced the first); here a
duplicate name raises `ToolAlreadyExistsError`, arguments are validated against the JSON Schema before the
handler runs, and every call goes through toolrun's executor (timeouts, rate limits, audit).
"""

from __future__ import annotations

import ast
import inspect
import operator
from collections.abc import Callable
from typing import Any

from toolrun import Tool, ToolContext, ToolError, ToolRegistry

SeedHandler = Callable[[dict[str, Any], dict[str, Any]], Any]
"""`handler(args, user_context)`; sync or async."""


class SeedToolRegistry:
    """Register tools the seed's way; `.registry` is the toolrun registry the executor runs."""

    def __init__(self) -> None:
        self.registry = ToolRegistry()

    def register(
        self,
        name: str,
        description: str,
        parameters: dict[str, Any],
        handler: SeedHandler,
        **options: Any,
    ) -> Tool:
        """Add a tool; `ToolAlreadyExistsError` if the name is taken. `options` are toolrun tool options."""
        if inspect.iscoroutinefunction(handler):

            async def run_async(ctx: ToolContext, **args: Any) -> Any:
                return await handler(args, _user_context(ctx))

            run: Callable[..., Any] = run_async
        else:

            def run_sync(ctx: ToolContext, **args: Any) -> Any:
                return handler(args, _user_context(ctx))

            run = run_sync
        tool = Tool.from_schema(name, description, parameters, run, **options)
        return self.registry.register(tool)


def _user_context(ctx: ToolContext[Any]) -> dict[str, Any]:
    return {"user_id": ctx.user_id, "roles": list(ctx.roles), **ctx.metadata.get("user_context", {})}


# ---------------------------------------------------------------------------------------------------------
# The demo tools

_WEATHER = {"paris": "sunny, 21 °C", "london": "light rain, 15 °C", "tokyo": "cloudy, 18 °C"}
_OPS: dict[type, Callable[..., Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.USub: operator.neg,
}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return float(_OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right)))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return float(_OPS[type(node.op)](_evaluate(node.operand)))
    raise ToolError("BAD_EXPRESSION", "Only numbers and + - * / are allowed.")


def get_weather(args: dict[str, Any], user_context: dict[str, Any]) -> dict[str, str]:
    city = args["city"]
    report = _WEATHER.get(city.strip().lower())
    if report is None:
        raise ToolError(
            "UNKNOWN_CITY", f"No weather data for {city}.", recover_action="Ask for another city."
        )
    return {"city": city, "weather": report}


def calculate(args: dict[str, Any], user_context: dict[str, Any]) -> float:
    expression = args["expression"]
    if len(expression) > 200:
        raise ToolError("BAD_EXPRESSION", "The expression is too long.")
    try:
        return _evaluate(ast.parse(expression, mode="eval"))
    except (SyntaxError, ZeroDivisionError) as exc:
        raise ToolError("BAD_EXPRESSION", f"Cannot compute this ({type(exc).__name__}).") from None


async def whoami(args: dict[str, Any], user_context: dict[str, Any]) -> dict[str, Any]:
    return {"user_id": user_context["user_id"], "plan": user_context.get("plan", "free")}


def default_tools() -> SeedToolRegistry:
    """The seed's three tools."""
    tools = SeedToolRegistry()
    tools.register(
        "get_weather",
        "Current weather for a city. Use when the user asks about the weather somewhere.",
        {"type": "object", "properties": {"city": {"type": "string", "minLength": 1}}, "required": ["city"]},
        get_weather,
        read_only=True,
    )
    tools.register(
        "calculate",
        "Evaluate an arithmetic expression with + - * / and parentheses.",
        {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]},
        calculate,
        read_only=True,
    )
    tools.register(
        "whoami",
        "The signed-in user's own profile (id and plan). Use when the user asks who they are.",
        {"type": "object", "properties": {}},
        whoami,
        read_only=True,
        private=True,
    )
    return tools
