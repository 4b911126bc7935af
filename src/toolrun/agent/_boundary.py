"""The model boundary: what a model answered, made safe to run, to store and to send to any provider.

A model is an untrusted client: it can emit lone surrogates, NUL, ids that are empty or repeated, tool
names no provider takes, arguments nested a thousand levels or ten megabytes long, hundreds of calls.
The agent passes every response through here before anything else sees it (`Agent._ask` for text,
`check_calls` for calls), so the conversation always satisfies `toolrun.models.history_problems`:

- lone surrogates and NUL in text or arguments: replaced by U+FFFD (a surrogate pair split across two
  streamed pieces is joined);
- whitespace-only text: kept out of the conversation (Anthropic refuses such blocks); text over
  `max_text_chars`: cut, with a note saying how much;
- an empty, duplicate, over-long or odd call id: a fresh `call_…` id (`CheckedCalls.renamed` maps back);
- an unknown tool name no provider takes: not run (`NOT_FOUND`); the conversation keeps a safe name;
- arguments over `max_argument_chars` or `max_argument_depth`, or not JSON data: not run
  (`INVALID_ARGUMENTS`); the conversation keeps a short `{"_removed": "<why>"}` instead;
- more than `max_calls` calls in one response: the extra ones are not run (`TOO_MANY_CALLS`).

Refused calls get their result here, without reaching the executor; the model reads it like any other
result and can correct itself. Each still leaves one audit record through the executor's sinks and logger
(`audit_refused`), content-free like the executor's own refusals: the registered tool name or none (never
the name the model made up), the fresh call id, the principal, outcome `error` and the code
(`NOT_FOUND`, `INVALID_ARGUMENTS`, `TOO_MANY_CALLS`); no arguments and no argument hash.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from toolrun.models import AssistantMessage, Message, ModelResponse
from toolrun.models._history import (
    MAX_ARGUMENT_CHARS,
    MAX_ARGUMENT_DEPTH,
    arguments_problem,
    clean_text,
    json_depth_over,
    new_call_id,
    removed_arguments,
    safe_call_id,
    text_depth_over,
)
from toolrun.results import ErrorCode, ToolResult
from toolrun.runtime._errors import fail, not_found
from toolrun.tools import ToolCall, ToolContext

if TYPE_CHECKING:
    from toolrun.runtime import ToolExecutor

__all__ = [
    "CheckedCalls",
    "OutputLimits",
    "TextCleaner",
    "audit_refused",
    "check_calls",
    "clean_response",
    "refused_unrun",
    "used_call_ids",
]

# The strictest provider rule (Gemini's; OpenAI and Anthropic take a superset): names outside it are kept
# only when they are registered (model clients send such tools under a provider-safe alias).
_SAFE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,62}")
_UNSAFE_RUN = re.compile(r"[^A-Za-z0-9_-]+")
TOO_MANY_CALLS = "TOO_MANY_CALLS"


@dataclass(kw_only=True, frozen=True, slots=True)
class OutputLimits:
    """How much of a model's response the agent takes (`Agent(output_limits=...)`)."""

    max_text_chars: int = 512_000
    """Most characters of text per response; the rest is cut (with a note)."""
    max_argument_chars: int = MAX_ARGUMENT_CHARS
    """Most characters of one call's arguments (as JSON text); larger calls are refused."""
    max_argument_depth: int = MAX_ARGUMENT_DEPTH
    """Most levels of nesting in one call's arguments; deeper calls are refused."""
    max_calls: int = 128
    """Most tool calls per response; the extra ones are refused."""

    def __post_init__(self) -> None:
        if min(self.max_text_chars, self.max_argument_chars, self.max_argument_depth, self.max_calls) < 1:
            raise ValueError("OutputLimits values must be at least 1.")
        if self.max_argument_chars > MAX_ARGUMENT_CHARS or self.max_argument_depth > MAX_ARGUMENT_DEPTH:
            raise ValueError(
                f"max_argument_chars and max_argument_depth may be lowered, not raised above "
                f"{MAX_ARGUMENT_CHARS} and {MAX_ARGUMENT_DEPTH} (what a stored conversation may hold)."
            )


class TextCleaner:
    """Cleans streamed text pieces; a high surrogate at a piece's end waits for the next piece."""

    def __init__(self) -> None:
        self._carry = ""

    def feed(self, piece: str) -> str:
        if self._carry:
            piece, self._carry = self._carry + piece, ""
        if piece and "\ud800" <= piece[-1] <= "\udbff":
            piece, self._carry = piece[:-1], piece[-1]
        return clean_text(piece)

    def flush(self) -> str:
        carry, self._carry = self._carry, ""
        return clean_text(carry)


def clean_response(response: ModelResponse, limits: OutputLimits) -> ModelResponse:
    """`response` with clean text (calls are checked by `check_calls`)."""
    text: Any = response.text  # typed str; a hand-made response may hold anything
    if not isinstance(text, str):
        text = ""
    cleaned = clean_text(text)
    if len(cleaned) > limits.max_text_chars:
        cut = len(cleaned) - limits.max_text_chars
        cleaned = cleaned[: limits.max_text_chars] + f"\n[… {cut} more characters cut by toolrun]"
    if not cleaned.strip():
        cleaned = ""
    if cleaned is response.text:
        return response
    return replace(response, text=cleaned)


def used_call_ids(messages: Iterable[Message]) -> set[str]:
    """The call ids a conversation already holds."""
    return {c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls}


