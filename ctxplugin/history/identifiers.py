"""Exact values that every compression tier must keep.

A compressed message may lose prose, but never the values an agent acts on: URLs, file paths,
ids (hex digests, UUIDs, codes mixing letters and digits, ``snake_case`` and ``CamelCase``
names, dotted names), numbers, exception and warning names, and whole error or security lines.
Extraction is pure regex work: deterministic, no model involved.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from functools import cache, lru_cache
from itertools import accumulate, product

from ctxplugin._lru import THREAD_TEXTS, Memo, TextKey, shared, text_key
from ctxplugin.history._grouped import GROUP_MARKS, mark_groups, unmark_groups
from ctxplugin.history._plain import scanned_chunks

# Runs that a later character must end (a scheme before "://", a name before "@", a path part
# before "/") are bounded at 256: unbounded, each start inside a long run of such characters
# (a line of dashes, a pasted blob) scanned to its end, which made a 50,000-character run
# take a minute. No value worth keeping has a part that long. Such a run is taken whole (``+``
# after its bound: possessive, never given back): the character that must end it is not one of
# its own, so no shorter run is ever followed by it, and trying each was work thrown away.
_URL = r"[a-zA-Z][a-zA-Z0-9+.-]{0,32}+://[^\s<>\"'`)\]}]+"
_REF = r"ref:[\w.-]{1,256}:[0-9a-f]{8,}"
_EMAIL = r"[\w.+-]{1,256}+@[\w-]+(?:\.[\w-]+)+"
_PATH = r"(?:~|\.{1,2})?/?(?:[\w.@+-]{1,256}+/)+[\w.@+-]{0,256}[\w@+-]|(?:~|\.{1,2})?/[\w.@+-]{0,256}[\w@+-]"
_FILE = r"[\w@+-]{1,256}+(?:\.[\w@+-]{1,256}+)*\.[A-Za-z][A-Za-z0-9]{0,7}\b"
_DOTTED = r"[A-Za-z_]\w{0,256}+(?:\.[A-Za-z_]\w{0,256}+)+"
_INSIDE = (
    r"\d0-9A-Za-z_\u00aa\u00b5\u00ba\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u02af\u0300-\u036f"
    r"\u0370-\u052f\u1e00-\u1eff\uff10-\uff19\uff21-\uff3a\uff41-\uff5a"
)
"""What continues a code, a hex id, a number or a name-like word on either side: digits,
letters of the Latin, Greek and Cyrillic alphabets with their combining accents, ``_``, and the
full-width ASCII letters and digits. Letters of other scripts end one: Chinese, Japanese, Korean
and Thai text (and particles such as 이고, 입니다, は) run straight into the values they hold
(``订单号ORD-88231已发货``, ``2024-06-11입니다``); ``\\b`` saw no edge there and cut the value
short or missed it."""
_START, _END = rf"(?<![{_INSIDE}])", rf"(?![{_INSIDE}])"
_HEX = rf"{_START}[0-9a-fA-F]{{7,}}{_END}"
# 2024-05-01, uuids, call_00_x9, astroid-1978; an id pasted with a zero-width space, word joiner
# or byte-order mark inside it (ID-77\u200b12) is one id, not the piece before the invisible mark
_CODE = rf"{_START}[A-Za-z0-9]+(?:[-_\u200b\u2060\ufeff]+[A-Za-z0-9]+)+{_END}"
_NUMBER = rf"(?<![{_INSIDE}.．])[-+]?\d+(?:[.,:．，：{GROUP_MARKS}]\d+)*"
_WORD = rf"{_START}[A-Za-z_Ａ-Ｚａ-ｚ][A-Za-z0-9_Ａ-Ｚａ-ｚ０-９]*{_END}"

_KINDS = {
    "url": _URL,
    "ref": _REF,
    "email": _EMAIL,
    "path": _PATH,
    "file": _FILE,
    "dotted": _DOTTED,
    "code": _CODE,
    "hex": _HEX,
    "number": _NUMBER,
    "word": _WORD,
}
_NEEDS = {"url": "/", "email": "@", "path": "/", "file": ".", "dotted": "."}
"""The kinds that cannot match in a text without a certain character."""


@cache
def _candidates(slash: bool, at: bool, dot: bool) -> re.Pattern[str]:
    """The pattern of every kind, without the kinds that need a ``/``, ``@`` or ``.`` a text
    lacks: a kind that cannot match anywhere in it never decides between the others, so the
    values found are the same, while the path, e-mail and file name kinds (each tries up to
    256 characters from every start) are not tried along a long run of letters."""
    present = {"/": slash, "@": at, ".": dot}
    kinds = [(name, pattern) for name, pattern in _KINDS.items() if name not in _NEEDS or present[_NEEDS[name]]]
    return re.compile(_FIRST + "(?:" + "|".join(f"(?P<{name}>{pattern})" for name, pattern in kinds) + ")")


_FIRST = r"(?=[\w.+\-~/@])"
"""A character some kind's match can start with (every kind starts with a word character, or
one of ``. + - ~ / @``): tried first, it passes over a blank, a bracket or a quote in one test,
where every kind's pattern was tried there in turn."""


