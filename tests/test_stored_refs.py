"""StoredRefs (ctxplugin._stored_refs): the tool calls whose ref a view shows, from a map of
refs that grows, changes an item or loses one between calls, are those a read of the whole map
finds."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctxplugin._message_values import refs_in
from ctxplugin._stored_refs import GrownRefs, StoredRefs

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


@given(st.lists(st.tuples(st.dictionaries(st.sampled_from(CALLS), st.sampled_from(REFS)), st.sampled_from(["grown", "plain", "fresh", "same", "unread"]),
                          st.lists(st.sampled_from(REFS))), min_size=1, max_size=8))
def test_a_map_that_says_what_it_grew_by_gets_the_calls_a_read_of_the_whole_map_finds(
    steps: list[tuple[dict[str, str], str, list[str]]],
) -> None:
    """Maps grown from the one read last, from one never read, plain maps among them, and the
    same map twice."""
    refs = StoredRefs()
    last: GrownRefs | None = None
    for more, how, shown in steps:
        if how == "grown" and last is not None:
            added = [(c, r) for c, r in more.items() if c not in last]
            stored: dict[str, str] = GrownRefs({**last, **dict(added)}, last, added)
        elif how == "same" and last is not None:
            stored = last
        else:
            stored = GrownRefs(more) if how == "fresh" else dict(more)
        last = stored if isinstance(stored, GrownRefs) else GrownRefs(stored)  # the next map may grow from one never read
        if how == "unread":  # a call whose view was never accounted for
            continue
        text = "summary " + " and ".join(shown)
        assert sorted(refs.calls_shown(stored, refs_in(text), text.__str__)) == sorted(read_whole(stored, text))
