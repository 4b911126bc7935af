"""The small protocols the executor keeps its state behind: confirmations, rate limits, a result cache.

Every method is `async` so that SQL and Redis backends fit without blocking the event loop. The operations
that must be atomic are single methods, so a backend can make them atomic in one round trip:

- `ConfirmationStore.consume` removes and returns a pending confirmation in one step (a SQL
  `DELETE ... RETURNING`, a Redis `GETDEL` or Lua script). Two approvals racing for one id: exactly one
  gets it; that is what makes an approved call run exactly once.
- `RateLimitStore.acquire` refills a token bucket and takes from it in one step (a Lua script in Redis).
- `RunStore.claim` takes a paused agent run for one decider in one step (a SQL `UPDATE ... WHERE
  claim_token IS NULL ... RETURNING`): of two decisions racing for one run, exactly one continues it.

This module imports nothing from the rest of toolrun: stores sit at the bottom of the house.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from toolrun._unicode import json_problem, text_problem

__all__ = [
    "NO_USER",
    "ApprovalRule",
    "ApprovalRuleStore",
    "CacheStore",
    "ConfirmationStore",
    "PausedRun",
    "PendingConfirmation",
    "RateLimitDecision",
    "RateLimitStore",
    "RunStore",
]

NO_USER = ""
"""The `user_id` of a confirmation requested by a call without a user id (and of the caller deciding it):
a principal of its own, so such a confirmation is never decided by a signed-in user, nor the reverse."""


@dataclass(frozen=True, kw_only=True, slots=True)
class PendingConfirmation:
    """A tool call held back until its user approves or denies it.

    Plain, JSON-safe data (`to_dict` / `from_dict`), so any backend can persist it.
    """

    id: str
    """The confirmation id handed to the caller (unguessable)."""
    user_id: str
    """The only principal who may approve or deny it; `NO_USER` (`""`) for a call made without a user id,
    which then only a caller without a user id can decide (never a signed-in user, and vice versa)."""
    tool_name: str
    """The registered name of the tool the call runs."""
    arguments_hash: str
    """Keyed hash of the canonical JSON of the validated arguments: the approval is bound to them."""
    call: Mapping[str, Any]
    """The original call as `ToolCall.to_dict()`: `{"id", "name", "arguments"}`."""
    summary: str
    """What the call would do, for the user's UI. Holds argument values: never log it."""
    created_at: float
    """When it was requested (`time.time()` seconds)."""
    expires_at: float
    """After this moment (`time.time()` seconds) it can no longer be approved."""
    conversation_id: str | None = None
    """The conversation the call came from, if known (lets a UI list pending actions per chat)."""
    run_id: str | None = None
    """The agent run the call was made in, if any: the confirmation can then only be decided in that run
    (`Agent.resume` of that run, or a context whose `run_id` is this one)."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """Anything else a backend or application wants to keep with it (JSON-safe)."""
    preview: str | None = None
    """The text the person approves: the tool's own preview, written from the application's records
    before the confirmation was issued (or, when it failed, the summary with a line saying so); None for
    a tool without a preview (then `summary` is what the person approves). Holds user data: never log it."""

    def expired(self, now: float) -> bool:
        """Whether it can no longer be approved at `now` (`time.time()` seconds)."""
        return now >= self.expires_at

    @property
    def shown(self) -> str:
        """What a door shows the person deciding: the preview when there is one, else the summary."""
        return self.preview if self.preview is not None else self.summary

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "user_id": self.user_id,
            "tool_name": self.tool_name,
            "arguments_hash": self.arguments_hash,
            "call": dict(self.call),
            "summary": self.summary,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "conversation_id": self.conversation_id,
            "run_id": self.run_id,
            "metadata": dict(self.metadata),
            "preview": self.preview,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PendingConfirmation:
        return cls(
            id=data["id"],
            user_id=data["user_id"],
            tool_name=data["tool_name"],
            arguments_hash=data["arguments_hash"],
            call=dict(data["call"]),
            summary=data["summary"],
            created_at=float(data["created_at"]),
            expires_at=float(data["expires_at"]),
            conversation_id=data.get("conversation_id"),
            run_id=data.get("run_id"),
            metadata=dict(data.get("metadata") or {}),
            preview=data.get("preview"),
        )

    def __repr__(self) -> str:  # the summary and the call hold argument values: keep them out of reprs
        return (
            f"PendingConfirmation(id={self.id!r}, user_id={self.user_id!r}, tool_name={self.tool_name!r}, "
            f"expires_at={self.expires_at!r})"
        )


@runtime_checkable
class ConfirmationStore(Protocol):
    """Where pending confirmations wait for a person's decision."""

    async def add(self, pending: PendingConfirmation) -> None:
        """Keep `pending` until it is consumed or expires."""
        ...

    async def get(self, confirmation_id: str) -> PendingConfirmation | None:
        """Look at a pending confirmation without using it (None when unknown or already used)."""
        ...

    async def consume(self, confirmation_id: str, *, user_id: str) -> PendingConfirmation | None:
        """Atomically remove and return the confirmation, only if it belongs to `user_id`.

        Returns None when the id is unknown, was already consumed, or belongs to someone else (then it
        is left in place, so another user cannot destroy it). An expired confirmation is removed and
        returned like any other: the caller checks `expired()`. Of two concurrent calls for one id, at
        most one gets it.
        """
        ...

    async def list_pending(self, user_id: str, *, now: float) -> list[PendingConfirmation]:
        """The unexpired confirmations waiting for `user_id`, oldest first."""
        ...

    async def purge_expired(self, now: float) -> int:
        """Drop confirmations expired at `now`; return how many were dropped."""
        ...


