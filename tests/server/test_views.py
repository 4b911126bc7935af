"""`server/_views.api_arguments` decodes a call's arguments with msgspec and reads what msgspec refuses the
stdlib's way: the same value as `json.loads` gave for every kind of text a stored call may hold."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from toolrun._unicode import clean_json
from toolrun.models._history import clean_text
from toolrun.server._views import api_arguments

TEXTS = [
    '{"title": "Buy milk", "priority": 2, "tags": ["a", "b"], "done": false, "due": null}',
    '{"a": 1, "a": 2}',  # a repeated key: the last wins, both ways
    '{"n": 123456789012345678901234567890, "f": -0.0, "e": 1.5e-7}',
    '{"t": "caf\\u00e9 \\u2603", "raw": "café ☃"}',
    '{"x": "\\ud800 lone"}',  # an escaped lone surrogate: the stdlib reads it, it is cleaned to U+FFFD
    '{"x": NaN}',  # not JSON, but json.loads took it
    '{"x": 1e400}',  # out of float range: json.loads gave inf
    '  [1, 2, {"k": "v"}]  ',
    "not json at all",
    '{"unterminated": ',
    '"just a string"',
    "",
]


def _before(raw: str) -> Any:
    """`api_arguments` for text as it was, with `json.loads` only."""
    try:
        value = json.loads(raw)
    except ValueError:
        return clean_text(raw)
    return value if raw.isascii() and "\\u" not in raw else clean_json(value)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("raw", TEXTS)
def test_arguments_read_as_the_stdlib_read_them(raw: str) -> None:
    assert _same(api_arguments(raw), _before(raw))


def test_a_lone_surrogate_is_cleaned_and_non_json_stays_text() -> None:
    assert api_arguments('{"x": "\\ud800 lone"}') == {"x": "\ufffd lone"}
    assert math.isinf(api_arguments('{"x": 1e400}')["x"])
    assert api_arguments("not json at all") == "not json at all"
