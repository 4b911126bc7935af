"""Per-tool options: annotations (what a tool does) and policies (how the executor treats it).

Options are plain data here; `toolrun.runtime` gives them behaviour.
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from toolrun.exceptions import ToolDefinitionError

__all__ = [
    "CacheScope",
    "OutputBudget",
    "PreviewFunction",
    "RateLimit",
    "ToolExample",
    "ToolOptions",
    "ToolOptionsKwargs",
    "parse_rate_limit",
]

PreviewFunction = Callable[[Mapping[str, Any], Any], "str | Awaitable[str]"]
"""`preview(arguments, ctx) -> str` (or an awaitable of one): what a held call would do, in the person's
words, read from the application's own records ("Delete the task 'Renew passport' (due 1 Dec, 2
attachments)"). It gets the validated arguments (a read-only view) and the call's `ToolContext`; it must
only read. See `ToolOptions.preview`."""

CacheScope = Literal["user", "shared"]
"""Who may be served a cached result: only the user whose call produced it, or everyone."""

_PERIODS = {
    "s": 1.0,
    "sec": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "m": 60.0,
    "min": 60.0,
    "minute": 60.0,
    "minutes": 60.0,
    "h": 3600.0,
    "hour": 3600.0,
    "hours": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
    "days": 86400.0,
}
_RATE_RE = re.compile(r"^\s*(\d+)\s*(?:/|per)\s*(\d+(?:\.\d+)?)?\s*([a-z]+)\s*$", re.IGNORECASE)


@dataclass(frozen=True, kw_only=True, slots=True)
class RateLimit:
    """At most `limit` calls per `period` seconds, per principal, counted under `key`.

    Tools that give the same `key` share one limit (e.g. every tool that calls one external API).
    """

    limit: int
    """Calls allowed per period (also the burst size of the token bucket)."""
    period: float
    """Length of the period in seconds."""
    key: str | None = None
    """The bucket's name; None means the tool's own name."""

    def __post_init__(self) -> None:
        if self.limit < 1 or not math.isfinite(self.period) or self.period <= 0:
            raise ToolDefinitionError(
                f"Invalid rate limit {self.limit}/{self.period}s: both must be positive."
            )

    @property
    def rate(self) -> float:
        """Tokens refilled per second."""
        return self.limit / self.period


def parse_rate_limit(spec: str | RateLimit | Mapping[str, Any], *, key: str | None = None) -> RateLimit:
    """Read `"5/minute"`, `"100 per hour"`, `"10/30s"`, a `RateLimit`, or `{"limit": 5, "period": 60}`."""
    if isinstance(spec, RateLimit):
        return spec if key is None else RateLimit(limit=spec.limit, period=spec.period, key=key)
    if isinstance(spec, Mapping):
        return RateLimit(limit=int(spec["limit"]), period=float(spec["period"]), key=spec.get("key", key))
    match = _RATE_RE.match(spec)
    if not match or match.group(3).lower() not in _PERIODS:
        raise ToolDefinitionError(
            f"Cannot read rate limit {spec!r}: write it as '<count>/<period>', e.g. '5/minute', "
            "'100/hour' or '10/30s'."
        )
    count, multiple, unit = match.groups()
    period = float(multiple or 1) * _PERIODS[unit.lower()]
    return RateLimit(limit=int(count), period=period, key=key)


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolExample:
    """A worked example: arguments a model may send and (optionally) what the tool returns."""

    input: dict[str, Any]
    """Arguments, as the model would send them."""
    output: Any = None
    """The tool's result for those arguments; checked against the output type when one is declared."""
    description: str | None = None
    """When this example applies."""

    @classmethod
    def coerce(cls, value: ToolExample | Mapping[str, Any]) -> ToolExample:
        if isinstance(value, ToolExample):
            return value
        if "input" not in value:
            raise ToolDefinitionError(
                "An example must be a ToolExample or a mapping with an 'input' key "
                f"(and optionally 'output', 'description'); got keys {sorted(value)}."
            )
        return cls(
            input=dict(value["input"]), output=value.get("output"), description=value.get("description")
        )


