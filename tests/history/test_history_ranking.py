"""A ranking read lazily, and what a fill leaves for the next, read as the lists they stand for."""

from __future__ import annotations

import numpy as np

from ctxplugin.history._ranking import Later, Ranking


def test_a_ranking_reads_as_its_pairs_in_the_order_of_its_rows_in_every_chunk() -> None:
    pairs = [("ran", f"v{n}") for n in range(700)]
    rows = np.random.default_rng(3).permutation(700)
    listed = [pairs[row] for row in rows]
    ranking = Ranking(pairs, rows)
    assert list(ranking) == listed and len(ranking) == 700
    assert ranking[0] == listed[0] and ranking[-1] == listed[-1] and ranking[300] == listed[300]
    assert list(ranking[260:]) == listed[260:] and list(ranking[10:20]) == listed[10:20]
    assert list(Ranking(pairs, rows[:0])) == []


def test_what_a_fill_leaves_reads_as_the_list_of_both_parts() -> None:
    first = [("ran", "a"), ("ran", "b")]
    rest = Ranking([("path", f"p{n}") for n in range(5)], np.arange(4, -1, -1))
    later = Later(first, rest)
    whole = first + list(rest)
    assert list(later) == whole and len(later) == 7
    for start in range(8):
        assert list(later[start:]) == whole[start:]
    assert [later[i] for i in range(-7, 7)] == whole + whole
    assert (
        list(later[1:4]) == whole[1:4]
        and list(later[::2]) == whole[::2]
        and list(later[-3:]) == whole[-3:]
    )
    assert list(Later([], rest)[2:]) == list(rest)[2:]
