"""A session's last history view, reused by its next call.

Tier boundaries move once every ``block_size`` exchanges, and between moves the view of a call
is the previous view with the new messages appended (see :mod:`ctxplugin.history.tiers`). When
the conversation is the previous one with messages appended — the very same message objects,
holding the very same content — the previous call's work is reused:

- :func:`extend` builds the view from the previous one and the new messages alone, when that
  is provably the view: the tier boundaries did not move; the latest human message, which is
  kept exact, was already verbatim when a newer one took its place; the history sent whole
  still fits its budget, or the window of a tiered history grew no further than its omission
  plan allowed for (:class:`~ctxplugin.history.omission.WindowLimit`); and no long exchange of
  the window may now be shown trimmed to spare the archive.
- Otherwise the view is planned again, but every exchange whose tier and kept messages did not
  change keeps its rendering and token counts, and the content keys of the gisted blocks are
  extended, not computed again. This holds too when some earlier messages (see
  :data:`REPLACED`) were replaced by copies of the same kind — a message marked as no longer
  current: only their exchanges are shown anew.

Nothing is reused with a summarizer (a model-written gist may arrive between calls). Bounded:
the views of the last :data:`SESSIONS` sessions are kept, and of fewer while they hold more
than :data:`MESSAGES` messages in all (the oldest go first; the latest view is always kept).
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from operator import is_
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ctxplugin._lru import LRU
from ctxplugin._messages import annotation, answered, exchange_spans
from ctxplugin._prefix import Prefix, Stamp
from ctxplugin.config import HistoryConfig
from ctxplugin.history._showing import Showing
from ctxplugin.history.omission import HistoryBudget, Keys, Parts, WindowLimit, parts_of

SESSIONS = 1024
"""Sessions whose last view is kept."""
MESSAGES = 8192
"""Messages the kept views may hold in all (each holds its whole conversation, the messages and
what the memos keep for them alive): past it the oldest views go, the latest one whatever its
size staying. Without it 1,024 sessions of long threads held all their messages for good."""
REPLACED = 16
"""Earlier messages a call may have replaced (marked as no longer current) and still reuse the
rest of the previous view, or a quarter of them when that is more (a long chat whose facts
change marks dozens of old messages at once); with more the view is planned from scratch."""


@dataclass(frozen=True)
class Made:
    """One session's last history view and what it was made from.

    Attributes:
        seen: the conversation it was made from, each message with the content it held then,
            and the stamp of the conversation when the caller gave one. The next view made
            from this one takes it over and extends it (a view is claimed by the call that
            reuses it, see :func:`grown`): it is read only by the call that made the view.
        config, counter, budget: what it was made with.
        spans: its exchanges.
        bounds: ``(gist_end, verbatim_start)`` then.
        protected: indexes of the messages kept exact.
        first_human, latest_human: indexes of the first and latest human messages.
        shown: each exchange as its tier showed it, its tokens as shown (see
            :data:`~ctxplugin.history.omission.Parts`) and how many of its messages were shown
            compressed; an exchange of the gist tier is made when first read.
        keys: the content keys of the gisted blocks (None when there were none).
        result: the view's messages.
        tiers, compressed, omitted, verbatim_from: as :class:`~ctxplugin.history.tiers.HistoryView`.
        whole: ``(tokens, tool-result tokens)`` when the history was sent whole because it fit
            its budget; None when it was tiered.
        window: for a tiered view, the limits its plan holds under (``()``: it holds however the
            window grows); None when the view cannot be extended.
        notes_from: the messages its context notes were read from (when not ``seen``'s).
        forced: window exchanges shown trimmed though verbatim by age (see
            :func:`~ctxplugin.history.tiers.compress_history`).
        trimmable: whether showing long window exchanges trimmed was weighed against a smaller
            archive (the choice is made again on the next call).
        archive_short: whether the archive was made smaller than its cap.
        raw: each exchange's tokens as its messages are, unshown (what the check that the whole
            history fits its budget sums), when they were counted (a list is taken over and
            extended by the next view, as ``seen``).
    """

    def keys_for(self, source: Sequence[BaseMessage]) -> Keys | None:
        """The block keys, when the notes of this call read the same messages as before."""
        before = self.notes_from or self.seen.held
        if self.keys is None or len(source) < len(before) or not all(map(is_, before, source)):
            return None
        return self.keys

    seen: Prefix
    config: HistoryConfig
    counter: Any
    budget: HistoryBudget | None
    spans: tuple[tuple[int, int], ...]
    bounds: tuple[int, int]
    protected: frozenset[int]
    first_human: int | None
    latest_human: int | None
    shown: Showing
    keys: Keys | None
    result: tuple[BaseMessage, ...]
    tiers: dict[str, int]
    compressed: int
    omitted: int
    verbatim_from: int | None
    whole: tuple[int, int] | None
    window: tuple[WindowLimit, ...] | None
    notes_from: tuple[BaseMessage, ...] = ()
    forced: frozenset[int] = frozenset()
    trimmable: bool = False
    archive_short: bool = False
    raw: Sequence[Parts] | None = None


@dataclass(frozen=True)
class Grown:
    """The conversation of this call, as the previous one grown by ``added``.

    Attributes:
        prior: the previous view.
        added: the messages appended since.
        spans: every exchange of this call.
        protected: indexes of the messages kept exact now.
        first_human, latest_human: as :class:`Made`.
        dirty: exchanges of the previous view whose kept messages changed, or holding a
            message replaced since (a message marked as no longer current).
        replaced: whether some earlier message was replaced (the view cannot just be extended).
        stamp: the stamp of this call's conversation, when the caller gave one.
    """

    prior: Made
    added: list[BaseMessage]
    spans: tuple[tuple[int, int], ...]
    protected: frozenset[int]
    first_human: int | None
    latest_human: int | None
    dirty: set[int]
    replaced: bool = False
    stamp: Stamp | None = None


_LAST: LRU[str, Made] = LRU(SESSIONS)
_HELD: dict[str, int] = {}
"""Messages each view kept in :data:`_LAST` holds (its conversation's length)."""
_TOTAL = [0]
"""The messages of :data:`_HELD` summed."""
_LOCK = threading.Lock()


def always_kept(message: BaseMessage) -> bool:
    """A system message inside the conversation, or one pinned by the host."""
    return isinstance(message, SystemMessage) or annotation(message).get("pinned") is True


def grown(
    session: str,
    messages: Sequence[BaseMessage],
    *,
    config: HistoryConfig,
    counter: Any,
    budget: HistoryBudget | None,
    stamp: Stamp | None = None,
) -> Grown | None:
    """``messages`` as ``session``'s previous conversation with messages appended (each of the
    previous ones the same object holding the same content, or some of them (see
    :data:`REPLACED`) replaced by a message of the same kind; the new ones beginning a new exchange), made with
    the same settings; None when it is not. A ``stamp`` grown from the previous one's says so
    without reading the messages (see :class:`~ctxplugin._prefix.Stamp`).

    The previous view is claimed: until this call remembers its own, a concurrent call of the
    session plans its view from scratch (the view made from this growth takes over
    :attr:`Made.seen` and extends it)."""
    with _LOCK:
        prior = _LAST.pop(session, None)
        _TOTAL[0] -= _HELD.pop(session, 0)
    if prior is None or prior.config is not config or prior.counter is not counter or prior.budget != budget:
        return None
    n = len(prior.seen)
    replaced = prior.seen.changed(messages, stamp)
    if replaced is None:
        return None
    seen = prior.seen.held
    if len(replaced) > max(REPLACED, n // 4) or any(_kind(seen[i]) != _kind(messages[i]) for i in replaced):
        return None  # another conversation, or one rewritten: planned from scratch
    added = list(messages[n:])
    if added and not isinstance(added[0], (HumanMessage, AIMessage)):
        return None  # the previous last exchange goes on: its span changes
    spans = (*prior.spans, *((s + n, e + n) for s, e in exchange_spans(added)))
    humans = [i for i, m in enumerate(added, start=n) if isinstance(m, HumanMessage)]
    first_human = prior.first_human if prior.first_human is not None else (humans[0] if humans else None)
    latest = humans[-1] if humans else prior.latest_human
    protected = set(prior.protected)
    dirty: set[int] = set()
    old = prior.latest_human
    if humans and old is not None:
        if old != first_human and not always_kept(messages[old]):
            protected.discard(old)  # no longer the latest human message
            dirty.add(bisect_right(prior.spans, (old, len(messages) + 1)) - 1)
        reply = answered(messages, old)
        if reply is not None and not always_kept(messages[reply]):
            protected.discard(reply)  # nor what it answered
            dirty.add(bisect_right(prior.spans, (reply, len(messages) + 1)) - 1)
    protected.update(i for i, m in enumerate(added, start=n) if i in (first_human, latest) or always_kept(m))
    reply = answered(messages, latest) if humans else None
    if reply is not None:
        protected.add(reply)
        if reply < n:  # the previous conversation's last message: shown anew, whole
            dirty.add(bisect_right(prior.spans, (reply, len(messages) + 1)) - 1)
    dirty.update(bisect_right(prior.spans, (i, len(messages) + 1)) - 1 for i in replaced)
    return Grown(prior, added, spans, frozenset(protected), first_human, latest, dirty, bool(replaced), stamp)


def _kind(message: BaseMessage) -> tuple[type, bool]:
    return type(message), always_kept(message)


def remember(session: str, made: Made) -> None:
    """Keep the view just made for ``session``, to reuse on its next call."""
    size = len(made.seen)
    with _LOCK:
        _TOTAL[0] -= _HELD.pop(session, 0)
        _LAST.pop(session, None)
        total = _TOTAL[0] + size
        while _LAST and (len(_LAST) >= SESSIONS or total > MESSAGES):
            gone, _ = _LAST.popitem(last=False)
            total -= _HELD.pop(gone, 0)
        _LAST.put(session, made)
        _HELD[session] = size
        _TOTAL[0] = total


def extend(
    growth: Grown,
    session: str,
    *,
    bounds_of: Callable[[int], tuple[int, int]],
    count: Callable[[BaseMessage], int],
) -> Made | None:
    """The previous view with the new messages appended, when that is this call's view (see the
    module); None when it must be planned again."""
    prior, added = growth.prior, growth.added
    if growth.replaced:
        return None
    bounds = bounds_of(len(growth.spans))
    if bounds != prior.bounds:
        return None
    if prior.trimmable:
        return None  # whether long window exchanges are shown trimmed is chosen again as the window grows
    last = len(prior.spans) - 1  # the previous latest exchange: no longer the latest
    if prior.archive_short and last in long_since_move(prior.shown.all_parts(), bounds, last + 1, prior.config):
        return None  # a long exchange that joined the window since the move may now be shown trimmed
    if growth.dirty and prior.whole is None and min(growth.dirty) < bounds[1]:
        return None  # a human message that was kept exact outside the verbatim tier is compressed now
    sizes = [count(m) for m in added]
    new_spans = growth.spans[len(prior.spans) :]
    n = len(prior.seen)
    parts = [parts_of(added[s - n : e - n], sizes[s - n : e - n]) for s, e in new_spans]
    tiers = dict(prior.tiers)
    tiers["protected"] = len(growth.protected)
    tiers["verbatim"] += len(added) + len(prior.protected) - len(growth.protected)
    whole, window = prior.whole, prior.window
    first = max(bounds[1], 1)
    verbatim_from = prior.verbatim_from
    if whole is not None:
        total = whole[0] + sum(p[0] for p in parts)
        results = whole[1] + sum(p[2] for p in parts)
        if prior.budget is None or not prior.budget.within(total, results):
            return None
        whole = (total, results)
        if verbatim_from is None and first < len(growth.spans):
            verbatim_from = growth.spans[first][0]
    else:
        window = _grown_window(window, parts)
        if window is None:
            return None
        if verbatim_from is None and len(prior.spans) <= first < len(growth.spans):
            verbatim_from = len(prior.result) + growth.spans[first][0] - n
    # taken over: the previous view was claimed by this call
    prior.seen.extend(added, growth.stamp)
    prior.shown.extend((tuple(added[s - n : e - n]), p, 0) for (s, e), p in zip(new_spans, parts, strict=True))
    raw = prior.raw
    if raw is not None:
        raw = raw if isinstance(raw, list) else list(raw)
        raw.extend(parts)  # new exchanges are shown as they are
    made = replace(
        prior,
        spans=growth.spans,
        protected=growth.protected,
        first_human=growth.first_human,
        latest_human=growth.latest_human,
        result=(*prior.result, *added),
        tiers=tiers,
        verbatim_from=verbatim_from,
        whole=whole,
        window=window,
        raw=raw,
    )
    remember(session, made)
    return made


def long_since_move(parts: Sequence[Parts], bounds: tuple[int, int], upto: int, config: HistoryConfig) -> frozenset[int]:
    """The exchanges before ``upto`` that joined the window since the tiers last moved (after
    the verbatim exchanges of the move, ``bounds`` then) and that trimming would shorten much:
    over twice ``trim_tokens``, as ``parts`` count them."""
    start = max(bounds[1] + config.verbatim_exchanges, 1)
    return frozenset(n for n in range(start, upto) if parts[n][0] > 2 * config.trim_tokens)


def long_scripts(parts: Sequence[Parts], bounds: tuple[int, int], exchanges: int, config: HistoryConfig) -> frozenset[int]:
    """The latest exchange, and the last one verbatim at the move, when what the assistant wrote
    there is long (a script it passed to a tool: over twice ``trim_tokens``) and its tool
    results short enough to stay whole when trimmed (at most ``trim_tokens`` together): shown
    trimmed, such an exchange keeps the output the next step reads. The same test on both, so
    that one shown trimmed as the latest at a move is judged alike on the calls after."""
    found: set[int] = set()
    moved = bounds[1] + config.verbatim_exchanges - 1 if config.verbatim_exchanges else exchanges - 1
    for n in (exchanges - 1, moved):
        if 1 <= n < exchanges:
            _, said, results = parts[n]
            if said > 2 * config.trim_tokens and results <= config.trim_tokens:
                found.add(n)
    return frozenset(found)


def _grown_window(window: tuple[WindowLimit, ...] | None, parts: Sequence[Parts]) -> tuple[WindowLimit, ...] | None:
    """``window``'s limits with the new exchanges' ``parts`` counted, or None when one is over
    (or the window is not known)."""
    if window is None:
        return None
    limits: list[WindowLimit] = []
    for limit in window:
        column = 0 if limit.kind is None else 2 if limit.is_kind else 1
        tokens = limit.tokens + sum(p[column] for p in parts)
        if tokens > limit.most:
            return None
        limits.append(WindowLimit(limit.kind, limit.is_kind, tokens, limit.most))  # replace() costs 8 us
    return tuple(limits)


__all__ = ["SESSIONS", "Grown", "Made", "always_kept", "extend", "grown", "long_scripts", "long_since_move", "remember"]
