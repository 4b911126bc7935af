"""`toolrun._unicode`: one rule for text at every door — a client's text is refused exactly when a model's
or a tool's would be changed by cleaning."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from toolrun._unicode import clean_json, json_problem

_text = st.text(st.characters(codec=None, min_codepoint=0, max_codepoint=0xE000), max_size=8)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=10,
)


@given(_json)
def test_refused_exactly_when_cleaning_would_change_it(value: Any) -> None:
    cleaned = clean_json(value)
    assert (json_problem(value) is None) == (cleaned == value)
    assert json_problem(cleaned) is None
    assert clean_json(cleaned) == cleaned


def test_the_problem_names_where_it_is() -> None:
    assert json_problem({"a": [1, {"b": "x\ud800"}]}) == (
        "a.1.b is not valid Unicode: a lone surrogate at character 1 "
        "(a \\uD800-\\uDFFF escape without its pair)"
    )
    assert json_problem({"a": {"\x00": 1}}) == "a key in a holds a NUL character (U+0000); remove it"
    assert json_problem("\U0001f600") is None  # JSON's "\\ud83d\\ude00" decodes to this one character
    assert clean_json({"k\udc80": ["\ud83d\ude00", "\ud83d"]}) == {"k\ufffd": ["\U0001f600", "\ufffd"]}
