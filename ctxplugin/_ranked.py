"""A set of values kept as a list in the order they were first seen, brought up to date by the
values that joined and left it instead of being listed again.

A session's account lists, on every call, the values it used that the view no longer shows, in
first-seen order. Filtered afresh from every value used, that list costs a pass over the whole
session each time a value joins or leaves it; kept here, it costs a binary search and a move
of the list's tail per value that changed.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection, Iterable, Mapping

REBUILD_SHARE = 8
"""A change of more than one in this many of the listed values is listed afresh instead: past
it, moving the tail once per value costs more than one filtering pass."""


class Ranked:
    """Values in the order of their ranks (each value's position in first-seen order).

    ``version`` changes with every change of :attr:`values`, so a result made from it can be
    reused while it stands. Not locked: the session state that owns one holds its own lock."""

    __slots__ = ("_ranks", "values", "version")

    def __init__(self) -> None:
        self.values: list[str] = []
        self._ranks: list[int] = []
        self.version = 0

    def reset(self, values: Iterable[str], rank: Mapping[str, int]) -> None:
        """Hold ``values``, given in rank order."""
        self.values = list(values)
        self._ranks = list(map(rank.__getitem__, self.values))
        self.version += 1

    def update(self, gone: Collection[str], added: Collection[str], rank: Mapping[str, int]) -> bool:
        """Drop ``gone`` (a set of values held) and insert ``added`` (a set of values not held).
        False when the change is too large to be worth it or a value is not where its rank
        says (the list may then be partly changed): the caller lists the values afresh with
        :meth:`reset`."""
        if not gone and not added:
            return True
        if (len(gone) + len(added)) * REBUILD_SHARE > len(self.values) + REBUILD_SHARE:
            return False
        values, ranks = self.values, self._ranks
        places = []
        for value in gone:
            at = bisect_left(ranks, rank[value])
            if at == len(values) or values[at] != value:
                return False
            places.append(at)
        for at in sorted(places, reverse=True):
            del values[at], ranks[at]
        for value in added:
            position = rank[value]
            at = bisect_left(ranks, position)
            if at < len(values) and ranks[at] == position:
                return False  # already held: the caller's sets disagree with this list
            values.insert(at, value)
            ranks.insert(at, position)
        self.version += 1
        return True


__all__ = ["Ranked"]