@dataclass(frozen=True, kw_only=True)
class ToolOptions:
    """What a tool does (annotations) and how the executor must treat it (policies)."""

    read_only: bool = False
    """Does not change anything (MCP `readOnlyHint`). Implies `idempotent`."""
    destructive: bool = False
    """May delete or overwrite irreversibly (MCP `destructiveHint`). Needs confirmation by default."""
    idempotent: bool = False
    """Calling again with the same arguments has no further effect: safe to retry and to cache."""
    open_world: bool | None = None
    """Reaches outside systems (web, email, third-party APIs) (MCP `openWorldHint`)."""
    title: str | None = None
    """A short human-readable name for UIs (MCP `annotations.title`); the model sees the name."""
    private: bool = False
    """Returns one principal's private data: cached per principal, never shared."""
    requires_confirmation: bool = False
    """A person must approve each call, bound to its exact arguments. Defaults to `destructive`."""
    timeout: float | None = None
    """Seconds the handler may run; None for the executor's default."""
    retries: int = 0
    """Extra attempts for retryable failures (only where a retry is safe)."""
    rate_limit: RateLimit | None = None
    """Calls allowed per principal per period."""
    cache_ttl: float | None = None
    """Seconds a result may be served from cache (read-only or idempotent tools only); positive, finite."""
    cache_scope: CacheScope | None = None
    """Who a cached result is served to. `"user"`: only the user (`ToolContext.user_id`) whose call
    produced it; calls without a user id are not cached. `"shared"`: every caller with the same
    arguments. None (the default) means `"user"` for tools that receive a `ToolContext` (their result may
    depend on who calls) and for `private` tools, `"shared"` for the others. A `private` tool can never
    be `"shared"`; say `"shared"` for a context-taking tool only when its result does not depend on the
    caller."""
    roles: frozenset[str] | None = None
    """Roles allowed to call the tool; None for everyone."""
    tags: frozenset[str] = field(default_factory=frozenset)
    """Free labels, for filtered registry views."""
    sequential: bool = False
    """Never run concurrently with other calls of the same batch."""
    examples: tuple[ToolExample, ...] = ()
    """Worked examples, validated at definition time."""
    preview: PreviewFunction | None = None
    """Writes the text the person approves whenever a call of this tool is held for confirmation, from the
    application's own records, before the confirmation is issued (see `PreviewFunction`). It runs
    time-boxed; when it fails, the person sees the plain summary of the call and a line saying the
    preview could not be made."""
    max_calls: int | None = None
    """Calls of this tool allowed per run (counted on the context's `ToolBudget`, which an `Agent` run
    always has; without a budget, on the context's `run_id`). Past it the call does not start and the
    model gets `BUDGET_EXCEEDED` (`details["limit"] == "tool"`) and may go on without it."""
    background: bool = False
    """A long-running tool: in a durable run (`toolrun.integrations.dbos`) a call starts a job and
    returns its handle at once; the result reaches the model in a later turn. Elsewhere it runs inline."""
    output_budget: OutputBudget | None = None
    """How much of a result the model is shown (None: the executor's `output_budget`). A result over it
    is cut where its structure allows and kept whole as an artifact the model can page with `read_result`."""
    include_return_schema: bool = False
    """Describe the output schema (from the return annotation) to models in the tool's description, for
    formats without a field for it (OpenAI, Anthropic, Gemini; MCP has `outputSchema`)."""
    coerce: bool = False
    """Read arguments leniently (Pydantic's lax mode: `"5"` → 5, `"yes"` → True, `true` → 1) instead of
    taking JSON types strictly. Unknown fields and non-finite numbers are refused either way."""

    @property
    def effective_idempotent(self) -> bool:
        return self.idempotent or self.read_only


MIN_OUTPUT_BUDGET = 200
"""The smallest output budget: the note telling the model what was left out takes up to ~190 characters."""


@dataclass(frozen=True, kw_only=True, slots=True)
class OutputBudget:
    """How much of a result the model may be shown: `limit` units of `counter` (characters by default;
    pass a tokenizer's `lambda text: len(encode(text))` to count tokens). `@tool(output_budget=4000)` means
    `OutputBudget(limit=4000)`."""

    limit: int
    """The most units the model is shown of one result (the note about what was left out included)."""
    counter: Callable[[str], int] = len
    """Counts the units of a text; `len` (characters) by default."""

    def __post_init__(self) -> None:
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < MIN_OUTPUT_BUDGET:
            raise ToolDefinitionError(
                f"output_budget must be a whole number of at least {MIN_OUTPUT_BUDGET} (the note saying "
                f"what was left out must fit), not {self.limit!r}."
            )
        if not callable(self.counter):
            raise ToolDefinitionError("OutputBudget.counter must be a function from text to a number.")

    @classmethod
    def coerce(cls, value: int | OutputBudget) -> OutputBudget:
        return value if isinstance(value, OutputBudget) else cls(limit=value)


class ToolOptionsKwargs(TypedDict, total=False):
    """The tool options as keyword arguments (`@tool(destructive=True, timeout=5)`), typed for editors and
    type checkers: a misspelt option is a type error. See `ToolOptions` for what each one means."""

    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool | None
    private: bool
    requires_confirmation: bool | None
    timeout: float | None
    retries: int
    rate_limit: str | RateLimit | Mapping[str, Any] | None
    cache_ttl: float | None
    roles: Iterable[str] | str | None
    tags: Iterable[str] | str | None
    sequential: bool
    examples: Iterable[ToolExample | Mapping[str, Any]]
    coerce: bool
    background: bool
    title: str | None
    cache_scope: CacheScope | None
    preview: PreviewFunction | None
    max_calls: int | None
    output_budget: int | OutputBudget | None
    include_return_schema: bool