_CANDIDATE = _candidates(True, True, True)


def warm() -> None:
    """Compile the pattern of every combination of kinds now (a few milliseconds each), not
    when the first text lacking a ``/``, ``@`` or ``.`` is read: an engine calls it when it is
    built, so that its first ``prepare`` does not pay for them."""
    for slash, at, dot in product((True, False), repeat=3):
        _candidates(slash, at, dot)


_DIGIT = re.compile(r"\d")

_EXCEPTION_SUFFIXES = ("Error", "Exception", "Warning", "Exit", "Interrupt", "Fault")
_EXCEPTION = re.compile(rf"\b[A-Z]\w*(?:{'|'.join(_EXCEPTION_SUFFIXES)})\b")
"""An exception name. Most texts hold none of the suffixes, and a search for each (in C) costs
less than the pattern, which tries every word that starts with a capital letter."""

ALERT_LINE = re.compile(
    r"(?i)(?:traceback \(most recent call last\)|\b(?:error|exception|fatal|panic|failed|failure|"
    r"denied|forbidden|unauthori[sz]ed|security|vulnerab\w*|cve-\d{4}-\d+|unsafe|insecure|"
    r"critical|segmentation fault|assertion)\b|^\s*E\s{2,}|\w(?:Error|Exception|Warning):)"
)
"""Lines that are never elided: errors, tracebacks, failures and security warnings. (A class
name ending in ``Error:`` is found by its last letter before the suffix: the pattern only says
whether a line has one, and ``\\w+`` there would try every start inside every word.)"""
_ALERT_ANYWHERE = re.compile(ALERT_LINE.pattern.replace(r"|^\s*E\s{2,}|", r"|E\s{2,}|"))
""":data:`ALERT_LINE` with its line-start anchor dropped: it matches somewhere in every text one
of whose lines it matches (wherever the line breaks are), so a text it misses has none."""

_TRAILING = ".,;:!?'\")]}>"
_TRIVIAL = frozenset({".", "..", "/", "./", "../", "~/"})
_MIN_NUMBER_DIGITS = 3
_QUOTED = re.compile(r"\"([^\"\n]{3,80})\"|`([^`\n]{3,80})`")


def _is_identifier_word(word: str) -> bool:
    """A bare word counts when it looks like a name in code or an id, not like prose."""
    if "_" in word.strip("_"):
        return True  # snake_case
    if _DIGIT.search(word):
        return True  # codes like HAT001, v2, sha1 (a word starts with a letter or _)
    inner = word[1:]
    return inner.lower() != inner and word.upper() != word  # CamelCase, getX


def quoted(text: str) -> list[str]:
    """Values in double quotes or backticks (3 to 80 characters, one line), in order."""
    if '"' not in text and "`" not in text:
        return []
    # a group that took part holds 3 characters or more, one that did not is found as ""
    stripped = (double.strip() or quote.strip() for double, quote in _QUOTED.findall(text))
    return list(dict.fromkeys(value for value in stripped if len(value) >= 3))


def _keep_number(value: str) -> bool:
    return len(_DIGIT.findall(value)) >= _MIN_NUMBER_DIGITS or any(c in value for c in ".,:．，：")


_LONG_CHUNK = 256


def _scans(text: str) -> Iterator[tuple[str, re.Pattern[str]]]:
    """The parts of ``text`` to scan, each with the pattern to scan it with: the whitespace-
    delimited chunks that are not plain words (:func:`~ctxplugin.history._plain.scanned_chunks`),
    joined by single spaces, and scanned with :data:`_CANDIDATE`, except that a chunk of
    :data:`_LONG_CHUNK` characters or more is scanned alone with the kinds it can hold
    (:func:`_candidates`). The values found are the same, in the same order, as in all of
    ``text``: no value spans whitespace, and at a chunk's edges the pattern sees whitespace or
    the end either way. Prose is mostly plain words, so a third of a tool output's text is
    scanned; Chinese, Japanese or Thai prose is one long chunk per paragraph."""
    chunks = scanned_chunks(text)
    if not chunks:
        return
    if max(map(len, chunks)) < _LONG_CHUNK:
        yield _joined(chunks)
        return
    kept: list[str] = []
    for chunk in chunks:
        if len(chunk) >= _LONG_CHUNK and not ("/" in chunk and "@" in chunk and "." in chunk):
            if kept:
                yield _joined(kept)
                kept = []
            yield chunk, _candidates("/" in chunk, "@" in chunk, "." in chunk)
        else:
            kept.append(chunk)
    if kept:
        yield _joined(kept)


