"""The archive's values ranked by how likely the next step reuses them, kept per exchange.

An archive covers the oldest exchanges of a conversation and grows at its newest end when
blocks move into it. What ranking needs of each value — the label it is listed under, where it
stands in the note's priority order, the newest exchange that names it, in how many exchanges
the model itself used it, its tokens, when it was first said — only changes for the values of
the exchanges added, so a :class:`Reuse` is extended by those exchanges rather than read again
from the first one, and a block's exchanges are gathered into one :class:`Run` (each value
once, as the exchanges one after another would leave it) when the block's note is made, so that
the archive step adds each value of a block once. Only the scores (which fall with age, so every
value's changes when the archive grows) are computed for every value, from those figures.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ctxplugin._lru import LRU
from ctxplugin._untrusted import ref_form
from ctxplugin.history._note_values import Labelled, _Valued, archivable
from ctxplugin.tokens import TokenCounter

if TYPE_CHECKING:
    import numpy as np

_TYPED_WEIGHT = (1.0, 7.0, 20.0, 80.0)
"""How much likelier a value is to be used again by the number of exchanges in which the model
itself used it (none, one, two, three or more). Measured with ``benchmarks/history_reuse.py`` on
the SWE runs: of the values older history held, the next action used about 0.05%, 0.4%, 1% and
4%."""
_AGE_POWER = 0.8
"""How fast that likelihood falls with age in exchanges (about ``age ** -0.8`` there)."""
_RECORD_WEIGHT = 3.0
"""How much likelier an id a tool returned in a record (JSON: ``credit_card_9525117``, ``HAT276``)
is to be used again than the record's other values and a text output's words: the next call
passes it on (a payment method, a reservation) without the model having said it. Without it an
airline conversation whose archive fell to 1,000 tokens lost the payment id its refund needed."""

_Place = tuple[int, int, int, int, int]
"""Where a value is first listed in the priority order: the pass (0: what the model ran and
its paths, 1: the rest of what was said, 2: what tools returned), the exchange (negated:
newest first), the message, first or rest values (tool results), and the item."""
_Seen = tuple[_Place, str, int, int, int]
"""One value's figures: its place, its label there, its newest exchange, the exchanges in which
the model or the user used it, its tokens."""

_DECAY = tuple((1.0 + age) ** -_AGE_POWER for age in range(4096))
"""``(1 + age) ** -_AGE_POWER`` by age, for the ages an archive usually has."""


def _decay(age: int) -> float:
    return _DECAY[age] if age < len(_DECAY) else float((1.0 + age) ** -_AGE_POWER)


_COLUMNS = 10
"""A value's row of figures: its place (five columns), its newest exchange, the exchanges in
which it was used (ranking reads at most 3: the weights stop there), its tokens, whether it is
a record's id (first among a tool result's values, not its ref: see
:func:`ctxplugin.history._note_values._values`), and whether the archive note may list it under
the label of its place (see :func:`ctxplugin.history._note_values.archivable`)."""


_LONGER: list[np.ndarray] = []
"""The longest table made so far (an archive older than 4,096 exchanges extends it once); made
on first use, so that ``import ctxplugin`` does not load numpy."""


def _decays(ages: int) -> np.ndarray:
    """:func:`_decay` of at least ``0 .. ages - 1`` (the same doubles)."""
    import numpy as np

    if not _LONGER:
        _LONGER.append(np.array(_DECAY, dtype=np.float64))
    table = _LONGER[0]
    if ages > len(table):
        size = max(ages, 2 * len(table))
        table = np.concatenate([table, np.array([_decay(age) for age in range(len(table), size)], dtype=np.float64)])
        _LONGER[0] = table  # one list item replaced: a concurrent reader sees the old table or this one
    return table


@dataclass(frozen=True)
class Reuse:
    """What ranking knows of the values of some exchanges, oldest first. Immutable: extending
    one makes another, so a shorter archive's figures can be extended more than once.

    Attributes:
        exchanges: how many exchanges it covers.
        when: each value's place in the order the conversation first said them.
        rows: each value's row in ``figures`` and ``pairs``.
        figures: the values' figures as numbers, a row each (see :data:`_COLUMNS`), so that
            ranking scores and sorts them in a few array operations.
        pairs: each row's ``(label, value)``.
    """

    exchanges: int = 0
    when: dict[str, int] | None = None
    rows: dict[str, int] | None = field(default=None, compare=False)
    figures: np.ndarray | None = field(default=None, compare=False)
    pairs: list[Labelled] | None = field(default=None, compare=False)

    def extended(self, spans: Iterable[Sequence[_Valued]], counter: TokenCounter) -> Reuse:
        """These figures with the values of ``spans`` (newer exchanges, oldest first, each as
        :func:`ctxplugin.history._note_values._valued` reads it) added."""
        return self.joined([gathered(list(spans), counter)])

    def joined(self, runs: Iterable[Run]) -> Reuse:
        """These figures with the values of ``runs`` (of newer exchanges, oldest first) added:
        the same as :meth:`extended` by their exchanges, one after another."""
        runs = list(runs)
        seen = self._seen_of([item[0] for run in runs for item in run.values])
        when = dict(self.when or {})
        e = self.exchanges
        touched: dict[str, None] = {}
        marks: dict[str, tuple[bool, bool]] = {}  # the flags of the values placed here
        for run in runs:
            for value, rank, at, m, sub, i, label, last, said, tokens, flags in run.values:
                touched[value] = None
                old = seen.get(value)
                if old is None:  # a value in seen is in when, and one not in seen is in neither
                    when[value] = len(when)
                    seen[value] = ((rank, -(e + at), m, sub, i), label, e + last, said, tokens)
                    marks[value] = flags
                elif rank <= old[0][0]:  # a newer exchange than any before: it wins a tie
                    place = (rank, -(e + at), m, sub, i)
                    seen[value] = (place, label, e + last, old[3] + said, old[4])
                    marks[value] = flags
                else:
                    seen[value] = (old[0], old[1], e + last, old[3] + said, old[4])
            e += run.exchanges
        import numpy as np

        rows = dict(self.rows or {})
        pairs = list(self.pairs or [])
        placed: list[int] = []
        whole: list[int] = []  # the placed rows' figures, one after another
        moved: list[int] = []
        newer_used: list[int] = []  # the other touched rows' newest exchange and uses, a pair each
        for value in touched:
            place, label, newest, used, tokens = seen[value]
            mark = marks.get(value)
            if mark is None:  # its place, label and tokens are those its row already has
                moved.append(rows[value])
                newer_used.append(newest)
                newer_used.append(used)
                continue
            row = rows.get(value)
            if row is None:
                row = rows[value] = len(pairs)
                pairs.append((label, value))
            else:
                pairs[row] = (label, value)
            placed.append(row)
            whole.extend(place)
            whole.extend((newest, used, tokens, *mark))
        figures = np.zeros((len(pairs), _COLUMNS), dtype=np.int64)
        if self.figures is not None:
            figures[: len(self.figures)] = self.figures
        if placed:
            figures[placed] = np.array(whole, dtype=np.int64).reshape(len(placed), _COLUMNS)
        if moved:
            figures[moved, 5:7] = np.array(newer_used, dtype=np.int64).reshape(len(moved), 2)
        return Reuse(e, when, rows, figures, pairs)

    def _seen_of(self, values: Iterable[str]) -> dict[str, _Seen]:
        """The figures of those of ``values`` these figures hold, read back from their rows at
        once: each value's figures are kept once, as the numbers ranking reads (as tuples too,
        the archives ranked lately held about as much again)."""
        rows, figures, pairs = self.rows, self.figures, self.pairs
        if not rows or figures is None or pairs is None:
            return {}
        known = {value: rows[value] for value in values if value in rows}
        if not known:
            return {}
        read = figures[list(known.values()), :8].tolist()
        return {
            value: ((a, b, c, d, f), pairs[row][0], newest, used, tokens)
            for (value, row), (a, b, c, d, f, newest, used, tokens) in zip(known.items(), read, strict=True)
        }

    @property
    def seen(self) -> dict[str, _Seen] | None:
        """Each value's figures: its place, its label there, its newest exchange, the exchanges
        in which the model or the user used it and its tokens (read back from :attr:`figures`)."""
        if self.when is None:
            return None
        return self._seen_of(self.when)

    def ranked(self, *, archivable_only: bool = False) -> list[Labelled]:
        """The values, the best bet per token first: values the model itself used in several
        exchanges before values a tool printed once, recent before old, short before long;
        equal scores in priority order (what the model ran, the rest of what was said, what
        tools returned; newest exchange first). A value has the label of its place there.
        With ``archivable_only``, only those the archive note may list, in the same order:
        the others are left out before the sort, not after it (on a long session a third of
        thousands of values)."""
        figures, pairs = self.figures, self.pairs
        if figures is None or pairs is None or not len(pairs):
            return []
        import numpy as np

        kept: np.ndarray | None = None
        if archivable_only:
            # each score is computed alone and places are unique, so the order of a subset of
            # the rows is the order of the whole with the other rows left out
            kept = np.flatnonzero(figures[:, 9])
            figures = figures[kept]
            if not len(figures):
                return []
        ages = (self.exchanges - 1) - figures[:, 5]
        # the doubles of W[used] * decay(age) / (tokens + 1), as Python computes them one by one
        weights = np.array(_TYPED_WEIGHT, dtype=np.float64)
        scores = weights[np.minimum(figures[:, 6], 3)] * _decays(self.exchanges)[ages] / (figures[:, 7] + 1)
        scores = np.where(figures[:, 8] == 1, scores * _RECORD_WEIGHT, scores)
        # by score, then by place (places are unique): the rows in place order first, then
        # sorted stably by score
        by_place = np.argsort(_place_keys(figures))
        order = by_place[np.argsort(-scores[by_place], kind="stable")]
        if kept is not None:
            order = kept[order]
        return [pairs[row] for row in order.tolist()]


_Entry = tuple[str, int, int, int, int, str, int, int, tuple[bool, bool]]
"""One value of an exchange: the value, its best place there (pass, message, first or rest
values, item), the label of that place, 1 if the model or the user said it (else 0), its
tokens, and the last two figures of its row when it takes that place (see :data:`_COLUMNS`)."""

_FLAGS = (((False, False), (False, True)), ((True, False), (True, True)))
"""The two flags of an entry, ``_FLAGS[a][b]`` for ``(a, b)``: one pair each, not one per entry."""

_ENTRIES: LRU[tuple[str, tuple[_Valued, ...]], tuple[_Entry, ...]] = LRU(4096)
"""The entries of the exchanges read lately, by their values and the counter: an archive is
extended again by the same exchanges when a user message joins an older block."""
_ENTRIES_LOCK = threading.Lock()


def _entries(span: Sequence[_Valued], counter: TokenCounter) -> tuple[_Entry, ...]:
    """Each value of one exchange once, in the order it first occurs there, at the first of
    its places in the lowest pass (where :meth:`Reuse.extended` would leave it)."""
    key = (counter.name, tuple(span))
    with _ENTRIES_LOCK:
        found = _ENTRIES.hit(key)
    if found is not None:
        return found
    best: dict[str, tuple[int, int, int, int, str]] = {}
    said: set[str] = set()
    for m, (tool, first, rest) in enumerate(span):
        for sub, items in ((0, first), (1, rest)):
            rank = 2 if tool else sub  # the pass
            for i, (label, value) in enumerate(items):
                old = best.get(value)
                if old is None or rank < old[0]:
                    best[value] = (rank, m, sub, i, label)
            if not tool:
                said.update([value for _, value in items])
    count = counter.count
    made = tuple(
        (
            value, rank, m, sub, i, label, int(value in said), count(value),
            _FLAGS[rank == 2 and sub == 0 and not ref_form(value)][archivable((label, value))],
        )
        for value, (rank, m, sub, i, label) in best.items()
    )
    with _ENTRIES_LOCK:
        _ENTRIES.put(key, made)
    return made


_Gathered = tuple[str, int, int, int, int, int, str, int, int, int, tuple[bool, bool]]
"""One value of some consecutive exchanges: the value, its place there (pass, the exchange of
it counted from the first, message, first or rest values, item), the label of that place, the
last exchange that has it (counted from the first), in how many of them the model or the user
said it, its tokens, and the last two figures of its row when it takes that place."""


@dataclass(frozen=True)
class Run:
    """The values of some consecutive exchanges (see :func:`gathered`).

    Attributes:
        exchanges: how many exchanges.
        values: each value once, in the order the exchanges first say them.
    """

    exchanges: int
    values: tuple[_Gathered, ...]


def gathered(spans: Sequence[Sequence[_Valued]], counter: TokenCounter) -> Run:
    """The values of consecutive exchanges (oldest first, each as
    :func:`ctxplugin.history._note_values._valued` reads it), each at the place
    :meth:`Reuse.extended` by them would leave it: the lowest pass, the last exchange of those
    that have it there. A block's are gathered when its note is made, a few calls before the
    archive takes the block in; an archive step then adds each value of a block once, not once
    per exchange that has it."""
    best: dict[str, _Gathered] = {}
    for at, span in enumerate(spans):
        for value, rank, m, sub, i, label, said, tokens, flags in _entries(span, counter):
            found = best.get(value)
            if found is None:
                best[value] = (value, rank, at, m, sub, i, label, at, said, tokens, flags)
            elif rank <= found[1]:  # a later exchange wins a tie
                uses, counted = found[8] + said, found[9]
                best[value] = (value, rank, at, m, sub, i, label, at, uses, counted, flags)
            else:
                best[value] = (*found[:7], at, found[8] + said, found[9], found[10])
    return Run(len(spans), tuple(best.values()))


def _place_keys(figures: np.ndarray) -> np.ndarray:
    """One number per row that orders the rows as their places (the first five columns)
    do: each column shifted to start at 0 and weighed by the spans of the columns after it;
    each row's rank in the columns' order when such numbers would not fit in 62 bits (never at
    the sizes an archive has: a few thousand exchanges, a few messages and items each)."""
    import numpy as np

    places = figures[:, :5]
    lows = places.min(axis=0)
    spans = (places.max(axis=0) - lows + 1).tolist()
    if math.prod(spans) >= 1 << 62:
        return np.lexsort(places.T[::-1]).argsort()
    keys: np.ndarray = places[:, 0] - lows[0]
    for column in range(1, 5):
        keys = keys * spans[column] + (places[:, column] - lows[column])
    return keys


__all__ = ["Reuse", "Run", "gathered"]
