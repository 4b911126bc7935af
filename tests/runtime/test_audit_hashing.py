"""Canonical JSON and the keyed argument hash: what confirmations and audit correlation are bound to.

Pinned by mutation testing (docs/mutation.md): nested key order, the fast path and the general path giving
the same bytes, the key length bounds, raw arguments as sent.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any

import pytest

from toolrun._json import canonical_json
from toolrun.runtime._audit import ArgumentHasher

KEY = b"k" * 16


def test_nested_objects_are_sorted_at_every_level_and_written_without_spaces() -> None:
    value = {"b": {"y": [{"d": 1, "c": 2}], "x": "é"}, "a": None}
    assert canonical_json(value) == '{"a":null,"b":{"x":"é","y":[{"c":2,"d":1}]}}'.encode()


def test_the_flat_fast_path_and_the_general_path_agree() -> None:
    # Flat str/int/bool/None values take the fast path; one nested or float value the general one.
    assert canonical_json({"b": 1, "a": "x", "c": True, "d": None}) == b'{"a":"x","b":1,"c":true,"d":null}'
    assert canonical_json({"a": "x", "b": 1}) == canonical_json({"b": 1, "a": "x"}) == b'{"a":"x","b":1}'
    assert canonical_json({"b": 1.5, "a": 1}) == b'{"a":1,"b":1.5}'
    assert canonical_json({"b": [1], "a": 1}) == b'{"a":1,"b":[1]}'
    assert canonical_json({"a": "\ud800"}) == '{"a":"\ud800"}'.encode("utf-8", "surrogatepass")
    assert canonical_json({1: "x"}) == b'{"1":"x"}'
    assert canonical_json({}) == b"{}"


def test_values_that_are_not_json_are_made_json_safe_or_fall_back() -> None:
    assert canonical_json({"d": dt.date(2024, 1, 2), "s": b"hi"}) == b'{"d":"2024-01-02","s":"aGk="}'
    assert canonical_json(float("nan")) == b"NaN"
    assert canonical_json({"o": object()}).startswith(b'{"o":"<object object at ')  # repr() fallback
    deep: list[object] = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(ValueError):  # nothing can hash it: the error propagates, nothing is bound
        canonical_json(deep)


@pytest.mark.parametrize("size", [0, 15, 65])
def test_the_hash_key_must_be_16_to_64_bytes(size: int) -> None:
    with pytest.raises(ValueError, match=r"^The hash key must be 16 to 64 bytes long\.$"):
        ArgumentHasher(b"k" * size)


def test_the_hash_is_keyed_blake2b_128_of_canonical_json() -> None:
    for size in (16, 64):
        key = b"k" * size
        expected = hashlib.blake2b(b'{"a":{"x":1,"y":2}}', key=key, digest_size=16).hexdigest()
        assert ArgumentHasher(key).arguments({"a": {"y": 2, "x": 1}}) == expected
    hasher = ArgumentHasher(KEY)
    assert hasher.arguments({"a": 1}) != ArgumentHasher(b"o" * 16).arguments({"a": 1})
    assert hasher.arguments({"a": {"b": 1}}) != hasher.arguments({"a": {"b": 2}})
    assert len(hasher.arguments({})) == 32


def test_raw_arguments_hash_as_sent() -> None:
    hasher = ArgumentHasher(KEY)

    def blake(data: bytes) -> str:
        return hashlib.blake2b(data, key=KEY, digest_size=16).hexdigest()

    assert hasher.raw(None) == blake(b"")
    assert hasher.raw('{"b": 1, "a": 2}') == blake(b'{"b": 1, "a": 2}')  # text: the exact bytes
    assert hasher.raw("\ud800") == blake("\ud800".encode("utf-8", "surrogatepass"))
    assert hasher.raw({"b": 1, "a": 2}) == blake(b'{"a":2,"b":1}') == hasher.digest(b'{"a":2,"b":1}')


def test_none_and_non_finite_floats_never_share_bytes() -> None:
    # msgspec writes NaN and Infinity as null: such values must take the path that spells them apart
    spelled = {canonical_json({"x": v}) for v in (None, float("nan"), float("inf"), float("-inf"))}
    assert len(spelled) == 4
    assert canonical_json({"x": [1.5, {"n": float("nan")}]}) != canonical_json({"x": [1.5, {"n": None}]})


def test_the_canonical_form_sorts_nested_keys_and_is_deterministic() -> None:
    a = {"z": {"b": [1, {"y": 2.5, "x": "null"}], "a": "é"}, "k": (1, 2)}
    b = {"k": [1, 2], "z": {"a": "é", "b": [1, {"x": "null", "y": 2.5}]}}
    assert canonical_json(a) == canonical_json(b) == canonical_json(a)
    assert canonical_json(a) == '{"k":[1,2],"z":{"a":"é","b":[1,{"x":"null","y":2.5}]}}'.encode()
    assert canonical_json({"big": 2**80}) == b'{"big":1208925819614629174706176}'


@pytest.mark.parametrize(
    "value",
    [
        {"b": 1, "a": 2},
        {"x": None},
        {"x": float("nan")},
        {1: "x"},
        {"s": "\ud800"},
        {"n": "null"},
        {"big": 2**70},
    ],
)
def test_arguments_hashes_exactly_the_canonical_json(value: Any) -> None:
    hasher = ArgumentHasher(KEY)
    expected = hashlib.blake2b(canonical_json(value), key=KEY, digest_size=16).hexdigest()
    assert hasher.arguments(value) == expected


def test_plain_json_takes_msgspec_spelling_and_only_null_bearing_output_takes_the_stdlib_path() -> None:
    # msgspec writes 1e-7 where the stdlib writes 1e-07: which path ran is visible in the bytes. Plain data
    # (with an "n" in it but no null) is msgspec's; output holding a null goes the stdlib way (None and NaN
    # must not meet as `null`).
    plain = {"name": "n", "x": 1e-7}
    assert canonical_json(plain) == b'{"name":"n","x":1e-7}'
    assert (
        ArgumentHasher(KEY).arguments(plain)
        == hashlib.blake2b(b'{"name":"n","x":1e-7}', key=KEY, digest_size=16).hexdigest()
    )
    assert canonical_json({"a": None, "x": 1e-7}) == b'{"a":null,"x":1e-07}'


def test_bytes_inside_values_are_url_safe_base64_in_the_canonical_form() -> None:
    assert canonical_json({"b": [b"\xff\x00"], "a": None}) == b'{"a":null,"b":["_wA="]}'  # URL-safe base64
