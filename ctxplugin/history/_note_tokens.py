"""A note's tokens summed from those of its parts, where that sum is exact.

tiktoken cuts a text into pieces with its encoding's pattern and encodes each piece on its own,
so a text's tokens are the sum of its pieces'. Under the pattern of ``cl100k_base`` a space
either begins a piece or lies in a piece of blanks alone, so a piece never holds a character
other than a blank followed by a space: the text is cut where its pieces are before each space
that follows such a character. Each part, read alone, is cut into the same pieces: the pattern
never looks back, and a part's last piece (a run of letters, of digits or of other signs,
ending at a character other than a blank) ends at the part's end as it ends at the space after
it. So the text's tokens are the sum of its parts'.

A note lists values after labels, ``label: value value``: its parts are mostly a value with the
space before it (``" value"``; a spaced value is cut at its own spaces too). The archive note is
counted after each fill and at each try of how many values it drops, and again at each step of
the archive, with mostly the same values: counted by parts, each is encoded once, not the whole
note (thousands of characters) each time. Other patterns (and counters other than tiktoken's)
count the whole text.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from ctxplugin.tokens import EXACT_COUNT_CHARS, TiktokenCounter, TokenCounter, remember_count

_T = TypeVar("_T")

_PARTED = frozenset({
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
})
"""The patterns (``cl100k_base``'s) under which a text's tokens are the sum of those of its
:func:`_parts` (see the module docstring)."""

_PARTS: weakref.WeakKeyDictionary[Any, dict[str, int]] = weakref.WeakKeyDictionary()
_PARTS_LOCK = threading.Lock()
_PARTS_SIZE = 65_536


def _parts(text: str) -> list[str]:
    """``text`` cut before each space that follows a character other than a blank (Python's
    blanks hold every one the pattern's ``\\s`` matches)."""
    cut = text.split(" ")
    parts = [cut[0]]
    for piece in cut[1:]:
        last = parts[-1]
        if last and not last[-1].isspace():
            parts.append(" " + piece)
        else:
            parts[-1] = f"{last} {piece}"
    return parts


def _memo(counter: TokenCounter) -> dict[str, int] | None:
    """The counts of parts made with ``counter`` lately, or None when its counts are not sums
    of its parts' (emptied when full)."""
    counts = getattr(counter, "counts_as", None) or counter
    if not isinstance(counts, TiktokenCounter) or getattr(getattr(counts, "_encoding", None), "_pat_str", None) not in _PARTED:
        return None
    return per_counter(_PARTS, _PARTS_LOCK, counts, _PARTS_SIZE)


def _part_count(counter: TokenCounter) -> Callable[[str], int]:
    """How a part missing from the memo of parts is counted: by ``counter``'s encoding itself
    when it counts as a plain :class:`TiktokenCounter` (a part is counted once and kept in that
    memo alone, not also in the counter's memos; ``encode_ordinary`` is ``encode`` without its
    search for special tokens, which a count with ``disallowed_special=()`` reads as text
    anyway), else by ``counter``."""
    counts = getattr(counter, "counts_as", None) or counter
    encode = getattr(getattr(counts, "_encoding", None), "encode_ordinary", None) if type(counts) is TiktokenCounter else None
    if encode is None:
        return counter.count
    return lambda part: len(encode(part))


def per_counter(
    maps: weakref.WeakKeyDictionary[Any, dict[str, _T]], lock: threading.Lock, counter: Any, size: int
) -> dict[str, _T] | None:
    """``counter``'s map in ``maps`` (made on first use), emptied once it holds more than
    ``size`` entries; None for a counter that cannot be weakly referenced."""
    try:
        found = maps.get(counter)
        if found is None:
            with lock:
                found = maps.setdefault(counter, {})
    except TypeError:
        return None
    if len(found) > size:
        found.clear()  # a lookup in another thread finds the entry or makes it again
    return found


def note_tokens(text: str, counter: TokenCounter) -> int:
    """``counter.count(text)``: summed from the counts of its parts where that is exact, and
    then kept as the text's count (the note is counted again when it is sized as a message)."""
    memo = _memo(counter) if len(text) <= EXACT_COUNT_CHARS else None
    if memo is None:
        return counter.count(text)
    count = _part_count(counter)
    total = 0
    for part in _parts(text):
        tokens = memo.get(part)
        if tokens is None:
            tokens = memo[part] = count(part)
        total += tokens
    remember_count(text, total, counter)
    return total


__all__ = ["note_tokens", "per_counter"]
