"""The archive's values in ranked order, made into ``(label, value)`` pairs only as far as a
note reads them.

An archive of a long session ranks thousands of values, and its note lists the first few
hundred that fit: a :class:`Ranking` holds the order as row numbers and makes the pairs a chunk
at a time as it is read, and :class:`Later` is what a fill leaves for the next one (the values
too costly then, and those it did not reach, still unread).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, overload

from ctxplugin.history._note_values import Labelled

if TYPE_CHECKING:
    import numpy as np

_CHUNK = 256
"""Pairs made at a time: an archive note of the default size reads one or two chunks."""


class Ranking(Sequence[Labelled]):
    """``pairs`` in the order of ``rows`` (row numbers into ``pairs``, which is not changed
    after: a longer archive's pairs are another list); a slice is another ranking."""

    __slots__ = ("_pairs", "_rows")

    def __init__(self, pairs: Sequence[Labelled], rows: np.ndarray) -> None:
        self._pairs = pairs
        self._rows = rows

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, at: int) -> Labelled: ...
    @overload
    def __getitem__(self, at: slice) -> Ranking: ...
    def __getitem__(self, at: int | slice) -> Labelled | Ranking:
        if isinstance(at, slice):
            return Ranking(self._pairs, self._rows[at])
        return self._pairs[int(self._rows[at])]

    def __iter__(self) -> Iterator[Labelled]:
        pairs, rows = self._pairs, self._rows
        for start in range(0, len(rows), _CHUNK):
            yield from [pairs[row] for row in rows[start : start + _CHUNK].tolist()]


class Later(Sequence[Labelled]):
    """``first``, then ``rest``: the values a note's fill leaves for another, those it did not
    reach (``rest``) read only as far as that one goes."""

    __slots__ = ("_first", "_rest")

    def __init__(self, first: Sequence[Labelled], rest: Sequence[Labelled]) -> None:
        self._first = first
        self._rest = rest

    def __len__(self) -> int:
        return len(self._first) + len(self._rest)

    @overload
    def __getitem__(self, at: int) -> Labelled: ...
    @overload
    def __getitem__(self, at: slice) -> Sequence[Labelled]: ...
    def __getitem__(self, at: int | slice) -> Labelled | Sequence[Labelled]:
        first = self._first
        if isinstance(at, slice):
            start = at.start or 0
            if at.stop is not None or at.step not in (None, 1) or start < 0:
                return list(self)[at]
            return (
                Later(first[start:], self._rest)
                if start < len(first)
                else self._rest[start - len(first) :]
            )
        if at < 0:
            at += len(self)
        return first[at] if 0 <= at < len(first) else self._rest[at - len(first)]

    def __iter__(self) -> Iterator[Labelled]:
        yield from self._first
        yield from self._rest


__all__ = ["Later", "Ranking"]