@dataclass(frozen=True, kw_only=True, slots=True)
class PausedRun:
    """An agent run paused on confirmations, as a `RunStore` keeps it between a request and the decision.

    The run itself is `data`, its signed JSON (`Agent.dump_run`): the agent that loads it checks the
    signature, and the confirmation store still decides what runs.
    """

    run_id: str
    """The run's id (one paused run per id: saving again replaces it)."""
    user_id: str
    """The only principal who may decide it; `NO_USER` (`""`) for a run without a user."""
    data: str
    """The run as signed JSON text. Holds the conversation: never log it."""
    confirmation_ids: tuple[str, ...]
    """The confirmations it waits for: a decision on any of them claims the run."""
    expires_at: float
    """When its confirmations expire (`time.time()` seconds); `purge_expired` drops it after that."""
    conversation_id: str | None = None
    """The conversation its confirmations are bound to (the pausing context's), if it had one."""
    claim_token: str | None = None
    """Who holds it now: the token given to `claim`; None while it waits for a decision."""
    claimed_until: float | None = None
    """When the claim lapses (`time.time()` seconds): a decider that died cannot hold the run forever."""
    taken_over: bool = False
    """Set by `claim` when it took the run from a decider whose claim had lapsed: that decider stopped
    mid-decision, and what it had started is not known."""

    def __repr__(self) -> str:  # `data` holds the conversation: keep it out of reprs
        return (
            f"PausedRun(run_id={self.run_id!r}, user_id={self.user_id!r}, "
            f"confirmation_ids={self.confirmation_ids!r}, claimed={self.claim_token is not None})"
        )


@runtime_checkable
class RunStore(Protocol):
    """Where paused agent runs wait for a decision that may come in another request, on another process.

    `Agent(..., runs=store)` saves a run here when it pauses; `Agent.decide(confirmation_id, ...)` claims
    it, continues it, and saves it again (paused again) or deletes it (ended).
    """

    async def save(self, run: PausedRun) -> None:
        """Keep `run`, unclaimed, replacing any run of the same id (and its claim and confirmation ids)."""
        ...

    async def claim(
        self, confirmation_id: str, *, user_id: str, token: str, until: float, now: float
    ) -> PausedRun | None:
        """Atomically take the run that waits for `confirmation_id`, for the caller holding `token`.

        Returns the run (with `claim_token=token`, `claimed_until=until`) only if it is `user_id`'s and
        nobody holds it (or a claim lapsed before `now`: then with `taken_over=True`). Else None, and
        nothing changes: of two concurrent claims, across processes, exactly one gets the run.
        """
        ...

    async def find(self, confirmation_id: str, *, user_id: str) -> PausedRun | None:
        """Look at the run that waits for `confirmation_id` without claiming it (None when unknown, or
        another user's)."""
        ...

    async def release(self, run_id: str, *, token: str) -> bool:
        """Put a claimed run back, unchanged, if `token` still holds it; False otherwise."""
        ...

    async def delete(self, run_id: str) -> bool:
        """Forget a run (it ended); False when there was none."""
        ...

    async def purge_expired(self, now: float) -> int:
        """Drop the runs expired at `now` that nobody holds; return how many."""
        ...


