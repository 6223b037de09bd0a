"""The chunks a text's values are looked for in: every chunk but plain words, whatever the
memo of chunks already seen holds."""

from __future__ import annotations

import pytest

from ctxplugin.history import _plain


def _reference(text: str) -> list[str]:
    return [chunk for chunk in text.split() if _plain._is_scanned(chunk)]


TEXTS = [
    "The build (defaced) used Deadbeef, then cafebabe1. See app.py and run_tests.",
    "the the THE The tHe (word) word, 'quoted' `tick` x=1 /repo/a.py",
    "effaced acceded faded Faded FACADED " + "x" * 100 + " " + "plain" * 20,
    "ValueError: bad value at line 12 in module.py",
]


def test_chunks_are_the_same_when_the_memo_fills_and_is_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_plain, "MEMO_CHUNKS", 5)
    monkeypatch.setattr(_plain, "_scanned", {})
    for text in TEXTS * 3:
        assert _plain.scanned_chunks(text) == _reference(text)
        assert len(_plain._scanned) <= 5


def test_long_chunks_are_not_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_plain, "_scanned", {})
    long = "x1" * _plain.MEMO_CHARS
    assert _plain.scanned_chunks(f"a {long} b_c") == [long, "b_c"]
    assert set(_plain._scanned) == {"a", "b_c"}


def test_a_text_of_more_chunks_than_the_memo_holds_leaves_it_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_plain, "MEMO_CHUNKS", 5)
    monkeypatch.setattr(_plain, "_scanned", {})
    _plain.scanned_chunks("a b_c")
    huge = " ".join(f"w{i} word" for i in range(50))
    assert _plain.scanned_chunks(huge) == _reference(huge)
    assert _plain._scanned == {"a": False, "b_c": True}
