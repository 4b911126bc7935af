"""One validation policy for every way of defining a tool (docs/argument-validation.md).

JSON types strictly; non-finite numbers refused; unknown fields refused at every depth, with their path
(for a raw schema: at the root, and below it where the schema closes the object);
`null` for an optional parameter means its default; `coerce=True` opts one tool into lax coercion.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from toolrun import Tool, tool
from toolrun.exceptions import ArgumentsError

RAW = {
    "type": "object",
    "properties": {
        "n": {"type": "integer"},
        "x": {"type": "number", "default": 1.0},
        "flag": {"type": "boolean", "default": False},
        "filter": {  # closed as a Pydantic model is: below the root, a raw schema is followed as it is
            "type": "object",
            "properties": {
                "status": {"type": "string"},
                "inner": {"type": "object", "properties": {"k": {}}, "additionalProperties": False},
            },
            "additionalProperties": False,
        },
        "who": {"type": ["string", "null"], "default": "bob"},
    },
    "required": ["n"],
}


class Inner(BaseModel):
    k: Any = None


class Filter(BaseModel):
    status: str = "open"
    inner: Inner | None = None


def _function(**options: Any) -> Tool:
    def listing(
        n: int, x: float = 1.0, flag: bool = False, filter: Filter | None = None, who: str | None = "bob"
    ) -> str:
        """List tasks."""
        return "ok"

    return tool(**options)(listing)


def _flattened(**options: Any) -> Tool:
    class Query(BaseModel):
        n: int
        x: float = 1.0
        flag: bool = False
        filter: Filter | None = None
        who: str | None = "bob"

    def listing(query: Query) -> str:
        """List tasks."""
        return "ok"

    return tool(**options)(listing)


def _subclass(**options: Any) -> Tool:
    class Listing(Tool):
        """List tasks."""

        class Params(BaseModel):
            n: int
            x: float = 1.0
            flag: bool = False
            filter: Filter | None = None
            who: str | None = "bob"

        def run(self, params: Params) -> str:
            return "ok"

    return Listing(**options)


def _raw(**options: Any) -> Tool:
    return Tool.from_schema("listing", "List tasks.", json.loads(json.dumps(RAW)), **options)


DEFINITIONS = {
    "function": _function,
    "flattened model": _flattened,
    "subclass": _subclass,
    "raw schema": _raw,
}


def _values(tool_: Tool, arguments: Any) -> dict[str, Any]:
    out = tool_.validate(arguments)
    if len(out) == 1 and isinstance(next(iter(out.values())), BaseModel):
        out = next(iter(out.values())).model_dump()
    return {k: (v.model_dump() if isinstance(v, BaseModel) else v) for k, v in out.items()}


REFUSED = [
    ('{"n": "5"}', "n"),
    ('{"n": true}', "n"),
    ('{"n": 1.5}', "n"),
    ('{"n": "5_000"}', "n"),
    ('{"n": 1, "flag": "yes"}', "flag"),
    ('{"n": 1, "flag": 1}', "flag"),
    ('{"n": 1, "x": "2.5"}', "x"),
    ('{"n": 1, "who": 5}', "who"),
    ('{"n": 1, "x": NaN}', ""),
    ('{"n": 1, "x": Infinity}', ""),
    ('{"n": 1, "x": -Infinity}', ""),
    ('{"n": 1, "filter": {"stauts": "closed"}}', "filter"),
    ('{"n": 1, "filter": {"inner": {"k": 1, "j": 2}}}', "filter.inner"),
]


@pytest.mark.parametrize("make", DEFINITIONS.values(), ids=DEFINITIONS.keys())
@pytest.mark.parametrize(("arguments", "path"), REFUSED)
def test_every_definition_path_refuses_the_same_arguments(make: Any, arguments: str, path: str) -> None:
    t = make()
    for given_ in (arguments, _loads(arguments)):
        with pytest.raises(ArgumentsError) as info:
            t.validate(given_)
        paths = [p.path for p in info.value.problems]
        assert any(p.startswith(path) for p in paths), paths


def _loads(text: str) -> Any:
    return json.loads(text)  # json.loads reads NaN and Infinity: a decoded object can carry them too


@pytest.mark.parametrize("make", DEFINITIONS.values(), ids=DEFINITIONS.keys())
def test_every_definition_path_accepts_the_same_arguments(make: Any) -> None:
    t = make()
    values = _values(t, '{"n": 3, "x": 2, "flag": true, "filter": {"status": "closed"}, "who": null}')
    assert values["n"] == 3 and values["x"] == 2 and values["flag"] is True
    assert values["filter"]["status"] == "closed"
    assert values["who"] == "bob"  # null for an optional parameter means its default, nullable or not
    assert _values(t, {"n": 3, "x": None})["x"] == 1.0
    assert _values(t, '{"n": 1, "filter": {"status": "NaN and Infinity are fine in text"}}')["n"] == 1


@pytest.mark.parametrize("make", DEFINITIONS.values(), ids=DEFINITIONS.keys())
def test_an_integral_number_is_an_integer_everywhere(make: Any) -> None:
    """JSON Schema: 5.0 is an integer. Every definition path accepts it and hands the handler 5."""
    t = make()
    for given_ in ('{"n": 5.0}', {"n": 5.0}, '{"n": 1e2}'):
        n = _values(t, given_)["n"]
        assert type(n) is int and n in (5, 100)
    with pytest.raises(ArgumentsError) as info:
        t.validate('{"n": 5.0, "x": "many"}')
    assert [p.path for p in info.value.problems] == ["x"]  # 5.0 is not listed as a problem
    with pytest.raises(ArgumentsError):
        t.validate('{"n": 5.5}')


def test_unknown_nested_fields_name_their_path() -> None:
    for make in DEFINITIONS.values():
        with pytest.raises(ArgumentsError) as info:
            make().validate({"n": 1, "filter": {"stauts": "closed"}})
        rendered = info.value.render()
        assert "filter" in rendered and "stauts" in rendered, rendered


@pytest.mark.parametrize("make", DEFINITIONS.values(), ids=DEFINITIONS.keys())
def test_coerce_opts_one_tool_into_lax_coercion(make: Any) -> None:
    t = make(coerce=True)
    assert t.options.coerce is True
    values = _values(t, '{"n": "5_000", "flag": "yes", "x": "2.5"}')
    assert values["n"] == 5000 and values["flag"] is True and values["x"] == 2.5
    # Unknown fields and non-finite numbers are refused all the same.
    with pytest.raises(ArgumentsError):
        t.validate('{"n": 1, "x": NaN}')
    with pytest.raises(ArgumentsError):
        t.validate({"n": 1, "filter": {"stauts": "x"}})
    assert make().options.coerce is False


def test_a_nested_model_that_explicitly_allows_extra_keys_keeps_them() -> None:
    class Open(BaseModel, extra="allow"):
        a: int = 0

    @tool
    def take(o: Open, n: int = 0) -> int:
        """Take."""
        return 0

    assert take.validate({"o": {"a": 1, "b": 2}})["o"].model_extra == {"b": 2}
    assert take.parameters["$defs"]["Open"]["additionalProperties"] is True


_STRICT = (_function(), _raw())
_LAX = (_function(coerce=True), _raw(coerce=True))


@settings(deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True))
def test_only_finite_numbers_pass(value: float) -> None:
    for t in _STRICT:
        if math.isfinite(value):
            assert t.validate({"n": 1, "x": value})["x"] == value
        else:
            with pytest.raises(ArgumentsError, match="non-finite"):
                t.validate({"n": 1, "x": value})


@settings(deadline=None)
@given(st.integers(-(10**6), 10**6))
def test_numbers_in_strings_are_never_numbers_without_coerce(value: int) -> None:
    for strict, lax in zip(_STRICT, _LAX, strict=True):
        with pytest.raises(ArgumentsError):
            strict.validate({"n": str(value)})
        assert lax.validate({"n": str(value)})["n"] == value


def _holds_non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_holds_non_finite(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_non_finite(v) for v in value)
    return False


def _zoo(
    n: int = 0,
    s: str = "",
    tags: list[str] | None = None,
    anything: Any = None,
    table: dict[str, Any] | None = None,
    pairs: list[tuple[int, float]] | None = None,
) -> None:
    """Zoo."""


def _plain(
    n: int = 0, s: str = "", tags: list[str] | None = None, flags: dict[str, bool] | None = None
) -> None:
    """Plain."""


ZOO = tool(_zoo)
PLAIN = tool(_plain)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=3), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(deadline=None, max_examples=300)
@given(st.sampled_from(["n", "s", "tags", "anything", "table", "pairs", "flags"]), JSON_VALUES)
def test_no_non_finite_number_reaches_a_handler_whatever_the_type(field: str, value: Any) -> None:
    """The NaN scan is skipped where no float can pass (a speed-up): never where one could."""
    PLAIN.validate({})
    assert not PLAIN._validator.scan_floats  # type: ignore[attr-defined]
    for t in (ZOO, PLAIN):
        if field not in t.parameters["properties"]:
            continue
        try:
            result = t.validate({field: value})
        except ArgumentsError:
            continue
        assert not _holds_non_finite(value), (t.name, field, value, result)