def _joined(chunks: list[str]) -> tuple[str, re.Pattern[str]]:
    """``chunks`` joined by single spaces, with the kinds the joined text can hold: most texts
    have no ``@``, and the e-mail kind would otherwise try the whole run of word characters
    from every start."""
    part = " ".join(chunks)
    return part, _candidates("/" in part, "@" in part, "." in part)


def _identifiers(text: str) -> tuple[str, ...]:
    return _VALUES.get_or_make(text_key(text), lambda: _read_identifiers(text))


_VALUES: Memo[TextKey, tuple[str, ...]] = Memo(THREAD_TEXTS)
"""The values of texts read lately, by the key of the text (which is not kept)."""


def _read_identifiers(text: str) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    marked = mark_groups(text)
    for part, pattern in _scans(marked):
        _read(pattern.finditer(part), seen, grouped=marked is not text)
    if any(map(text.__contains__, _EXCEPTION_SUFFIXES)):
        for value in _EXCEPTION.findall(text):
            seen.setdefault(value, None)
    for value in quoted(text):
        seen.setdefault(value, None)
    return shared(list(seen))


def _read(matches: Iterator[re.Match[str]], seen: dict[str, None], *, grouped: bool) -> None:
    """Adds to ``seen`` the values among ``matches`` of the candidate pattern worth keeping. A
    value already kept is not judged again (a number with marks in it is never one: no other
    kind holds them but a URL, which is no number)."""
    for match in matches:
        value = match.group(0).rstrip(_TRAILING)
        if not value or value in seen:
            continue
        kind = match.lastgroup
        if kind == "word":
            # a lowercase word of letters alone is prose; an exception name is an identifier
            # word (its suffix has a capital inside the word, and lowercase letters)
            keep = not (value.isalpha() and value.islower()) and _is_identifier_word(value)
        elif kind == "number":
            # fewer than three characters hold fewer than three digits and no separator
            keep = len(value) > 2 and (value.isdecimal() or _keep_number(value))
            if grouped:
                value = unmark_groups(value)
        elif kind == "code":
            keep = "_" in value or _DIGIT.search(value) is not None
        else:
            keep = value not in _TRIVIAL
        if keep:
            seen[value] = None


def identifiers(text: str) -> list[str]:
    """Exact values in ``text`` that must survive compression, in first-seen order, deduplicated.

    Args:
        text: any message text.

    Returns:
        URLs, refs, e-mail addresses, paths, file names, dotted names, hex ids, numbers with at
        least three digits (or with a decimal point, comma or colon; digits grouped by spaces
        as :mod:`ctxplugin.history._grouped` says stay one number), exception names,
        identifier-like words (``snake_case``, ``CamelCase``, letters mixed with digits) and
        values in double quotes or backticks.
    """
    return list(_identifiers(text))


def alert_lines(text: str, *, max_chars: int = 400) -> list[str]:
    """Error, failure and security lines of ``text`` (stripped, deduplicated, in order).

    A line longer than ``max_chars`` keeps its head: error lines in minified output can be
    megabytes long, and the head holds the exception name and message.
    """
    return list(_ALERTS.get_or_make((text_key(text), max_chars), lambda: _alert_lines(text, max_chars)))


_ALERTS: Memo[tuple[TextKey, int], tuple[str, ...]] = Memo(THREAD_TEXTS)
"""The alert lines of texts read lately (by the key of the text, which is not kept): a message
is compressed again at each tier it passes."""


def _alert_lines(text: str, max_chars: int) -> tuple[str, ...]:
    # Only the lines where the pattern matches in the whole text are read: a match of a line
    # starts at a letter, and a match in the whole text that runs over a line break (``E`` and
    # the blanks after it) takes in nothing but blanks of the next line.
    lines = text.splitlines(keepends=True)
    starts = list(accumulate(map(len, lines), initial=0))
    candidates = dict.fromkeys(bisect_right(starts, match.start()) - 1 for match in _ALERT_ANYWHERE.finditer(text))
    seen: dict[str, None] = {}
    for index in candidates:
        stripped = lines[index].strip()  # the line break too: every one is a blank to strip()
        if stripped and ALERT_LINE.search(stripped):
            seen.setdefault(stripped[:max_chars], None)
    return tuple(seen)


