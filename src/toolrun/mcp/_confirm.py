"""Confirming a destructive call with the human behind an MCP client.

The executor holds the call back (a pending confirmation bound to the user, the tool and the keyed
argument hash, expiring, single use); this module asks the person: on 2025 protocol versions with an
`elicitation/create` request while the `tools/call` waits; on 2026-07-28 with an `InputRequiredResult`
whose `requestState` is sealed here (confirmation id, principal, tool, argument hash, expiry; keyed
BLAKE2b with the executor's key), checked when the client retries, and consumed through
`executor.approve` / `executor.deny`, so a state works once. A client that cannot ask its user gets an
`isError` result, and the pending call is withdrawn.

Edit, then approve: the form carries one field per argument a form can hold (`editable_fields`). An edited
answer is validated and previewed again (`executor.preview_edit`) and asked once more; only an approval of
exactly the previewed arguments runs (`executor.approve(..., arguments=...)`). An answer naming a field the
form did not offer is refused whole; an edit the tool refuses asks again with the error. In the
2026-07-28 rounds the sealed state carries the previewed edit and a round count, so an answer is read
against what the person was last shown, never run as a call nobody saw last. docs/mcp.md, "Confirming
destructive tools with a person".
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import mcp_types as types

from toolrun.results import ErrorCode, ToolResult
from toolrun.runtime import ToolExecutor

if TYPE_CHECKING:
    from toolrun.tools import Tool

__all__ = [
    "CONFIRM_KEY",
    "FIELD_PREFIX",
    "INVALID_STATE",
    "MAX_ROUNDS",
    "Sealer",
    "confirmation_form",
    "converse",
    "decision_of",
    "editable_fields",
    "edited_note",
    "edits_of",
    "expired_state",
    "filled",
    "needs_confirmation",
    "reason_of",
    "refuse_edit",
    "settle_round",
    "too_many_rounds",
]

CONFIRM_KEY = "toolrun_confirm"
"""The key of toolrun's confirmation in `inputRequests` / `inputResponses`."""

_PREFIX = "tr2."  # tr2: the previewed edit itself (`v`), no longer its hash
_LABEL = b"toolrun/mcp/request-state/v2\x00"
MAX_STATE = 65_536
"""The longest `requestState` sealed or opened (it carries the previewed edit, no more than the client's own
answer held)."""


class Sealer:
    """Seals and opens the `requestState` of a confirmation round with the executor's key."""

    def __init__(self, executor: ToolExecutor, clock: Callable[[], float] = time.time) -> None:
        self._hasher = executor.hasher
        self._clock = clock

    def arguments_hash(self, arguments: Mapping[str, Any] | None) -> str:
        """The keyed hash of the arguments as the client sent them."""
        return self._hasher.raw(dict(arguments) if arguments else {})

    def seal(
        self,
        *,
        confirmation_id: str,
        principal: str,
        tool: str,
        arguments_hash: str,
        ttl: float,
        edit: Mapping[str, Any] | None = None,
        round: int = 0,
    ) -> str:
        """`edit`: the edited arguments (validated, as JSON data) the person was just shown the preview of:
        an approval of exactly these runs them; `round`: how many edit rounds came before. A state longer
        than `MAX_STATE` does not open: the caller checks."""
        claims: dict[str, Any] = {
            "c": confirmation_id,
            "p": principal,
            "t": tool,
            "a": arguments_hash,
            "e": self._clock() + ttl,
        }
        if edit is not None:
            claims["v"] = dict(edit)
        if round:
            claims["n"] = round
        body = base64.urlsafe_b64encode(json.dumps(claims, separators=(",", ":")).encode()).decode()
        return f"{_PREFIX}{body}.{self._hasher.digest(_LABEL + body.encode())}"

    def open(self, token: object) -> dict[str, Any] | None:
        """The claims of a token this server sealed, or None (malformed or tampered)."""
        if not isinstance(token, str) or not token.startswith(_PREFIX) or len(token) > MAX_STATE:
            return None
        body, _, tag = token[len(_PREFIX) :].rpartition(".")
        if not body or not hmac.compare_digest(tag, self._hasher.digest(_LABEL + body.encode())):
            return None
        try:
            claims = json.loads(base64.urlsafe_b64decode(body.encode()))
        except (ValueError, binascii.Error):
            return None
        if not isinstance(claims, dict) or not all(isinstance(claims.get(k), str) for k in "cpta"):
            return None
        if not isinstance(claims.get("e"), int | float):
            return None
        if not isinstance(claims.get("v", {}), dict) or type(claims.get("n", 0)) is not int:
            return None
        return claims

    def now(self) -> float:
        return self._clock()

    def expired(self, claims: Mapping[str, Any]) -> bool:
        return not self._clock() < float(claims["e"])


