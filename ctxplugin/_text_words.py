"""Error and warning lines and identifiers in text: what a summary keeps of any output."""

from __future__ import annotations

import re
import string
from collections.abc import Iterator
from functools import cache

_KEYWORDS = (
    "error", "exception", "traceback", "fatal", "fail", "panic", "warn", "denied", "refused",
    "abort", "segmentation fault", "cannot", "can't", "unable to", "not found", "no such file",
    "timed out", "killed", "assert",
)
_KEYWORD_LINE = re.compile(
    r"(?i)\b(?:errors?|exceptions?|traceback|fatal|fail(?:s|ed|ure|ures|ing)?|panic(?:ked)?|warn(?:ing|ings)?|"
    r"denied|refused|abort(?:ed)?|segmentation fault|cannot|can't|unable to|not found|no such file|timed out|"
    r"killed|assert(?:ion)?)\b"
)
_CAMEL_ERROR = re.compile(r"[a-z](?:Error|Exception|Warning|Exit)\b")
_CAMEL_WORDS = ("Error", "Exception", "Warning", "Exit")
KEYWORD_CAP = 5000
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)

_IDENT_PARTS = (
    ("/", r"https?://[^\s<>\"'`)\]]+"),
    ("@", r"[\w.+-]+@[\w-]+\.[\w.-]+"),
    ("/", r"(?:\.{0,2}/)?(?:[\w.@+-]+/)+[\w.@+-]+"),
    (".", r"\b[\w-]+\.(?:py|pyi|js|ts|tsx|jsx|json|md|rst|txt|ya?ml|toml|cfg|ini|sql|sh|c|h|cc|cpp|hpp|go|rs|java|kt|rb|php|html|css|csv|log|lock|xml)\b"),
    (".", r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*){2,}\b"),
    ("", r"\b(?=[A-Za-z_-]*\d)(?=[\d_-]*[A-Za-z])[A-Za-z0-9][\w-]{3,}\b"),
)
"""The alternatives of :data:`_IDENT` in order (URL, email, path, file name, dotted name, mixed
letter-digit id), each with a character every match of it holds ("" for none)."""
_IDENT = re.compile("|".join(part for _, part in _IDENT_PARTS))


@cache
def _ident_within(slash: bool, at: bool, dot: bool) -> re.Pattern[str]:
    """:data:`_IDENT` without the alternatives that need a ``/``, ``@`` or ``.`` a word lacks.

    An alternative that cannot match anywhere in a word never decides between the others, so
    the word's matches are the same, while the quadratic path and email alternatives are not
    tried at every position of the many words that cannot hold them."""
    present = {"": True, "/": slash, "@": at, ".": dot}
    return re.compile("|".join(part for needs, part in _IDENT_PARTS if present[needs]))


_IDENT_CAP = 200
_WORD_MAX = 300
_PROBE = 1_600
"""An error line is read up to this many characters (four times a shape sample's line)."""


def mentions_trouble(text: str) -> bool:
    """Whether a line of ``text`` has an error or warning word (:data:`_KEYWORD_LINE`,
    :data:`_CAMEL_ERROR`; neither pattern spans lines).

    In ASCII text a keyword match starts where a keyword does once lower-cased, a camel-case
    match a character before its word: the patterns are tried there alone (found by
    ``str.find``), not at every position. Outside ASCII a few characters (``ſ``, ``K``) match a
    letter case-insensitively without lower-casing to it: the patterns search the text alone.
    """
    if not text.isascii():
        return _KEYWORD_LINE.search(text) is not None or _CAMEL_ERROR.search(text) is not None
    low = text.lower()
    return matched_at_words(_KEYWORD_LINE, text, low, _KEYWORDS) or matched_at_words(_CAMEL_ERROR, text, text, _CAMEL_WORDS, 1)


def word_starts(low: str, words: tuple[str, ...], start: int = 0) -> Iterator[int]:
    """Where each of ``words`` occurs in ``low`` from ``start`` on, word after word (each
    word's places in order), found by ``str.find``."""
    for word in words:
        index = low.find(word, start)
        while index != -1:
            yield index
            index = low.find(word, index + 1)


def matched_at_words(pattern: re.Pattern[str], text: str, low: str, words: tuple[str, ...], back: int = 0) -> bool:
    """Whether ``pattern`` matches ``text`` starting ``back`` characters before an occurrence of
    one of ``words`` in ``low`` (``text`` or, for an ASCII text, its lower-case copy): the same as
    a search of the whole text when every match starts so."""
    return any(pattern.match(text, index - back) for index in word_starts(low, words, back))


def whole_words(pattern: re.Pattern[str], text: str, words: tuple[str, ...]) -> list[str]:
    """What ``pattern.findall(text)`` gives for a ``pattern`` of whole words (``\\b`` at both
    ends, no group) each of which starts as one of ``words`` does: the pattern is tried where
    ``str.find`` found one of them, not at every position. Two whole words never overlap."""
    return [m.group(0) for start in sorted(set(word_starts(text, words))) if (m := pattern.match(text, start))]


def keyword_lines(body: str) -> list[tuple[int, str]]:
    """Every error/warning/exception line as ``(0-based line number, line)``, in order.

    A traceback's deepest ``File "...", line N`` frame is kept with its exception line.
    Linear: one lower-cased copy and ``str.find`` per keyword, then a check per hit line.
    """
    low = body.lower()
    if len(low) != len(body):  # a few characters lower-case to two; keep offsets aligned
        low = body.translate(_ASCII_LOWER)
    spans: set[int] = set()
    for word in _KEYWORDS:
        index = low.find(word)
        while index != -1 and len(spans) < KEYWORD_CAP:
            start = low.rfind("\n", 0, index) + 1
            spans.add(start)
            end = low.find("\n", index)
            if end == -1:
                break
            index = low.find(word, end)
    out: list[tuple[int, str]] = []
    number, position = 0, 0
    frames: set[int] = set()
    for start in sorted(spans):
        number += body.count("\n", position, start)
        position = start
        end = body.find("\n", start)
        line = body[start : end if end != -1 else len(body)]
        probe = line if len(line) <= _PROBE else line[:_PROBE]
        if len(line) <= _PROBE and not (_KEYWORD_LINE.search(probe) or _CAMEL_ERROR.search(probe)):
            continue
        if _CAMEL_ERROR.search(probe) and not line[:1].isspace():
            frame = body.rfind('\n  File "', max(0, start - 2000), start)
            if frame != -1 and frame + 1 not in frames:
                frames.add(frame + 1)
                frame_end = body.find("\n", frame + 1)
                out.append((number - body.count("\n", frame + 1, start), body[frame + 1 : frame_end]))
        out.append((number, line))
    return out


def identifiers_in(text: str) -> list[str]:
    """URLs, emails, paths, file names, dotted names and mixed letter-digit ids, in
    first-occurrence order. Matched word by word: words longer than 300 characters are skipped,
    which keeps the patterns' backtracking bounded."""
    seen: dict[str, None] = {}
    # each distinct word once, in first-occurrence order: a word read before adds nothing
    for word in dict.fromkeys(text.split()):
        if len(word) > _WORD_MAX or word.isalpha():
            continue
        for match in _ident_within("/" in word, "@" in word, "." in word).finditer(word):
            value = match.group(0).rstrip(".,:;")
            if len(value) > 120 or value in seen:
                continue
            seen[value] = None
            if len(seen) >= _IDENT_CAP:
                return list(seen)
    return list(seen)
