"""Token bounds on text: a token-bounded list of summary lines, and text cut to a budget."""

from __future__ import annotations

import re

from ctxplugin._graphemes import floor_boundary, head
from ctxplugin.tokens import TokenCounter, count_text

MAX_LINE_CHARS = 320
"""Lines longer than this are cut (with an ellipsis) before they are placed in a summary."""


_TOKEN_CHAR = re.compile(r"[\w.-]")
"""A character that continues a token: one next to a value joins it to a longer token."""


def appears(value: str, text: str) -> bool:
    """Whether ``value`` stands in ``text`` as a whole token: id 3 is not shown by "300 records".

    Found with ``str.find`` and a look at the characters around each place: a summary asks
    this of every record's id, and a pattern made for each value (compiled anew once the
    ``re`` module's cache of 512 is full) took seconds for a large array of records."""
    start = text.find(value)
    while start != -1:
        end = start + len(value)
        if (start == 0 or _TOKEN_CHAR.match(text, start - 1) is None) and _TOKEN_CHAR.match(text, end) is None:
            return True
        start = text.find(value, start + 1)
    return False


def clip(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis when cut."""
    return text if len(text) <= limit else head(text, limit - 1).rstrip() + "…"


ECHO_CHARS = 200
"""The most of what the model sent (a pattern, a field list) that a reply repeats back to it."""


def echoed(value: object, same: str) -> str:
    """``repr(value)``, or ``same`` when that is longer than :data:`ECHO_CHARS`: a reply must
    not grow with what the model sent."""
    text = repr(value)
    return text if len(text) <= ECHO_CHARS else same


def shortened(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters (one at least) with an ellipsis, spaces kept."""
    return text if len(text) <= width else head(text, max(1, width - 1)) + "…"


def window(text: str, budget: int, counter: TokenCounter, *, around: int = 0) -> tuple[int, int]:
    """Where to cut ``text`` to about ``budget`` tokens (a few counts of page-sized strings):
    from its start, or around the character at ``around`` when the start does not reach it;
    both ends between whole characters (see :mod:`ctxplugin._graphemes`)."""
    size = budget * 4
    while True:
        start = floor_boundary(text, around - size // 4) if around >= size // 2 else 0
        end = floor_boundary(text, start + size) if start + size < len(text) else len(text)
        if size <= 16 or count_text(text[start:end], counter) <= budget:
            return start, end
        size = size * 3 // 4


def cut_around(text: str, budget: int, counter: TokenCounter, *, around: int = 0) -> str:
    """``text`` cut to about ``budget`` tokens (see :func:`window`), saying what part it is."""
    start, end = window(text, budget, counter, around=around)
    cut = text[start:end]
    if start == 0:
        return cut + f"… [cut at {len(cut):,} of {len(text):,} characters]"
    return f"…{cut}… [characters {start:,}–{end:,} of {len(text):,}]"


class CountedOnce:
    """``counter`` remembering what it counted, for one summary: a line placed in a sub-budget
    (the error lines of a log) is counted again when it moves into the summary, and the last
    fit of :meth:`Lines.add_list`'s bisection when it is added. Counts are the counter's own."""

    def __init__(self, counter: TokenCounter) -> None:
        self.name = counter.name
        self._counter = counter
        self._counts: dict[str, int] = {}

    def count(self, text: str) -> int:
        tokens = self._counts.get(text)
        if tokens is None:
            tokens = self._counts[text] = self._counter.count(text)
        return tokens


class Lines:
    """Summary lines under a token budget; every line costs its tokens plus one for the newline."""

    def __init__(self, counter: TokenCounter, budget: int) -> None:
        self.counter = counter
        self.budget = budget
        self.used = 0
        self.lines: list[str] = []

    @property
    def left(self) -> int:
        return self.budget - self.used

    def cost(self, line: str) -> int:
        return self.counter.count(line) + 1

    def add(self, line: str, *, force: bool = False) -> bool:
        """Append ``line`` if it fits (always with ``force``); True when appended."""
        cost = self.cost(line)
        if not force and self.used + cost > self.budget:
            return False
        self.lines.append(line)
        self.used += cost
        return True

    def add_list(self, prefix: str, items: list[str], *, more_hint: str = "", sep: str = ", ") -> int:
        """Append ``prefix`` + as many ``items`` as fit on one line, plus a count of the rest.

        Returns how many items were placed.
        """
        if not items:
            return 0

        def line(k: int) -> str:
            rest = len(items) - k
            tail = f"{sep.rstrip()} … +{rest} more{more_hint}" if rest else ""
            return prefix + sep.join(items[:k]) + tail

        # a token is at least one character: no line longer than this can fit
        chars, upper = len(prefix), 0
        while upper < len(items) and chars + len(items[upper]) + len(sep) <= (self.left + 1) * 12:
            chars += len(items[upper]) + len(sep)
            upper += 1
        low, high = 0, upper  # largest k whose line fits, by bisection on exact counts
        while low < high:
            mid = (low + high + 1) // 2
            if self.used + self.cost(line(mid)) <= self.budget:
                low = mid
            else:
                high = mid - 1
        if low == 0:
            return 0
        self.add(line(low), force=True)
        return low

    def text(self) -> str:
        return "\n".join(self.lines)
