"""The last tier: old exchanges condensed to context notes when the history must fit a budget.

Old exchanges go in whole blocks of ``block_size``. A condensed block is replaced by one note
(a ``HumanMessage``) listing the exact values its exchanges used — commands, paths, ids,
numbers, quoted strings, short sentences of the user — within ``digest_tokens``, as
``label: value value`` lines that say where each value came from (values holding a space or a
semicolon on a line of their own, each ended by ``;``)::

    [context note: values used in exchanges 4-5:
    ran: python repro.py;
    customer_id: CUS-40917
    lookup_customer returned: ORD-77120 2024-05-01]

A label is the argument the model passed the value in (``ran`` for a shell command, ``path``
for a path inside a longer argument, ``in <argument>`` for other parts of one), ``user said``,
``user mentioned`` or ``assistant mentioned`` for what the conversation said, and
``<tool> returned`` (``<tool> failed`` for a failed call) for what a tool printed.

Every ``archive_blocks`` condensed blocks are merged into one archive note at the front, deduplicated, within ``archive_tokens``, the
values likeliest to be used again per token first (what the model itself used in several
exchanges, then recent before old, short before long): the rest fall out of the archive, never
out of a note still shown.

Cache stability: a note depends only on the blocks it covers and those before them, so it never
changes while shown, and which blocks are condensed depends only on exchanges already gisted and
on the window as it stood at the last tier move. Between moves every call just appends to the
previous view; the archive (right after the task) is rewritten once every ``archive_blocks``
moves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial

from langchain_core.messages import BaseMessage, ToolMessage

from ctxplugin.config import HistoryConfig
from ctxplugin.errors import InvalidInputError
from ctxplugin.history._digests import Digests as Digests
from ctxplugin.history._digests import Keys as Keys
from ctxplugin.history._dropped import OMITTED_NOTE as OMITTED_NOTE
from ctxplugin.history._dropped import dropped_note as dropped_note
from ctxplugin.history._dropped import omitted_note as omitted_note
from ctxplugin.history._note_values import PATH as PATH
from ctxplugin.history._note_values import RAN as RAN
from ctxplugin.history._note_values import USER_SAID as USER_SAID
from ctxplugin.history._note_values import Labelled as Labelled
from ctxplugin.history._notes import EXPAND_HINT as EXPAND_HINT
from ctxplugin.history._notes import note_values
from ctxplugin.tokens import TokenCounter, count_message


@dataclass(frozen=True)
class HistoryBudget:
    """Token limits the compressed history must meet (None: no limit on that part).

    Attributes:
        total: all history messages together.
        messages: messages other than tool results (the engine's ``history`` section).
        tool_results: tool results (the engine's ``summaries`` section).
        room: when ``total`` is only an aim below the room the history has
            (``history.max_tokens``), that room. Blocks are condensed to meet the aim, but the
            archive note is made smaller only to fit the room: the oldest values (the user's
            ids, the first results) are not given up to meet an aim the view need not meet.
    """

    total: int | None = None
    messages: int | None = None
    tool_results: int | None = None
    room: int | None = None

    def __post_init__(self) -> None:
        for name in ("total", "messages", "tool_results", "room"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise InvalidInputError(f"history budget {name} must be >= 0, got {value}")

    def fits(self, messages: Sequence[BaseMessage], counter: TokenCounter) -> bool:
        """Whether ``messages`` as they are meet every limit."""
        return self.within(*totals(messages, counter))

    def within(self, total: int, results: int) -> bool:
        """Whether messages of ``total`` tokens, ``results`` of them in tool results, meet
        every limit."""
        return not (
            (self.total is not None and total > self.total)
            or (self.room is not None and total > self.room)
            or (self.messages is not None and total - results > self.messages)
            or (self.tool_results is not None and results > self.tool_results)
        )

    def limits(self) -> Iterator[tuple[int, type[BaseMessage] | None, bool, bool]]:
        """``(limit, kind, is_kind, shrinks)``: the limit applies to messages that are (or are
        not) of ``kind``; ``shrinks``: the archive note may be made smaller to meet it (not for
        an aim below the room)."""
        aim = self.total is not None and self.room is not None and self.total < self.room
        if self.total is not None:
            yield self.total, None, True, not aim
        if self.room is not None:
            yield self.room, None, True, True
        if self.messages is not None:
            yield self.messages, ToolMessage, False, True
        if self.tool_results is not None:
            yield self.tool_results, ToolMessage, True, True


def totals(messages: Sequence[BaseMessage], counter: TokenCounter) -> tuple[int, int]:
    """Tokens of ``messages`` and of the tool results among them."""
    total = results = 0
    for message in messages:  # one pass: this runs on every call, over the whole history
        size = count_message(message, counter)
        total += size
        if isinstance(message, ToolMessage):
            results += size
    return total, results


Parts = tuple[int, int, int]
"""Tokens of one exchange as shown: all its messages, those that are not tool results, and
the tool results (what each limit of a :class:`HistoryBudget` counts)."""


def parts_of(messages: Sequence[BaseMessage], sizes: Sequence[int]) -> Parts:
    """The :data:`Parts` of one exchange's ``messages`` of ``sizes`` tokens."""
    total = results = 0
    for message, size in zip(messages, sizes, strict=True):
        total += size
        if isinstance(message, ToolMessage):
            results += size
    return total, total - results, results


def raw_parts(
    messages: Sequence[BaseMessage],
    spans: Sequence[tuple[int, int]],
    count: Callable[[BaseMessage], int],
    known: Sequence[Parts] | None = None,
    dirty: Iterable[int] = (),
) -> tuple[Parts, ...]:
    """Each exchange's :data:`Parts` as its messages are: ``known`` (the previous call's, for its
    exchanges, which begin ``spans``) where an exchange holds the very messages it held, counted
    for the new exchanges and the ``dirty`` ones (holding a message replaced since). A long chat
    asks on every user turn whether its whole history fits: this keeps that O(new messages)."""
    if known is None or len(known) > len(spans):
        return tuple(parts_of(messages[s:e], [count(m) for m in messages[s:e]]) for s, e in spans)
    out = [*known, *((0, 0, 0),) * (len(spans) - len(known))]
    for number in {*(d for d in dirty if d < len(known)), *range(len(known), len(spans))}:
        start, end = spans[number]
        out[number] = parts_of(messages[start:end], [count(m) for m in messages[start:end]])
    return tuple(out)


def _counts(message: BaseMessage, kind: type[BaseMessage] | None, is_kind: bool) -> bool:
    return kind is None or isinstance(message, kind) == is_kind


@dataclass(frozen=True)
class OmissionPlan:
    """How many of the oldest blocks (of ``block_size`` exchanges) are not shown as exchanges.

    Attributes:
        condensed: blocks ``0 .. condensed - 1`` are condensed.
        archived: of those, blocks ``0 .. archived - 1`` are merged into one archive note; the
            others each keep a note of their own.
        archive_tokens: cap of the archive note (``archive_tokens`` of the configuration, halved
            as often as needed when even a fully condensed history does not fit).
        holds_while: per limit, how far the window may grow with this plan unchanged (None
            when not known: the plan is made again on the next call).
    """

    condensed: int = 0
    archived: int = 0
    archive_tokens: int = 0
    holds_while: tuple[WindowLimit, ...] | None = None


@dataclass(frozen=True)
class WindowLimit:
    """How far the window (exchanges after the gisted ones) may grow under one limit before
    :func:`plan_omission` would condense more: while the tokens it counts stay within ``most``,
    the same plan stands (used to extend a view without planning again).

    Attributes:
        kind, is_kind: which messages the limit counts (see :meth:`HistoryBudget.limits`).
        tokens: what the window counted when the plan was made.
        most: the most it may count with the plan unchanged.
    """

    kind: type[BaseMessage] | None
    is_kind: bool
    tokens: int
    most: int


_NO_BAR = 1 << 60

_Hold = tuple[WindowLimit, int, int, int, "Callable[[int, int], int] | None"]
"""One limit's window limit as planned, with what may relax it: the room (``limit - kept``),
the blocks it needs condensed, the archive level then, and its cost of a count at a cap."""


def plan_omission(
    rendered: Sequence[Sequence[BaseMessage]],
    sizes: Sequence[Sequence[int]],
    protected_spans: set[int],
    digests: Digests,
    *,
    bounds: tuple[int, int],
    budget: HistoryBudget,
    config: HistoryConfig,
    parts: Sequence[Parts] | None = None,
) -> OmissionPlan:
    """The fewest old blocks to condense so that every limit of ``budget`` is met.

    ``rendered``/``sizes`` hold each exchange's messages as their tiers show them and their
    tokens (``parts``, when given, their sums as :func:`parts_of` makes them). Blocks are condensed oldest first; condensed blocks are merged into the archive
    ``archive_blocks`` at a time. The window (trimmed and verbatim exchanges) is measured as it
    was at the last boundary move, plus room for ``block_size - 1`` more exchanges, so the plan
    stays the same until the boundaries move again — unless the window outgrows that room (a
    long script since the move): the archive then shrinks to fit the window as it is, since
    otherwise the budget stage would drop the oldest exchanges, which are the notes. It shrinks
    for the room only, never for an aim below it (see :attr:`HistoryBudget.room`): meeting an
    aim is worth condensing every block, not losing the oldest values.
    """
    gist_end, verbatim_start = bounds
    block = config.block_size
    blocks = gist_end // block
    if not any(digests.members(k) for k in range(blocks)):
        return OmissionPlan(holds_while=())  # nothing can be condensed, however the window grows
    if parts is None:
        parts = [parts_of(r, t) for r, t in zip(rendered, sizes, strict=True)]
    window_end = min(len(parts), verbatim_start + config.verbatim_exchanges)
    caps = [config.archive_tokens >> shift for shift in range(4)] + [0]
    condensed, level = 0, 0
    holds: list[_Hold] = []
    # each block's gists, per column of Parts (read once: every limit sums one column), read
    # from the newest block back only as far as a limit asks (see :class:`_After`)
    gists: dict[int, Parts] = {}

    def block_gists(k: int) -> Parts:
        found = gists.get(k)
        if found is None:
            found = gists[k] = _summed(parts, digests.members(k))
        return found

    # the notes shown with ``count`` blocks condensed at archive cap ``cap``, looked up once per
    # plan: every limit tries some of the same counts, and counts each more than once
    shown_at: dict[tuple[int, int], list[BaseMessage]] = {}

    def notes_at(count: int, cap: int) -> list[BaseMessage]:
        found = shown_at.get((count, cap))
        if found is None:
            archived = count // config.archive_blocks * config.archive_blocks
            made = (digests.archive(archived, cap), *(digests.block(k, archived, cap) for k in range(archived, count)))
            found = shown_at[(count, cap)] = [m for m in made if m is not None]
        return found

    for limit, kind, is_kind, shrinks in budget.limits():
        column = 0 if kind is None else 2 if is_kind else 1
        deepest = len(caps) if shrinks else level + 1  # the archive levels this limit may ask for

        def part(i: int, column: int = column, parts: Sequence[Parts] = parts) -> int:
            return parts[i][column]

        window = [part(i) for i in range(gist_end, window_end)]
        fresh = [part(i) for i in range(verbatim_start, window_end)] or window
        reserve = (block - 1) * (sum(fresh) // len(fresh)) if fresh else 0
        kept = sum(part(i) for i in protected_spans if i < gist_end)
        allowance = limit - kept - sum(window) - reserve
        # after[k]: the gists of blocks k.. (summed once, read per try); never grows with k
        after = _After(blocks, partial(_column_of, block_gists, column))

        costs: dict[tuple[int, int], int] = {}  # this limit's cost of each count tried

        def cost(count: int, cap: int, after: _After = after, kind: type[BaseMessage] | None = kind, is_kind: bool = is_kind,
                 costs: dict[tuple[int, int], int] = costs) -> int:
            # ``kind`` bound here: :func:`_relaxed` calls each limit's cost after the loop, when
            # the name holds the last limit's (tool results: the notes count nothing)
            found = costs.get((count, cap))
            if found is None:
                found = costs[(count, cap)] = sum(digests.size(m) for m in notes_at(count, cap) if _counts(m, kind, is_kind)) + after[count]
            return found

        def fits(count: int, cap: int, after: _After = after, allowance: int = allowance) -> bool:
            if after[count] > allowance:
                return False  # the blocks left as gists alone are over: no note is made to learn that
            return cost(count, cap) <= allowance

        # counts below what an earlier limit condensed cannot change the plan (their holds are
        # relaxed to that count anyway): no note is made for them
        need = next((count for count in after.counts_from(condensed, allowance) if fits(count, caps[level])), None)
        planned = allowance  # the room the plan leaves for the window to grow into
        if need is None:
            # Even a fully condensed history is too large with room for the exchanges still to
            # come: a smaller archive, one that fits the window as it stood at the move (still
            # the same plan until the next move). When none does (the window alone is over),
            # shrinking it would only lose older history without meeting the limit; the budget
            # stage cuts the rest.
            need, planned = blocks, allowance + reserve
            fitting = next((lv for lv in range(level, deepest) if fits(blocks, caps[lv], allowance=planned)), None)
            if fitting is None:
                # none fits even with the window as it stood at the move, so none will as it
                # grows (a smaller allowance fits no more): the plan holds until the next move
                holds.append((WindowLimit(kind, is_kind, sum(part(i) for i in range(gist_end, len(parts))), _NO_BAR), 0, blocks, level, None))
                condensed = blocks
                continue
            level = fitting
        grown = sum(part(i) for i in range(gist_end, len(parts)))
        now = limit - kept - grown
        # ``bar``: the window may count up to ``limit - kept - bar`` with this plan unchanged
        if now >= planned or fits(need, caps[level], allowance=now):
            bar = min(planned, cost(need, caps[level]))
        else:
            # The window outgrew the room kept for it (a long script since the move): condense
            # more, or shrink the archive, now, rather than leave the budget stage to drop the
            # oldest exchanges, which are the notes themselves. The window only grows until the
            # next move, so this happens at most once per shrink.
            more = next((count for count in after.counts_from(need, now) if fits(count, caps[level], allowance=now)), None)
            if more is not None:
                need = more
                bar = cost(need, caps[level])
            else:
                need = blocks
                shrunk = next((lv for lv in range(level, deepest) if fits(blocks, caps[lv], allowance=now)), None)
                if shrunk is None:
                    bar = -_NO_BAR  # none fits however much the window grows: the plan stays
                else:
                    level = shrunk
                    bar = cost(blocks, caps[level])
        holds.append((WindowLimit(kind, is_kind, grown, limit - kept - bar), limit - kept, need, level, cost))
        condensed = max(condensed, need)
    return OmissionPlan(
        condensed=condensed,
        archived=condensed // config.archive_blocks * config.archive_blocks,
        archive_tokens=caps[level],
        holds_while=tuple(_relaxed(hold, condensed, level, caps) for hold in holds),
    )


def _summed(parts: Sequence[Parts], members: Sequence[int]) -> Parts:
    """The :data:`Parts` of the exchanges ``members`` together."""
    total = others = results = 0
    for i in members:
        a, b, c = parts[i]
        total += a
        others += b
        results += c
    return total, others, results


def _column_of(gists: Callable[[int], Parts], column: int, block: int) -> int:
    return gists(block)[column]


class _After:
    """``after[k]``: the gists of blocks ``k ..`` in one column of :data:`Parts`, summed from the
    newest block back only as far as asked. The counts a plan tries are those whose remaining
    gists alone fit (:meth:`counts_from`), found from the newest back, so the gists of the blocks
    before them are never read: on a long thread's first call those are nearly all of them, and
    they need not even be made (see :mod:`ctxplugin.history._showing`)."""

    def __init__(self, blocks: int, gist: Callable[[int], int]) -> None:
        self._blocks = blocks
        self._gist = gist
        self._sums = [0]  # _sums[j]: after[blocks - j]

    def __getitem__(self, count: int) -> int:
        sums, blocks = self._sums, self._blocks
        while len(sums) <= blocks - count:
            sums.append(sums[-1] + self._gist(blocks - len(sums)))
        return sums[blocks - count]

    def counts_from(self, start: int, allowance: int) -> range:
        """The counts from ``start`` on whose remaining gists alone fit ``allowance``:
        :func:`plan_omission` tries no other, since a count whose gists alone are over cannot
        fit. (Gists never grow with the count, so these are the counts from the first that fits.)"""
        count = self._blocks
        if self[count] > allowance:
            return range(0)
        while count > start and self[count - 1] <= allowance:
            count -= 1
        return range(count, self._blocks + 1)


def _relaxed(hold: _Hold, condensed: int, level: int, caps: list[int]) -> WindowLimit:
    """How far the window may grow under one limit with the whole plan unchanged.

    A limit that needs fewer blocks condensed than another one does (``need < condensed``)
    would, once the window grows past its own bar, ask for the first count from ``need`` on that
    fits; that is at most ``condensed`` while ``condensed`` blocks still fit it at the same
    archive cap, so the plan stands until then."""
    limit, room, need, at_level, cost = hold
    if cost is None or need >= condensed or at_level != level:
        return limit
    return replace(limit, most=max(limit.most, room - cost(condensed, caps[level])))


__all__ = ["OMITTED_NOTE", "Digests", "HistoryBudget", "Keys", "OmissionPlan", "Parts", "WindowLimit", "dropped_note", "note_values", "omitted_note", "parts_of", "plan_omission"]
