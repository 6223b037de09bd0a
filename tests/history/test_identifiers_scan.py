"""Values are found in a tool output's text with its plain words left out of the scan: the
same values, in the same order, as scanning all of it."""

from __future__ import annotations

import importlib
import os
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

SCAN = module._identifiers.__wrapped__


def _whole(text: str) -> tuple[str, ...]:
    """The values found scanning all of ``text``."""
    original = module.__dict__["_scanned"]
    module.__dict__["_scanned"] = lambda t: t
    try:
        return SCAN(text)  # type: ignore[no-any-return]
    finally:
        module.__dict__["_scanned"] = original


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
     "订单号", "입니다", "ORD-88231", "1 234,56", "12\u00a0000", "€", "ＡＢＣ１２３", "2024-06-11"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_PIECES, st.sampled_from(["", " ", "\n", "  ", "\t", ".", ", ", "/"])), max_size=30))
def test_any_text_of_such_pieces_gives_the_values_a_whole_scan_gives(pieces: list[tuple[str, str]]) -> None:
    text = "".join(piece + gap for piece, gap in pieces)
    assert SCAN(text) == _whole(text)
