"""The digest of the question a window's facts block is chosen for: memoised for the questions
of the calls in flight, without holding a long one (a pasted log, a file) after its session."""

from __future__ import annotations

import hashlib
import sys

from ctxplugin.stages._shared_window import query_digest


def _fresh(text: str) -> str:
    return (text + ".")[:-1]  # an equal string of its own, held only here


def test_a_question_digests_as_its_text_does() -> None:
    for question in ("when does it arrive?", "", "x" * 50_000, "caf\udce9"):
        expected = hashlib.sha256(question.encode("utf-8", "surrogatepass")).hexdigest()
        assert query_digest(question) == query_digest(_fresh(question)) == expected


def test_a_long_question_is_not_held_once_digested() -> None:
    question = _fresh("Here is the whole build log:\n" + "error: cannot find symbol\n" * 4_000)
    held = sys.getrefcount(question)
    query_digest(question)
    assert sys.getrefcount(question) == held
