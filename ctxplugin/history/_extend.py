"""A history view extended from the session's previous one, when a call only appends.

Tier boundaries move once every ``block_size`` exchanges, and between moves the view of a call
is the previous view with the new messages appended (see :mod:`ctxplugin.history.tiers`). When
that is provably so, :func:`extend` builds it from the previous view and the new messages alone,
so a call between moves costs its new messages, not the whole conversation. It is so when:

- the conversation is the previous one (the very same message objects, holding the very same
  content) with messages appended, and those begin a new exchange;
- the tier boundaries did not move, and no model-written gist can arrive (no summarizer);
- the latest human message, which is kept exact, was already verbatim when a newer one took
  its place (it is shown the same either way);
- the history sent whole still fits its budget, or the window of a tiered history grew no
  further than its omission plan allowed for (:class:`~ctxplugin.history.omission.WindowLimit`).

Otherwise the caller plans the view from scratch, and :func:`remember` keeps the new one.
Bounded: the views of the last :data:`SESSIONS` sessions are kept (the oldest go first).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from operator import attrgetter, is_
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin._lru import LRU
from ctxplugin._messages import annotation, exchange_spans
from ctxplugin.config import HistoryConfig
from ctxplugin.history.omission import HistoryBudget, WindowLimit, _counts
from ctxplugin.tokens import TokenCounter, count_message

SESSIONS = 1024
"""Sessions whose last view is kept."""

_content = attrgetter("content")


@dataclass(frozen=True)
class Made:
    """One session's last history view and what it was made from.

    Attributes:
        messages: the conversation it was made from.
        contents: each message's content object then.
        config, counter, budget: what it was made with.
        exchanges: exchanges of ``messages``.
        bounds: ``(gist_end, verbatim_start)`` then.
        first_human, latest_human: indexes of the first and latest human messages (kept exact).
        latest_span: the exchange number of ``latest_human``.
        result: the view's messages.
        tiers, compressed, omitted, verbatim_from: as :class:`~ctxplugin.history.tiers.HistoryView`.
        whole: ``(tokens, tool-result tokens)`` when the history was sent whole because it fit
            its budget; None when it was tiered.
        window: for a tiered view, the limits its plan holds under (``()``: it holds however the
            window grows); None when the view cannot be extended.
    """

    messages: tuple[BaseMessage, ...]
    contents: tuple[Any, ...]
    config: HistoryConfig
    counter: TokenCounter
    budget: HistoryBudget | None
    exchanges: int
    bounds: tuple[int, int]
    first_human: int | None
    latest_human: int | None
    latest_span: int | None
    result: tuple[BaseMessage, ...]
    tiers: dict[str, int]
    compressed: int
    omitted: int
    verbatim_from: int | None
    whole: tuple[int, int] | None
    window: tuple[WindowLimit, ...] | None


_LAST: LRU[str, Made] = LRU(SESSIONS)
_LOCK = threading.Lock()


def _always_kept(message: BaseMessage) -> bool:
    return isinstance(message, SystemMessage) or annotation(message).get("pinned") is True


def remember(
    session: str,
    messages: Sequence[BaseMessage],
    *,
    config: HistoryConfig,
    counter: TokenCounter,
    budget: HistoryBudget | None,
    spans: Sequence[tuple[int, int]],
    bounds: tuple[int, int],
    result: Sequence[BaseMessage],
    tiers: dict[str, int],
    compressed: int,
    omitted: int,
    verbatim_from: int | None,
    whole: tuple[int, int] | None,
    window: tuple[WindowLimit, ...] | None,
) -> None:
    """Keep the view just made for ``session``, to extend on its next call."""
    humans = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
    latest = humans[-1] if humans else None
    latest_span = next((number for number, (s, e) in enumerate(spans) if s <= latest < e), None) if latest is not None else None
    made = Made(
        messages=tuple(messages),
        contents=tuple(map(_content, messages)),
        config=config,
        counter=counter,
        budget=budget,
        exchanges=len(spans),
        bounds=bounds,
        first_human=humans[0] if humans else None,
        latest_human=latest,
        latest_span=latest_span,
        result=tuple(result),
        tiers=dict(tiers),
        compressed=compressed,
        omitted=omitted,
        verbatim_from=verbatim_from,
        whole=whole,
        window=window,
    )
    with _LOCK:
        _LAST.put(session, made)


def extend(
    session: str,
    messages: Sequence[BaseMessage],
    *,
    config: HistoryConfig,
    counter: TokenCounter,
    budget: HistoryBudget | None,
    bounds_of: Callable[[int], tuple[int, int]],
) -> tuple[Made, list[BaseMessage]] | None:
    """The view of ``messages`` extended from ``session``'s previous one, with what it was made
    from (for the next call), or None when it must be planned from scratch (see the module)."""
    with _LOCK:
        last = _LAST.hit(session)
    if last is None or last.config is not config or last.counter is not counter or last.budget != budget:
        return None
    n = len(last.messages)
    if len(messages) < n:
        return None
    if not (all(map(is_, last.messages, messages)) and all(map(is_, last.contents, map(_content, messages)))):
        return None
    added = list(messages[n:])
    if added and not isinstance(added[0], (HumanMessage, AIMessage)):
        return None  # the previous last exchange goes on: its span changes
    spans = [(s + n, e + n) for s, e in exchange_spans(added)]
    exchanges = last.exchanges + len(spans)
    bounds = bounds_of(exchanges)
    if bounds != last.bounds:
        return None
    humans = [i for i, m in enumerate(added, start=n) if isinstance(m, HumanMessage)]
    first_human = last.first_human if last.first_human is not None else (humans[0] if humans else None)
    latest = humans[-1] if humans else last.latest_human
    tiers = dict(last.tiers)
    old = last.latest_human
    if humans and old is not None and old != first_human and not _always_kept(messages[old]):
        # the previous latest human message is no longer kept exact: shown the same only when
        # its exchange is verbatim
        if last.whole is None and (last.latest_span is None or last.latest_span < bounds[1]):
            return None
        tiers["protected"] -= 1
        tiers["verbatim"] += 1
    for index, message in enumerate(added, start=n):
        if index in (first_human, latest) or _always_kept(message):
            tiers["protected"] += 1
        else:
            tiers["verbatim"] += 1
    whole, window = last.whole, last.window
    first = max(bounds[1], 1)
    verbatim_from = last.verbatim_from
    if whole is not None:
        if budget is None:
            return None
        total, results = whole
        for message in added:
            size = count_message(message, counter)
            total += size
            results += size if isinstance(message, ToolMessage) else 0
        if not budget.within(total, results):
            return None
        whole = (total, results)
        if verbatim_from is None and first < exchanges:
            verbatim_from = spans[first - last.exchanges][0]
    else:
        if window is None:
            return None
        grown: list[WindowLimit] = []
        for limit in window:
            tokens = limit.tokens + sum(count_message(m, counter) for m in added if _counts(m, limit.kind, limit.is_kind))
            if tokens > limit.most:
                return None
            grown.append(replace(limit, tokens=tokens))
        window = tuple(grown)
        if verbatim_from is None and last.exchanges <= first < exchanges:
            verbatim_from = len(last.result) + spans[first - last.exchanges][0] - n
    result = [*last.result, *added]
    latest_span = last.latest_span
    if humans:
        latest_span = next(last.exchanges + j for j, (s, e) in enumerate(spans) if s <= latest < e)  # type: ignore[operator]
    made = replace(
        last,
        messages=tuple(messages),
        contents=tuple(map(_content, messages)),
        exchanges=exchanges,
        first_human=first_human,
        latest_human=latest,
        latest_span=latest_span,
        result=tuple(result),
        tiers=tiers,
        verbatim_from=verbatim_from,
        whole=whole,
        window=window,
    )
    with _LOCK:
        _LAST.put(session, made)
    return made, result


__all__ = ["SESSIONS", "Made", "extend", "remember"]
