"""Values indexed by a run, to find the few of them a new text may hold without looking for
each one.

A value found in a text as a whole token has each of its runs among the text's (see
:data:`~ctxplugin.history.identifiers.RUN`). Indexed by one run each, the values a text may
hold are those under the text's runs whose every run is the text's too: the cost is that of the
text's runs and of the values that pass, not of every value indexed. The index holds what its
owner adds and drops (the values a view lacks, for the account of values), so it stays as large
as that set, not as every value that was ever in it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet

from ctxplugin.history.identifiers import longest_run, occurs, value_runs


class RunIndex:
    """Values by their longest run (see :func:`~ctxplugin.history.identifiers.longest_run`),
    each with its runs, with those that have no letter or digit (:attr:`bare`) and those with a
    line break (:attr:`lined`, which no run can find across two texts) kept apart, in the order
    added.

    Not locked: the session state that owns one holds its own lock."""

    __slots__ = ("_by_run", "bare", "lined")

    def __init__(self) -> None:
        self._by_run: dict[str, dict[str, tuple[str, ...]]] = {}  # longest run -> value -> its runs
        self.bare: dict[str, None] = {}
        self.lined: dict[str, None] = {}

    def add(self, values: Iterable[str]) -> None:
        """Index ``values`` (not indexed yet)."""
        for value in values:
            if "\n" in value:
                self.lined[value] = None
            elif run := longest_run(value):
                self._by_run.setdefault(run, {})[value] = value_runs(value)
            else:
                self.bare[value] = None

    def discard(self, values: Iterable[str]) -> None:
        """Drop ``values`` (those indexed; the others are ignored)."""
        by_run = self._by_run
        for value in values:
            if "\n" in value:
                self.lined.pop(value, None)
            elif run := longest_run(value):
                bucket = by_run.get(run)
                if bucket is not None and bucket.pop(value, None) is not None and not bucket:
                    del by_run[run]
            else:
                self.bare.pop(value, None)

    def candidates(self, runs: frozenset[str]) -> list[str]:
        """The values indexed under a run of ``runs`` whose every run is among ``runs`` (those
        of :attr:`bare` and :attr:`lined` aside), in no set order: all that a text with these
        runs may hold."""
        return [value for value, _ in self._pairs(runs)]

    def _pairs(self, runs: frozenset[str]) -> list[tuple[str, tuple[str, ...]]]:
        """The values :meth:`candidates` gives for ``runs``, each with its runs."""
        by_run = self._by_run
        # the runs both hold, found in C over the smaller of the two
        keys: AbstractSet[str] = runs.intersection(by_run) if len(by_run) < len(runs) else by_run.keys() & runs
        return [pair for run in keys for pair in by_run[run].items() if runs.issuperset(pair[1])]

    def found_in(self, texts: Sequence[tuple[int, str, frozenset[str]]], wanted: Callable[[str], bool]) -> list[tuple[str, int]]:
        """The values indexed (those of :attr:`lined` aside) that ``wanted`` accepts and that
        occur (see :func:`~ctxplugin.history.identifiers.occurs`) in the ``texts`` joined by line
        breaks, each with the key of the first text it occurs in, in no set order. ``texts``:
        (key, text, the text's runs). A value here has no line break, so it occurs in the joined
        texts exactly when it occurs in one of them, and that one holds each of its runs: each
        text is searched only for the values whose every run it holds (:meth:`candidates` of its
        own runs), not for every value whose runs are spread over several of the texts."""
        found: dict[str, int] = {}
        for key, text, held in texts:
            for value, _ in self._pairs(held):
                if value not in found and wanted(value) and occurs(value, text):
                    found[value] = key
        for value in self.bare:  # no run to look up by: looked for in each text
            if wanted(value):
                for key, text, _ in texts:
                    if occurs(value, text):
                        found[value] = key
                        break
        return list(found.items())


__all__ = ["RunIndex"]
