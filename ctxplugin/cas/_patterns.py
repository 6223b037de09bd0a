"""Patterns the model writes for ``expand_ref``: a substring, or a regular expression whose
searches share a deadline."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from re import _constants, _parser  # type: ignore[attr-defined]  # the parser re compiles with
from typing import Any, Protocol

import regex  # type: ignore[import-untyped]  # installed with tiktoken; its searches take a timeout

from ctxplugin.cas._budget import clip
from ctxplugin.errors import InvalidInputError

PATTERN_SECONDS = 1.0
"""How long the searches of one read may take in all. A regular expression the model wrote can
backtrack for hours on one line (``(a+)+$``); past this it is refused with an error the model
reads, and the step goes on."""

MAX_REGEX_CHARS = 10_000
"""The longest regular expression read: compiling one takes time no deadline bounds (a
1,000,000-character one took seconds). A plain substring has no limit."""

MAX_REGEX_ITEMS = 100_000
"""The most items a regular expression may stand for once its counted repeats are written out,
as the ``regex`` module compiles them: ``a{1000000000}`` took gigabytes before any search."""

MAX_REGEX_LITERAL = 500
"""The longest run of plain characters in a row a regular expression may hold. The ``regex``
module prepares such a run for a fast search on the first search, in time that grows with the
cube of its length, and no deadline bounds it: 3,000 ``a``s in a row took 6 s, 9,000 about five
minutes. A plain substring has no limit."""

_LITERALS = {_constants.LITERAL, _constants.NOT_LITERAL, _constants.IN}
_REPEATS = {_constants.MAX_REPEAT, _constants.MIN_REPEAT, _constants.POSSESSIVE_REPEAT}


class _Found(Protocol):
    def start(self) -> int: ...


class Matcher(Protocol):
    def search(self, text: str) -> _Found | None: ...


class _Bounded:
    """A regular expression whose searches share one deadline, counted from the first search
    (reading the output from the store is not the pattern's time)."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.compiled = regex.compile(pattern)
        self.deadline: float | None = None

    def search(self, text: str) -> _Found | None:
        if self.deadline is None:
            self.deadline = time.monotonic() + PATTERN_SECONDS
        left = self.deadline - time.monotonic()
        try:
            if left <= 0:
                raise TimeoutError
            found: _Found | None = self.compiled.search(text, timeout=left)
            return found
        except TimeoutError:
            raise InvalidInputError(
                f"pattern {self.pattern!r} took over {PATTERN_SECONDS:g} s on this output (it backtracks "
                "without end); use a simpler expression, or a plain substring without regex"
            ) from None


def _subpatterns(value: Any) -> Iterator[Any]:
    if isinstance(value, _parser.SubPattern):
        yield value
    elif isinstance(value, (tuple, list)):
        for part in value:
            yield from _subpatterns(part)


def _items(pattern: Any) -> int:
    """How many items ``pattern`` (parsed) stands for with each repeat written out its least
    number of times (what ``regex`` compiles into its program; optional repeats stay loops)."""
    total = 0
    for op, value in pattern:
        if op in _REPEATS:
            least, _most, repeated = value
            total += max(least, 1) * _items(repeated)
        else:
            total += 1 + sum(_items(part) for part in _subpatterns(value))
        if total > MAX_REGEX_ITEMS:
            break  # enough to refuse: products of nested counts grow without bound
    return total


def _inline(pattern: Any) -> Iterator[tuple[Any, Any]]:
    for op, value in pattern:
        if op is _constants.SUBPATTERN:  # a group's characters run on with those around it
            yield from _inline(value[-1])
        else:
            yield op, value


def _literal_run(pattern: Any) -> int:
    """The longest run of single characters (or sets of them: counted too, to be safe) in a row
    in ``pattern`` (parsed), groups read through."""
    longest = run = 0
    for op, value in _inline(pattern):
        if op in _LITERALS:
            run += 1
            longest = max(longest, run)
        else:
            run = 0
            longest = max([longest, *(_literal_run(part) for part in _subpatterns(value))])
    return longest


def _bounded(pattern: str) -> _Bounded:
    if len(pattern) > MAX_REGEX_CHARS:
        raise InvalidInputError(
            f"pattern is a regular expression of {len(pattern):,} characters, longer than the "
            f"{MAX_REGEX_CHARS:,} read; use a shorter one, or a plain substring without regex"
        )
    re.compile(pattern)  # the syntax the tool documents: what re refuses is refused
    parsed = _parser.parse(pattern)
    if _literal_run(parsed) > MAX_REGEX_LITERAL:
        raise InvalidInputError(
            f"pattern {clip(pattern, 80)!r} holds over {MAX_REGEX_LITERAL:,} plain characters in a row, "
            "more than a regular expression is read with; search for that text as a plain substring "
            "without regex, or shorten it"
        )
    if _items(parsed) > MAX_REGEX_ITEMS:
        raise InvalidInputError(
            f"pattern {clip(pattern, 80)!r} repeats too many times (over {MAX_REGEX_ITEMS:,} items "
            "once its counts are written out); use smaller counts, e.g. a{3,} for a run"
        )
    return _Bounded(pattern)


def check_options(offset: int, limit: int | None, pattern: str | None, as_regex: bool) -> Matcher | None:
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise InvalidInputError(f"offset must be an integer >= 0, got {offset!r}")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
        raise InvalidInputError(f"limit must be an integer >= 0 or None, got {limit!r}")
    if pattern is None or pattern == "":
        return None
    if not isinstance(pattern, str):
        raise InvalidInputError(f"pattern is a string, got {type(pattern).__name__}")
    if not as_regex:  # a substring, any case: no backtracking
        return re.compile(re.escape(pattern), re.IGNORECASE)
    try:
        return _bounded(pattern)
    except (re.error, regex.error, OverflowError, RecursionError) as exc:  # a{99999999999}, ((((...
        raise InvalidInputError(f"pattern {clip(pattern, 80)!r} is not a valid regular expression: {exc}") from exc


__all__ = ["MAX_REGEX_CHARS", "MAX_REGEX_ITEMS", "MAX_REGEX_LITERAL", "PATTERN_SECONDS", "Matcher", "check_options"]
