"""`AgentRun`: everything one run produced, serialisable to JSON so a paused run can resume elsewhere.

A run that leaves the process (a browser, a queue) can come back edited. `to_json(signing_key=...)` signs
it (HMAC-SHA256 over its canonical JSON) and `from_json(text, signing_key=...)` refuses any change with
`RunSignatureError`; `Agent.dump_run` / `Agent.load_run` do both with a key derived from the executor's
`hash_key`. Malformed input raises `InvalidRunError` (a `ToolrunError` and a `ValueError`) naming the field.
Either way, what a resumed run executes is decided by the executor's confirmation store, never by the
run's JSON (see `Agent.resume`). A run that ends early says why twice: in words (`error`) and as a code
(`error_code`, a `RunErrorCode`) that an application matches.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, TypeVar, get_args

from toolrun.exceptions import ToolrunError
from toolrun.models import Message, Usage
from toolrun.models._messages import message_from_dict
from toolrun.results import ToolResult
from toolrun.tools import ToolCall

__all__ = [
    "AgentRun",
    "DecisionRefusedError",
    "InvalidRunError",
    "PendingCall",
    "RunErrorCode",
    "RunSignatureError",
    "RunStatus",
    "ToolCallRecord",
]

RunStatus = Literal[
    "running",
    "completed",
    "awaiting_confirmation",
    "needs_user_input",
    "max_steps",
    "deadline_exceeded",
    "budget_exceeded",
    "failed",
]
"""Where a run stands. Every status but `"running"` and `"awaiting_confirmation"` is final."""


class RunErrorCode(StrEnum):
    """Why a run ended early or a decision was refused, for code to match (`AgentRun.error_code`,
    `DecisionRefusedError.code`); the words are in `AgentRun.error`."""

    CONFIRMATION_UNKNOWN = "confirmation_unknown"
    """The confirmation is unknown to the stores: already decided, expired and purged, another user's, or
    a store this process does not share. Nothing ran."""
    DECIDED_ELSEWHERE = "decided_elsewhere"
    """Another decision holds the run at this moment (a double click reaching two processes); that one
    carries it on. Nothing more of this one ran."""
    RUN_MISMATCH = "run_mismatch"
    """The run does not match the confirmation store's records (changed after it paused, another run's
    or conversation's confirmation, another hash key). Nothing ran."""
    STORE_UNAVAILABLE = "store_unavailable"
    """A store could not be read; nothing ran. Trying again later may work."""
    LIMIT_REACHED = "limit_reached"
    """A limit of the run was reached: steps, deadline, tokens or tool calls (`status` says which)."""
    TOOL_FAILING = "tool_failing"
    """One tool failed `max_tool_errors` times in a row."""
    MODEL_FAILED = "model_failed"
    """The model request failed (a provider error, or the model's output could not be used)."""
    INVALID_PLAN = "invalid_plan"
    """Planner mode: the model did not produce a valid plan, twice."""
    ABANDONED = "abandoned"
    """`Agent.abandon` ended the paused run without a decision."""
    DECISION_INTERRUPTED = "decision_interrupted"
    """`Agent.decide` found the run's last decider stopped mid-decision (its claim lapsed, the call it
    approved consumed): the run is closed, each held call's result says whether it may have run
    (`RESULT_UNKNOWN`) or did not. Nothing of this decision ran."""


REFUSALS = frozenset(
    {
        RunErrorCode.CONFIRMATION_UNKNOWN,
        RunErrorCode.DECIDED_ELSEWHERE,
        RunErrorCode.RUN_MISMATCH,
        RunErrorCode.STORE_UNAVAILABLE,
    }
)
"""The codes of a resume refused before anything of it ran."""

SCHEMA_VERSION = 1

_SIGNATURE = "signature"
_SIGNATURE_PREFIX = "hmac-sha256:"
_STATUSES = frozenset(get_args(RunStatus))
_RESULT_STATUSES = frozenset({"ok", "error", "confirmation_required"})


