"""The fast paths of `history_problems`, `safe_call_id`, `arguments_problem` and `message_from_dict` (issue
21: they run over the whole stored conversation on every service turn) against the code they replaced,
kept here verbatim: same problems word for word, same messages, same exceptions, for hostile histories."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolrun import ToolCall
from toolrun.models import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
    history_problems,
)
from toolrun.models._history import (
    MAX_ARGUMENT_CHARS,
    MAX_ARGUMENT_DEPTH,
    _bad_text,
    _decoded_strings_bad,
    arguments_problem,
    json_depth_over,
    safe_call_id,
    text_depth_over,
)
from toolrun.models._messages import message_from_dict

# ------------------------------------------------------------------------------------------------------
# The code as it was before issue 21 (verbatim but for the names).

_CALL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def old_safe_call_id(value: object) -> bool:
    return isinstance(value, str) and _CALL_ID.fullmatch(value) is not None


def old_arguments_problem(
    arguments: Any, *, max_chars: int = MAX_ARGUMENT_CHARS, max_depth: int = MAX_ARGUMENT_DEPTH
) -> str | None:
    if arguments is None:
        return None
    if isinstance(arguments, str):
        if len(arguments) > max_chars:
            return f"are {len(arguments)} characters long (the limit is {max_chars})"
        if "\x00" in arguments:
            return "hold a NUL character"
        if _bad_text(arguments) is not None:
            return "are not valid Unicode (a lone surrogate)"
        escapes = _SURROGATE_ESCAPE.search(arguments) or "\\u0000" in arguments
        if escapes and _decoded_strings_bad(arguments):
            return "hold a lone surrogate or a NUL character (as JSON escapes)"
        if text_depth_over(arguments, max_depth):
            return f"nest deeper than {max_depth} levels"
        return None
    if isinstance(arguments, Mapping):
        if json_depth_over(arguments, max_depth):
            return f"nest deeper than {max_depth} levels"
        import json

        try:
            text = json.dumps(arguments, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            return "are not JSON data"
        return old_arguments_problem(text, max_chars=max_chars, max_depth=max_depth)
    return f"are a {type(arguments).__name__}, not JSON text or an object"


def _old_call_problems(call: ToolCall, where: str) -> Iterator[str]:
    if not old_safe_call_id(call.id):
        yield f"{where}: id {str(call.id)[:80]!r} is not 1-64 characters of [A-Za-z0-9_-]"
    if not isinstance(call.name, str) or not call.name.strip():
        yield f"{where}: the tool name is empty"
    elif (bad := _bad_text(call.name)) is not None:
        yield f"{where}: the tool name {bad}"
    problem = old_arguments_problem(call.arguments)
    if problem is not None:
        yield f"{where}: the arguments {problem}"


def old_history_problems(messages: Sequence[Message], *, open_tail: bool = False) -> list[str]:
    problems: list[str] = []
    seen_ids: set[str] = set()
    open_calls: dict[str, bool] = {}
    started = False
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        content: Any = message.content
        if not isinstance(content, str):
            problems.append(f"{where}: content is not text")
            continue
        if isinstance(message, ToolResultMessage):
            bad = _bad_text(content, nul=False) or _bad_text(message.call_id) or _bad_text(message.tool_name)
            if bad is not None:
                problems.append(f"{where}: the tool result {bad}")
            if message.call_id not in open_calls:
                problems.append(f"{where}: a result for call {message.call_id[:80]!r}, which is not open")
            elif open_calls[message.call_id]:
                problems.append(f"{where}: a second result for call {message.call_id[:80]!r}")
            else:
                open_calls[message.call_id] = True
            continue
        unanswered = [cid for cid, done in open_calls.items() if not done]
        if unanswered:
            problems.append(f"{where}: follows calls without results: {unanswered[:5]}")
        open_calls = {}
        if isinstance(message, SystemMessage):
            if started:
                problems.append(f"{where}: a system message after the conversation started")
            if (bad := _bad_text(content, nul=False)) is not None:
                problems.append(f"{where}: the system message {bad}")
            continue
        if not started and not isinstance(message, UserMessage):
            problems.append(f"{where}: the conversation must start with the user's message")
        started = True
        if (bad := _bad_text(content)) is not None:
            problems.append(f"{where}: the {message.role}'s text {bad}")
        if isinstance(message, UserMessage):
            if not content.strip():
                problems.append(f"{where}: the user's text is empty")
            continue
        assert isinstance(message, AssistantMessage)
        if content and not content.strip():
            problems.append(f"{where}: the assistant's text is whitespace only")
        for j, call in enumerate(message.tool_calls):
            call_where = f"{where}.tool_calls[{j}]"
            problems.extend(_old_call_problems(call, call_where))
            if call.id in seen_ids:
                problems.append(f"{call_where}: id {str(call.id)[:80]!r} is used twice in the conversation")
            seen_ids.add(call.id)
            open_calls[call.id] = False
    unanswered = [cid for cid, done in open_calls.items() if not done]
    if unanswered and not open_tail:
        problems.append(f"the last turn has calls without results: {unanswered[:5]}")
    return problems


def old_message_from_dict(data: Mapping[str, Any]) -> Message:
    role = data.get("role")
    if role == "system":
        return SystemMessage(content=data["content"])
    if role == "user":
        return UserMessage(content=data["content"])
    if role == "assistant":
        extra = data.get("provider_data")
        return AssistantMessage(
            content=data.get("content") or "",
            tool_calls=[ToolCall.from_dict(c) for c in data.get("tool_calls") or ()],
            provider_data=extra if isinstance(extra, Mapping) and extra else None,
        )
    if role == "tool":
        return ToolResultMessage(
            call_id=data["call_id"],
            tool_name=data.get("tool_name", ""),
            content=data["content"],
            is_error=bool(data.get("is_error", False)),
        )
    raise ValueError(f"Not a message: unknown role {role!r} (expected system, user, assistant or tool).")


# ------------------------------------------------------------------------------------------------------
# Hostile data: a few call ids shared between calls and results (so turns close, stay open, repeat),
# text with NUL, lone surrogates, whitespace, non-ASCII, JSON escapes; values of the wrong type.


def _outcome(fn: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return ("ok", fn(*args, **kwargs))
    except Exception as exc:  # the same exception type for the same garbage
        return ("raised", type(exc))


_TEXT = st.one_of(
    st.sampled_from(
        ["", " ", "\n\t", "hello", "héllo", "\x00", "a\x00b", "\ud800", "x\udfffy", "日本", "\ud83d\ude00"]
    ),
    st.text(alphabet=st.sampled_from('ab _-\x00\ud800\udc00é\n{}[]"\\u0d8'), max_size=12),
)
_IDS = st.one_of(
    st.sampled_from(
        ["c1", "c2", "call_abc", "a-b_C9", "_", "-", "x" * 64, "x" * 65, "c 1", "c\n", "é", "c\x00"]
    ),
    st.text(alphabet=st.sampled_from("aZ09_-é\n \ud800"), max_size=6),
)
_ARGS = st.one_of(
    st.none(),
    st.sampled_from(
        [
            "{}",
            '{"a": 1}',
            '{"a": "\\ud800"}',
            '{"a": "\\u0000"}',
            '{"a": "\\u00e9"}',
            "not json",
            "[" * 70 + "]" * 70,
            '{"a": "\x00"}',
            "{\ud800}",
        ]
    ),
    _TEXT,
    st.dictionaries(
        st.sampled_from(["a", "b", "\ud800"]), st.sampled_from([1, "x", "\x00", None]), max_size=2
    ),
    st.integers(),
)
_CALLS = st.lists(
    st.builds(ToolCall, id=_IDS, name=st.one_of(_TEXT, st.just("get")), arguments=_ARGS), max_size=3
)
_MESSAGE = st.one_of(
    st.builds(SystemMessage, content=_TEXT),
    st.builds(UserMessage, content=st.one_of(_TEXT, st.just("hi"))),
    st.builds(AssistantMessage, content=_TEXT, tool_calls=_CALLS),
    st.builds(
        ToolResultMessage,
        call_id=_IDS,
        tool_name=st.one_of(_TEXT, st.just("get")),
        content=_TEXT,
        is_error=st.booleans(),
    ),
)
_ODD = st.one_of(st.integers(), st.none(), st.lists(st.integers(), max_size=1))


@settings(max_examples=600, deadline=None)
@given(st.lists(_MESSAGE, max_size=12), st.booleans())
def test_history_problems_says_what_it_said(messages: list[Message], open_tail: bool) -> None:
    assert history_problems(messages, open_tail=open_tail) == old_history_problems(
        messages, open_tail=open_tail
    )


@settings(max_examples=200, deadline=None)
@given(
    st.lists(_MESSAGE, max_size=6),
    st.integers(0, 5),
    st.sampled_from(["id", "name", "content", "call_id"]),
    _ODD,
)
def test_history_problems_fails_as_it_failed_on_wrong_types(
    messages: list[Message], index: int, attribute: str, value: Any
) -> None:
    """A hand-made message may hold anything: the same problems, or the same exception, as before."""
    if messages:
        message = messages[index % len(messages)]
        if attribute in ("id", "name") and isinstance(message, AssistantMessage) and message.tool_calls:
            setattr(message.tool_calls[0], attribute, value)
        elif hasattr(message, attribute):
            setattr(message, attribute, value)
    for open_tail in (False, True):
        assert _outcome(history_problems, messages, open_tail=open_tail) == _outcome(
            old_history_problems, messages, open_tail=open_tail
        )


@settings(max_examples=500, deadline=None)
@given(st.one_of(_IDS, st.text(max_size=70), _ODD))
def test_safe_call_id_takes_what_it_took(value: Any) -> None:
    assert safe_call_id(value) == old_safe_call_id(value)


def test_safe_call_id_edges() -> None:
    class Id(str):
        pass

    for value in [
        "_",
        "-",
        "__",
        "a",
        "x" * 64,
        "x" * 65,
        "",
        "ａ",
        "²",
        "a\n",
        "a b",
        Id("c1"),
        Id("c 1"),
        b"c1",
    ]:
        assert safe_call_id(value) == old_safe_call_id(value), value


@settings(max_examples=500, deadline=None)
@given(_ARGS)
def test_arguments_problem_says_what_it_said(arguments: Any) -> None:
    assert arguments_problem(arguments) == old_arguments_problem(arguments)
    assert arguments_problem(arguments, max_chars=5, max_depth=1) == old_arguments_problem(
        arguments, max_chars=5, max_depth=1
    )


_DICTS = st.fixed_dictionaries(
    {"role": st.one_of(st.sampled_from(["system", "user", "assistant", "tool", "bot", ""]), _ODD)},
    optional={
        "content": st.one_of(_TEXT, st.none()),
        "tool_calls": st.one_of(
            st.none(),
            st.just([]),
            st.lists(
                st.fixed_dictionaries({"id": _IDS, "name": _TEXT}, optional={"arguments": _ARGS}), max_size=2
            ),
        ),
        "provider_data": st.one_of(
            st.none(), st.just({}), st.just({"anthropic": {"x": 1}}), st.just([1]), _TEXT
        ),
        "call_id": _IDS,
        "tool_name": _TEXT,
        "is_error": st.one_of(st.booleans(), st.none(), st.integers(0, 1)),
        "interrupted": st.booleans(),
    },
)


@settings(max_examples=600, deadline=None)
@given(_DICTS)
def test_message_from_dict_builds_what_it_built(data: dict[str, Any]) -> None:
    assert _outcome(message_from_dict, data) == _outcome(old_message_from_dict, data)