@dataclass(kw_only=True, slots=True)
class CheckedCalls:
    """A response's calls after the boundary."""

    calls: list[ToolCall] = field(default_factory=list)
    """What the conversation keeps, in the model's order (ids unique, names safe, arguments bounded)."""
    refused: dict[str, ToolResult] = field(default_factory=dict)
    """Results of calls that must not run, by call id (the executor never sees them)."""
    renamed: dict[str, str] = field(default_factory=dict)
    """Fresh call id → the id the model gave (for logs; results pair by the fresh id)."""


def _clean_json(value: Any) -> Any:
    """Decoded JSON with every string (keys too) clean; raises TypeError/ValueError on non-JSON data."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, Mapping):
        return {clean_text(k) if isinstance(k, str) else _key(k): _clean_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean_json(v) for v in value]
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("a non-finite number")
        return value
    raise TypeError(f"a {type(value).__name__}")


def _key(key: Any) -> str:
    if isinstance(key, bool | int | float) or key is None:
        return json.dumps(key)
    raise TypeError(f"a {type(key).__name__} key")


def _arguments(raw: Any, limits: OutputLimits) -> tuple[Any, str | None]:
    """(arguments to keep, why the call is refused or None)."""
    if raw is None:
        return None, None
    max_chars, max_depth = limits.max_argument_chars, limits.max_argument_depth
    if isinstance(raw, str):
        if len(raw) > max_chars:
            return None, f"are {len(raw)} characters long; the limit is {max_chars}"
        if text_depth_over(raw, max_depth):
            return None, f"nest deeper than {max_depth} levels"
        if arguments_problem(raw, max_chars=max_chars, max_depth=max_depth) is None:
            return raw, None
        # invalid Unicode or NUL: clean the decoded strings, or the text itself when it is not JSON
        try:
            cleaned = json.dumps(_clean_json(json.loads(raw)), ensure_ascii=False)
        except (TypeError, ValueError, RecursionError):
            cleaned = clean_text(raw)
        problem = arguments_problem(cleaned, max_chars=max_chars, max_depth=max_depth)
        return (None, problem) if problem is not None else (cleaned, None)
    if isinstance(raw, Mapping):
        if json_depth_over(raw, max_depth):
            return None, f"nest deeper than {max_depth} levels"
        try:
            data = _clean_json(raw)
            size = len(json.dumps(data, ensure_ascii=False))
        except (TypeError, ValueError, RecursionError) as exc:
            return None, f"are not JSON data ({exc})"
        if size > max_chars:
            return None, f"are {size} characters long as JSON; the limit is {max_chars}"
        return data, None
    return None, f"must be a JSON object, not a {type(raw).__name__}"


def check_calls(
    calls: Sequence[ToolCall],
    *,
    used_ids: set[str],
    known: Callable[[str], bool],
    suggest: Callable[[str], list[str]],
    limits: OutputLimits,
) -> CheckedCalls:
    """Make a response's calls safe to run and keep (see the module doc). Adds the ids to `used_ids`."""
    out = CheckedCalls()
    for index, call in enumerate(calls):
        model_id = call.id
        call_id = model_id
        if not safe_call_id(call_id) or call_id in used_ids:
            call_id = new_call_id()
            out.renamed[call_id] = clean_text(str(model_id))[:200]
        used_ids.add(call_id)
        name = call.name if isinstance(call.name, str) else ""
        refusal: ToolResult | None = None
        if not (_SAFE_NAME.fullmatch(name) or known(name)):
            shown = clean_text(name)
            name = _UNSAFE_RUN.sub("_", shown).strip("_")
            if not name[:1].isalpha() or known(name):  # never another tool's name: it did not call that
                name = f"unknown_{name}".rstrip("_")
            name = name[:63]
            refusal = not_found(call_id, shown, suggest(shown))
            refusal.tool_name = name
        arguments, problem = _arguments(call.arguments, limits)
        if problem is not None:
            arguments = removed_arguments(f"the arguments {problem}"[:300])
            if refusal is None:
                refusal = fail(
                    call_id,
                    name,
                    ErrorCode.INVALID_ARGUMENTS,
                    f"The arguments of this call {problem}; it did not run.",
                    recover_action="Call the tool again with smaller, flatter arguments.",
                    details={"problems": [{"path": "", "message": f"the arguments {problem}"}]},
                )
        if refusal is None and index >= limits.max_calls:
            refusal = fail(
                call_id,
                name,
                TOO_MANY_CALLS,
                f"Only {limits.max_calls} tool calls are run per response; this one did not run.",
                retryable=True,
                recover_action="Make fewer calls per response; repeat the ones that did not run.",
            )
        checked = ToolCall(id=call_id, name=name, arguments=arguments)
        out.calls.append(checked)
        if refusal is not None:
            out.refused[call_id] = refusal
    return out


def audit_refused(executor: ToolExecutor, checked: CheckedCalls, ctx: ToolContext[Any]) -> None:
    """One audit record per call `check_calls` refused, in the model's order, as the executor writes for the
    calls it refuses itself (action `execute`, outcome `error`, the code, no duration, no attempts).

    The record names a tool only when the call's name is registered with `executor` (an unknown name is
    what the model wrote, so it stays out of the trail, as in the executor's `NOT_FOUND` records), and holds
    no argument hash: the arguments were refused before anything read them, and hashing ten megabytes of
    them would cost more than the refusal itself.
    """
    refused = checked.refused
    if refused:
        executor.audit_refusals((refused[c.id] for c in checked.calls if c.id in refused), ctx)


def refused_unrun(result: ToolResult) -> bool:
    """A call the model boundary held back for the per-response limit (`TOO_MANY_CALLS`): the tool never
    saw it, so it is no failure of the tool; the model reads the refusal and sends the call again
    (docs/security.md)."""
    error = result.error
    return error is not None and error.code == TOO_MANY_CALLS
