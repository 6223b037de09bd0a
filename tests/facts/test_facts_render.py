"""The texts the facts block is checked against: the standing text a fact may only repeat."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxplugin.facts.render import collapsed, restates

_PIECES = ["Budget", "is", "$500", ".", " ", "  ", "\n", "\t", "\r\n", "\u00a0", "\u2003", "\u3000", "\x1c", "\x85", "\u2028", "\u200b", "Ω"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40))
def test_every_run_of_whitespace_is_collapsed_to_one_space_at_the_ends_too(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert collapsed(text) == re.sub(r"\s+", " ", text).lower()


def test_a_fact_said_across_lines_of_the_standing_text_restates_it() -> None:
    shown = collapsed("\n  The BUDGET for the offsite\n\tis $500.\u00a0 ")
    assert shown == " the budget for the offsite is $500. "
    assert restates("The budget for the offsite is $500.", shown)
