"""`check_calls`, `clean_response` and `TextCleaner` directly: what the model reads back from each refusal,
what the conversation keeps, and that what the boundary keeps passes the boundary again unchanged."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolrun import ToolCall
from toolrun.agent import OutputLimits
from toolrun.agent._boundary import TextCleaner, check_calls, clean_response
from toolrun.models import ModelResponse

REGISTERED = {"add", "store", "ns.search"}


def check(*calls: ToolCall, limits: OutputLimits | None = None, used: set[str] | None = None) -> Any:
    return check_calls(
        calls,
        used_ids=set() if used is None else used,
        known=REGISTERED.__contains__,
        suggest=lambda name: sorted(n for n in REGISTERED if n in name),
        limits=limits or OutputLimits(),
    )


def again(checked: Any, limits: OutputLimits | None = None) -> Any:
    """The kept calls through the boundary once more (ids already used elsewhere are fine here)."""
    return check(*checked.calls, limits=limits)


# ------------------------------------------------------------------------------------------------------
# names


@pytest.mark.parametrize(
    ("name", "kept"),
    [
        ("💥 boom", "boom"),
        ("_💥boom💥_", "boom"),
        ("rm -rf /", "rm_-rf"),
        ("a1 b", "a1_b"),
        ("9lives!", "unknown_9lives"),
        ("", "unknown"),
        ("💥", "unknown"),
        ("add!", "unknown_add"),  # never another tool's name: the model did not call `add`
        ("a" * 300, "a" * 63),
        ("x\x00y", "x_y"),
        ("Xbox 💥X", "Xbox_X"),  # only underscores are trimmed
        ("9X!", "unknown_9X"),
    ],
)
def test_an_unsafe_unknown_name_is_refused_and_kept_as_a_safe_name_no_tool_has(name: str, kept: str) -> None:
    checked = check(ToolCall(id="c1", name=name, arguments={}))
    [call] = checked.calls
    assert call.name == kept
    result = checked.refused["c1"]
    assert result.error is not None and result.error.code == "NOT_FOUND"
    assert result.tool_name == kept
    assert again(checked).refused == {}  # the kept name is one every provider takes


def test_the_refusal_names_what_the_model_wrote_and_suggests_from_it() -> None:
    checked = check(ToolCall(id="c1", name="add numbers!", arguments={}))
    error = checked.refused["c1"].error
    assert error is not None
    assert 'There is no tool named "add numbers!"' in error.message
    assert error.details["suggestions"] == ["add"]


def test_a_safe_unknown_name_is_left_to_the_executor() -> None:
    checked = check(ToolCall(id="c1", name="frobnicate", arguments={}))
    assert checked.refused == {} and checked.calls[0].name == "frobnicate"


def test_a_registered_name_outside_the_safe_pattern_is_kept_and_runs() -> None:
    checked = check(ToolCall(id="c1", name="ns.search", arguments={}))
    assert checked.refused == {} and checked.calls[0].name == "ns.search"


@pytest.mark.parametrize("name", [None, 7, ["add"]])
def test_a_name_that_is_not_text_is_refused(name: Any) -> None:
    checked = check(ToolCall(id="c1", name=name, arguments={}))
    assert checked.calls[0].name == "unknown"
    assert checked.refused["c1"].error.code == "NOT_FOUND"  # type: ignore[union-attr]


# ------------------------------------------------------------------------------------------------------
# ids


def test_replaced_ids_are_mapped_back_to_what_the_model_sent_cleaned_and_cut() -> None:
    used = {"old"}
    calls = [
        ToolCall(id="old", name="add", arguments={}),
        ToolCall(id="ok_1", name="add", arguments={}),
        ToolCall(id="ok_1", name="add", arguments={}),
        ToolCall(id="bad id\ud83d" + "z" * 300, name="add", arguments={}),
    ]
    checked = check(*calls, used=used)
    ids = [c.id for c in checked.calls]
    assert ids[1] == "ok_1" and len(set(ids)) == 4 and not {ids[0], ids[2], ids[3]} & {"old", "ok_1"}
    assert checked.renamed == {
        ids[0]: "old",
        ids[2]: "ok_1",
        ids[3]: ("bad id\ufffd" + "z" * 300)[:200],
    }
    assert set(ids) <= used


# ------------------------------------------------------------------------------------------------------
# arguments


def test_oversized_arguments_are_refused_with_what_the_model_needs_to_act() -> None:
    limits = OutputLimits(max_argument_chars=100)
    checked = check(ToolCall(id="c1", name="store", arguments="[" + "1," * 60 + "1]"), limits=limits)
    why = "are 123 characters long; the limit is 100"
    assert checked.calls[0].arguments == {
        "_removed": "the arguments are 123 characters long; the limit is 100"
    }
    result = checked.refused["c1"]
    assert result.tool_name == "store"
    error = result.error
    assert error is not None and error.code == "INVALID_ARGUMENTS" and not error.retryable
    assert (
        error.message
        == "The arguments of this call are 123 characters long; the limit is 100; it did not run."
    )
    assert error.recover_action == "Call the tool again with smaller, flatter arguments."
    assert error.details == {"problems": [{"path": "", "message": f"the arguments {why}"}]}
    assert again(checked, limits).refused == {}  # the note itself fits


@pytest.mark.parametrize("size", [99, 100])
def test_arguments_up_to_the_limit_pass(size: int) -> None:
    limits = OutputLimits(max_argument_chars=100)
    text = json.dumps({"data": "x" * (size - 12)})
    assert len(text) == size
    mapping = {"data": "x" * (size - 12)}
    checked = check(
        ToolCall(id="t", name="store", arguments=text),
        ToolCall(id="m", name="store", arguments=mapping),
        limits=limits,
    )
    assert checked.refused == {}
    assert [c.arguments for c in checked.calls] == [text, mapping]


def test_a_mapping_one_character_over_the_limit_is_refused() -> None:
    limits = OutputLimits(max_argument_chars=100)
    checked = check(ToolCall(id="m", name="store", arguments={"data": "x" * 89}), limits=limits)
    assert checked.refused["m"].error.message.startswith(  # type: ignore[union-attr]
        "The arguments of this call are 101 characters long as JSON; the limit is 100"
    )


def test_cleaned_text_arguments_keep_their_characters_and_are_checked_again() -> None:
    text = '{"text": "bad \\ud83d é \\u00e9", "n": [1, "\\u0000"]}'
    checked = check(ToolCall(id="c1", name="store", arguments=text))
    assert checked.refused == {}
    assert checked.calls[0].arguments == '{"text": "bad \ufffd é é", "n": [1, "\ufffd"]}'
    # compact JSON grows when it is written back: over the limit after cleaning, it is refused
    compact = '{"a":"\\ud83d","b":[' + ",".join(["1"] * 40) + "]}"
    limits = OutputLimits(max_argument_chars=len(compact))
    checked = check(ToolCall(id="c2", name="store", arguments=compact), limits=limits)
    assert checked.refused["c2"].error.code == "INVALID_ARGUMENTS"  # type: ignore[union-attr]
    assert "characters long" in checked.calls[0].arguments["_removed"]


def test_decoded_arguments_are_cleaned_to_json_data() -> None:
    raw = {
        "s": "a\ud83d",
        "list": ["b\x00", 1, 2.5, None, True, {"k\ud83d": "v"}],
        3: "three",
        None: 0,
        1.5: 1,
    }
    checked = check(ToolCall(id="c1", name="store", arguments=raw))
    assert checked.refused == {}
    assert checked.calls[0].arguments == {
        "s": "a\ufffd",
        "list": ["b\ufffd", 1, 2.5, None, True, {"k\ufffd": "v"}],
        "3": "three",
        "null": 0,
        "1.5": 1,
    }


@pytest.mark.parametrize(
    ("arguments", "why"),
    [
        ({"x": float("inf")}, "are not JSON data (a non-finite number)"),
        ({"x": [float("-inf")]}, "are not JSON data (a non-finite number)"),
        ({"x": float("nan")}, "are not JSON data (a non-finite number)"),
        ({"x": {1, 2}}, "are not JSON data (a set)"),
        ({(1, 2): "x"}, "are not JSON data (a tuple key)"),
        ([1, 2], "must be a JSON object, not a list"),
        (7, "must be a JSON object, not a int"),
    ],
)
def test_arguments_that_are_not_json_data_are_refused_saying_why(arguments: Any, why: str) -> None:
    checked = check(ToolCall(id="c1", name="store", arguments=arguments))
    assert checked.calls[0].arguments == {"_removed": f"the arguments {why}"}
    assert why in checked.refused["c1"].error.message  # type: ignore[union-attr]


def test_the_kept_note_is_bounded_whatever_the_reason_says() -> None:
    odd = type("T" * 400, (), {})()
    checked = check(ToolCall(id="c1", name="store", arguments=odd))
    note = checked.calls[0].arguments["_removed"]
    assert note.startswith("the arguments must be a JSON object, not a TTT") and len(note) == 300


# ------------------------------------------------------------------------------------------------------
# call count


def test_calls_past_the_limit_are_refused_as_retryable() -> None:
    calls = [ToolCall(id=f"c{i}", name="add", arguments={}) for i in range(3)]
    checked = check(*calls, limits=OutputLimits(max_calls=2))
    assert list(checked.refused) == ["c2"]
    error = checked.refused["c2"].error
    assert error is not None and error.code == "TOO_MANY_CALLS" and error.retryable
    assert error.message == "Only 2 tool calls are run per response; this one did not run."
    assert error.recover_action == "Make fewer calls per response; repeat the ones that did not run."


# ------------------------------------------------------------------------------------------------------
# limits


@pytest.mark.parametrize("field", ["max_text_chars", "max_argument_chars", "max_argument_depth", "max_calls"])
def test_every_limit_must_be_at_least_one(field: str) -> None:
    with pytest.raises(ValueError, match=r"^OutputLimits values must be at least 1\.$"):
        OutputLimits(**{field: 0})
    assert getattr(OutputLimits(**{field: 1}), field) == 1


# ------------------------------------------------------------------------------------------------------
# text


def test_text_over_the_limit_is_cut_with_a_note_and_text_at_the_limit_is_kept() -> None:
    limits = OutputLimits(max_text_chars=5)
    assert clean_response(ModelResponse(text="12345"), limits).text == "12345"
    assert (
        clean_response(ModelResponse(text="123456"), limits).text
        == "12345\n[… 1 more characters cut by toolrun]"
    )


@pytest.mark.parametrize("text", [None, 7, b"bytes"])
def test_text_that_is_not_a_string_becomes_empty(text: Any) -> None:
    response = ModelResponse(text=text)
    assert clean_response(response, OutputLimits()).text == ""


@pytest.mark.parametrize(
    ("pieces", "whole"),
    [
        (["a\ud83d", "\ude00b"], "a😀b"),
        (["ab\ud800", "\udc00"], "ab\U00010000"),
        (["\udbff", "\udfffz"], "\U0010ffffz"),
        (["café", "!"], "café!"),
        (["", "x", ""], "x"),
    ],
)
def test_streamed_pieces_join_split_pairs_and_pass_the_rest_at_once(pieces: list[str], whole: str) -> None:
    cleaner = TextCleaner()
    out = [cleaner.feed(piece) for piece in pieces]
    assert "".join(out) + cleaner.flush() == whole
    if "\ud83d" not in pieces[0] and "\ud800" not in pieces[0] and "\udbff" not in pieces[0]:
        assert out[0] == pieces[0]  # nothing waits that does not have to


def test_a_high_surrogate_left_at_the_end_is_replaced_and_forgotten() -> None:
    cleaner = TextCleaner()
    assert cleaner.feed("a\ud83d") == "a"
    assert cleaner.flush() == "\ufffd"
    assert cleaner.feed("b") == "b" and cleaner.flush() == ""
