"""The passes over a record set (keys and their types, categorical columns) gather columns in C;
what they find is what a loop over every record's items finds, for any records."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxplugin.cas._records import _STATUS_KEY, _categorical, key_types


def _name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object" if isinstance(value, dict) else "array"


def key_types_one_by_one(records: list[dict[str, Any]]) -> list[tuple[str, str, int]]:
    seen: dict[str, Counter[str]] = {}
    counts: Counter[str] = Counter()
    for record in records:
        for key, value in record.items():
            seen.setdefault(key, Counter())[_name(value)] += 1
            counts[key] += 1
    return [(k, "/".join(t for t, _ in types.most_common(2)), counts[k]) for k, types in seen.items()]


def categorical_one_by_one(records: list[dict[str, Any]]) -> list[tuple[str, Counter[str]]]:
    values: dict[str, Counter[str]] = {}
    dead: set[str] = set()
    for record in records:
        for key, value in record.items():
            if key in dead or not isinstance(value, (str, bool)) or len(str(value)) > 40:
                continue
            counter = values.setdefault(key, Counter())
            counter[str(value).lower() if isinstance(value, bool) else value] += 1
            if len(counter) > 24:
                dead.add(key)
    n, out = len(records), []
    for key, counter in values.items():
        total, distinct = sum(counter.values()), len(counter)
        if key not in dead and not (total * 2 < n or distinct < 2 or distinct * 3 > total):
            out.append((key, counter))
    out.sort(key=lambda kc: (0 if _STATUS_KEY.search(kc[0]) else 1, -max(kc[1].values()) / sum(kc[1].values())))
    return out


VALUES = st.sampled_from(["ok", "failed", "true", "True", "x" * 41, "", 0, 1, 1.0, 0.0, True, False, None, 2, 7.5, [1], {"a": 1}])
KEYS = ("status", "level", "id", "n", "note")


@st.composite
def record_sets(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Records whose columns each draw from a few values, mixing what is counted (short text,
    booleans) with what is not (numbers, among them 1 and 0, which hash as True and False;
    objects; long text), keys in any order; one column may hold a new value in every record."""
    pools = [draw(st.lists(VALUES, min_size=1, max_size=3)) for _ in KEYS]
    unique = draw(st.sampled_from([None, *KEYS]))
    rows = draw(st.lists(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 2)), min_size=3, max_size=9), min_size=5, max_size=80))
    return [
        {KEYS[k]: f"v{n}" if KEYS[k] == unique else pools[k][i % len(pools[k])] for k, i in row}
        for n, row in enumerate(rows)
    ]


RECORDS = record_sets()


@settings(max_examples=300, deadline=None)
@given(RECORDS)
def test_key_types_are_those_a_loop_over_every_record_finds(records: list[dict[str, Any]]) -> None:
    assert key_types(records) == key_types_one_by_one(records)


# equal shares: the column first counted first (not the key first seen, with a number)
TIED = [{"note": 5, "id": "x"}, {"note": "p", "id": "y"}, *({"note": "pq"[i % 2], "id": "xy"[i % 2]} for i in range(10)), {"note": "q"}]
BOOLEANS = [{"status": True}, {"status": "ok"}, {"status": 1}] * 4  # True and 1 are one key of a dict


@settings(max_examples=300, deadline=None)
@given(RECORDS)
@example(TIED).via("equal shares")
@example(BOOLEANS).via("booleans beside numbers")
def test_categorical_columns_are_those_a_loop_over_every_record_finds(records: list[dict[str, Any]]) -> None:
    got, expected = _categorical(records), categorical_one_by_one(records)
    assert got == expected
    assert [list(c.items()) for _, c in got] == [list(c.items()) for _, c in expected]  # in first-seen order
