"""Values are found in a tool output's text with its plain words left out of the scan: the
same values, in the same order, as scanning all of it."""

from __future__ import annotations

import importlib
import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxplugin.replay.loaders import load_file

module = importlib.import_module("ctxplugin.history.identifiers")  # the package exports a function of that name

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("CTXPLUGIN_DATA", ROOT.parent.parent / "shared" / "data"))
if not DATA.is_dir():
    DATA = ROOT.parent / "shared" / "data"

SCAN = module._read_identifiers


def _whole(text: str) -> tuple[str, ...]:
    """The values found scanning all of ``text``."""
    original = module.__dict__["_scans"]
    module.__dict__["_scans"] = lambda t: [(t, module._CANDIDATE)]
    try:
        return SCAN(text)  # type: ignore[no-any-return]
    finally:
        module.__dict__["_scans"] = original


def _texts() -> list[str]:
    texts: list[str] = []
    for path in [*sorted((DATA / "trajectories" / "swe").glob("*.traj.json")), DATA / "trajectories" / "tau" / "gpt-4o-airline-dev.json"]:
        for conversation in load_file(path).conversations:
            texts.extend(m.content for m in conversation.messages if isinstance(m.content, str))
    return texts


@pytest.mark.skipif(not (DATA / "trajectories").is_dir(), reason=f"recordings not found under {DATA}")
def test_every_recorded_text_gives_the_values_a_whole_scan_gives() -> None:
    texts = _texts()
    assert len(texts) > 1000
    different = [t[:80] for t in texts if SCAN(t) != _whole(t)]
    assert different == []


def test_words_that_could_be_hex_ids_are_still_scanned() -> None:
    text = 'The build (defaced) used "Deadbeef", then cafebabe1. Done: see app.py, e.g. run_tests.'
    found = SCAN(text)
    assert found == _whole(text)
    assert {"defaced", "Deadbeef", "cafebabe1", "app.py", "run_tests"} <= set(found)


_PIECES = st.sampled_from(
    ["the", "Error", "ValueError", "defaced", "(x)", "a.b", "/repo/a.py", "v2", "1,234", "ref:", "x@y.io",
     "http://h.io/p", "snake_case", "Camel", "CamelCase", "'q'", '"quoted text"', "`cmd`", ".", ",", ":", "-", "_", "deadbeef42",
     "订单号", "입니다", "ORD-88231", "1 234,56", "12\u00a0000", "€", "ＡＢＣ１２３", "2024-06-11", "ID-77\u200b12",
     "订单" * 130, "ORD-1订单" * 40, "报告/" * 60, "年.月" * 70, "x@日" * 90]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_PIECES, st.sampled_from(["", " ", "\n", "  ", "\t", ".", ", ", "/"])), max_size=30))
def test_any_text_of_such_pieces_gives_the_values_a_whole_scan_gives(pieces: list[tuple[str, str]]) -> None:
    text = "".join(piece + gap for piece, gap in pieces)
    assert SCAN(text) == _whole(text)


def test_a_long_run_of_letters_is_not_scanned_for_paths_e_mails_or_file_names() -> None:
    # Chinese, Japanese and Thai prose is one whitespace-free chunk per paragraph: the path,
    # e-mail and file name kinds try up to 256 characters from every start in it (CJK text took
    # eighty times as long as English prose of the same length).
    paragraph = "我的订单号是ORD-88231，金额为12,000元，请在明天之前发货到上海市浦东新区。" * 40
    parts = list(module._scans(f"Note: {paragraph} see /repo/a.py"))
    long = [pattern for part, pattern in parts if part == paragraph]
    assert len(long) == 1
    assert not {"path", "email", "file", "url", "dotted"} & set(long[0].groupindex)
    assert SCAN(paragraph) == _whole(paragraph) == ("ORD-88231", "12,000")


def test_a_bare_suffix_is_no_exception_name_but_a_longer_name_ending_in_one_is() -> None:
    found = SCAN("Exception raised: Error in ValueError, then KeyboardInterrupt and SystemExit; Fault.")
    assert [v for v in found if v.endswith(module._EXCEPTION_SUFFIXES)] == ["ValueError", "KeyboardInterrupt", "SystemExit"]


def test_a_quoted_value_is_kept_only_with_three_characters_left_once_stripped() -> None:
    assert module.quoted('"   " and ` ab ` then "  abc " and `abc` and "x\ny"') == ["abc"]


def test_a_grouped_number_seen_twice_is_kept_once_as_written() -> None:
    found = SCAN("Paid 1 234,56 €, then 1 234,56 € again; 12 and 123 and ａｂｃ and getX and 1.5")
    assert found == ("1 234,56", "123", "getX", "1.5")


def test_a_grouped_amount_in_ascii_text_is_one_number() -> None:
    assert SCAN("Total: 1 234,56 EUR over 12 rows, 1 234 each") == ("1 234,56", "234")


_POSSESSIVE = re.compile(r"\}\+")
_UNGUARDED = re.compile(_POSSESSIVE.sub("}", module._CANDIDATE.pattern.removeprefix(module._FIRST)))
"""The candidate pattern with no first-character test and every run given back one character
at a time, as it was written first."""


def test_the_plain_pattern_differs_only_by_the_first_character_test_and_seven_possessive_runs() -> None:
    assert len(_POSSESSIVE.findall(module._CANDIDATE.pattern)) == 7


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([*"aZ_9.+-~/@:()'\" \n=é١ＡＢ１订\u00a0\u200b\ue000", "://", "ref:", "x.py", "a" * 300]), max_size=60))
def test_the_candidate_pattern_finds_what_the_plain_one_finds(pieces: list[str]) -> None:
    text = "".join(pieces)

    def spans(pattern: re.Pattern[str]) -> list[tuple[str | None, tuple[int, int]]]:
        return [(m.lastgroup, m.span()) for m in pattern.finditer(text)]

    assert spans(module._CANDIDATE) == spans(_UNGUARDED)
