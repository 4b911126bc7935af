"""The two values that travel with every call: what the model asked for, and who is asking."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic

from typing_extensions import TypeVar

if TYPE_CHECKING:
    import asyncio  # imported where used: a bare `import toolrun` stays light

__all__ = ["PartialReporter", "ProgressReporter", "ProgressThrottle", "ToolBudget", "ToolCall", "ToolContext"]

ProgressReporter = Callable[[float, "float | None", "str | None"], Awaitable[None]]
"""`async (progress, total, message) -> None`: where a tool's progress reports go (e.g. MCP progress)."""

PartialReporter = Callable[[float, "str | None", Any], Awaitable[None]]
"""`async (progress, message, value) -> None`: where an async generator tool's partial results go, the value
as JSON data (None when it has none small enough to send), beside its text (see `ProgressThrottle`)."""

DepsT = TypeVar("DepsT", default=Any)


class ProgressThrottle:
    """A `ProgressReporter` that passes reports on at a bounded rate, losing none while a tool reports
    under it: a burst of `burst` reports goes on at once, then one per `interval` seconds (a token
    bucket). A report that comes too soon waits and goes on as soon as the rate allows; a newer one that
    comes meanwhile replaces it (only then is a report dropped: the tool reports faster than the rate).
    So the first report always goes on at once, and the last one always goes on too: when the rate
    allows, or at the latest when the call ends and the transport calls `aclose()`. A report is never
    final because of its numbers ("n of n so far" is not the end): the call's end is.

    Once closed it forwards nothing: the transport closes it when the call ends, so a tool still running
    after its timeout or cancellation reports to nobody.

    An async generator tool's partial results come through `report_partial`, which passes the same gate:
    to `partial` when given (a transport that can show a result while it grows, like the AI SDK's
    preliminary tool output), else to `forward` as a report with the value as text.

    Args:
        forward: Where reports that pass go.
        interval: Seconds per report at the steady rate (0: no throttling).
        partial: Where partial results that pass go, with the value as JSON data.
        burst: Reports that may go on at once before the rate applies (at least 1).
    """

    __slots__ = (
        "_forward",
        "_held",
        "_lock",
        "_partial",
        "_refilled",
        "_sending",
        "_timer",
        "_tokens",
        "burst",
        "closed",
        "dropped",
        "interval",
    )

    def __init__(
        self,
        forward: ProgressReporter,
        *,
        interval: float = 0.1,
        partial: PartialReporter | None = None,
        burst: int = 5,
    ) -> None:
        if burst < 1:
            raise ValueError("burst must be at least 1.")
        self._forward = forward
        self._partial = partial
        self.interval = interval
        self.burst = burst
        self._tokens = float(burst)
        self._refilled = time.monotonic()
        self._held: Callable[[], Awaitable[None]] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._sending: set[asyncio.Task[None]] = set()
        self._lock: asyncio.Lock | None = None  # reports go on in the order they were made
        self.closed = False
        self.dropped = 0
        """Reports not forwarded (replaced by a newer one while waiting, or made after `close`)."""

    def _take(self) -> bool:
        """One report's worth of rate, if there is one now."""
        if self.interval <= 0:
            return True
        now = time.monotonic()
        self._tokens = min(float(self.burst), self._tokens + (now - self._refilled) / self.interval)
        self._refilled = now
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False

    async def _send(self, send: Callable[[], Awaitable[None]]) -> None:
        if self._lock is None:
            import asyncio

            self._lock = asyncio.Lock()
        async with self._lock:
            await send()

    async def _offer(self, send: Callable[[], Awaitable[None]]) -> None:
        if self.closed:
            self.dropped += 1
            return
        if self._held is not None and self._take():  # the waiting one first: its time has come
            held, self._held = self._held, None
            await self._send(held)
        if self._held is None and self._take():
            await self._send(send)
            return
        if self._held is not None:
            self.dropped += 1  # replaced by this newer report
        self._held = send
        self._arm()

    def _arm(self) -> None:
        """Send the waiting report once the rate allows (even if the tool says nothing more)."""
        if self._timer is not None:
            return
        import asyncio

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop here: it goes on with the next report, or at the end
            return
        self._timer = loop.call_later(max(0.0, (1 - self._tokens) * self.interval), self._release)

    def _release(self) -> None:
        self._timer = None
        if self._held is None or self.closed:
            return
        if not self._take():
            self._arm()
            return
        held, self._held = self._held, None
        import asyncio

        task = asyncio.get_running_loop().create_task(self._quietly(held))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _quietly(self, send: Callable[[], Awaitable[None]]) -> None:
        with contextlib.suppress(Exception):  # progress is advisory (see `ToolContext.report_progress`)
            await self._send(send)

    async def __call__(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        forward = self._forward
        await self._offer(lambda: forward(progress, total, message))

    @property
    def takes_partials(self) -> bool:
        """Whether partial results go on as values (`partial` was given), not only as text."""
        return self._partial is not None

    async def report_partial(self, progress: float, message: str | None, value: Any) -> None:
        """A partial result (`value`: JSON data or None, `message`: its text), gated like a report."""
        partial, forward = self._partial, self._forward
        if partial is not None:
            await self._offer(lambda: partial(progress, message, value))
        else:
            await self._offer(lambda: forward(progress, None, message))

    async def aclose(self) -> None:
        """The call ended: send the report still waiting (the last one the tool made), then forward
        nothing more."""
        if self.closed:
            return
        held, self._held = self._held, None
        self.close()
        if self._sending:
            import asyncio

            await asyncio.gather(*self._sending, return_exceptions=True)
        if held is not None:
            await self._quietly(held)

    def close(self) -> None:
        """Forward nothing more (a report still waiting is dropped: `aclose` sends it)."""
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._held is not None:
            self._held = None
            self.dropped += 1


@dataclass(kw_only=True, slots=True)
class ToolCall:
    """One tool call as a model made it, provider-neutral.

    `arguments` stays as the model sent it (usually a JSON string) until the executor validates it, so a
    malformed payload can be reported back instead of failing in a parser.
    """

    id: str = field(default_factory=lambda: f"call_{uuid.uuid4().hex[:24]}")
    """The provider's call id; results are matched to calls by it."""
    name: str
    """The tool name as the model gave it (a provider-safe alias is mapped back by the registry)."""
    arguments: str | Mapping[str, Any] | None = None
    """A JSON object as text, an already-decoded mapping, or None for no arguments."""

    def to_dict(self) -> dict[str, Any]:
        args = self.arguments if isinstance(self.arguments, str | None) else dict(self.arguments)
        return {"id": self.id, "name": self.name, "arguments": args}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCall:
        return cls(id=data["id"], name=data["name"], arguments=data.get("arguments"))


@dataclass(kw_only=True, slots=True)
class ToolBudget:
    """A mutable allowance shared by every call made under one context (e.g. one agent run)."""

    max_calls: int | None = None
    """How many tool calls may start; None for no limit."""
    calls_used: int = 0
    """How many have started so far."""
    tool_limits: dict[str, int] = field(default_factory=dict)
    """Per-tool limits for this run (`{"send_email": 2}`), on top of each tool's own `max_calls` (the
    smaller one applies)."""
    tool_calls: dict[str, int] = field(default_factory=dict)
    """How many calls of each tool with a limit have started so far."""

    @property
    def exhausted(self) -> bool:
        return self.max_calls is not None and self.calls_used >= self.max_calls


@dataclass(kw_only=True, slots=True)
class ToolContext(Generic[DepsT]):
    """Who is calling and under what limits. Tools receive it by declaring a parameter typed `ToolContext`.

    A context is cheap to copy (`evolve`); the `budget` and `state` objects are shared between copies on
    purpose, so that every call of one run spends from, and sees, the same ones.
    """

    user_id: str | None = None
    """The principal on whose behalf tools run; rate limits, approvals and private caches key on it."""
    roles: tuple[str, ...] = ()
    """The principal's roles, matched against each tool's `roles` option. Any collection of strings is
    kept as a tuple; one string is one role (`roles="admin"` means `("admin",)`)."""
    allowed_tools: frozenset[str] | None = None
    """If set, only these tool names may run under this context (an allowlist on top of roles). Any
    collection of names is kept as a frozenset; one string is one name (never a set of characters, nor a
    substring match)."""
    conversation_id: str | None = None
    """The conversation or session this call belongs to."""
    run_id: str | None = None
    """The agent run this call belongs to (the `Agent` sets it): confirmations requested in a run are
    bound to it, and can only be decided in that same run."""
    trace_id: str | None = None
    """A correlation id carried into events, audit records and spans."""
    deadline: float | None = None
    """Wall-clock time (`time.time()` seconds) after which no tool may start."""
    budget: ToolBudget | None = None
    """Shared allowance of tool calls."""
    state: dict[str, Any] | None = None
    """Session state tools may change; restored by the executor when a handler fails."""
    deps: DepsT = None  # type: ignore[assignment]
    """Your own dependencies (database handles, clients) for tools to use."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Anything else the application wants to hand to tools."""
    progress: ProgressReporter | None = None
    """Where `report_progress` sends a long tool's progress (set by the transport, e.g. the MCP server)."""
    idempotency_key: str | None = None
    """A key that stays the same when one call is run again (a durable run resumed after a crash), set by
    `toolrun.integrations.dbos`: derived from the run id and the call id. Pass it to the outside system
    (an `Idempotency-Key` header, a unique column) so a repeated call has no further effect."""

    def __post_init__(self) -> None:
        # Exact types pass untouched (the common case costs two type checks). Anything else is made into
        # the declared type here, once, so that no check downstream can iterate a string's characters or
        # match a substring (`"tool" in "my_tools"`).
        if type(self.roles) is not tuple:
            self.roles = tuple(_names(self.roles, "roles"))
        allowed = self.allowed_tools
        if allowed is not None and type(allowed) is not frozenset:
            self.allowed_tools = frozenset(_names(allowed, "allowed_tools"))

    def evolve(self, **changes: Any) -> ToolContext[DepsT]:
        """A copy with some fields changed."""
        return replace(self, **changes)

    def with_timeout(self, seconds: float) -> ToolContext[DepsT]:
        """A copy whose deadline is `seconds` from now (or sooner, if the current deadline is sooner)."""
        new = time.time() + seconds
        deadline = new if self.deadline is None else min(self.deadline, new)
        return replace(self, deadline=deadline)

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Tell the caller how far a long tool has come (`progress` of `total`, both in any unit).

        A no-op when nobody listens; a failing listener never fails the tool. Call it from async tools
        (a sync tool runs in a worker thread, away from the event loop).
        """
        if self.progress is None:
            return
        try:
            await self.progress(progress, total, message)
        except Exception:  # progress is advisory: a closed connection must not fail the work
            return

    @property
    def time_left(self) -> float | None:
        """Seconds until the deadline, or None without one."""
        return None if self.deadline is None else self.deadline - time.time()


def _names(value: Any, field_name: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping) or not isinstance(value, Iterable):
        kind = type(value).__name__
        raise TypeError(f"ToolContext.{field_name} must be a collection of strings, not {kind}.")
    names = list(value)
    for item in names:
        if not isinstance(item, str):
            raise TypeError(f"ToolContext.{field_name} must hold strings only, not {type(item).__name__}.")
    return names
