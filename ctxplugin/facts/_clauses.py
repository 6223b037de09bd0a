"""A user's sentences, with clauses a semicolon joins read one by one ("Neither of those flights
work for me; I'm looking to fly after 11 AM"): a semicolon in prose ends a statement as a full
stop would, where in code (``for (i = 0; i < n; i++)``, ``a = 1; b = 2``, ``cd app; make``) it
makes the whole sentence code, which states no facts."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ctxplugin.facts._not_prose import CODE
from ctxplugin.facts._text import sentences

_BREAK = re.compile(r"(?<=[\w'’\").!?])\s*;\s+(?=[\"'“‘]?[A-Za-z])")
"""A semicolon between clauses: after a word or closing punctuation, a space, then a word."""
_WORDS = re.compile(r"[A-Za-z][A-Za-z'’-]*")
_NOT_PROSE = re.compile(r"[=<>{}|&$`\\]|\+\+|(?:^|\s)--?\w|^\s*(?:cd|git|export|sudo|pip|npm|make|ls|rm|mv|cp|echo)\s")
"""What a clause of prose never holds: an operator, a shell's flag (``-m``), a shell command."""


def user_sentences(text: str) -> Iterator[str]:
    """The sentences of a user's ``text`` (see :func:`~ctxplugin.facts._text.sentences`), a
    sentence whose semicolons join clauses of prose given clause by clause."""
    for sentence in sentences(text):
        yield from prose_clauses(sentence)


def prose_clauses(sentence: str) -> list[str]:
    """``sentence``'s clauses when each is prose: words, at least one clause of four or more,
    none that reads as code; else ``[sentence]``."""
    if ";" not in sentence:
        return [sentence]
    clauses = [c.strip() for c in _BREAK.split(sentence)]
    prose = all(
        ";" not in c and _WORDS.match(c) and len(_WORDS.findall(c)) >= 2 and not CODE.search(c) and not _NOT_PROSE.search(c)
        for c in clauses
    )
    return clauses if len(clauses) > 1 and prose and max(len(_WORDS.findall(c)) for c in clauses) >= 4 else [sentence]
