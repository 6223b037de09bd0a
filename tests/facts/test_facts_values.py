"""Typed values for implicit supersession: what is found, how it is normalised, what conflicts."""

from __future__ import annotations

import pytest

from ctxplugin.facts._values import conflicting, keeps_bound, read_values, typed_values


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Meeting is Tuesday at 2pm", {"day": {"tuesday"}, "time": {"14:00"}}),
        ("Let's meet Thu. at 14:00", {"day": {"thursday"}, "time": {"14:00"}}),
        ("The call is tomorrow at noon", {"day": {"tomorrow"}, "time": {"12:00"}}),
        ("Check-in at 11:30 a.m. and out by 12am", {"time": {"11:30", "00:00"}}),
        ("Fly out May 20th, back on 2024-06-02", {"date": {"05-20", "06-02"}}),
        ("Due the 1st of March", {"date": {"03-01"}}),
        ("Budget is $50k", {"money": {"$50000"}}),
        ("We can spend 50,000 USD or €1.5m", {"money": {"$50000", "€1500000"}}),
        ("A 15% discount, or 12.5 percent for members", {"percent": {"15%", "12.5%"}}),
        ("I sat down with the team", {}),
        ("Release v1.2 ships in build 3000", {}),
    ],
)
def test_typed_values_are_found_and_normalised(text: str, expected: dict[str, set[str]]) -> None:
    assert {kind: set(values) for kind, values in typed_values(text).items()} == expected


@pytest.mark.parametrize(
    ("old", "new", "kinds"),
    [
        ("Meeting is Tuesday at 2pm", "Let's do the meeting Thursday at 3pm", ["day", "time"]),
        ("Meeting is Tuesday at 2pm", "The meeting stays Tuesday, now at 14:30", ["time"]),
        ("Budget is $50k", "Budget is now $50,000", []),  # the same amount written another way
        ("Standup is Monday", "Standup is Monday and Friday", []),  # an addition, not a conflict
        ("Discount is 15%", "The discount deadline is Friday", []),  # no shared type
        ("Flight on May 20", "Flight on 2025-05-21", ["date"]),
    ],
)
def test_conflicts_need_a_shared_type_with_values_on_both_sides(old: str, new: str, kinds: list[str]) -> None:
    assert conflicting(old, new) == kinds


@pytest.mark.parametrize(
    ("text", "points", "bounds"),
    [
        ("I prefer flights departing after 8am and before 9pm", {}, {"time": {("08:00", False), ("21:00", True)}}),
        ("Anything between 8 am and 9 pm", {}, {"time": {("08:00", False), ("21:00", True)}}),
        ("I'm willing to pay up to $600", {}, {"money": {("$600", True)}}),
        ("Make the changes within a fee of $200", {}, {"money": {("$200", True)}}),
        ("I don't want to fly before 11 AM", {}, {"time": {("11:00", False)}}),  # the negation turns it round
        ("Not before 9am, no later than 5pm", {}, {"time": {("09:00", False), ("17:00", True)}}),
        ("The 9:15 flight works", {"time": {"09:15"}}, {}),
        ("Meeting moved from 2pm to 3pm", {"time": {"14:00", "15:00"}}, {}),
    ],
)
def test_values_after_a_limit_word_are_bounds(
    text: str, points: dict[str, set[str]], bounds: dict[str, set[tuple[str, bool]]]
) -> None:
    found = read_values(text)
    assert {kind: set(values) for kind, values in found.points.items()} == points
    assert {kind: {(b.value, b.upper) for b in values} for kind, values in found.bounds.items()} == bounds


@pytest.mark.parametrize(
    ("old", "new", "kinds"),
    [
        ("A flight after 8 am", "The 9:15 flight works", []),  # meets the bound
        ("A flight after 8 am", "The 7am flight is fine", ["time"]),  # breaks it
        ("A flight after 8 am", "A flight after 10 am", ["time"]),  # another bound
        ("Up to $600 for the upgrade", "The $450 upgrade", []),
        ("Up to $600 for the upgrade", "The $750 upgrade", ["money"]),
        ("Refunds close on Friday", "Refunds are open until Sunday", ["day"]),  # a value, then a bound
    ],
)
def test_a_value_that_meets_a_bound_is_no_conflict(old: str, new: str, kinds: list[str]) -> None:
    assert conflicting(old, new) == kinds


@pytest.mark.parametrize(
    ("old", "new", "kept"),
    [
        ("I'd prefer a flight after 8 am", "I'd like the HAT266 flight", True),
        ("I'd prefer a flight after 8 am", "Make it the 9:15 flight", True),
        ("I'd prefer a flight after 8 am", "Make it the 7am flight", False),
        ("I'd prefer a flight after 8 am", "I'd prefer a flight after 10 am", False),
        ("I'd prefer an aisle seat", "Make it a window seat", False),  # no bound to keep
    ],
)
def test_a_bound_stands_until_another_bound_or_a_breaking_value(old: str, new: str, kept: bool) -> None:
    assert keeps_bound(old, new) is kept


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("We expect 5 people.", {"people:5"}),
        ("seven guests and 3 rooms", {"guest:7", "room:3"}),
        ("seven guests and 2 more rooms", {"guest:7"}),  # 2 rooms added to others: no count of its own
        ("1 person, 3 kids", {"people:1", "child:3"}),
        ("2.5 people on average", set()),  # a number's fraction is not a count of its own
        ("version 1.3 users", set()),
    ],
)
def test_counts_of_a_unit_are_typed_values(text: str, expected: set[str]) -> None:
    assert typed_values(text).get("count", frozenset()) == expected


@pytest.mark.parametrize(
    ("old", "new", "kinds"),
    [
        ("We expect 5 people.", "Actually 7 people will come.", ["count"]),
        ("We expect 5 people.", "We need 3 rooms.", []),
        ("We expect 5 people.", "2 more people will come.", []),
        ("at most 10 people", "at most 3 bags", []),
        ("at most 10 people", "12 people will come", ["count"]),
        ("at most 10 people", "8 people will come", []),
    ],
)
def test_counts_conflict_only_within_their_unit(old: str, new: str, kinds: list[str]) -> None:
    assert conflicting(old, new) == kinds