class InvalidRunError(ToolrunError, ValueError):
    """A serialised `AgentRun` that cannot be read: not JSON, a missing field, a field of the wrong type.

    Attributes:
        field: The path of the offending field (`"pending[0].call.name"`), or None for the whole text.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(f"Invalid AgentRun: {field}: {message}" if field else f"Invalid AgentRun: {message}")
        self.field = field


class RunSignatureError(InvalidRunError):
    """A signed `AgentRun` was changed after it was signed, signed with another key, or not signed at all
    where a signature is required. Nothing of it can be trusted: start a new run."""


class DecisionRefusedError(ToolrunError):
    """`Agent.decide` refused a decision; nothing of it ran. Match `code`, not the words.

    Attributes:
        code: Why (`RunErrorCode`): `CONFIRMATION_UNKNOWN` (unknown, already decided, or another user's),
            `DECIDED_ELSEWHERE` (another decision holds the run right now), `RUN_MISMATCH`,
            `STORE_UNAVAILABLE`.
        confirmation_id: The confirmation the decision was for.
    """

    def __init__(self, code: RunErrorCode, confirmation_id: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.confirmation_id = confirmation_id


_T = TypeVar("_T")


def _get(
    data: Mapping[str, Any], path: str, name: str, kinds: type | tuple[type, ...], default: Any = ...
) -> Any:
    """`data[name]`, checked to be one of `kinds` (None allowed only through `kinds`)."""
    where = f"{path}.{name}" if path else name
    if name not in data:
        if default is ...:
            raise InvalidRunError("is missing", field=where)
        return default
    value = data[name]
    if isinstance(value, bool) and bool not in (kinds if isinstance(kinds, tuple) else (kinds,)):
        raise InvalidRunError(f"expected {_names(kinds)}, got a boolean", field=where)
    if not isinstance(value, kinds):
        raise InvalidRunError(f"expected {_names(kinds)}, got {type(value).__name__}", field=where)
    return value


def _names(kinds: type | tuple[type, ...]) -> str:
    items = kinds if isinstance(kinds, tuple) else (kinds,)
    names = {
        dict: "an object",
        list: "an array",
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "a boolean",
        type(None): "null",
    }
    return " or ".join(names.get(k, k.__name__) for k in items)


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidRunError(f"expected an object, got {type(value).__name__}", field=where)
    return value


def _items(data: Mapping[str, Any], name: str, parse: Callable[[Mapping[str, Any], str], _T]) -> list[_T]:
    """Parse the array `data[name]` (missing: empty) item by item, naming the item that fails."""
    values = _get(data, "", name, list, [])
    return [parse(_object(item, f"{name}[{i}]"), f"{name}[{i}]") for i, item in enumerate(values)]


def _call(data: Mapping[str, Any], where: str) -> ToolCall:
    return ToolCall(
        id=_get(data, where, "id", str),
        name=_get(data, where, "name", str),
        arguments=_get(data, where, "arguments", (str, dict, type(None)), None),
    )


def _result(data: Mapping[str, Any], where: str) -> ToolResult:
    status = _get(data, where, "status", str)
    if status not in _RESULT_STATUSES:
        raise InvalidRunError(f"unknown result status {status!r}", field=f"{where}.status")
    _get(data, where, "call_id", str, "")
    _get(data, where, "tool_name", str, "")
    _get(data, where, "message", (str, type(None)), None)
    _get(data, where, "confirmation_id", (str, type(None)), None)
    _get(data, where, "metadata", dict, {})
    _get(data, where, "attempts", int, 0)
    error = _get(data, where, "error", (dict, type(None)), None)
    if error is not None:
        _get(error, f"{where}.error", "code", str)
        _get(error, f"{where}.error", "message", str)
        _get(error, f"{where}.error", "details", (dict, type(None)), None)
    try:
        return ToolResult.from_dict(dict(data))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InvalidRunError(f"not a tool result ({type(exc).__name__}: {exc})", field=where) from None


def _message(data: Mapping[str, Any], where: str) -> Message:
    role = _get(data, where, "role", str)
    if role in ("system", "user", "tool"):
        _get(data, where, "content", str)
    if role == "tool":
        _get(data, where, "call_id", str)
    if role == "assistant":
        _get(data, where, "content", (str, type(None)), None)
        for i, item in enumerate(_get(data, where, "tool_calls", (list, type(None)), None) or ()):
            _call(_object(item, f"{where}.tool_calls[{i}]"), f"{where}.tool_calls[{i}]")
    try:
        return message_from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InvalidRunError(str(exc), field=where) from None


def _canonical(data: Mapping[str, Any]) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8", "surrogatepass"
    )


def _signature(data: Mapping[str, Any], key: bytes) -> str:
    return _SIGNATURE_PREFIX + hmac.new(key, _canonical(data), hashlib.sha256).hexdigest()


@dataclass(kw_only=True, slots=True)
class ToolCallRecord:
    """One tool call the model made in this run and what came of it."""

    call: ToolCall
    """The call, with the registered tool name."""
    result: ToolResult
    """Its result (for a call awaiting confirmation: the `confirmation_required` result)."""
    step: int
    """The model turn that made it (1-based)."""

    def to_dict(self) -> dict[str, Any]:
        return {"call": self.call.to_dict(), "result": self.result.to_dict(), "step": self.step}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, _where: str = "tool_call") -> ToolCallRecord:
        """Rebuild a record from `to_dict()` output; `InvalidRunError` names the field that is wrong."""
        data = _object(data, _where)
        return cls(
            call=_call(_object(_get(data, _where, "call", dict), f"{_where}.call"), f"{_where}.call"),
            result=_result(_get(data, _where, "result", dict), f"{_where}.result"),
            step=_get(data, _where, "step", int),
        )


@dataclass(kw_only=True, slots=True)
class PendingCall:
    """A call that waits for a person: approve or deny it by `confirmation_id` in `Agent.resume`.

    Filled from the executor's confirmation store when the run pauses, and again (from the store, not
    from whatever JSON the run was rebuilt from) when it resumes.
    """

    confirmation_id: str
    """The id to pass in `approvals`."""
    call: ToolCall
    """The call that would run."""
    summary: str
    """What it would do, for the person deciding: every argument value in full (folded over lines); a
    value too long to show is named as such, and then `arguments` holds it."""
    arguments: dict[str, Any] | None = None
    """The full validated arguments (as JSON data) the call would run with, for a UI to show."""
    preview: str | None = None
    """The text the person approves, written by the tool's preview from the application's records (see
    `toolrun.store.PendingConfirmation.preview`); None for a tool without one (then show `summary`)."""

    @property
    def shown(self) -> str:
        """What to show the person deciding: the preview when there is one, else the summary."""
        return self.preview if self.preview is not None else self.summary

    def to_dict(self) -> dict[str, Any]:
        return {
            "confirmation_id": self.confirmation_id,
            "call": self.call.to_dict(),
            "summary": self.summary,
            "arguments": self.arguments,
            "preview": self.preview,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, _where: str = "pending") -> PendingCall:
        """Rebuild an entry from `to_dict()` output; `InvalidRunError` names the field that is wrong."""
        data = _object(data, _where)
        return cls(
            confirmation_id=_get(data, _where, "confirmation_id", str),
            call=_call(_object(_get(data, _where, "call", dict), f"{_where}.call"), f"{_where}.call"),
            summary=_get(data, _where, "summary", str),
            arguments=_get(data, _where, "arguments", (dict, type(None)), None),
            preview=_get(data, _where, "preview", (str, type(None)), None),
        )


@dataclass(kw_only=True)
class AgentRun:
    """The state and outcome of one agent run.

    A run that stops with `awaiting_confirmation` holds everything needed to continue it:
    `to_json()` it, and `Agent.resume(AgentRun.from_json(text), approvals={...})` later, in this process or
    another (the executor's confirmation store must be shared for approvals to be found there).
    """

    run_id: str = field(default_factory=lambda: f"run_{uuid.uuid4().hex[:20]}")
    """A unique id; also the default conversation id of tool contexts."""
    status: RunStatus = "running"
    """Where the run stands."""
    mode: Literal["native", "planner"] = "native"
    """Native tool calling, or a JSON plan for models without it."""
    messages: list[Message] = field(default_factory=list)
    """The conversation, system message first, as sent to the model."""
    output: str | None = None
    """The final answer (or the question for the user, with `needs_user_input`)."""
    steps: int = 0
    """Model turns taken."""
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    """Every tool call and its result, in order."""
    pending: list[PendingCall] = field(default_factory=list)
    """Calls awaiting a person's decision (with `awaiting_confirmation`)."""
    batch: list[ToolCall] = field(default_factory=list)
    """The calls of the turn that paused, in the model's order (their results go back together)."""
    usage: Usage = field(default_factory=Usage)
    """Tokens spent, summed over every model request."""
    error: str | None = None
    """Why the run failed or stopped early, in words."""
    error_code: RunErrorCode | None = None
    """Why the run failed or stopped early, as a code to match (None when it did not, or when code outside
    the agent ended it with words only)."""
    plan: dict[str, Any] | None = None
    """Planner mode: the validated plan."""
    state: dict[str, Any] = field(default_factory=dict)
    """The session state its tools saw (`ToolContext.state`): the context's own when it carried one, else
    the run's. Kept in the JSON (so it must be JSON-safe), and given back to tools on resume when the
    resuming context carries none: a plan made before a pause is still there after it."""

    @property
    def done(self) -> bool:
        """Whether the run has ended (nothing will continue it)."""
        return self.status not in ("running", "awaiting_confirmation")

    @property
    def results(self) -> list[ToolResult]:
        """Every tool result, in call order."""
        return [r.result for r in self.tool_calls]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "status": self.status,
            "mode": self.mode,
            "messages": [m.to_dict() for m in self.messages],
            "output": self.output,
            "steps": self.steps,
            "tool_calls": [r.to_dict() for r in self.tool_calls],
            "pending": [p.to_dict() for p in self.pending],
            "batch": [c.to_dict() for c in self.batch],
            "usage": self.usage.to_dict(),
            "error": self.error,
            "error_code": None if self.error_code is None else str(self.error_code),
            "plan": self.plan,
            "state": self.state,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgentRun:
        """Rebuild a run from `to_dict()` output.

        Raises:
            InvalidRunError: the data is not a run of this schema version; the message and `field` name
                the first field that is missing or of the wrong type (`"messages[2].content"`).
        """
        data = _object(data, "(the run)")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION or isinstance(version, bool):
            raise InvalidRunError(
                f"cannot read schema version {version!r} (expected {SCHEMA_VERSION})", field="schema_version"
            )
        status = _get(data, "", "status", str)
        if status not in _STATUSES:
            raise InvalidRunError(f"unknown status {status!r}", field="status")
        mode = _get(data, "", "mode", str, "native")
        if mode not in ("native", "planner"):
            raise InvalidRunError(f"unknown mode {mode!r}", field="mode")
        usage = _get(data, "", "usage", (dict, type(None)), None) or {}
        try:
            parsed_usage = Usage.from_dict(usage)
        except (TypeError, ValueError) as exc:
            raise InvalidRunError(str(exc), field="usage") from None
        return cls(
            run_id=_get(data, "", "run_id", str),
            status=status,  # checked against RunStatus above
            mode=mode,
            messages=[
                _message(_object(m, f"messages[{i}]"), f"messages[{i}]")
                for i, m in enumerate(_get(data, "", "messages", list))
            ],
            output=_get(data, "", "output", (str, type(None)), None),
            steps=_get(data, "", "steps", int, 0),
            tool_calls=_items(data, "tool_calls", lambda d, w: ToolCallRecord.from_dict(d, _where=w)),
            pending=_items(data, "pending", lambda d, w: PendingCall.from_dict(d, _where=w)),
            batch=_items(data, "batch", _call),
            usage=parsed_usage,
            error=_get(data, "", "error", (str, type(None)), None),
            error_code=_error_code(data),
            plan=_get(data, "", "plan", (dict, type(None)), None),
            state=dict(_get(data, "", "state", (dict, type(None)), None) or {}),
        )

    def to_json(self, *, signing_key: bytes | None = None) -> str:
        """The run as JSON text; with `signing_key`, signed (a `"signature"` field: HMAC-SHA256 of the
        canonical JSON of everything else), so `from_json(text, signing_key=...)` detects any change.

        Prefer `Agent.dump_run(run)`, which signs with a key derived from the executor's `hash_key`.
        """
        data = self.to_dict()
        text = self._dumps(data)
        if signing_key is None:
            return text
        key = _check_key(signing_key)
        # Sign what a reader will parse (tuples become lists, keys strings), not the Python objects.
        data = json.loads(text)
        data[_SIGNATURE] = _signature(data, key)
        return json.dumps(data, ensure_ascii=False)

    def _dumps(self, data: dict[str, Any]) -> str:
        """JSON text of `data`; a state value that is not JSON-safe is a `TypeError` naming its key."""
        try:
            return json.dumps(data, ensure_ascii=False)
        except (TypeError, ValueError):
            for key, value in self.state.items():
                try:
                    json.dumps(value)
                except (TypeError, ValueError) as exc:
                    raise TypeError(
                        f"AgentRun.state[{key!r}] is not JSON-safe ({exc}); a saved run keeps its state. "
                        "Keep handles and clients in ToolContext.deps, not in state."
                    ) from None
            raise

    @classmethod
    def from_json(cls, text: str | bytes, *, signing_key: bytes | None = None) -> AgentRun:
        """A run from `to_json()` output.

        Args:
            text: The JSON text.
            signing_key: Verify the signature with this key: a run that is unsigned, or was changed in any
                way after `to_json(signing_key=...)`, raises `RunSignatureError`. Without a key, a signature
                present is not checked (the caller trusts where the text comes from).

        Raises:
            InvalidRunError: not JSON, or not a run (names the field); `RunSignatureError` for a bad
                signature.
        """
        try:
            data = json.loads(text)
        except (ValueError, TypeError) as exc:  # JSONDecodeError, bad UTF-8, not str/bytes
            raise InvalidRunError(f"the text is not JSON ({exc})") from None
        data = dict(_object(data, "(the run)"))
        signature = data.pop(_SIGNATURE, None)
        if signing_key is not None:
            if not isinstance(signature, str):
                raise RunSignatureError(
                    "the run is not signed, and a signed one is required; it cannot be trusted."
                )
            expected = _signature(data, _check_key(signing_key))
            if not hmac.compare_digest(signature.encode("utf-8", "surrogatepass"), expected.encode()):
                raise RunSignatureError(
                    "the signature does not match: the run was changed after it was signed, or signed with "
                    "another key. Nothing of it can be trusted; start a new run."
                )
        return cls.from_dict(data)


def _error_code(data: Mapping[str, Any]) -> RunErrorCode | None:
    """The run's `error_code` (absent in runs saved before it existed: None)."""
    value = _get(data, "", "error_code", (str, type(None)), None)
    if value is None:
        return None
    try:
        return RunErrorCode(value)
    except ValueError:
        raise InvalidRunError(f"unknown error code {value!r}", field="error_code") from None


def _check_key(key: bytes) -> bytes:
    if not isinstance(key, bytes | bytearray) or len(key) < 16:
        raise ValueError("A signing key must be at least 16 bytes.")
    return bytes(key)
