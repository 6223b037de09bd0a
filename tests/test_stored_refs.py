"""StoredRefs (ctxplugin._stored_refs): the tool calls whose ref a view shows, from a map of
refs that grows, changes an item or loses one between calls, are those a read of the whole map
finds."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctxplugin._message_values import refs_in
from ctxplugin._stored_refs import StoredRefs

REFS = ["ref:bash:0123456789abcdef", "ref:json:fedcba9876543210", "ref:bash:00000000000000ff", "odd-ref", "ref:short"]
CALLS = [f"c{i}" for i in range(8)]


def read_whole(stored: dict[str, str], text: str) -> set[str]:
    return {call_id for call_id, ref in stored.items() if ref in text}


@given(st.lists(st.tuples(st.dictionaries(st.sampled_from(CALLS), st.sampled_from(REFS)), st.lists(st.sampled_from(REFS))), min_size=1, max_size=8))
def test_the_calls_shown_are_those_a_read_of_the_whole_map_finds(calls: list[tuple[dict[str, str], list[str]]]) -> None:
    refs = StoredRefs()
    for stored, shown in calls:
        text = "summary " + " and ".join(shown)
        assert sorted(refs.calls_shown(stored, refs_in(text), text.__str__)) == sorted(read_whole(stored, text))


def test_a_map_that_grows_changes_or_shrinks_is_read_as_it_is_now() -> None:
    refs = StoredRefs()
    a, b = "ref:bash:0123456789abcdef", "ref:json:fedcba9876543210"
    text = f"see {a}"
    assert refs.calls_shown({"c1": a}, refs_in(text), lambda: text) == ["c1"]
    assert sorted(refs.calls_shown({"c1": a, "c2": a}, refs_in(text), lambda: text)) == ["c1", "c2"]  # grew
    assert refs.calls_shown({"c1": a, "c2": b}, refs_in(text), lambda: text) == ["c1"]  # an item changed, same size
    assert refs.calls_shown({"c1": b, "c2": b, "c3": a}, refs_in(text), lambda: text) == ["c3"]  # changed and grew
    assert refs.calls_shown({"c3": b}, refs_in(text), lambda: text) == []  # shrank
