"""Ranked (ctxplugin._ranked): a set kept in first-seen order by its changes lists what a
filter of every value seen would list, whatever the changes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctxplugin._ranked import Ranked

VALUES = [f"v{i}" for i in range(40)]
RANK = {value: i for i, value in enumerate(VALUES)}


@given(st.lists(st.sets(st.sampled_from(VALUES)), min_size=1, max_size=12))
def test_updates_list_the_set_in_rank_order(states: list[set[str]]) -> None:
    """Each step moves the set to the next state; where update refuses, reset lists it again."""
    ranked = Ranked()
    held: set[str] = set()
    for state in states:
        version = ranked.version
        if not ranked.update(held - state, state - held, RANK):
            ranked.reset(filter(state.__contains__, VALUES), RANK)
        assert ranked.values == [v for v in VALUES if v in state]
        assert ranked.version != version or state == held
        held = state


def test_a_small_change_is_made_in_place_and_a_large_one_refused() -> None:
    ranked = Ranked()
    ranked.reset(VALUES[::2], RANK)  # twenty values
    assert ranked.update({"v4"}, {"v5", "v39"}, RANK)
    assert ranked.values == sorted({*VALUES[::2], "v5", "v39"} - {"v4"}, key=RANK.__getitem__)
    assert not ranked.update(set(VALUES[::2][:10]), set(), RANK)


def test_a_value_not_where_its_rank_says_is_refused() -> None:
    """The caller's sets disagree with the list (a value said to be held is not, or one said to
    be new is): update says so instead of listing a wrong set."""
    ranked = Ranked()
    ranked.reset(["v1", "v3", "v5"], RANK)
    assert not ranked.update({"v2"}, set(), RANK)
    ranked.reset(["v1", "v3", "v5"], RANK)
    assert not ranked.update(set(), {"v3"}, RANK)
