"""What a conversation must look like before any provider sees it, and how to repair one that does not.

The invariant (`history_problems` checks it; `repair_history` restores it):

- every string is valid Unicode (no lone surrogate: they cannot be encoded as UTF-8, so no provider,
  no JSON response and no PostgreSQL text column takes them) and the user's and the model's text holds
  no NUL;
- the first turn after the system messages is the user's; user text and assistant text are not
  whitespace only (Anthropic refuses such text blocks);
- every tool call has an id of 1-64 characters from `[A-Za-z0-9_-]` (Anthropic's rule, the strictest),
  unique in the whole conversation, and a non-empty name;
- its arguments are None, a mapping or text, at most `MAX_ARGUMENT_CHARS` characters and nested at most
  `MAX_ARGUMENT_DEPTH` levels (deeper JSON breaks decoders and serialisers along the way);
- the calls of an assistant turn are answered, right after it and before any other turn, by exactly one
  tool result each; no result answers a call that is not open. Only the last turn may stay open, and only
  when `open_tail=True` (a run paused for a person's approval).

The agent keeps this by construction at the model boundary (`toolrun.agent`); the service checks
histories it loads and repairs old ones (written before the boundary existed).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from toolrun._unicode import clean_json, clean_text
from toolrun.models._messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
)
from toolrun.tools import ToolCall

__all__ = [
    "LOST_RESULT",
    "MAX_ARGUMENT_CHARS",
    "MAX_ARGUMENT_DEPTH",
    "MAX_CALL_ID_CHARS",
    "arguments_problem",
    "clean_text",
    "history_problems",
    "json_depth_over",
    "new_call_id",
    "removed_arguments",
    "repair_history",
    "safe_call_id",
    "text_depth_over",
]

MAX_ARGUMENT_CHARS = 256_000
"""Most characters of one call's arguments (as JSON text) kept in a conversation."""
MAX_ARGUMENT_DEPTH = 64
"""Most levels of nesting of one call's arguments."""
MAX_CALL_ID_CHARS = 64
"""Longest call id kept as the model gave it (OpenAI's own limit is 40, Anthropic's ids are about 30)."""

LOST_RESULT = (
    "Error RESULT_LOST: this call's result was not recorded; it may or may not have run. "
    "Check before repeating it."
)
"""The result `repair_history` gives a call that had none."""

_CALL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _bad_text(text: str, *, nul: bool = True) -> str | None:
    """Why `text` cannot go to a provider, or None."""
    if nul and "\x00" in text:
        return "holds a NUL character"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return "is not valid Unicode (a lone surrogate)"
    return None


def new_call_id() -> str:
    """A fresh call id, valid for every provider."""
    return f"call_{uuid.uuid4().hex[:24]}"


def safe_call_id(value: object) -> bool:
    """Whether `value` is a call id every provider takes (1-64 of `[A-Za-z0-9_-]`)."""
    if type(value) is str:  # the common case, without the regex: ASCII letters and digits are `isalnum`
        if not 0 < len(value) <= MAX_CALL_ID_CHARS or not value.isascii():
            return False
        rest = value.replace("_", "").replace("-", "")
        return not rest or rest.isalnum()
    return isinstance(value, str) and _CALL_ID.fullmatch(value) is not None


