"""Validation: every problem reported with a path, what was expected and what was given; nothing escapes."""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from toolrun import ArgumentsError, Tool, tool


class Address(BaseModel):
    city: str
    zip: str


@tool
def book(
    name: str,
    nights: int,
    room: Literal["single", "double"] = "single",
    address: Address | None = None,
    tags: list[str] | None = None,
    breakfast: bool = False,
) -> str:
    """Book a room.

    Args:
        name: Guest name.
        nights: How many nights.
    """
    return name


def problems(arguments: Any) -> list[tuple[str, str]]:
    with pytest.raises(ArgumentsError) as info:
        book.validate(arguments)
    return [(p.path, p.message) for p in info.value.problems]


def test_valid_json_string_and_mapping() -> None:
    kwargs = book.validate('{"name": "Ann", "nights": 2}')
    assert kwargs == {
        "name": "Ann",
        "nights": 2,
        "room": "single",
        "address": None,
        "tags": None,
        "breakfast": False,
    }
    with pytest.raises(ArgumentsError, match="nights: input should be a valid integer"):
        book.validate({"name": "Ann", "nights": "2"})  # JSON types strictly (coerce=True opts out)


def test_every_problem_listed_with_path() -> None:
    found = problems('{"nights": "many", "room": "suite", "address": {"city": 5}, "color": "red"}')
    paths = [p for p, _ in found]
    assert paths == ["name", "nights", "room", "address.city", "address.zip", "color"]
    messages = dict(found)
    assert "required" in messages["name"]
    assert "unknown field 'color'" in messages["color"]
    assert "allowed fields: address, breakfast, name, nights, room, tags" in messages["color"]


def test_rendered_error_is_readable_by_a_model() -> None:
    with pytest.raises(ArgumentsError) as info:
        book.validate('{"name": "Ann", "nights": "x", "room": "suite"}')
    text = info.value.render()
    assert text.splitlines()[0] == "Invalid arguments for tool 'book' (2 problems):"
    assert '- nights: input should be a valid integer; got "x"' in text
    assert "- room: input should be 'single' or 'double'" in text
    assert 'got "suite"' in text


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('"a string"', "must be a JSON object"),
        ("42", "must be a JSON object"),
        ("[" * 100_000 + "]" * 100_000, "not valid JSON"),
    ],
)
def test_malformed_json_is_a_problem_not_a_crash(raw: str, fragment: str) -> None:
    with pytest.raises(ArgumentsError) as info:
        book.validate(raw)
    assert fragment in info.value.render()


def test_empty_and_none_mean_no_arguments() -> None:
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    assert ping.validate("") == {}
    assert ping.validate(None) == {}
    assert ping.validate("  ") == {}
    with pytest.raises(ArgumentsError, match="this tool takes no arguments"):
        ping.validate('{"x": 1}')


def test_null_for_optional_non_nullable_param_means_default() -> None:
    # What a model sends under OpenAI strict mode for an optional parameter it leaves out.
    kwargs = book.validate('{"name": "Ann", "nights": 1, "room": null, "breakfast": null, "tags": null}')
    assert kwargs["room"] == "single"
    assert kwargs["breakfast"] is False
    assert kwargs["tags"] is None
    assert problems('{"name": null, "nights": 1}') == [("name", "input should be a valid string")]


def test_huge_and_odd_unicode_arguments() -> None:
    big = "x" * 3_000_000
    assert book.validate(json.dumps({"name": big, "nights": 1}))["name"] == big
    odd = "\u202e\u0000\U0001f600 \u4e2d\ufeff"  # RTL override, NUL, emoji (escaped as a pair), CJK, BOM
    assert book.validate(json.dumps({"name": odd, "nights": 1}))["name"] == odd
    assert book.validate(json.dumps({"name": odd, "nights": 1}, ensure_ascii=False))["name"] == odd
    # A lone surrogate is not Unicode text: a clear error, rather than a string that breaks later.
    with pytest.raises(ArgumentsError, match="not valid JSON"):
        book.validate('{"name": "\\ud800", "nights": 1}')
    # A huge wrong value is reported in bounded length.
    with pytest.raises(ArgumentsError) as info:
        book.validate(json.dumps({"name": "a", "nights": big}))
    assert len(info.value.render()) < 1_000