RuleDecision = Literal["allow", "deny"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalRule:
    """A standing decision of one user about one tool: "always allow this for me" (or "always deny").

    A call of `tool` by `user_id` that needs confirmation is decided by the rule instead of asking,
    while the rule has not expired and the call's validated arguments equal every value in `arguments`
    (argument constraints; none means any arguments). A `deny` rule wins over an `allow` rule. Every call
    a rule decides is audited with the rule's id (`AuditRecord.rule_id`). Without rules the default stays:
    ask every time.
    """

    user_id: str
    """The user the rule speaks for (never empty: calls without a user are always asked)."""
    tool: str
    """The registered name of the tool."""
    decision: RuleDecision = "allow"
    """`allow`: run such calls without asking; `deny`: refuse them without asking."""
    arguments: Mapping[str, Any] | None = None
    """Argument constraints: each named argument must equal this JSON value (after validation)."""
    expires_at: float | None = None
    """After this moment (`time.time()` seconds) the rule no longer applies; None for never."""
    id: str = ""
    """The rule's id (`rule_...`); given by the store when empty."""
    created_at: float = 0.0
    """When the rule was made (`time.time()` seconds); set by the store when 0."""
    note: str | None = None
    """What the person called it ("archiving is fine"), for lists; never logged."""

    def __post_init__(self) -> None:
        if not isinstance(self.user_id, str) or not self.user_id:
            raise ValueError("An approval rule needs a user_id: calls without a user are always asked.")
        if not isinstance(self.tool, str) or not self.tool:
            raise ValueError("An approval rule needs the tool's name.")
        if self.decision not in ("allow", "deny"):
            raise ValueError(f"An approval rule's decision is 'allow' or 'deny', not {self.decision!r}.")
        if self.arguments is not None and not isinstance(self.arguments, Mapping):
            raise ValueError("An approval rule's arguments are a mapping of argument name to value.")

    def expired(self, now: float) -> bool:
        """Whether the rule no longer applies at `now`."""
        return self.expires_at is not None and now >= self.expires_at

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "user_id": self.user_id,
            "tool": self.tool,
            "decision": self.decision,
            "arguments": dict(self.arguments) if self.arguments is not None else None,
            "expires_at": self.expires_at,
            "created_at": self.created_at,
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ApprovalRule:
        arguments = data.get("arguments")
        expires = data.get("expires_at")
        return cls(
            id=str(data.get("id") or ""),
            user_id=data["user_id"],
            tool=data["tool"],
            decision=data.get("decision", "allow"),
            arguments=dict(arguments) if arguments is not None else None,
            expires_at=float(expires) if expires is not None else None,
            created_at=float(data.get("created_at") or 0.0),
            note=data.get("note"),
        )

    def __repr__(self) -> str:  # argument constraints and notes may hold user data
        return (
            f"ApprovalRule(id={self.id!r}, user_id={self.user_id!r}, tool={self.tool!r}, "
            f"decision={self.decision!r}, expires_at={self.expires_at!r})"
        )


def check_rule_text(rule: ApprovalRule) -> None:
    """Refuse a rule whose text a store could not keep, or a client could not read back: a lone
    surrogate or a NUL in its user, tool, argument constraints (keys or values) or note (the rule for
    text from a client, `toolrun._unicode`). Every store calls it before it keeps anything.

    Raises:
        ValueError: which field, and what is wrong with it.
    """
    for name, value in (("id", rule.id), ("user_id", rule.user_id), ("tool", rule.tool)):
        problem = text_problem(value)
        if problem is not None:
            raise ValueError(f"An approval rule's {name} {problem}.")
    if rule.note is not None:
        if not isinstance(rule.note, str):
            raise ValueError(f"An approval rule's note is text, not {type(rule.note).__name__}.")
        problem = text_problem(rule.note)
        if problem is not None:
            raise ValueError(f"An approval rule's note {problem}.")
    if rule.arguments is not None:
        problem = json_problem(dict(rule.arguments), "arguments")
        if problem is not None:
            raise ValueError(f"An approval rule's {problem}.")


@runtime_checkable
class ApprovalRuleStore(Protocol):
    """Where standing approvals (`ApprovalRule`) are kept."""

    async def add(self, rule: ApprovalRule) -> ApprovalRule:
        """Keep `rule`; returns it with its id and creation time filled in. Raises `ValueError` for a
        rule it cannot keep (`check_rule_text`: a lone surrogate or NUL in its text; too many rules)."""
        ...

    async def list_rules(self, user_id: str, *, tool: str | None = None) -> list[ApprovalRule]:
        """The rules of `user_id` (for `tool` only, if given), expired ones included, oldest first."""
        ...

    async def remove(self, rule_id: str, *, user_id: str) -> bool:
        """Delete one of `user_id`'s rules; False when there is no such rule of theirs."""
        ...

    def empty(self) -> bool | None:
        """True when this store certainly holds no rule (lets the executor skip a lookup); None when it
        cannot tell without asking its backend."""
        ...


@dataclass(frozen=True, kw_only=True, slots=True)
class RateLimitDecision:
    """The answer of a token bucket."""

    allowed: bool
    """Whether the call may proceed (a token was taken)."""
    remaining: float
    """Tokens left after this decision."""
    retry_after: float
    """Seconds until a token will be available (0 when allowed)."""


@runtime_checkable
class RateLimitStore(Protocol):
    """Token buckets, one per key (the executor's key combines the limit's key and the principal)."""

    async def acquire(self, key: str, *, limit: int, period: float, cost: float = 1.0) -> RateLimitDecision:
        """Refill the bucket `key` (capacity `limit`, `limit` tokens per `period` seconds) and take `cost`.

        Atomic: concurrent callers never both take the last token. A bucket starts full.
        """
        ...

    async def reset(self, key: str | None = None) -> None:
        """Refill one bucket (or all of them)."""
        ...


@runtime_checkable
class CacheStore(Protocol):
    """A byte cache with per-entry time to live. Keys are opaque strings (they hold no argument values)."""

    async def get(self, key: str) -> bytes | None:
        """The value stored under `key`, or None when absent or expired."""
        ...

    async def set(self, key: str, value: bytes, *, ttl: float) -> None:
        """Store `value` for `ttl` seconds."""
        ...

    async def delete(self, key: str) -> None:
        """Forget `key` (no error when absent)."""
        ...

    async def clear(self) -> None:
        """Forget everything."""
        ...


@dataclass(frozen=True, kw_only=True, slots=True)
class Artifact:
    """A whole result kept for paging."""

    id: str
    owner: str | None
    """The `user_id` of the call that made it (None: calls without a user)."""
    tool_name: str
    text: str
    """The whole result as the model would read it uncut (empty for stored content bytes)."""
    expires_at: float
    data: bytes | None = None
    """The bytes of a stored content item (an image, a file), served by the service's results route."""
    media_type: str | None = None
    """The media type of `data`."""
    name: str | None = None
    """A file name for `data`, when it has one."""


@runtime_checkable
class ArtifactStore(Protocol):
    """Where whole results wait to be paged. `get` must answer None for another owner's artifact."""

    async def put(self, artifact: Artifact) -> None: ...

    async def get(self, artifact_id: str, owner: str | None) -> Artifact | None: ...
