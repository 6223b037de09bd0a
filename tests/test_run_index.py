"""RunIndex (ctxplugin._run_index): whatever was added and dropped, the candidates for a text
are the indexed values whose every run is the text's, so every indexed value the text holds is
among them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctxplugin._run_index import RunIndex
from ctxplugin.history.identifiers import RUN, occurs, text_runs, value_runs

VALUES = ["HAT1367", "getitem_start", "in_getitem", "/testbed/src/a.py", "a.py", "v2.1", "2.10", "ünï_cødé", "***", "--->",
          "line one\nline two", "Does not have getitem method", "getitem", "src", "Ⅻ12", "x²", "٣٣", "py"]


@given(
    st.lists(st.tuples(st.sets(st.sampled_from(VALUES)), st.sets(st.sampled_from(VALUES))), min_size=1, max_size=8),
    st.lists(st.sampled_from([*VALUES, "x", "method", "getitem_end", " ", "/"]), max_size=12),
)
def test_candidates_are_the_indexed_values_whose_runs_a_text_has(steps: list[tuple[set[str], set[str]]], words: list[str]) -> None:
    index = RunIndex()
    held: set[str] = set()
    for added, dropped in steps:
        index.add(added - held)
        held |= added
        index.discard(dropped)
        held -= dropped
    text = " ".join(words)
    runs = frozenset(RUN.findall(text))
    got = index.candidates(runs)
    ranged = {v for v in held if "\n" not in v and value_runs(v)}
    assert sorted(got) == sorted(v for v in ranged if runs.issuperset(value_runs(v)))
    assert {v for v in ranged if occurs(v, text)} <= set(got)
    assert set(index.bare) == {v for v in held if "\n" not in v and not value_runs(v)}
    assert set(index.lined) == {v for v in held if "\n" in v}


@given(
    st.sets(st.sampled_from(VALUES)),
    st.lists(st.lists(st.sampled_from([*VALUES, "x", "method", "getitem_end", " ", "/", "(", "7"]), max_size=8), max_size=4),
    st.sets(st.sampled_from(VALUES)),
)
def test_the_values_found_in_texts_are_those_their_joined_text_holds_each_with_the_first_text_holding_it(
    held: set[str], texts: list[list[str]], unwanted: set[str]
) -> None:
    index = RunIndex()
    index.add(held)
    parts = ["".join(words) for words in texts]  # words run into each other: values inside longer tokens too
    given_texts = [(key, text, frozenset(RUN.findall(text))) for key, text in enumerate(parts)]
    got = index.found_in(given_texts, lambda v: v not in unwanted)
    joined = "\n".join(parts)
    expected = [v for v in held if "\n" not in v and v not in unwanted and occurs(v, joined)]
    assert sorted(v for v, _ in got) == sorted(expected)
    for value, key in got:
        assert occurs(value, parts[key]) and not any(occurs(value, text) for text in parts[:key])


@given(st.one_of(st.text(st.characters(max_codepoint=127)), st.text(), st.text(st.sampled_from("aZ9_ \x1c\x1f\x0b\x85ｚ٣é-\n"))))
def test_the_runs_of_a_text_are_those_the_pattern_finds(text: str) -> None:
    """ASCII texts (with the separators str.split takes as blanks among them) and all others."""
    assert text_runs(text) == frozenset(RUN.findall(text))


@given(st.one_of(st.text(st.characters(max_codepoint=127)), st.text(st.sampled_from("ab9_ /.\n"))))
def test_the_runs_of_a_value_are_its_runs_each_once_in_order(value: str) -> None:
    assert value_runs(value) == tuple(dict.fromkeys(RUN.findall(value)))


def test_dropped_values_leave_no_trace_in_the_index() -> None:
    """The index stays as large as the values it holds, values that are one run whole among them."""
    index = RunIndex()
    index.add(["HAT1367", "Ⅻ12", "HAT1367.py", "a.py"])
    index.discard(["HAT1367", "Ⅻ12", "a.py"])
    assert index.candidates(frozenset({"HAT1367", "Ⅻ12", "py", "a"})) == ["HAT1367.py"]
    index.discard(["HAT1367.py"])
    assert index._by_run == {}


def test_a_value_that_is_one_run_whole_is_found_where_it_is_a_whole_token_only() -> None:
    index = RunIndex()
    index.add(["HAT1367", "x²", "٣٣"])
    texts = ["HAT13670 x²y ٣٣٣", "(HAT1367) _x²_", "٣٣,HAT1367"]
    given_texts = [(key, text, frozenset(RUN.findall(text))) for key, text in enumerate(texts)]
    assert sorted(index.found_in(given_texts, lambda v: True)) == [("HAT1367", 1), ("x²", 1), ("٣٣", 2)]
