"""Tiers by age, moved in blocks, and the ``compress_history`` stage built on them.

Age is counted in exchanges (:func:`ctxplugin._messages.exchange_spans`). The newest exchanges
are verbatim, the next ones trimmed, older ones gisted, and — when a token budget requires it —
the oldest blocks are condensed into context notes (:mod:`ctxplugin.history.omission`). Tier
boundaries are multiples of ``block_size`` exchanges, so between two boundary moves a call only
appends to the previous view and a provider's prompt cache serves everything before the new
messages.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from functools import partial

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from ctxplugin._messages import annotation, answered, exchange_spans
from ctxplugin._prefix import Prefix, Stamp
from ctxplugin.config import HistoryConfig
from ctxplugin.history._condensed import assemble
from ctxplugin.history._extend import Made, extend, grown, long_scripts, long_since_move, remember
from ctxplugin.history._leads import GistSource as GistSource
from ctxplugin.history._leads import lead_text, request_leads, shown_gists
from ctxplugin.history._showing import EMPTY, BlockSizes, Showing
from ctxplugin.history._showing import show as show_exchange
from ctxplugin.history._shown import Tier as Tier
from ctxplugin.history._shown import compress_message
from ctxplugin.history.compressors import memo_counter
from ctxplugin.history.omission import (
    Digests,
    HistoryBudget,
    OmissionPlan,
    plan_omission,
    raw_parts,
)
from ctxplugin.tokens import TokenCounter, content_text, count_message


@dataclass
class HistoryView:
    """The compressed history and what was done to it.

    Attributes:
        messages: the history as the model should see it (a valid conversation).
        compressed_count: messages whose content was trimmed or gisted.
        omitted_exchanges: old exchanges condensed into context notes to fit ``budget``.
        tiers: messages per tier (``verbatim``, ``trimmed``, ``gist``, ``omitted``, ``protected``).
        verbatim_from: index in ``messages`` where the verbatim tier begins (never before the
            end of the first exchange); None when it holds only that exchange. It moves only
            when tier boundaries move, so content inserted there stays in the cached prefix.
    """

    messages: list[BaseMessage]
    compressed_count: int = 0
    omitted_exchanges: int = 0
    tiers: dict[str, int] = field(default_factory=dict)
    verbatim_from: int | None = None


def tier_bounds(exchanges: int, config: HistoryConfig) -> tuple[int, int]:
    """``(gist_end, verbatim_start)``: exchanges before ``gist_end`` are gisted, those from
    ``verbatim_start`` on are verbatim, the ones between trimmed.

    Both are multiples of ``block_size`` and move together, once every ``block_size`` new
    exchanges. At least ``verbatim_exchanges`` exchanges stay verbatim (up to
    ``verbatim_exchanges + block_size - 1`` just before a move), and the trimmed tier holds
    ``trimmed_exchanges - verbatim_exchanges`` exchanges rounded up to whole blocks.
    """
    block = config.block_size
    if exchanges <= config.verbatim_exchanges:
        return 0, 0
    verbatim_start = (exchanges - config.verbatim_exchanges) // block * block
    trimmed = math.ceil((config.trimmed_exchanges - config.verbatim_exchanges) / block) * block
    return max(0, verbatim_start - trimmed), verbatim_start


def is_boundary_call(exchanges: int, config: HistoryConfig) -> bool:
    """Whether tier boundaries moved on this call (as against one exchange fewer)."""
    return tier_bounds(exchanges, config) != tier_bounds(exchanges - 1, config)


def protected_indexes(messages: Sequence[BaseMessage]) -> set[int]:
    """Messages never altered: the first human message (the task), the latest human message
    and the assistant message it answers (see :func:`answered`), system messages inside the
    conversation, and anything pinned with ``additional_kwargs["ctxplugin"]["pinned"] = True``."""
    humans = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
    keep = {humans[0], humans[-1]} if humans else set()
    if humans and (reply := answered(messages, humans[-1])) is not None:
        keep.add(reply)
    keep.update(
        i for i, m in enumerate(messages) if isinstance(m, SystemMessage) or annotation(m).get("pinned") is True
    )
    return keep


def compress_history(
    body: Sequence[BaseMessage],
    *,
    config: HistoryConfig,
    counter: TokenCounter,
    budget: HistoryBudget | int | None = None,
    summarizer: GistSource | None = None,
    session: str = "default",
    notes_from: Sequence[BaseMessage] | None = None,
    stamp: Stamp | None = None,
) -> HistoryView:
    """Compress a conversation by age; never mutates ``body``.

    Args:
        body: the conversation after the leading system messages.
        config: tier sizes and block size.
        counter: token counter.
        budget: limits the history must meet (an ``int`` limits the total); when over, the
            oldest blocks are condensed into context notes listing their exact values (see
            :mod:`ctxplugin.history.omission`). None keeps every exchange.
        summarizer: optional source of model-written gist leads, consulted without waiting and
            asked only for the messages the view shows as gists.
        session: whose conversation this is (for the summarizer's per-session quota).
        notes_from: ``body`` as context notes should read it, message for message (the
            conversation before outdated marks, so that a mark on an old message does not
            rewrite the notes that stand for it); ``body`` when None.
        stamp: what ``body`` is as a sequence, when the caller knows (see
            :class:`ctxplugin._prefix.Stamp`): a body stamped as grown from the session's
            previous one is not compared with it message by message.

    Returns:
        The compressed view. Every AI tool call keeps its result and vice versa, nothing is
        reordered, and protected messages (first and latest human message, pinned ones) are
        kept exactly.
    """
    counter = memo_counter(counter)
    if isinstance(budget, int):
        budget = HistoryBudget(total=budget)
    growth = grown(session, body, config=config, counter=counter, budget=budget, stamp=stamp) if summarizer is None else None
    if growth is not None:
        made = extend(growth, session, bounds_of=partial(tier_bounds, config=config), count=partial(count_message, counter=counter))
        if made is not None:
            return _view(made)
    messages = list(body)  # (copied only when the view is not the previous one extended)
    spans: Sequence[tuple[int, int]]
    if growth is not None:
        spans, protected = growth.spans, growth.protected
    else:
        spans, protected = exchange_spans(messages), frozenset(protected_indexes(messages))
    exchanges = len(spans)
    bounds = tier_bounds(exchanges, config)
    gist_end, verbatim_start = bounds
    upgrade = is_boundary_call(exchanges, config)
    first_human = growth.first_human if growth is not None else next((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), None)
    if growth is not None and not growth.replaced:  # the earlier messages hold the very contents they held
        seen = growth.prior.seen  # taken over: the previous view was claimed by this call
        seen.extend(messages[len(seen) :], stamp)
    else:
        seen = Prefix()
        seen.extend(messages, stamp)
    keep = partial(
        Made, seen, config, counter, budget, tuple(spans), bounds, protected, first_human,
        growth.latest_human if growth is not None else max((i for i in protected if isinstance(messages[i], HumanMessage)), default=None),
    )
    known, dirty = (growth.prior.raw, growth.dirty) if growth is not None else (None, set())
    raw = raw_parts(messages, spans, partial(count_message, counter=counter), known, dirty) if config.compress == "over_budget" and budget else None
    if raw is not None and budget is not None and (growth is None or growth.prior.whole is not None or growth.replaced):
        # (a tiered history of the same settings did not fit before and, nothing replaced, only grew since)
        whole = (sum(p[0] for p in raw), sum(p[2] for p in raw))
        if budget.within(*whole):
            first = max(verbatim_start, 1)
            tiers = {t.value: 0 for t in Tier}
            tiers["protected"] = len(protected)
            tiers[Tier.VERBATIM.value] = len(messages) - len(protected)
            made = keep(
                shown=Showing((tuple(messages[s:e]), p, 0) for (s, e), p in zip(spans, raw, strict=True)), keys=None,
                result=tuple(messages), tiers=tiers, compressed=0, omitted=0,
                verbatim_from=spans[first][0] if first < exchanges else None, whole=whole, window=None, raw=raw,
            )
            if summarizer is None:
                remember(session, made)
            return _view(made)
    if growth is not None and growth.prior.whole is not None:
        growth = None  # the previous view was the history sent whole: none of it is tiered yet
    forced: frozenset[int] = frozenset()  # window exchanges shown trimmed: see below
    trimmable = False
    if growth is not None:
        # only exchanges that are new, changed tier or changed a kept message are shown anew
        prior = growth.prior
        fresh = exchanges - len(prior.spans)
        shown = prior.shown  # taken over, as ``seen``
        shown.extend((EMPTY,) * fresh)
        redo = {*range(len(prior.spans), exchanges), *growth.dirty, *prior.forced}
        for before, now in zip(prior.bounds, bounds, strict=True):
            redo.update(range(min(before, now), max(before, now)))
        numbers: Sequence[int] = sorted(n for n in redo if n < exchanges)
    else:
        shown = Showing((EMPTY,) * exchanges)
        numbers = range(exchanges)
    def show(number: int) -> None:
        start, end = spans[number]
        tier = Tier.TRIMMED if number in forced else _tier(number, bounds)
        if tier is Tier.GIST and summarizer is None:  # gisted when read (most are condensed unread)
            return shown.defer(number, tuple(messages[start:end]), tuple(i in protected for i in range(start, end)), tier, config, counter)
        out: list[BaseMessage] = []
        for index in range(start, end):
            message = messages[index]
            if index in protected:
                out.append(message)
                continue
            lead = None
            if summarizer is not None and tier is Tier.GIST and (text := lead_text(message, config, counter)) is not None:
                lead = summarizer.lead(text, session=session, upgrade=upgrade)  # asked for below, if shown
            out.append(compress_message(message, tier, config=config, counter=counter, lead=lead))
        shown.put(number, show_exchange(messages[start:end], out, counter))

    for number in numbers:
        show(number)
    tiers = _tier_counts(spans, protected, bounds, len(messages))
    plan = OmissionPlan()
    notes: Digests | None = None
    short: list[int] = []  # the gisted blocks short of members (holding a protected exchange)
    parts = shown.all_parts()
    source = notes_from if notes_from is not None and len(notes_from) == len(messages) else messages
    if budget is not None and gist_end:
        protected_spans = {bisect_right(spans, (j, len(messages) + 1)) - 1 for j in protected}
        members = _block_members(gist_end // config.block_size, config.block_size, protected_spans)
        short = sorted({n // config.block_size for n in protected_spans if n < gist_end})
        sizes = BlockSizes(shown, members, counter)
        notes = Digests(
            _Exchanges(source, spans),
            members,
            sizes,
            content_text(source[first_human].content) if first_human is not None else "",
            config,
            counter,
            resume=growth.prior.keys_for(source) if growth is not None else None,
            gist_over=sizes.over,
        )
        plan = plan_omission((), (), protected_spans, notes, bounds=bounds, budget=budget, config=config, parts=parts)
        if plan.archive_tokens < config.archive_tokens:
            # The archive is made smaller to leave the window room. When exchanges that joined
            # the window since the move, before the latest, are long (a long script), they are
            # shown trimmed instead, if that keeps more of the archive: it would otherwise grow
            # back at the next move, which gists them anyway, and it holds the oldest values.
            # When that still leaves the archive short, so is the latest exchange (and the last
            # one verbatim at the move) if only what the assistant wrote there is long: an
            # archive shrunk for one call and grown back on the next rewrites the whole cached
            # view twice, where trimming the script rewrites only its end.
            older = long_since_move(parts, bounds, exchanges - 1, config)
            tries = [older] if older else []
            scripts = long_scripts(parts, bounds, exchanges, config) - older
            if scripts:
                tries.append(older | scripts)
            trimmable = bool(tries)
            untrimmed = {n: shown.entry(n) for n in (tries[-1] if tries else ())}
            chosen: frozenset[int] = frozenset()
            for candidate in tries:
                # each try adds to the one before: only the exchanges it adds are shown anew
                fresh_trims, forced = candidate - forced, candidate
                for number in fresh_trims:
                    show(number)
                trimmed = plan_omission((), (), protected_spans, notes, bounds=bounds, budget=budget, config=config, parts=parts)
                if trimmed.archive_tokens > plan.archive_tokens:
                    plan, chosen = trimmed, candidate
                    if plan.archive_tokens >= config.archive_tokens:
                        break
            forced = chosen
            for number, entry in untrimmed.items():
                if number not in chosen:
                    shown.put(number, entry)
            if chosen:
                _count_trimmed(tiers, chosen, spans, protected)
    view = assemble(
        shown, spans, notes, plan, config.block_size, max(verbatim_start, 1), short if notes is not None else None, source=messages
    )
    if summarizer is not None:
        shown_now = shown_gists(gist_end, notes, plan, config.block_size)
        request_leads(summarizer, shown_now, messages, spans, protected, config=config, counter=counter, session=session)
    tiers[Tier.OMITTED.value] += view.omitted_messages
    tiers[Tier.GIST.value] -= view.omitted_messages
    made = keep(
        shown=shown, keys=notes.keys() if notes is not None else None,
        result=view.messages, tiers=tiers, compressed=view.compressed, omitted=view.omitted, verbatim_from=view.verbatim_from, whole=None,
        window=plan.holds_while if notes is not None else (),
        notes_from=tuple(source) if notes is not None and source is not messages else (),
        forced=forced,
        trimmable=trimmable,
        archive_short=notes is not None and plan.archive_tokens < config.archive_tokens,
        raw=raw,
    )
    if summarizer is None:
        remember(session, made)
    return _view(made)


def _view(made: Made) -> HistoryView:
    return HistoryView(
        messages=list(made.result),
        compressed_count=made.compressed,
        omitted_exchanges=made.omitted,
        tiers=dict(made.tiers),
        verbatim_from=made.verbatim_from,
    )


def _count_trimmed(tiers: dict[str, int], numbers: frozenset[int], spans: Sequence[tuple[int, int]], protected: frozenset[int]) -> None:
    """Move the messages of verbatim exchanges ``numbers``, shown trimmed, to the trimmed count."""
    moved = sum(1 for n in numbers for i in range(*spans[n]) if i not in protected)
    tiers[Tier.VERBATIM.value] -= moved
    tiers[Tier.TRIMMED.value] += moved


def _block_members(blocks: int, size: int, protected: Collection[int]) -> list[tuple[int, ...]]:
    """The exchange numbers of each of the first ``blocks`` blocks of ``size``, without the
    ``protected`` ones (made in C: a long chat has thousands of blocks, a few protected)."""
    members = list(zip(*(range(j, blocks * size, size) for j in range(size)), strict=True))
    for number in protected:
        block = number // size
        if block < blocks:
            members[block] = tuple(i for i in members[block] if i != number)
    return members


def _tier(number: int, bounds: tuple[int, int]) -> Tier:
    """The tier of exchange ``number`` under ``(gist_end, verbatim_start)``."""
    return Tier.GIST if number < bounds[0] else Tier.TRIMMED if number < bounds[1] else Tier.VERBATIM


def _tier_counts(spans: Sequence[tuple[int, int]], protected: frozenset[int], bounds: tuple[int, int], size: int) -> dict[str, int]:
    """Messages per tier (the kept-exact ones counted as ``protected``), before any is omitted."""
    def start(number: int) -> int:
        return spans[number][0] if number < len(spans) else size

    tiers = {t.value: 0 for t in Tier}
    tiers[Tier.GIST.value] = start(bounds[0])
    tiers[Tier.TRIMMED.value] = start(bounds[1]) - start(bounds[0])
    tiers[Tier.VERBATIM.value] = size - start(bounds[1])
    for index in protected:
        number = bisect_right(spans, (index, size + 1)) - 1
        tiers[_tier(number, bounds).value] -= 1
    tiers["protected"] = len(protected)
    return tiers


class _Exchanges(Sequence[tuple[BaseMessage, ...]]):
    """The exchanges of a conversation, each made when asked for."""

    def __init__(self, messages: Sequence[BaseMessage], spans: Sequence[tuple[int, int]]) -> None:
        self._messages = messages
        self._spans = spans

    def __len__(self) -> int:
        return len(self._spans)

    def __getitem__(self, number: int) -> tuple[BaseMessage, ...]:  # type: ignore[override]
        start, end = self._spans[number]
        return tuple(self._messages[start:end])


__all__ = [
    "GistSource",
    "HistoryView",
    "Tier",
    "compress_history",
    "compress_message",
    "is_boundary_call",
    "protected_indexes",
    "tier_bounds",
]
