"""The one JSON form of a value, for everything that hashes, compares or stores one: `json_safe` (plain JSON
data) and `canonical_json` (sorted-key bytes, a function of the value alone).

A bottom module (it imports no other part of toolrun): the executor's hashes and results, approval rules
and edits, and the agent's run checks all reach the same bytes for the same value.
"""

from __future__ import annotations

import json
import math
from typing import Any

import msgspec
import pydantic_core

__all__ = ["ResultNotJSON", "canonical_json", "json_safe"]

_SIMPLE = frozenset({str, int, bool, type(None)})


class ResultNotJSON(Exception):
    """The value has no JSON form (an object of an unknown type, a cycle, absurd nesting)."""


def json_safe(value: Any) -> Any:
    """`value` as plain JSON data: Pydantic models, dataclasses, datetimes, enums, sets, tuples, bytes
    (UTF-8 text, else base64) become dicts, lists, strings and numbers; NaN and infinities become null.

    Raises:
        ResultNotJSON: when no JSON form exists.
    """
    kind = type(value)
    if kind in _SIMPLE:
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    try:
        return pydantic_core.to_jsonable_python(value, inf_nan_mode="null", bytes_mode="utf8")
    except Exception:  # PydanticSerializationError, ValueError (cycles), RecursionError, bad UTF-8
        pass
    try:
        return pydantic_core.to_jsonable_python(value, inf_nan_mode="null", bytes_mode="base64")
    except Exception:
        raise ResultNotJSON from None


# Plain JSON data natively, dicts and sets sorted (and dict/list subclasses, dataclasses, datetimes, UUIDs,
# enums, big integers, bytes as base64); non-str keys, lone surrogates, subclasses of str/int, pydantic
# models and other objects raise here and take the stdlib path (made JSON-safe by pydantic-core).
_msgspec_encode = msgspec.json.Encoder(order="sorted").encode
_NOT_MSGSPEC = (TypeError, ValueError, RecursionError, msgspec.EncodeError)


def _jsonable(value: Any) -> Any:
    return pydantic_core.to_jsonable_python(value, inf_nan_mode="constants", bytes_mode="base64")


_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True, default=_jsonable
)


def canonical_json(value: Any) -> bytes:
    """Canonical UTF-8 JSON of `value`: object keys sorted at every level, no whitespace.

    Dataclasses, datetimes, UUIDs, enums and sets (sorted) are encoded by msgspec as it does natively;
    pydantic models and other objects are first made JSON-safe by pydantic-core. Lone
    surrogates (valid in a Python `str`) are kept as they are (`surrogatepass`), so every string hashes.
    A value that cannot be expressed as JSON falls back to `repr()` of the odd parts, which may differ
    between processes (an approval over such arguments then fails closed). If even that fails, the
    error propagates: callers must not bind anything to arguments they cannot hash.

    The bytes are a function of the value alone (deterministic), not of the encoder that made them: JSON
    data with str keys (and the types msgspec encodes natively) is encoded by msgspec; anything else, and
    anything holding `None` or a non-finite float (msgspec writes both as `null`), by the stdlib encoder,
    which spells `NaN`/`Infinity` apart from `null`.
    """
    try:
        data: bytes = _msgspec_encode(value)
    except _NOT_MSGSPEC:  # non-str keys, lone surrogates, str subclasses, models...
        pass
    else:
        # No None and no NaN/Infinity anywhere (or a string holds "null"). `110 in` (the byte "n") is a
        # memchr; `b"null" in data` would cost an exception inside CPython (it tries an int first).
        if 110 not in data or data.find(b"null") < 0:
            return data
    return _canonical_stdlib(value)


def _canonical_stdlib(value: Any) -> bytes:
    try:
        return _ENCODER.encode(value).encode("utf-8", "surrogatepass")
    except (TypeError, ValueError, RecursionError):
        return pydantic_core.to_json(value, fallback=repr, inf_nan_mode="constants", bytes_mode="base64")