_OPTION_NAMES = frozenset(ToolOptions.__dataclass_fields__)


def build_options(tool_name: str, options: Mapping[str, Any]) -> ToolOptions:
    """Check and normalise user-given options; contradictions are refused with the fix in the message."""
    unknown = set(options) - _OPTION_NAMES
    if unknown:
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: unknown option(s) {sorted(unknown)}. Known: {sorted(_OPTION_NAMES)}."
        )
    values = dict(options)
    read_only = bool(values.get("read_only", False))
    destructive = bool(values.get("destructive", False))
    if read_only and destructive:
        raise ToolDefinitionError(
            f"Tool {tool_name!r} cannot be both read_only and destructive: a tool that only reads "
            "cannot destroy anything. Drop one of the two."
        )
    if values.get("requires_confirmation") is None:
        values["requires_confirmation"] = destructive
    if read_only:
        values["idempotent"] = True

    timeout = values.get("timeout")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < math.inf
    ):
        raise ToolDefinitionError(f"Tool {tool_name!r}: timeout must be a positive number of seconds.")
    retries = values.get("retries", 0)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ToolDefinitionError(f"Tool {tool_name!r}: retries must be a whole number >= 0.")

    cache_ttl = values.get("cache_ttl")
    if cache_ttl is not None:
        number = isinstance(cache_ttl, int | float) and not isinstance(cache_ttl, bool)
        if not number or not 0 < cache_ttl < math.inf:
            raise ToolDefinitionError(
                f"Tool {tool_name!r}: cache_ttl must be a positive, finite number of seconds (got "
                f"{cache_ttl!r}); leave it out for no caching."
            )
        if not (read_only or values.get("idempotent")):
            raise ToolDefinitionError(
                f"Tool {tool_name!r}: cache_ttl needs read_only=True or idempotent=True; caching a tool "
                "with side effects would skip those effects."
            )
        if destructive:
            raise ToolDefinitionError(f"Tool {tool_name!r}: a destructive tool cannot be cached.")

    cache_scope = values.get("cache_scope")
    if cache_scope is not None:
        if cache_scope not in ("user", "shared"):
            raise ToolDefinitionError(
                f"Tool {tool_name!r}: cache_scope must be 'user' or 'shared' (or None for the default)."
            )
        if cache_ttl is None:
            raise ToolDefinitionError(
                f"Tool {tool_name!r}: cache_scope needs a cache_ttl (without one nothing is cached)."
            )
        if cache_scope == "shared" and values.get("private"):
            raise ToolDefinitionError(
                f"Tool {tool_name!r}: a private tool's results are never shared between users; drop "
                "cache_scope='shared' or private=True."
            )

    rate_limit = values.get("rate_limit")
    if rate_limit is not None:
        values["rate_limit"] = parse_rate_limit(rate_limit)

    for name in ("roles", "tags"):
        raw = values.get(name)
        if raw is None:
            continue
        if isinstance(raw, str):
            raw = (raw,)
        if not isinstance(raw, Iterable) or not all(isinstance(r, str) and r for r in raw):
            raise ToolDefinitionError(
                f"Tool {tool_name!r}: {name} must be a collection of non-empty strings."
            )
        values[name] = frozenset(raw)

    preview = values.get("preview")
    if preview is not None and not callable(preview):
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: preview must be a function (arguments, ctx) -> str, not "
            f"{type(preview).__name__}."
        )
    max_calls = values.get("max_calls")
    if max_calls is not None and (
        isinstance(max_calls, bool) or not isinstance(max_calls, int) or max_calls < 1
    ):
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: max_calls must be a whole number >= 1 (calls per run), or None."
        )

    if values.get("background") and values.get("requires_confirmation"):
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: a background tool cannot wait for a confirmation (its job starts at "
            "once); drop background=True, or split the confirmed step into its own tool."
        )
    if values.get("output_budget") is not None:
        try:
            values["output_budget"] = OutputBudget.coerce(values["output_budget"])
        except ToolDefinitionError as exc:
            raise ToolDefinitionError(f"Tool {tool_name!r}: {exc}") from None
    values["examples"] = tuple(ToolExample.coerce(e) for e in values.get("examples", ()) or ())
    if not isinstance(values.get("coerce", False), bool):
        raise ToolDefinitionError(f"Tool {tool_name!r}: coerce must be True or False.")
    return ToolOptions(**values)
