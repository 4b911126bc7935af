"""`Invocation` (one call on its way through the stages) and the `Middleware` interface.

A stage is any object with `async __call__(invocation, call_next) -> ToolResult`, optionally with
`applies_to(tool) -> bool`: it may answer without calling `call_next`, look at or replace the result, or
change `invocation.arguments` first; an exception it raises becomes `EXECUTION_FAILED`. Each tool's chain
is built once per registry version from the stages that apply to it, so a stage that does not concern a
tool costs that tool nothing per call. Writing one: docs/executor.md, "Middleware: stages of your own".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from toolrun.results import ToolResult
from toolrun.store import PendingConfirmation
from toolrun.tools import Tool, ToolCall, ToolContext

if TYPE_CHECKING:
    from toolrun.runtime._executor import ToolExecutor

__all__ = ["CallNext", "Invocation", "Middleware"]

CallNext = Callable[["Invocation"], Awaitable[ToolResult]]
"""The rest of the chain: call it with the invocation to run the next stage (and, at the end, the tool)."""


@runtime_checkable
class Middleware(Protocol):
    """A stage of the executor's pipeline. Optionally also `applies_to(tool) -> bool`."""

    async def __call__(self, invocation: Invocation, call_next: CallNext) -> ToolResult: ...


class Invocation:
    """One validated call on its way through the stages."""

    __slots__ = (
        "_hash",
        "_hashed",
        "approval",
        "arguments",
        "attempts",
        "call",
        "context",
        "exception",
        "executor",
        "rule_id",
        "tool",
    )

    def __init__(
        self,
        executor: ToolExecutor,
        tool: Tool,
        call: ToolCall,
        context: ToolContext[Any],
        arguments: dict[str, Any],
        approval: PendingConfirmation | None = None,
    ) -> None:
        self.executor = executor
        """The executor running the call (its stores, its hash key)."""
        self.tool = tool
        """The tool being called."""
        self.call = call
        """The call as the model made it (`call.arguments` is the raw text: do not log it)."""
        self.context = context
        """Who is calling and under what limits."""
        self.arguments = arguments
        """The validated keyword arguments for the handler (stages may replace them)."""
        self.approval: PendingConfirmation | None = approval
        """The consumed confirmation this run is approved by (`ToolExecutor.approve`), if any."""
        self.attempts = 0
        """How many times the handler has started."""
        self.exception: BaseException | None = None
        """The unexpected exception behind an `EXECUTION_FAILED`, if any (for events, never for the model)."""
        self.rule_id: str | None = None
        """The standing approval rule that decided this call instead of a person, if any (audited)."""
        self._hash: str | None = None
        self._hashed: dict[str, Any] | None = None

    @property
    def arguments_hash(self) -> str:
        """Keyed hash of the canonical JSON of `arguments` (the executor's key); computed once per
        arguments object (a stage that replaces `arguments` gets a fresh hash)."""
        if self._hash is None or self._hashed is not self.arguments:
            self._hash = self.executor.hasher.arguments(self.arguments)
            self._hashed = self.arguments
        return self._hash

    def __repr__(self) -> str:  # no argument values
        return f"<Invocation {self.tool.name!r} call_id={self.call.id!r} attempts={self.attempts}>"
