"""Which standing approvals may be made: one rule for every door (`POST /api/v1/approval-rules` and
`toolrun approvals add`).

A rule names a tool the user can call and that asks for confirmation, and only arguments the tool takes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from toolrun.registry import ToolRegistry
from toolrun.tools import Tool

__all__ = ["RuleRefused", "check_rule"]


class RuleRefused(Exception):
    """The rule cannot be made; `status` and `code` are the HTTP API's, `message` says why."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def check_rule(
    registry: ToolRegistry, tool_name: str, roles: Collection[str], arguments: Mapping[str, Any] | None
) -> Tool:
    """The tool a new rule of a user with `roles` would stand for.

    Raises:
        RuleRefused: no such tool the user can use (404, as for any record that is not theirs), a tool
            that never asks for confirmation, or an argument the tool does not take (422).
    """
    tool = registry.find(tool_name)
    allowed = tool.options.roles if tool is not None else None
    if tool is None or (allowed is not None and allowed.isdisjoint(roles)):
        raise RuleRefused(404, "unknown_tool", f"There is no tool {tool_name!r} you can use.")
    if not tool.options.requires_confirmation:
        raise RuleRefused(
            422, "no_confirmation", f"{tool_name!r} never asks for confirmation: no rule needed."
        )
    known = set((tool.parameters.get("properties") or {}).keys())
    unknown = sorted(set(arguments or {}) - known)
    if unknown:
        raise RuleRefused(422, "unknown_argument", f"{tool_name!r} takes no argument(s) {unknown}.")
    return tool