def json_depth_over(value: Any, limit: int) -> bool:
    """Whether decoded JSON `value` nests deeper than `limit` levels (an object or array is one level).

    Iterative, and stops at the first path over the limit.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, Mapping | list | tuple))
    return False


def text_depth_over(text: str, limit: int) -> bool:
    """Whether JSON text nests deeper than `limit` (an upper bound first: the count of opening brackets)."""
    if text.count("{") + text.count("[") <= limit:
        return False
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
            if depth > limit:
                return True
        elif ch in "}]":
            depth -= 1
    return False


def removed_arguments(reason: str) -> dict[str, str]:
    """The short object kept in a conversation instead of arguments that were refused."""
    return {"_removed": reason}


def arguments_problem(
    arguments: Any, *, max_chars: int = MAX_ARGUMENT_CHARS, max_depth: int = MAX_ARGUMENT_DEPTH
) -> str | None:
    """Why a call's arguments may not stay in a conversation, or None (see the module doc)."""
    if arguments is None:
        return None
    if isinstance(arguments, str):
        if len(arguments) > max_chars:
            return f"are {len(arguments)} characters long (the limit is {max_chars})"
        if "\x00" in arguments:
            return "hold a NUL character"
        if not arguments.isascii() and _bad_text(arguments) is not None:
            return "are not valid Unicode (a lone surrogate)"
        escapes = "\\u" in arguments and (
            _SURROGATE_ESCAPE.search(arguments) is not None or "\\u0000" in arguments
        )
        if escapes and _decoded_strings_bad(arguments):
            return "hold a lone surrogate or a NUL character (as JSON escapes)"
        if text_depth_over(arguments, max_depth):
            return f"nest deeper than {max_depth} levels"
        return None
    if isinstance(arguments, Mapping):
        if json_depth_over(arguments, max_depth):
            return f"nest deeper than {max_depth} levels"
        try:
            text = json.dumps(arguments, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            return "are not JSON data"
        return arguments_problem(text, max_chars=max_chars, max_depth=max_depth)
    return f"are a {type(arguments).__name__}, not JSON text or an object"


def _decoded_strings_bad(text: str) -> bool:
    """Whether JSON `text` decodes to a string (key or value) that is not valid Unicode or holds a NUL."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return False  # not JSON: the executor says so; as text it is valid Unicode
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _bad_text(item) is not None:
                return True
        elif isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def _call_problems(call: ToolCall, where: str) -> Iterator[str]:
    if not safe_call_id(call.id):
        yield f"{where}: id {str(call.id)[:80]!r} is not 1-64 characters of [A-Za-z0-9_-]"
    if not isinstance(call.name, str) or not call.name.strip():
        yield f"{where}: the tool name is empty"
    elif (bad := _bad_text(call.name)) is not None:
        yield f"{where}: the tool name {bad}"
    problem = arguments_problem(call.arguments)
    if problem is not None:
        yield f"{where}: the arguments {problem}"


def _plain(text: Any) -> bool:
    """Whether `text` is ASCII text without NUL (then `_bad_text(text)` is None; else ask it)."""
    return type(text) is str and text.isascii() and "\x00" not in text


def history_problems(messages: Sequence[Message], *, open_tail: bool = False) -> list[str]:
    """What makes `messages` unfit to send to some provider (empty: fit for all). See the module doc.

    Args:
        messages: The conversation, oldest first.
        open_tail: Allow the last assistant turn's calls to have no results yet (a paused run).
    """
    # Runs on every turn over the whole stored conversation, so the fit case is kept cheap: positions are
    # formatted only for a problem, and what is still open is counted rather than listed per message.
    problems: list[str] = []
    seen_ids: set[str] = set()
    open_calls: dict[str, bool] = {}  # the last assistant turn's call ids → answered yet
    unanswered = 0  # how many of them are not answered yet
    started = False
    for i, message in enumerate(messages):
        content: Any = message.content  # typed str; a hand-made message may hold anything
        if not isinstance(content, str):
            problems.append(f"messages[{i}]: content is not text")
            continue
        if isinstance(message, ToolResultMessage):
            call_id = message.call_id
            if not (content.isascii() and _plain(call_id) and _plain(message.tool_name)):
                bad = _bad_text(content, nul=False) or _bad_text(call_id) or _bad_text(message.tool_name)
                if bad is not None:
                    problems.append(f"messages[{i}]: the tool result {bad}")
            answered = open_calls.get(call_id)
            if answered is None:
                problems.append(f"messages[{i}]: a result for call {call_id[:80]!r}, which is not open")
            elif answered:
                problems.append(f"messages[{i}]: a second result for call {call_id[:80]!r}")
            else:
                open_calls[call_id] = True
                unanswered -= 1
            continue
        if unanswered:
            waiting = [cid for cid, done in open_calls.items() if not done]
            problems.append(f"messages[{i}]: follows calls without results: {waiting[:5]}")
        if open_calls:
            open_calls = {}
            unanswered = 0
        if isinstance(message, SystemMessage):
            if started:
                problems.append(f"messages[{i}]: a system message after the conversation started")
            if not content.isascii() and (bad := _bad_text(content, nul=False)) is not None:
                problems.append(f"messages[{i}]: the system message {bad}")
            continue
        is_user = isinstance(message, UserMessage)
        if not started and not is_user:
            problems.append(f"messages[{i}]: the conversation must start with the user's message")
        started = True
        if not _plain(content) and (bad := _bad_text(content)) is not None:
            problems.append(f"messages[{i}]: the {message.role}'s text {bad}")
        if is_user:
            if not content.strip():
                problems.append(f"messages[{i}]: the user's text is empty")
            continue
        assert isinstance(message, AssistantMessage)
        if content and not content.strip():
            problems.append(f"messages[{i}]: the assistant's text is whitespace only")
        for j, call in enumerate(message.tool_calls):
            call_id = call.id
            name: Any = call.name
            if (
                not safe_call_id(call_id)
                or not isinstance(name, str)
                or not _plain(name)
                or not name.strip()
                or arguments_problem(call.arguments) is not None
            ):
                problems.extend(_call_problems(call, f"messages[{i}].tool_calls[{j}]"))
            if call_id in seen_ids:
                where = f"messages[{i}].tool_calls[{j}]"
                problems.append(f"{where}: id {str(call_id)[:80]!r} is used twice in the conversation")
            seen_ids.add(call_id)
            if call_id not in open_calls:
                unanswered += 1
            open_calls[call_id] = False
    if unanswered and not open_tail:
        waiting = [cid for cid, done in open_calls.items() if not done]
        problems.append(f"the last turn has calls without results: {waiting[:5]}")
    return problems


def _repaired_arguments(arguments: Any) -> Any:
    problem = arguments_problem(arguments)
    if problem is None:
        return arguments
    if isinstance(arguments, str):
        if len(arguments) <= MAX_ARGUMENT_CHARS and not text_depth_over(arguments, MAX_ARGUMENT_DEPTH):
            try:
                decoded = json.loads(arguments)
            except (ValueError, RecursionError):
                return clean_text(arguments)
            return json.dumps(clean_json(decoded), ensure_ascii=False)
    elif isinstance(arguments, Mapping) and not json_depth_over(arguments, MAX_ARGUMENT_DEPTH):
        cleaned = clean_json(arguments)
        if arguments_problem(cleaned) is None:
            return cleaned
    return removed_arguments(f"the arguments {problem}")


def _unicode(text: str) -> str:
    """`text` with valid Unicode (NUL kept: instructions and tool output may hold one)."""
    return text if _bad_text(text, nul=False) is None else clean_text(text)


def repair_history(messages: Sequence[Message]) -> list[Message]:
    """`messages` made to satisfy `history_problems` (with `open_tail=True`), changing as little as it can.

    Text is cleaned (`clean_text`); bad, duplicate or empty call ids get fresh ids (the results that
    answer them, in order, follow); arguments over the limits become a short `_removed` note; a call
    without a result gets `LOST_RESULT`; results that answer no open call are dropped; whitespace-only
    assistant text becomes empty; an empty user turn is dropped.
    """
    out: list[Message] = []
    seen_ids: set[str] = set()
    # the open turn: model's id → our ids not yet answered (in order), and which are answered
    open_turn: dict[str, list[str]] = {}
    open_calls: dict[str, ToolCall] = {}
    answered: set[str] = set()

    def close_turn() -> None:
        for cid, call in open_calls.items():
            if cid not in answered:
                out.append(
                    ToolResultMessage(call_id=cid, tool_name=call.name, content=LOST_RESULT, is_error=True)
                )
        open_turn.clear()
        open_calls.clear()
        answered.clear()

    for index, message in enumerate(messages):
        if isinstance(message, ToolResultMessage):
            ids = open_turn.get(message.call_id)
            if not ids:
                continue  # answers nothing open: a provider would refuse it
            cid = ids.pop(0)
            answered.add(cid)
            out.append(
                ToolResultMessage(
                    call_id=cid,
                    tool_name=clean_text(message.tool_name),
                    content=_unicode(message.content),
                    is_error=message.is_error,
                )
            )
            continue
        is_last = index == len(messages) - 1
        close_turn()
        if isinstance(message, SystemMessage):
            if any(not isinstance(m, SystemMessage) for m in out):
                continue
            out.append(SystemMessage(content=_unicode(message.content)))
        elif isinstance(message, UserMessage):
            text = clean_text(message.content)
            if text.strip():
                out.append(UserMessage(content=text))
        else:
            if not any(isinstance(m, UserMessage) for m in out):
                continue  # a provider wants the user first
            text = clean_text(message.content)
            calls: list[ToolCall] = []
            for call in message.tool_calls:
                cid = call.id if safe_call_id(call.id) and call.id not in seen_ids else new_call_id()
                seen_ids.add(cid)
                name = (
                    clean_text(call.name) if isinstance(call.name, str) and call.name.strip() else "unknown"
                )
                calls.append(ToolCall(id=cid, name=name, arguments=_repaired_arguments(call.arguments)))
                open_turn.setdefault(str(call.id), []).append(cid)
                open_calls[cid] = calls[-1]
            out.append(AssistantMessage(content=text if text.strip() else "", tool_calls=calls))
            if is_last:  # a paused turn stays open
                open_calls.clear()
    close_turn()
    return out
