"""Patterns the model writes for ``expand_ref``: a substring, or a regular expression whose
searches share a deadline."""

from __future__ import annotations

import re
import time
from typing import Protocol

import regex  # type: ignore[import-untyped]  # installed with tiktoken; its searches take a timeout

from ctxplugin.cas._budget import clip
from ctxplugin.errors import InvalidInputError

PATTERN_SECONDS = 1.0
"""How long the searches of one read may take in all. A regular expression the model wrote can
backtrack for hours on one line (``(a+)+$``); past this it is refused with an error the model
reads, and the step goes on."""


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


def check_options(offset: int, limit: int | None, pattern: str | None, as_regex: bool) -> Matcher | None:
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise InvalidInputError(f"offset must be an integer >= 0, got {offset!r}")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
        raise InvalidInputError(f"limit must be an integer >= 0 or None, got {limit!r}")
    if pattern is None or pattern == "":
        return None
    if not as_regex:  # a substring, any case: no backtracking
        return re.compile(re.escape(pattern), re.IGNORECASE)
    try:
        re.compile(pattern)  # the syntax the tool documents: what re refuses is refused
        return _Bounded(pattern)
    except (re.error, regex.error, OverflowError, RecursionError) as exc:  # a{99999999999}, ((((...
        raise InvalidInputError(f"pattern {clip(pattern, 80)!r} is not a valid regular expression: {exc}") from exc


__all__ = ["PATTERN_SECONDS", "Matcher", "check_options"]