FIELD_PREFIX = "arg_"
"""Form fields for arguments are named `arg_<name>` (an argument may be called "approve" or "reason"). No
dots: clients that turn the form into a typed object (FastMCP, pydantic-ai) need identifiers, and send the
object's field names back."""
MAX_ROUNDS = 4
"""How many times one confirmation asks the person (each edit asks again): then it is withdrawn."""
_MAX_FIELDS = 20
_MAX_TEXT = 2000
_FORMATS = frozenset({"email", "uri", "date", "date-time"})


def editable_fields(tool: Tool, current: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The arguments of `tool` a form can carry, name -> the field's schema (MCP forms hold flat
    primitives only: a string, a number, an integer, a boolean or a string enum), each filled with its
    value in `current`. Other arguments (objects, arrays, anything else) are not editable here, nor is an
    argument without a value of the field's type: every field of the form has a default, so a typed
    client that sends its whole object back sends values of the field's type (never `null`)."""
    schema = tool.parameters
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(props, Mapping):
        return {}
    fields: dict[str, dict[str, Any]] = {}
    for name, sub in props.items():
        field = _primitive(sub)
        if field is None or not isinstance(name, str) or len(fields) == _MAX_FIELDS:
            continue
        field["title"] = name
        if isinstance(sub, Mapping) and isinstance(sub.get("description"), str):
            field["description"] = sub["description"][:_MAX_TEXT]
        value = current.get(name)
        if value is not None and _fits(field, value):
            field["default"] = value
            fields[name] = field
    return fields


def _primitive(sub: Any, depth: int = 0) -> dict[str, Any] | None:
    """A form field for a parameter schema, or None when a form cannot carry it."""
    if not isinstance(sub, Mapping) or depth > 2:
        return None
    enum = sub.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(v, str) for v in enum):
        return {"type": "string", "enum": list(enum)}
    for key in ("anyOf", "oneOf"):  # an optional parameter: [X, null]
        alternatives = sub.get(key)
        if isinstance(alternatives, list):
            real = [a for a in alternatives if not (isinstance(a, Mapping) and a.get("type") == "null")]
            return _primitive(real[0], depth + 1) if len(real) == 1 else None
    kind = sub.get("type")
    if kind == "string":
        field: dict[str, Any] = {"type": "string"}
        for key in ("minLength", "maxLength"):
            if type(sub.get(key)) is int:
                field[key] = sub[key]
        if sub.get("format") in _FORMATS:
            field["format"] = sub["format"]
        return field
    if kind in ("number", "integer"):
        field = {"type": kind}
        for key in ("minimum", "maximum"):
            if isinstance(sub.get(key), int | float) and type(sub.get(key)) is not bool:
                field[key] = sub[key]
        return field
    if kind == "boolean":
        return {"type": "boolean"}
    return None


def _fits(field: Mapping[str, Any], value: Any) -> bool:
    kind = field["type"]
    if kind == "boolean":
        return type(value) is bool
    if kind == "integer":
        return type(value) is int
    if kind == "number":
        return isinstance(value, int | float) and type(value) is not bool
    return isinstance(value, str) and ("enum" not in field or value in field["enum"])


