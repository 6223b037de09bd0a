"""The whitespace-delimited chunks of a text worth scanning for values: all but plain words.

Prose repeats its words, and a conversation repeats its names and paths, from one message to
the next: whether a chunk is a plain word is decided once and remembered (for chunks up to
:data:`MEMO_CHARS` characters, at most :data:`MEMO_CHUNKS` of them), so that most chunks of a
new message are sorted by a lookup, not by two pattern matches each.
"""

from __future__ import annotations

import re
import threading
from itertools import compress

PLAIN = re.compile(r"[(\[{\"'`]*([A-Za-z][a-z]*)[.,;:!?)\]}\"'`]*")
"""A whitespace-delimited chunk that is a plain word (lowercase, or capitalised) with only
brackets, quotes or sentence punctuation around it: no kind of value can be found in it."""
_HEXISH = re.compile(r"[0-9a-fA-F]{7,}")

MEMO_CHUNKS = 32_768
"""Chunks whose answer is remembered (all are forgotten at once when a text would pass this; a
text with more distinct chunks is read without the memo)."""
MEMO_CHARS = 64
"""The longest chunk remembered: a longer one (a minified line, a pasted blob) is rarely seen
twice and would hold its memory."""

_scanned: dict[str, bool] = {}
_lock = threading.Lock()


def _is_scanned(chunk: str) -> bool:
    """Whether ``chunk`` is not a :data:`PLAIN` word, or is one that could be a hex id."""
    plain = PLAIN.fullmatch(chunk)
    return plain is None or _HEXISH.fullmatch(plain.group(1)) is not None


def scanned_chunks(text: str) -> list[str]:
    """The chunks of ``text`` (split at whitespace) that are not plain words, in order."""
    chunks = text.split()
    distinct = set(chunks)
    if len(distinct) > MEMO_CHUNKS:  # a text of more chunks than the memo holds (a huge output): on its own
        answers = {chunk: _is_scanned(chunk) for chunk in distinct}
        return list(compress(chunks, map(answers.__getitem__, chunks)))
    with _lock:
        fresh = distinct.difference(_scanned)
        if fresh:
            if len(_scanned) + len(fresh) > MEMO_CHUNKS:
                _scanned.clear()
                fresh = distinct
            _scanned.update({chunk: _is_scanned(chunk) for chunk in fresh})
        kept = list(compress(chunks, map(_scanned.__getitem__, chunks)))
        for chunk in fresh:
            if len(chunk) > MEMO_CHARS:
                del _scanned[chunk]
    return kept


__all__ = ["MEMO_CHARS", "MEMO_CHUNKS", "PLAIN", "scanned_chunks"]
