"""Canonical hashing and ref ids."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxplugin.cas import (
    canonical_json,
    check_ref,
    content_hash,
    normalize_text,
    parse_json,
    raw_hash,
)
from ctxplugin.cas._canon import kind_slug, make_ref
from ctxplugin.errors import InvalidInputError
from ctxplugin.tokens import count_text, get_counter

COUNTER = get_counter()[0]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=30,
)


def test_json_key_order_and_whitespace_do_not_change_the_hash() -> None:
    a = '{"b": 1, "a": [1, 2, {"y": null, "x": "é"}]}'
    b = '{\n  "a": [1,2,{"x":"é","y":null}],\n  "b": 1\n}'
    assert content_hash(a) == content_hash(b)
    assert raw_hash(a) != raw_hash(b)
    assert content_hash(a) != content_hash('{"b": 2, "a": [1, 2, {"y": null, "x": "é"}]}')


def test_text_line_endings_and_trailing_whitespace_do_not_change_the_hash() -> None:
    assert content_hash("a  \r\nb\t\r\n\n") == content_hash("a\nb")
    assert content_hash("a\nb") != content_hash("a\n b")  # leading whitespace matters
    assert normalize_text("x \r\ny\r") == "x\ny"


@settings(max_examples=50, deadline=None)
@given(JSON)
def test_canonical_json_is_stable_under_reformatting(value: object) -> None:
    compact = json.dumps(value)
    pretty = json.dumps(value, indent=3, sort_keys=False)
    if isinstance(value, (dict, list)):
        assert content_hash(compact) == content_hash(pretty)
        assert parse_json(pretty) == (True, value)
    assert canonical_json(value) == json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def test_json_lookalikes_and_deep_nesting_hash_as_text() -> None:
    assert parse_json('{"a": 1') == (False, None)
    assert parse_json("[" * 100_000 + "]" * 100_000) == (False, None)  # too deep for the parser
    assert parse_json("42") == (False, None)  # scalars read as text
    deep = "[" * 100_000 + "]" * 100_000
    assert content_hash(deep) == content_hash(deep + "\n")


def test_ref_ids() -> None:
    ref = make_ref(kind_slug("Search Flights!", "json"), content_hash("x"))
    assert ref.startswith("ref:search_flights:") and len(ref.rsplit(":", 1)[1]) == 16
    assert check_ref(ref) == ref
    assert kind_slug(None, "command") == "command"
    assert kind_slug("___", "log") == "log"
    assert kind_slug("a" * 100, "x") == "a" * 40
    for bad in ("ref:bash:0123", "ref::0123456789abcdef", "bash", 7, None):
        with pytest.raises(InvalidInputError, match="not a ref id"):
            check_ref(bad)


def test_surrogates_hash_and_round_trip() -> None:
    text = b"caf\xe9 \xff".decode("utf-8", "surrogateescape")
    assert len(raw_hash(text)) == 64 and len(content_hash(text)) == 64


def test_token_counts_stay_close_for_long_ordinary_text() -> None:
    text = " ".join(f"word{i} value={i * 7}" for i in range(60_000))  # ~900 KB: sampled
    exact = sum(COUNTER.count(text[i : i + 100_000]) for i in range(0, len(text), 100_000))
    assert abs(count_text(text, COUNTER) - exact) / exact < 0.05
    medium = text[:200_000]  # counted in pieces: exact up to the cut points
    assert abs(count_text(medium, COUNTER) - COUNTER.count(medium)) <= 5