def confirmation_form(
    summary: str,
    fields: Mapping[str, Mapping[str, Any]] | None = None,
    note: str | None = None,
) -> types.ElicitRequestFormParams:
    """The question put to the person: what would run (the tool's preview, from the server's records,
    when it has one), a yes/no field, an optional reason for a refusal (the model receives it), and one
    field per editable argument (`editable_fields`, named `FIELD_PREFIX` + the argument's name); `note`
    comes first (what the person changed, or why their change was refused). Only `approve` is required;
    every other field has a default (a typed client sends its whole object back)."""
    properties: dict[str, Any] = {
        "approve": {
            "type": "boolean",
            "title": "Approve",
            "description": "Run this action now.",
            "default": False,
        },
        "reason": {
            "type": "string",
            "title": "Reason",
            "description": "If you refuse: why (the assistant is told).",
            "maxLength": _MAX_TEXT,
            "default": "",
        },
    }
    for name, field in (fields or {}).items():
        properties[FIELD_PREFIX + name] = {
            **field,
            "description": (
                (str(field["description"]) + " " if field.get("description") else "")
                + "Change it before approving if you want: you will see the new preview first."
            ),
        }
    message = f"Allow this action? {summary}"
    return types.ElicitRequestFormParams(
        message=f"{note}\n\n{message}" if note else message,
        requested_schema={"type": "object", "properties": properties, "required": ["approve"]},
    )


def edits_of(
    answer: types.ElicitResult | None,
    fields: Mapping[str, Mapping[str, Any]],
    current: Mapping[str, Any],
) -> dict[str, Any] | str | None:
    """The arguments the person approved, when they changed any: `current` with the form's argument
    fields applied (a field left out keeps its value). None when nothing changed; a string saying what
    is wrong when the answer names a field the form did not offer (the whole answer is then refused)."""
    content = (answer.content if answer is not None else None) or {}
    offered = {FIELD_PREFIX + name for name in fields}
    unknown = sorted(str(key) for key in content if key not in offered and key not in ("approve", "reason"))
    if unknown:
        shown = ", ".join(name[:60] for name in unknown[:5])
        return f"the answer sets {shown}, which this form did not offer to change"
    edited = dict(current)
    changed = False
    for name in fields:
        key = FIELD_PREFIX + name
        if key in content and content[key] is not None and content[key] != current.get(name):
            edited[name] = content[key]
            changed = True
    return edited if changed else None


Decide = Callable[[str, str, Any, str, "str | None"], Awaitable[ToolResult]]


async def converse(
    executor: ToolExecutor,
    tool: Tool,
    confirmation_id: str,
    context: Any,
    *,
    shown: str,
    current: Mapping[str, Any] | None,
    ask: Callable[[types.ElicitRequestFormParams], Awaitable[types.ElicitResult | None]],
    decide: Decide,
) -> ToolResult:
    """Ask the person in the call (2025 elicitation), edits included: approve as shown, refuse, or change
    arguments, see the new preview and approve that (see the module docstring). `decide(decision, id,
    context, tool name, reason)` settles anything but an approval. `current`: the held call's arguments
    (None when its record could not be read: then nothing is editable)."""
    fields = editable_fields(tool, current) if current is not None else {}
    arguments: dict[str, Any] = dict(current or {})
    edited: dict[str, Any] | None = None
    note: str | None = None
    for _ in range(MAX_ROUNDS):
        form = confirmation_form(shown, filled(fields, arguments), note)
        try:
            answer = await ask(form)
        except Exception:  # the client failed to ask: treat as no answer, fail closed
            answer = None
        decision = decision_of(answer)
        if decision != "approve":
            return await decide(decision, confirmation_id, context, tool.name, reason_of(answer))
        wanted = edits_of(answer, fields, arguments)
        if isinstance(wanted, str):
            return await refuse_edit(executor, confirmation_id, context, tool.name, wanted)
        if wanted is None:
            return await executor.approve(confirmation_id, context, arguments=edited)
        checked = await executor.preview_edit(confirmation_id, context, wanted)
        if checked.status != "ok":
            if checked.error is None or checked.error.code != ErrorCode.INVALID_ARGUMENTS:
                return checked  # expired, used, someone else's: nothing to ask any more
            note = f"Your change was not accepted: {checked.error.message}"
            continue
        if dict(checked.value["arguments"]) == arguments:  # what was shown, written otherwise ("3" for 3)
            return await executor.approve(confirmation_id, context, arguments=edited)
        arguments = dict(checked.value["arguments"])
        edited = arguments if checked.value["changes"] else None  # None: back to the call as held
        shown, note = edited_note(checked.value)
    return await too_many_rounds(executor, confirmation_id, context, tool.name)


