"""The scans that guard the JSON parser: what they find in a text, checked against the value
the text holds and against the patterns they stand for."""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxplugin._untrusted import _FINE_NUMBER, _number_shapes, json_depth_exceeds, nesting_exceeds

# strings full of what a scan could take for structure: brackets, quotes, backslashes, escapes
TRICKY = st.text(st.sampled_from(list('[]{}"\\ab\n\u00e9\ud800')), max_size=8)
VALUES = st.recursive(
    st.none() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TRICKY,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TRICKY, inner, max_size=3),
    max_leaves=40,
)


@settings(max_examples=400, deadline=None)
@given(VALUES, st.integers(min_value=0, max_value=6), st.booleans())
def test_json_depth_is_the_nesting_of_the_value_the_text_holds(value: Any, limit: int, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, indent=None if limit % 2 else 1)
    assert json_depth_exceeds(text, limit) is nesting_exceeds(value, limit)


def test_json_depth_counts_brackets_outside_strings_only() -> None:
    deep = "[" * 120 + "]" * 120
    assert json_depth_exceeds(deep) and json_depth_exceeds('["\\\\", ' + deep + "]")
    assert not json_depth_exceeds(json.dumps(["[" * 120, '\\"' + "{" * 120, "\\" * 3 + "[" * 120]))


NUMBERISH = st.lists(
    st.text(st.sampled_from(list("0123456789")), min_size=1, max_size=18) | st.sampled_from(list(".eE+- a\"[,\u0663")),
    max_size=12,
).map("".join)
_FINE = re.compile(r"[0-9](?:\.?[0-9]){15}|[eE][-+]?[0-9]{3}")


@settings(max_examples=400, deadline=None)
@given(NUMBERISH)
@example("[1e-400]").via("an exponent too small")
@example("[2.5E+308]").via("an exponent too large")
@example("[0.1000000000000000055]").via("more digits than a float keeps")
@example("[1234567.123456789]").via("sixteen digits around a point")
def test_the_number_scan_finds_every_literal_the_patterns_find(text: str) -> None:
    # finding more costs only time (each number is then checked in Python); finding less would
    # let a float that does not keep its literal, or a huge integer, through
    shapes = _number_shapes(text)
    if _FINE.search(text):
        assert any(run in shapes for run in _FINE_NUMBER)
    if re.search(r"[0-9]{6}", text):
        assert b"0" * 6 in shapes
