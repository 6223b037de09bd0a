"""Numbers whose digits are grouped by spaces (``1 234,56 €``, ``12 500,00 ₽``, ``1 000 000``).

French, Russian, Polish, Scandinavian and many other writers group thousands with a space (a
no-break or thin space in typeset text, a plain one when typed). Scanned word by word, such an
amount fell apart into its last groups, and ``234,56`` was kept for ``1 234,56``: a different
amount. Here the spaces inside a grouped number are swapped for marks no scan splits at, and
swapped back in the values found.

A no-break, narrow no-break or thin space between groups always groups. A plain space only
groups a number that reads as an amount — with a decimal comma (``1 234,56``) or beside a
currency sign (``12 000 ₽``, ``€ 1 234``) — so that columns of figures in a table stay apart.
"""

from __future__ import annotations

import re
import unicodedata

_SPACES = " \u00a0\u202f\u2009"
GROUP_MARKS = "\ue000\ue001\ue002\ue003"
"""Private-use characters standing for each of the grouping spaces while a text is scanned."""
_TO_MARKS = str.maketrans(_SPACES, GROUP_MARKS)
_FROM_MARKS = str.maketrans(GROUP_MARKS, _SPACES)

_MAYBE = re.compile(r"\d[ \u00a0\u202f\u2009]\d{3}")
_GROUPED = re.compile(r"(?<![\dA-Za-z_.,])\d{1,3}(?:[ \u00a0\u202f\u2009]\d{3}(?!\d))+(?P<decimals>[.,]\d+)?")


def _currency_beside(text: str, start: int, end: int) -> bool:
    """Whether a currency sign stands right before ``start`` or right after ``end`` in
    ``text``, one space between them allowed."""
    for index, step in ((start - 1, -1), (end, 1)):
        if 0 <= index < len(text) and text[index] in _SPACES:
            index += step
        if 0 <= index < len(text) and unicodedata.category(text[index]) == "Sc":
            return True
    return False


def _marked(match: re.Match[str]) -> str:
    value = match.group(0)
    if " " in value:
        decimals = match.group("decimals")
        if not (decimals and decimals[0] == ",") and not _currency_beside(match.string, match.start(), match.end()):
            return value
    return value.translate(_TO_MARKS)


_DIGITS_AS_ZERO = bytes(48 if 48 <= c <= 57 else c for c in range(256))
"""Each ASCII digit as ``0``, every other byte as itself."""


def mark_groups(text: str) -> str:
    """``text`` with the spaces inside its grouped numbers swapped for :data:`GROUP_MARKS`
    (``text`` itself when it has none, or already holds one of those characters). An ASCII
    text (as a rule) is first searched for :data:`_MAYBE` with its digits made zeros, as a
    plain substring: the pattern tries every character of the text, and finds the same."""
    if text.isascii():
        if b"0 000" not in text.encode("ascii").translate(_DIGITS_AS_ZERO):
            return text
    elif _MAYBE.search(text) is None or any(mark in text for mark in GROUP_MARKS):
        return text
    return _GROUPED.sub(_marked, text)


def unmark_groups(value: str) -> str:
    """``value`` as the text wrote it: :data:`GROUP_MARKS` back to the spaces they stand for."""
    return value.translate(_FROM_MARKS)


__all__ = ["GROUP_MARKS", "mark_groups", "unmark_groups"]