def filled(fields: Mapping[str, Mapping[str, Any]], values: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The fields with `values` as their defaults (the edited values in a later round); a field without a
    value of its type is left out (see `editable_fields`)."""
    out = {}
    for name, field in fields.items():
        value = values.get(name)
        if value is not None and _fits(field, value):
            out[name] = {**field, "default": value}
    return out


def edited_note(preview: Mapping[str, Any]) -> tuple[str, str]:
    """What to show for a previewed edit: the new preview, and a note listing the changes (or saying the
    person changed the call back to what was first asked)."""
    changes = [str(line) for line in preview.get("changes") or ()]
    text = str(preview.get("preview") or "")
    if not changes:
        return text, "You changed it back: this is the action as it was first asked."
    return text, f"You changed: {'; '.join(changes)}. This is the action as changed."


async def settle_round(
    executor: ToolExecutor,
    sealer: Sealer,
    tool: Tool,
    context: Any,
    claims: Mapping[str, Any],
    answer: types.ElicitResult | None,
) -> ToolResult | types.InputRequiredResult:
    """An approving answer in a 2026-07-28 round (its state already checked). What the person was last
    shown is the state's edit (`v`) when it has one, else the call as held; the answer is read against it
    (a field left out keeps the value shown). An approval of exactly that runs it; any other arguments
    (the held call's included, after an edit was shown) are previewed and asked again (a new state); an
    answer setting what the form did not offer is refused. Anything but an approval is settled by the
    caller."""
    confirmation_id = str(claims["c"])
    try:
        record = await executor.confirmations.record(confirmation_id)
    except Exception:
        record = None
    held = record.metadata.get("arguments") if record is not None else None
    current = dict(held) if isinstance(held, Mapping) else None
    fields = editable_fields(tool, current) if current is not None else {}
    previewed = claims.get("v")  # the edit last shown; None: the call as held was
    last = dict(previewed) if isinstance(previewed, Mapping) else (current or {})
    wanted = edits_of(answer, fields, last)
    if isinstance(wanted, str):
        return await refuse_edit(executor, confirmation_id, context, tool.name, wanted)
    if wanted is None:  # exactly what was shown last
        return await _approve_shown(executor, confirmation_id, context, previewed)
    round = int(claims.get("n", 0)) + 1
    if round >= MAX_ROUNDS:
        return await too_many_rounds(executor, confirmation_id, context, tool.name)
    checked = await executor.preview_edit(confirmation_id, context, wanted)
    edit: dict[str, Any] | None
    if checked.status == "ok":
        arguments = dict(checked.value["arguments"])
        held_again = not checked.value["changes"]
        if (previewed is None and held_again) or (
            previewed is not None
            and hmac.compare_digest(sealer.arguments_hash(arguments), sealer.arguments_hash(last))
        ):  # what was shown, written otherwise ("7" for 7)
            return await _approve_shown(executor, confirmation_id, context, previewed)
        edit = None if held_again else arguments
        shown, note = edited_note(checked.value)
    elif (
        checked.error is not None and checked.error.code == ErrorCode.INVALID_ARGUMENTS and record is not None
    ):  # asked again about the call as held, with the error
        arguments, shown, edit = current or {}, record.shown, None
        note = f"Your change was not accepted: {checked.error.message}"
    else:
        return checked  # expired, used, someone else's: nothing to ask any more
    state = _next_state(sealer, claims, edit, round)
    if state is None and record is not None:  # an edit too long to carry in a state: not taken
        arguments, shown, edit = current or {}, record.shown, None
        note = "Your change was not accepted: it is too long to be carried in this form."
        state = _next_state(sealer, claims, None, round)
    if state is None:
        return await refuse_edit(executor, confirmation_id, context, tool.name, "the change is too long")
    form = confirmation_form(shown, filled(fields, arguments), note)
    return types.InputRequiredResult(
        input_requests={CONFIRM_KEY: types.ElicitRequest(params=form)}, request_state=state
    )


async def _approve_shown(
    executor: ToolExecutor, confirmation_id: str, context: Any, previewed: Any
) -> ToolResult:
    """Run what the person was last shown: the call as held, or the previewed edit."""
    if isinstance(previewed, Mapping):
        return await executor.approve(confirmation_id, context, arguments=dict(previewed))
    return await executor.approve(confirmation_id, context)


def _next_state(
    sealer: Sealer, claims: Mapping[str, Any], edit: Mapping[str, Any] | None, round: int
) -> str | None:
    """The state of the next round (the edit now shown, the round count), None when too long to open."""
    state = sealer.seal(
        confirmation_id=str(claims["c"]),
        principal=str(claims["p"]),
        tool=str(claims["t"]),
        arguments_hash=str(claims["a"]),
        ttl=max(0.0, float(claims["e"]) - sealer.now()),
        edit=edit,
        round=round,
    )
    return state if len(state) <= MAX_STATE else None


async def refuse_edit(
    executor: ToolExecutor, confirmation_id: str, context: Any, tool_name: str, why: str
) -> ToolResult:
    """An answer that changes what the form did not offer: withdrawn, nothing runs."""
    result = await executor.deny(confirmation_id, context)
    if result.error is not None and result.error.details.get("reason") == "denied":
        result.error.message = (
            f"The answer to the confirmation for {tool_name!r} was refused ({why}); it did not run."
        )
        result.error.details["reason"] = "invalid_edit"
    return result


async def too_many_rounds(
    executor: ToolExecutor, confirmation_id: str, context: Any, tool_name: str
) -> ToolResult:
    result = await executor.deny(confirmation_id, context)
    if result.error is not None and result.error.details.get("reason") == "denied":
        result.error.message = (
            f"The confirmation for {tool_name!r} was asked {MAX_ROUNDS} times without a decision on one "
            "version of the call; it was withdrawn and did not run."
        )
        result.error.details["reason"] = "too_many_edits"
    return result


def reason_of(answer: types.ElicitResult | None) -> str | None:
    """The person's reason for refusing, when the form carried one."""
    if answer is None or answer.action != "accept":
        return None
    reason = (answer.content or {}).get("reason")
    return reason.strip()[:2000] if isinstance(reason, str) and reason.strip() else None


def decision_of(answer: types.ElicitResult | None) -> str:
    """`"approve"`, `"decline"`, `"cancel"` or `"invalid"`: only an accepted form whose `approve` is the
    boolean `true` approves; `false` declines; a missing `approve` or any other value (`"no"`, `"true"`,
    `1`) is `"invalid"`, and nothing runs (the same rule as every other door that takes a decision)."""
    if answer is None or answer.action == "cancel":
        return "cancel"
    if answer.action != "accept":
        return "decline"
    approve = (answer.content or {}).get("approve")
    if approve is True:
        return "approve"
    return "decline" if approve is False else "invalid"


INVALID_STATE = (
    "Invalid requestState: it was not issued by this server for this user, tool and arguments (or was "
    "altered); nothing ran. Call the tool again without requestState to ask for a new confirmation."
)
"""The JSON-RPC error (`INVALID_PARAMS`) for a `requestState` this server did not seal for this call."""


def needs_confirmation(call_id: str, tool_name: str) -> ToolResult:
    """The fail-closed answer to a client that cannot ask its user."""
    return ToolResult.error_result(
        ErrorCode.CONFIRMATION_DENIED,
        f"The tool {tool_name!r} needs confirmation by a person, and this MCP client cannot ask its user "
        "(it does not support form elicitation); the action did not run.",
        recover_action="Tell the user this action must be confirmed in a client that can ask them.",
        details={"reason": "confirmation_unsupported"},
        call_id=call_id,
        tool_name=tool_name,
    )


def expired_state(call_id: str, tool_name: str) -> ToolResult:
    return ToolResult.error_result(
        ErrorCode.CONFIRMATION_EXPIRED,
        "The confirmation for this action has expired; the action did not run.",
        recover_action="Call the tool again to ask the user to confirm this action.",
        details={"reason": "expired"},
        call_id=call_id,
        tool_name=tool_name,
    )
