"""Where text may be cut without breaking a character as a reader sees it.

A Python string is a sequence of code points, but what a reader sees as one character may be
several: a letter and its combining accents (``e`` + U+0301, Hindi ``कि``), an emoji family
joined by zero-width joiners, a skin tone or a flag's pair of regional indicators, a Korean
syllable spelled in jamo (macOS file names), a Devanagari conjunct (``क्ष``). A cut inside one
leaves a dangling accent or joiner, or turns a family into strangers. The rules here follow
Unicode's extended grapheme clusters (UAX #29) closely enough for cutting: every place they
forbid is refused, and a run longer than :data:`MAX_CLUSTER` code points (a pile of accents
meant to break renderers) is cut where asked.
"""

from __future__ import annotations

import unicodedata

MAX_CLUSTER = 32
"""The farthest a cut moves to reach a boundary."""

_ZWJ = "\u200d"
_VIRAMA = 9  # canonical combining class of a virama


def _extends(char: str) -> bool:
    """Whether ``char`` belongs with the character before it (UAX #29 Extend, SpacingMark,
    ZWJ; the emoji modifiers and tags are among Extend)."""
    code = ord(char)
    if code < 0x300:
        return False
    return (
        unicodedata.category(char) in ("Mn", "Mc", "Me")
        or char == _ZWJ
        or 0xFE00 <= code <= 0xFE0F
        or 0x1F3FB <= code <= 0x1F3FF
        or 0xE0020 <= code <= 0xE007F
        or 0xE0100 <= code <= 0xE01EF
    )


def _jamo(char: str) -> str:
    """The Hangul syllable type of ``char``: L, V, T, LV, LVT, or "" for none."""
    code = ord(char)
    if 0x1100 <= code <= 0x115F or 0xA960 <= code <= 0xA97C:
        return "L"
    if 0x1160 <= code <= 0x11A7 or 0xD7B0 <= code <= 0xD7C6:
        return "V"
    if 0x11A8 <= code <= 0x11FF or 0xD7CB <= code <= 0xD7FB:
        return "T"
    if 0xAC00 <= code <= 0xD7A3:
        return "LV" if (code - 0xAC00) % 28 == 0 else "LVT"
    return ""


def _regional(char: str) -> bool:
    return 0x1F1E6 <= ord(char) <= 0x1F1FF


def breakable(text: str, index: int) -> bool:
    """Whether ``text`` may be cut before ``text[index]`` (always at either end)."""
    if index <= 0 or index >= len(text):
        return True
    before, after = text[index - 1], text[index]
    if before == "\r" and after == "\n":
        return False
    if before.isascii() and after.isascii():
        return True
    if _extends(after) or before == _ZWJ:
        return False
    if 0xD800 <= ord(before) <= 0xDBFF and 0xDC00 <= ord(after) <= 0xDFFF:
        return False  # a surrogate pair kept by "surrogatepass"
    left, right = _jamo(before), _jamo(after)
    if left and right and (
        (left == "L" and right in ("L", "V", "LV", "LVT")) or (left in ("LV", "V") and right in ("V", "T")) or (left in ("LVT", "T") and right == "T")
    ):
        return False
    if _regional(before) and _regional(after):
        run = 0
        while index - run - 1 >= 0 and _regional(text[index - run - 1]):
            run += 1
        return run % 2 == 0
    if unicodedata.category(after).startswith("L"):
        start = index - 1
        while start > 0 and _extends(text[start]) and unicodedata.combining(text[start]) != _VIRAMA:
            start -= 1
        return unicodedata.combining(text[start]) != _VIRAMA  # a conjunct: consonant, virama, consonant
    return True


def floor_boundary(text: str, index: int) -> int:
    """The nearest place at or before ``index`` where ``text`` may be cut (``index`` itself
    when none is within :data:`MAX_CLUSTER`)."""
    index = max(0, min(index, len(text)))
    for place in range(index, max(0, index - MAX_CLUSTER) - 1, -1):
        if breakable(text, place):
            return place
    return index


def ceil_boundary(text: str, index: int) -> int:
    """The nearest place at or after ``index`` where ``text`` may be cut (``index`` itself
    when none is within :data:`MAX_CLUSTER`)."""
    index = max(0, min(index, len(text)))
    for place in range(index, min(len(text), index + MAX_CLUSTER) + 1):
        if breakable(text, place):
            return place
    return index


def head(text: str, size: int) -> str:
    """At most ``size`` code points from the start of ``text``, ending on a boundary."""
    return text if size >= len(text) else text[: floor_boundary(text, size)]


def tail(text: str, size: int) -> str:
    """At most ``size`` code points from the end of ``text``, starting on a boundary."""
    if size <= 0:
        return ""
    return text if size >= len(text) else text[ceil_boundary(text, len(text) - size) :]


__all__ = ["MAX_CLUSTER", "breakable", "ceil_boundary", "floor_boundary", "head", "tail"]
