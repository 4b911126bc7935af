"""A user's message at every door: some text, at most 32,000 characters, no NUL, valid Unicode."""

from __future__ import annotations

import pytest

from toolrun.server._text import MAX_MESSAGE_CHARS, conversation_title, message_problem


@pytest.mark.parametrize(
    "text",
    ["hi", "  padded  ", "x" * MAX_MESSAGE_CHARS, "😀 עברית 中文", "tab\there\nnewline"],
)
def test_a_message_with_text_within_the_limit_passes(text: str) -> None:
    assert message_problem(text) is None


@pytest.mark.parametrize("text", ["", " ", "\n\t  \r\n", "\u2003\u3000"])
def test_a_blank_message_is_refused(text: str) -> None:
    assert message_problem(text) == "The message is empty."


def test_one_character_over_the_limit_is_refused_and_the_limit_is_named() -> None:
    assert MAX_MESSAGE_CHARS == 32_000
    assert message_problem("x" * (MAX_MESSAGE_CHARS + 1)) == "The message is longer than 32000 characters."
    # characters are counted, not bytes: 32,000 four-byte characters fit
    assert message_problem("😀" * MAX_MESSAGE_CHARS) is None


@pytest.mark.parametrize("text", ["\x00", "a\x00b", "ok\x00", "😀\x00"])
def test_a_nul_is_refused(text: str) -> None:
    assert message_problem(text) == "The message holds a NUL character (U+0000); remove it."


@pytest.mark.parametrize(
    ("text", "at"),
    [("\ud83d", 0), ("ab\ud83d", 2), ("x\ude00y", 1), ("😀\udfff", 1), ("é\ud800", 1)],
)
def test_a_lone_surrogate_is_refused_with_its_position(text: str, at: int) -> None:
    assert message_problem(text) == (
        f"The message is not valid Unicode: a lone surrogate at character {at} "
        "(a \\uD800-\\uDFFF escape without its pair)."
    )


def test_the_first_problem_found_is_the_one_named() -> None:
    assert message_problem(" " * (MAX_MESSAGE_CHARS + 1)) == "The message is empty."
    assert message_problem("\x00" * (MAX_MESSAGE_CHARS + 1)).startswith("The message is longer")  # type: ignore[union-attr]
    assert message_problem("\ud83d\x00") == "The message holds a NUL character (U+0000); remove it."


@pytest.mark.parametrize(
    ("message", "title"),
    [
        ("list tasks", "List tasks"),
        ("add Buy milk !high #home", "Add Buy milk !high #home"),
        ("   ", "Conversation"),
        ("<img src=x onerror=alert(1)>", "Conversation"),
        ("```python\nprint(1)\n```\nwhat does this do?", "What does this do?"),
        ("# Plan\n- pack the bags\n- book the train", "Plan pack the bags book the train"),
        ("x" * 100, "X" + "x" * 46 + "…"),
        (
            "**Please** add a task: renew my [passport](https://x.example) before the trip",
            "Please add a task: renew my passport…",
        ),
    ],
)
def test_conversation_titles_are_a_few_plain_words(message: str, title: str) -> None:
    assert conversation_title(message) == title
