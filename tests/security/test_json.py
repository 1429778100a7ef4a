"""The JSON gate: only values every backend stores and returns unchanged get in."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caderno.core.errors import UsageError
from caderno.core.jsonvalue import (
    MAX_JSON_DEPTH,
    MAX_MESSAGE_CHARS,
    MAX_MESSAGES_PER_APPEND,
    MAX_METADATA_BYTES,
    MAX_PATCH_BYTES,
    check_json,
    dumps_strict,
    loads_strict,
)

TEXT = st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=20)
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TEXT
JSON_VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(TEXT, inner, max_size=5), max_leaves=30
)


def test_policy_constants_are_sane() -> None:
    assert MAX_MESSAGE_CHARS >= 100_000 and MAX_PATCH_BYTES >= 64 * 1024
    assert 16 <= MAX_JSON_DEPTH <= 256 and MAX_MESSAGES_PER_APPEND >= 1000 and MAX_METADATA_BYTES >= 4096


@pytest.mark.parametrize(
    "value,path",
    [
        ({"a": [1, 2, 3, {"b": math.nan}]}, r"metadata\.a\[3\]\.b"),
        ({"x": math.inf}, r"metadata\.x"),
        ([-math.inf], r"metadata\[0\]"),
        ({1: "int key"}, "non-string key"),
        ({"a": {(1, 2): 3}}, r"metadata\.a has a non-string key"),
        ({"s": {1, 2}}, r"metadata\.s is of type set"),
        ({"b": b"bytes"}, r"metadata\.b is of type bytes"),
        ({"o": object()}, r"metadata\.o is of type object"),
        ({"t": (1, 2)}, r"metadata\.t is a tuple; use a list"),
        ({"n": "nul\x00here"}, r"metadata\.n contains a NUL"),
        ({"k": "lone \ud800 surrogate"}, r"metadata\.k is not valid Unicode"),
        ({"bad\x00key": 1}, r"a key of metadata contains a NUL"),
        ({"with space": [math.nan]}, r'metadata\["with space"\]\[0\]'),
        ({"big": 10**5000}, r"metadata\.big is an integer"),
        ({"é\nx": {"y": math.nan}}, r'metadata\["\\u00e9\\nx"\]\.y'),
        ({"é\ud800": 1}, r"a key of metadata is not valid Unicode"),
        ({"k" * 100: math.nan}, r'metadata\["k{40}…"\]'),
    ],
)
def test_refusals_name_the_path(value: Any, path: str) -> None:
    with pytest.raises(UsageError, match=path):
        check_json(value, "metadata", max_bytes=None)


def test_depth_limit_without_recursion() -> None:
    deep: Any = "leaf"
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(UsageError, match="nests deeper than 64 levels"):
        check_json(deep, "patch", max_bytes=None)
    ok: Any = 1
    for _ in range(MAX_JSON_DEPTH):
        ok = {"a": ok}
    check_json(ok, "patch", max_bytes=None)
    with pytest.raises(UsageError, match="deeper than 64"):
        check_json({"wrap": ok}, "patch", max_bytes=None)


def test_a_self_containing_value_is_refused_not_walked_forever() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(UsageError, match="deeper"):
        check_json(loop, "metadata", max_bytes=None)


def test_size_limit_counts_utf8_bytes() -> None:
    check_json({"s": "é" * 10}, "metadata", max_bytes=len('{"s":""}') + 20)
    with pytest.raises(UsageError, match="bytes as JSON"):
        check_json({"s": "é" * 10}, "metadata", max_bytes=len('{"s":""}') + 19)
    with pytest.raises(UsageError, match="longer than the 100 bytes"):
        check_json(["x" * 101], "patch", max_bytes=100)


def test_loads_strict() -> None:
    assert loads_strict('{"a": [1, 2.5, null, "é"]}', "body") == {"a": [1, 2.5, None, "é"]}
    assert loads_strict(b'{"a": 1}', "body") == {"a": 1}
    for constant in ("NaN", "Infinity", "-Infinity"):
        with pytest.raises(UsageError, match=f"body is not valid JSON: {constant}"):
            loads_strict(f'{{"a": {constant}}}', "body")
    with pytest.raises(UsageError, match="duplicate key 'a'"):
        loads_strict('{"a": 1, "a": 2}', "body")
    with pytest.raises(UsageError, match=r"not valid JSON: Expecting .*line 1"):
        loads_strict('{"a": ', "body")
    with pytest.raises(UsageError, match="NUL"):
        loads_strict('"\\u0000"', "body")
    with pytest.raises(UsageError, match="lone surrogate"):
        loads_strict('"\\ud800"', "body")
    with pytest.raises(UsageError, match="not UTF-8"):
        loads_strict(b'"\xff"', "body")
    with pytest.raises(UsageError, match="longer than the 10 bytes"):
        loads_strict('"' + "x" * 20 + '"', "body", max_bytes=10)
    with pytest.raises(UsageError, match="body is not valid JSON"):
        loads_strict("1" * 5000, "body")


@pytest.mark.parametrize("depth", [65, 5_000, 100_000])
def test_loads_strict_deep_nesting_is_a_clean_error(depth: int) -> None:
    with pytest.raises(UsageError, match="nests deeper than 64"):
        loads_strict("[" * depth + "]" * depth, "body")


def test_dumps_strict() -> None:
    assert dumps_strict({"a": [1, "é"]}) == '{"a":[1,"é"]}'
    with pytest.raises(UsageError, match="args cannot be encoded"):
        dumps_strict({"a": math.nan}, "args")
    with pytest.raises(UsageError, match="cannot be encoded"):
        dumps_strict({"a": {1, 2}})


@settings(max_examples=200, deadline=None)
@given(JSON_VALUES)
def test_json_values_round_trip(value: Any) -> None:
    check_json(value, "value", max_bytes=None)
    text = dumps_strict(value)
    assert loads_strict(text, "value") == value


@st.composite
def with_nan(draw: st.DrawFn) -> Any:
    """A JSON value with NaN or ±Infinity put somewhere inside it."""
    bad = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
    value = draw(JSON_VALUES)
    if isinstance(value, dict) and value:
        key = draw(st.sampled_from(sorted(value)))
        value[key] = [value[key], bad] if draw(st.booleans()) else bad
        return value
    if isinstance(value, list):
        value.insert(draw(st.integers(0, len(value))), bad)
        return value
    return {"wrapped": [value, {"x": bad}]}


@settings(max_examples=200, deadline=None)
@given(with_nan())
def test_nan_anywhere_is_refused(value: Any) -> None:
    with pytest.raises(UsageError, match="NaN or Infinity"):
        check_json(value, "value", max_bytes=None)
    with pytest.raises(UsageError):
        dumps_strict(value)
    with pytest.raises(UsageError, match="not valid JSON"):
        loads_strict(json.dumps(value), "value")