def occurs(value: str, text: str) -> bool:
    """Whether ``value`` occurs in ``text`` as a whole token (no letter or digit right before
    or after it), so that ``470`` is not taken as visible inside ``4700``."""
    start = text.find(value)
    while start != -1:
        end = start + len(value)
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        if not before.isalnum() and not after.isalnum():
            return True
        start = text.find(value, start + 1)
    return False


RUN = re.compile(r"[^\W_]+")
"""A run of the characters :meth:`str.isalnum` accepts (the word characters but ``_``): what
:func:`occurs` takes as a token's inside. Where a value occurs as a whole token, each of its runs
is a whole run of the text: a run inside the value is bounded by the value's own other
characters, and its first and last runs by the token's boundaries."""


@lru_cache(maxsize=65536)
def value_runs(value: str) -> tuple[str, ...]:
    """The :data:`RUN` s of ``value``, each once (memoised: the same values are looked up call
    after call, for the context notes and for the account of values a view shows). A tuple:
    a value has one to a few runs, and the smallest set weighs three times a tuple of them
    (``runs.issuperset(value_runs(value))`` asks what ``<=`` asks of a set)."""
    found = _runs(value)
    return shared(dict.fromkeys(found) if len(found) > 1 else found)


_RUN_BYTES = bytes(c if c < 128 and chr(c).isalnum() else 32 for c in range(256))
"""Each ASCII letter and digit as itself, every other byte as a blank."""


def text_runs(text: str) -> frozenset[str]:
    """The :data:`RUN` s of ``text``. An ASCII text (as a rule) is cut at what is not a letter
    or digit by a translation of its bytes and a split, twice as fast as the pattern: in ASCII
    the pattern's characters are exactly the letters and digits."""
    return frozenset(shared(_runs(text)))


def _runs(text: str) -> list[str]:
    """The :data:`RUN` s of ``text`` in order, repeats kept."""
    if text.isascii():
        return text.encode("ascii").translate(_RUN_BYTES).decode("ascii").split()
    return RUN.findall(text)


@lru_cache(maxsize=65536)
def longest_run(value: str) -> str:
    """The longest :data:`RUN` of ``value`` (the first of equal length; ``""`` when it has none):
    as a rule the rarest, a file name rather than the ``repo`` every path starts with."""
    runs = RUN.findall(value)
    return max(runs, key=len) if runs else ""


_SCAN_DIRECTLY = 1 << 16
"""Below this many values times characters of text each value is looked for on its own."""


def missing(values: Iterable[str], text: str) -> list[str]:
    """The values that do not occur in ``text`` as whole tokens.

    Many values in a long text (every line of a long log is an error line a gist keeps) are
    found through the text's runs, read once: looked for one by one, each value that occurs
    only inside longer tokens (``470`` in ``4700``) scans the whole text, and the time grows
    with the square of the text."""
    values = list(values)
    if len(values) * len(text) <= _SCAN_DIRECTLY:
        return [v for v in values if not occurs(v, text)]
    starts: dict[str, list[int]] = {}
    for match in RUN.finditer(text):
        starts.setdefault(match.group(0), []).append(match.start())
    return [v for v in values if not _occurs_at_runs(v, text, starts)]


def _occurs_at_runs(value: str, text: str, starts: dict[str, list[int]]) -> bool:
    """:func:`occurs`, given where each run of ``text`` starts: where ``value`` occurs as a
    whole token, its longest run is a whole run of ``text`` (see :data:`RUN`)."""
    run = longest_run(value)
    if not run:
        return occurs(value, text)
    offsets = [m.start() for m in RUN.finditer(value) if m.group(0) == run]
    end = len(text)
    for position in starts.get(run, ()):
        for offset in offsets:
            start = position - offset
            stop = start + len(value)
            if (
                start >= 0
                and text.startswith(value, start)
                and (start == 0 or not text[start - 1].isalnum())
                and (stop == end or not text[stop].isalnum())
            ):
                return True
    return False


__all__ = [
    "ALERT_LINE", "RUN", "alert_lines", "identifiers", "longest_run", "missing", "occurs", "quoted", "text_runs", "value_runs",
]
