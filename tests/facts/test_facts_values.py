"""Typed values for implicit supersession: what is found, how it is normalised, what conflicts."""

from __future__ import annotations

import pytest

from ctxplugin.facts._values import conflicting, typed_values


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
