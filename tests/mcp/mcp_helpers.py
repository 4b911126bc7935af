"""Helpers shared by the MCP tests."""

from __future__ import annotations

from typing import Any

import mcp_types as types


class Clock:
    """A wall clock a test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def answer(action: str, approve: bool | None = True) -> Any:
    """An elicitation callback that answers every request with `action` (and `approve` on accept)."""

    asked: list[types.ElicitRequestParams] = []

    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        content = {"approve": approve} if action == "accept" and approve is not None else None
        return types.ElicitResult(action=action, content=content)  # type: ignore[arg-type]

    callback.asked = asked  # type: ignore[attr-defined]
    return callback


def text(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))
