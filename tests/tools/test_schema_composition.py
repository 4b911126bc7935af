"""The composed (fast) arguments schema equals the one Pydantic's model gives, for any signature.

Tools built from functions get their JSON Schema composed from cached per-type schemas, and their
validator model is built on first use. This pins that the two never disagree.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal, Optional

from hypothesis import given, settings
from hypothesis import strategies as st

from toolrun import Tool
from toolrun.tools._function_schema import model_json_schema

ANNOTATIONS: dict[str, tuple[Any, list[Any]]] = {
    "str": (str, ["x", ""]),
    "int": (int, [0, 7]),
    "float": (float, [1.5]),
    "bool": (bool, [True, False]),
    "list[str]": (list[str], [["a"]]),
    "Optional[int]": (Optional[int], [None, 3]),  # noqa: UP045
    "int | None": (int | None, [None]),
    "Literal['a', 'b']": (Literal["a", "b"], ["a"]),
    "dict[str, int]": (dict[str, int], [{"k": 1}]),
    "dt.date": (dt.date, [dt.date(2024, 1, 2)]),
    "tuple[int, str]": (tuple[int, str], [(1, "a")]),
    "set[str]": (set[str], [{"z"}]),
    "Any": (Any, [None, 1]),
}

param_strategy = st.tuples(
    st.sampled_from(sorted(ANNOTATIONS)),
    st.booleans(),  # has a default
    st.booleans(),  # documented
    st.integers(0, 5),  # which default
)


@settings(max_examples=150, deadline=None)
@given(st.lists(param_strategy, min_size=0, max_size=6))
def test_composed_schema_equals_model_schema(spec: list[tuple[str, bool, bool, int]]) -> None:
    # Parameters with defaults must follow those without: sort them so.
    spec = sorted(spec, key=lambda p: p[1])
    namespace: dict[str, Any] = {"Optional": Optional, "Literal": Literal, "dt": dt, "Any": Any}
    params, docs = [], []
    for i, (ann, has_default, documented, which) in enumerate(spec):
        text = f"p{i}: {ann}"
        if has_default:
            defaults = ANNOTATIONS[ann][1]
            namespace[f"d{i}"] = defaults[which % len(defaults)]
            text += f" = d{i}"
        params.append(text)
        if documented:
            docs.append(f"        p{i}: Parameter {i}.")
    doc = "Do it." + ("\n\n    Args:\n" + "\n".join(docs) + "\n    " if docs else "")
    source = f'def fn({", ".join(params)}) -> None:\n    """{doc}"""\n'
    exec(source, namespace)
    made = Tool.from_function(namespace["fn"])
    validator = made._make_validator()  # type: ignore[misc]
    assert made.parameters == model_json_schema("fn", validator.model), source