def test_raw_schema_tool_validation() -> None:
    search = Tool.from_schema(
        "search",
        "Search the web.",
        {
            "type": "object",
            "properties": {
                "q": {"type": "string", "minLength": 1},
                "n": {"type": "integer", "default": 5},
                "lang": {"type": "string", "enum": ["en", "de"]},
            },
            "required": ["q"],
            "additionalProperties": False,
        },
        handler=lambda q, n, lang="en": [q] * n,
    )
    assert search.validate('{"q": "x"}') == {"q": "x", "n": 5}
    assert search.validate('{"q": "x", "n": null, "lang": null}') == {"q": "x", "n": 5}
    with pytest.raises(ArgumentsError) as info:
        search.validate('{"q": "", "n": "3", "lang": "fr", "zz": 1}')
    paths = sorted(p.path for p in info.value.problems)
    assert paths == ["", "lang", "n", "q"]
    assert any("unknown field(s) 'zz'" in p.message for p in info.value.problems)


def test_raw_schema_tool_rejects_unknown_fields_even_without_additional_properties() -> None:
    # Unknown fields are rejected by contract; a schema that does not say so is tightened on validate.
    loose = Tool.from_schema("t", "T.", {"type": "object", "properties": {"a": {"type": "integer"}}})
    assert loose.validate({"a": 1}) == {"a": 1}
    with pytest.raises(ArgumentsError, match="unknown field"):
        loose.validate({"a": 1, "b": 2})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(value=json_values)
def test_any_json_value_validates_or_reports_problems(value: Any) -> None:
    for arguments in (value, json.dumps(value)):
        try:
            kwargs = book.validate(arguments)  # type: ignore[arg-type]
        except ArgumentsError as exc:
            assert exc.problems
            assert all(isinstance(p.path, str) and p.message for p in exc.problems)
        else:
            assert set(kwargs) == {"name", "nights", "room", "address", "tags", "breakfast"}


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200))
def test_any_text_validates_or_reports_problems(text: str) -> None:
    try:
        book.validate(text)
    except ArgumentsError as exc:
        assert exc.problems


def test_parameters_named_like_model_attributes_reach_the_handler_under_their_own_names() -> None:
    """`schema`, `copy` and `_private` cannot be pydantic field names: the model renames them, and
    validation hands them back under the handler's names (JSON text and mapping alike)."""

    def configure(schema: str, copy: int, _private: bool = False) -> str:
        """Configure something."""
        return f"{schema}/{copy}/{_private}"

    t = Tool.from_function(configure)
    assert set(t.parameters["properties"]) >= {"schema", "copy"}
    expected = {"schema": "s", "copy": 2, "_private": False}
    assert t.validate('{"schema": "s", "copy": 2}') == expected
    assert t.validate({"schema": "s", "copy": 2}) == expected


def test_a_problem_with_no_expected_type_says_none_rather_than_a_made_up_one() -> None:
    """A validator's own error (no JSON type behind it) reports its message and no `expected`."""
    from typing import Annotated

    from pydantic import AfterValidator

    def refuse(value: str) -> str:
        raise ValueError("not a good name")

    def greet(name: Annotated[str, AfterValidator(refuse)]) -> str:
        """Greet someone."""
        return name

    with pytest.raises(ArgumentsError) as caught:
        Tool.from_function(greet).validate('{"name": "x"}')
    [problem] = caught.value.problems
    assert (problem.path, problem.expected, problem.given) == ("name", None, '"x"')
    assert "not a good name" in problem.message
