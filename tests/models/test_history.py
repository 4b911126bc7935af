"""`toolrun.models._history`: the rule every stored and sent conversation keeps, word for word, and the
repair of one that breaks it (exact outputs: a repaired history is what every later turn sends)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
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
    LOST_RESULT,
    MAX_ARGUMENT_CHARS,
    arguments_problem,
    json_depth_over,
    new_call_id,
    repair_history,
    text_depth_over,
)


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


# ------------------------------------------------------------------------------------------------------
# depth


def depth_of(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    return 0


_strings = st.text(alphabet='[]{}"\\ab,:', max_size=6)
_json = st.recursive(
    st.none() | st.integers() | _strings,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_strings, inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_json, st.integers(min_value=0, max_value=8))
def test_both_depth_checks_agree_with_the_real_depth(value: Any, limit: int) -> None:
    over = depth_of(value) > limit
    assert json_depth_over(value, limit) is over
    assert text_depth_over(json.dumps(value), limit) is over
    assert text_depth_over(json.dumps(value, separators=(",", ":")), limit) is over


@pytest.mark.parametrize(
    ("text", "limit", "over"),
    [
        ("[][][]", 1, False),
        ('{"a":{"b":{}}}', 2, True),
        ('{"a":{"b":{}}}', 3, False),
        ('["[[[[", "]"]', 1, False),
        ('["\\"[[[["]', 1, False),  # an escaped quote does not end the string
        ('["\\\\", [[]]]', 2, True),  # an escaped backslash does not escape the closing quote
        ("[][][]XXXX", 2, False),  # not JSON: only brackets count
        ("[X[X[X", 2, True),
        ("[[]][[]]", 2, False),
    ],
)
def test_text_depth_counts_brackets_outside_strings(text: str, limit: int, over: bool) -> None:
    assert text_depth_over(text, limit) is over


def test_json_depth_counts_objects_and_arrays() -> None:
    assert json_depth_over({}, 0) and not json_depth_over({}, 1)
    assert json_depth_over({"a": {}}, 1) and not json_depth_over({"a": {}}, 2)
    assert json_depth_over([1, (2,)], 1) and not json_depth_over(5, 0)


# ------------------------------------------------------------------------------------------------------
# arguments


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        (None, None),
        ('{"a": 1}', None),
        ('{"a": "\\ud83d\\ude00 é"}', None),  # a pair of escapes is one character
        ("not json \\ud83d", None),  # not JSON: the executor says so
        ("x" * 11, "are 11 characters long (the limit is 10)"),
        ('{"a":"\x00"}', "hold a NUL character"),
        ('{"a":"\ud83d"}', "are not valid Unicode (a lone surrogate)"),
        ('{"a":"\\ud83d"}', "hold a lone surrogate or a NUL character (as JSON escapes)"),
        ('{"\\udc00":1}', "hold a lone surrogate or a NUL character (as JSON escapes)"),
        ('{"a":["\\u0000"]}', "hold a lone surrogate or a NUL character (as JSON escapes)"),
        ("[[[[]]]]", "nest deeper than 3 levels"),
        ({"a": [[1]]}, "nest deeper than 2 levels"),
        ({"a": nested(5000)}, "nest deeper than 2 levels"),  # never handed to json.dumps
        ({"a": float("nan")}, "are not JSON data"),
        ({"a": {1, 2}}, "are not JSON data"),
        ({"a": "x" * 20}, "are 29 characters long (the limit is 10)"),
        ({"a": "\ud83d"}, "are not valid Unicode (a lone surrogate)"),
        ({"a": "\x00"}, "hold a lone surrogate or a NUL character (as JSON escapes)"),
        (42, "are a int, not JSON text or an object"),
    ],
)
def test_arguments_problem_says_what_is_wrong(arguments: Any, problem: str | None) -> None:
    limits = {"max_chars": 10} if "characters long" in str(problem) else {}
    depth = re.search(r"deeper than (\d+)", str(problem))
    if depth:
        limits = {"max_depth": int(depth.group(1))}
    assert arguments_problem(arguments, **limits) == problem  # type: ignore[arg-type]


def test_a_higher_depth_limit_than_the_default_is_honoured() -> None:
    assert arguments_problem({"a": nested(70)}, max_depth=100) is None
    assert arguments_problem(json.dumps({"a": nested(70)}), max_depth=100) is None


def test_mapping_arguments_are_measured_as_written_with_their_own_characters() -> None:
    assert arguments_problem({"a": "é" * 60}, max_chars=69) is None  # 69 characters, not 369 escaped
    assert arguments_problem({"a": "é" * 60}, max_chars=68) == "are 69 characters long (the limit is 68)"


def test_new_call_ids_are_short_unique_and_safe_for_every_provider() -> None:
    ids = {new_call_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(re.fullmatch(r"call_[0-9a-f]{24}", i) for i in ids)


# ------------------------------------------------------------------------------------------------------
# the rule, word for word


def call(cid: Any, name: Any = "add", arguments: Any = None) -> ToolCall:
    return ToolCall(id=cid, name=name, arguments=arguments if arguments is not None else {"a": 1})


def answer(cid: str, content: str = "2", tool_name: str = "add") -> ToolResultMessage:
    return ToolResultMessage(call_id=cid, tool_name=tool_name, content=content)


def test_history_problems_lists_every_problem_in_order() -> None:
    long_id = "L" * 100
    messages: list[Message] = [
        SystemMessage(content="rules \x00 ok"),  # NUL is allowed in instructions
        SystemMessage(content="bad \ud83d"),
        UserMessage(content="hi"),
        AssistantMessage(content=None),  # type: ignore[arg-type]
        AssistantMessage(tool_calls=[call("a"), call(long_id), call("b", name="x\ud83d")]),
        answer("a", content="nul \x00 is fine in a result"),
        answer(long_id, tool_name="bad \ud83d"),
        answer("b\ud83d"),
        answer("a"),
        AssistantMessage(tool_calls=[call("a", arguments='{"t": "\\udc00"}'), call("c", name=" ")]),
        SystemMessage(content="late"),
        AssistantMessage(tool_calls=[call(f"k{i}") for i in range(7)]),
        UserMessage(content="nul \x00"),
        AssistantMessage(tool_calls=[call(f"m{i}") for i in range(7)]),
    ]
    assert history_problems(messages) == [
        "messages[1]: the system message is not valid Unicode (a lone surrogate)",
        "messages[3]: content is not text",
        f"messages[4].tool_calls[1]: id {'L' * 80!r} is not 1-64 characters of [A-Za-z0-9_-]",
        "messages[4].tool_calls[2]: the tool name is not valid Unicode (a lone surrogate)",
        "messages[6]: the tool result is not valid Unicode (a lone surrogate)",
        "messages[7]: the tool result is not valid Unicode (a lone surrogate)",
        "messages[7]: a result for call 'b\\ud83d', which is not open",
        "messages[8]: a second result for call 'a'",
        "messages[9]: follows calls without results: ['b']",
        "messages[9].tool_calls[0]: the arguments hold a lone surrogate or a NUL character (as JSON escapes)",
        "messages[9].tool_calls[0]: id 'a' is used twice in the conversation",
        "messages[9].tool_calls[1]: the tool name is empty",
        "messages[10]: follows calls without results: ['a', 'c']",
        "messages[10]: a system message after the conversation started",
        "messages[12]: follows calls without results: ['k0', 'k1', 'k2', 'k3', 'k4']",
        "messages[12]: the user's text holds a NUL character",
        "the last turn has calls without results: ['m0', 'm1', 'm2', 'm3', 'm4']",
    ]


def test_long_ids_are_cut_in_every_message() -> None:
    long_id = "x" * 100
    messages: list[Message] = [
        UserMessage(content="hi"),
        AssistantMessage(tool_calls=[call(long_id)]),
        answer(long_id),
        answer(long_id),
        AssistantMessage(tool_calls=[call(long_id)]),
        answer(long_id + "y"),
    ]
    cut = repr("x" * 80)
    assert [p for p in history_problems(messages) if "not 1-64" not in p] == [
        f"messages[3]: a second result for call {cut}",
        f"messages[4].tool_calls[0]: id {cut} is used twice in the conversation",
        f"messages[5]: a result for call {cut}, which is not open",
        f"the last turn has calls without results: [{'x' * 100!r}]",
    ]


# ------------------------------------------------------------------------------------------------------
# the repair, exactly


def test_repair_keeps_what_it_can_and_says_what_it_lost() -> None:
    messages: list[Message] = [
        AssistantMessage(content="before the user"),
        SystemMessage(content="late but first"),
        UserMessage(content="hi \ud83d"),
        SystemMessage(content="after the user"),
        UserMessage(content="  "),
        AssistantMessage(
            content="  ",
            tool_calls=[
                call("", name=""),
                call("ok", arguments='{"a": "\\ud83d", "b": "é"}'),
                call("ok", arguments={"k\ud83d": ["v\ud83d", {"n": "\x00"}], 1: "x"}),
                call("t", arguments="oops \ud83d"),
                call("d", arguments={"d": nested(70)}),
                call("s", arguments="[" * 70 + "]" * 70),
                call("z", arguments={"fine": True}),
            ],
        ),
        answer("zzz"),  # answers nothing open
        answer("", content="for the empty id"),
        answer("ok", content="for the first ok"),
        answer("z", content="for z"),
        UserMessage(content="more"),
        AssistantMessage(tool_calls=[call("p")]),  # the paused turn stays open
    ]
    repaired = repair_history(messages)
    assistant = repaired[2]
    assert isinstance(assistant, AssistantMessage)
    ids = [c.id for c in assistant.tool_calls]
    assert ids[1:] == ["ok", ids[2], "t", "d", "s", "z"] and ids[0] not in ("", "ok") and ids[2] != "ok"
    assert repaired[:2] == [SystemMessage(content="late but first"), UserMessage(content="hi \ufffd")]
    assert repaired[2] == assistant and assistant.content == ""
    assert [c.name for c in assistant.tool_calls] == ["unknown", "add", "add", "add", "add", "add", "add"]
    assert [c.arguments for c in assistant.tool_calls] == [
        {"a": 1},
        '{"a": "\ufffd", "b": "é"}',
        {"k\ufffd": ["v\ufffd", {"n": "\ufffd"}], "1": "x"},
        "oops \ufffd",
        {"_removed": "the arguments nest deeper than 64 levels"},
        {"_removed": "the arguments nest deeper than 64 levels"},
        {"fine": True},
    ]
    results = [m for m in repaired[3:] if isinstance(m, ToolResultMessage)]
    assert len(repaired) == 3 + 7 + 2 and {r.tool_name for r in results} == {"add"}
    assert [(r.call_id, r.content, r.is_error) for r in results] == [
        (ids[0], "for the empty id", False),
        ("ok", "for the first ok", False),
        ("z", "for z", False),
        (ids[2], LOST_RESULT, True),
        ("t", LOST_RESULT, True),
        ("d", LOST_RESULT, True),
        ("s", LOST_RESULT, True),
    ]
    assert repaired[-2:] == [UserMessage(content="more"), AssistantMessage(tool_calls=[call("p")])]
    assert history_problems(repaired, open_tail=True) == []


def test_repair_removes_arguments_over_the_size_limit_and_cleans_those_at_it() -> None:
    at_limit = '{"a": "\\ud83d", "b": "' + "x" * (MAX_ARGUMENT_CHARS - 24) + '"}'
    assert len(at_limit) == MAX_ARGUMENT_CHARS
    over = at_limit[:-2] + 'x"}'
    messages: list[Message] = [
        UserMessage(content="hi"),
        AssistantMessage(tool_calls=[call("a", arguments=at_limit), call("b", arguments=over)]),
        answer("a"),
        answer("b"),
    ]
    [_, turn, *_] = repair_history(messages)
    assert isinstance(turn, AssistantMessage)
    kept, removed = (c.arguments for c in turn.tool_calls)
    assert json.loads(kept)["a"] == "\ufffd"  # type: ignore[arg-type]
    why = f"are {MAX_ARGUMENT_CHARS + 1} characters long (the limit is {MAX_ARGUMENT_CHARS})"
    assert removed == {"_removed": f"the arguments {why}"}


def test_repair_keeps_text_and_nul_where_a_provider_takes_them() -> None:
    messages: list[Message] = [
        SystemMessage(content="rules \x00"),
        UserMessage(content="hi"),
        AssistantMessage(content="I will add.", tool_calls=[call("a")]),
        answer("a", content="result \x00"),
        AssistantMessage(content="Done."),
    ]
    assert repair_history(messages) == [
        SystemMessage(content="rules \x00"),  # NUL is fine in instructions and tool output
        UserMessage(content="hi"),
        AssistantMessage(content="I will add.", tool_calls=[call("a")]),
        answer("a", content="result \x00"),
        AssistantMessage(content="Done."),
    ]


def test_repair_removes_mapping_arguments_too_big_or_too_deep_to_walk() -> None:
    messages: list[Message] = [
        UserMessage(content="hi"),
        AssistantMessage(
            tool_calls=[
                call("big", arguments={"a": "x" * 300_000}),
                call("deep", arguments={"d": nested(5000)}),
            ]
        ),
    ]
    [_, turn] = repair_history(messages)
    assert isinstance(turn, AssistantMessage)
    assert [c.arguments for c in turn.tool_calls] == [
        {"_removed": "the arguments are 300009 characters long (the limit is 256000)"},
        {"_removed": "the arguments nest deeper than 64 levels"},
    ]
