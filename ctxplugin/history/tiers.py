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
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache, partial
from typing import Protocol

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolCall

from ctxplugin._lru import PerMessage
from ctxplugin._messages import META_KEY, annotation, exchange_spans
from ctxplugin.config import HistoryConfig
from ctxplugin.history._extend import extend, remember
from ctxplugin.history.compressors import MemoCounter, gist_text, memo_counter, trim_text
from ctxplugin.history.omission import Digests, HistoryBudget, OmissionPlan, plan_omission, totals
from ctxplugin.tokens import TokenCounter, content_text, count_message


class Tier(StrEnum):
    """How much of a message the view keeps."""

    VERBATIM = "verbatim"
    TRIMMED = "trimmed"
    GIST = "gist"
    OMITTED = "omitted"


class GistSource(Protocol):
    """Where model-written gist leads come from (see :class:`BackgroundSummarizer`)."""

    def prefetch(self, text: str, *, session: str) -> None:
        """Ask for a summary of ``text`` ahead of need; never blocks."""

    def lead(self, text: str, *, session: str, upgrade: bool) -> str | None:
        """The summary to lead the gist of ``text`` with, or None for the zero-LLM gist.

        ``upgrade`` is True on calls where tier boundaries move (the cache prefix breaks there
        anyway); only then may an earlier zero-LLM gist be replaced by a summary."""


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
    """Messages never altered: the first human message (the task), the latest human message,
    system messages inside the conversation, and anything pinned with
    ``additional_kwargs["ctxplugin"]["pinned"] = True``."""
    humans = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
    keep = {humans[0], humans[-1]} if humans else set()
    keep.update(
        i for i, m in enumerate(messages) if isinstance(m, SystemMessage) or annotation(m).get("pinned") is True
    )
    return keep


def _plain_text(message: BaseMessage) -> str | None:
    """The text of a message that is text only, or None (multimodal content passes through)."""
    content = message.content
    if isinstance(content, str):
        return content
    if all(isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text") for b in content):
        return content_text(content)
    return None


@lru_cache(maxsize=4096)
def _compressed(text: str, tier: Tier, max_tokens: int, counter: MemoCounter, ref: str | None, lead: str | None) -> str:
    keep = [ref] if ref else None
    if tier is Tier.TRIMMED:
        return trim_text(text, max_tokens=max_tokens, counter=counter, must_keep=keep)
    return gist_text(text, max_tokens=max_tokens, counter=counter, lead=lead, must_keep=keep)


def _summarizable(text: str, config: HistoryConfig, counter: TokenCounter) -> bool:
    return counter.count(text) > 2 * config.gist_tokens


_SHOWN: PerMessage[dict[tuple[object, ...], BaseMessage]] = PerMessage(4096)
"""Each message as its tiers showed it, by message: an old message keeps its tier for many calls
and is compressed once; the same copy is shown again, so what is derived from the copy (its
token count) is found by identity too."""


def compress_message(
    message: BaseMessage,
    tier: Tier,
    *,
    config: HistoryConfig,
    counter: TokenCounter,
    lead: str | None = None,
) -> BaseMessage:
    """``message`` as its tier shows it: a copy with new content, or ``message`` itself.

    Text content is compressed, and only when that makes it smaller. Tool calls of AI messages
    keep their ids, names and short arguments; a long string argument is trimmed (its exact
    values listed at the marker), unless the message holds its calls as content blocks. A
    stored tool output keeps its ref."""
    if tier is Tier.VERBATIM:
        return message
    max_tokens = config.trim_tokens if tier is Tier.TRIMMED else config.gist_tokens
    memo = memo_counter(counter)
    key = (tier, max_tokens, lead, memo)
    shown = _SHOWN.get(message)
    if shown is not None and key in shown:
        return shown[key]
    out = _compress_message(message, tier, max_tokens, memo, lead)
    if shown is None:
        shown = {}
        _SHOWN.put(message, shown)
    shown[key] = out
    return out


def _compress_message(message: BaseMessage, tier: Tier, max_tokens: int, memo: MemoCounter, lead: str | None) -> BaseMessage:
    update: dict[str, object] = {}
    text = _plain_text(message)
    note = annotation(message)
    extra = dict(message.additional_kwargs)
    calls = _trimmed_calls(message, max_tokens, memo) if text is not None else None
    if calls is not None:
        update["tool_calls"] = calls
        extra.pop("tool_calls", None)  # a provider's raw copy of the calls would still hold the long arguments
    if text:
        ref = note.get("ref") if isinstance(note.get("ref"), str) else None
        new = _compressed(text, tier, max_tokens, memo, ref, lead)
        if new != text:
            update["content"] = new
    if not update:
        return message
    meta = {**note, "tier": tier.value}
    update["additional_kwargs"] = {**extra, META_KEY: meta}
    return message.model_copy(update=update)


def _trimmed_calls(message: BaseMessage, max_tokens: int, counter: MemoCounter) -> list[ToolCall] | None:
    """The tool calls of an AI message with every long string argument trimmed (its exact
    values listed at the elision point), or None when none is long."""
    if not isinstance(message, AIMessage) or not message.tool_calls:
        return None
    changed = False
    calls: list[ToolCall] = []
    for call in message.tool_calls:
        args = dict(call["args"])
        for key, value in args.items():
            if isinstance(value, str) and len(value) > 4 * max_tokens:
                short = _compressed(value, Tier.TRIMMED, max_tokens, counter, None, None)
                if short != value:
                    args[key] = short
                    changed = True
        calls.append({**call, "args": args})
    return calls if changed else None


def compress_history(
    body: Sequence[BaseMessage],
    *,
    config: HistoryConfig,
    counter: TokenCounter,
    budget: HistoryBudget | int | None = None,
    summarizer: GistSource | None = None,
    session: str = "default",
) -> HistoryView:
    """Compress a conversation by age; never mutates ``body``.

    Args:
        body: the conversation after the leading system messages.
        config: tier sizes and block size.
        counter: token counter.
        budget: limits the history must meet (an ``int`` limits the total); when over, the
            oldest blocks are condensed into context notes listing their exact values (see
            :mod:`ctxplugin.history.omission`). None keeps every exchange.
        summarizer: optional source of model-written gist leads, consulted without waiting.
        session: whose conversation this is (for the summarizer's per-session quota).

    Returns:
        The compressed view. Every AI tool call keeps its result and vice versa, nothing is
        reordered, and protected messages (first and latest human message, pinned ones) are
        kept exactly.
    """
    messages = list(body)
    counter = memo_counter(counter)
    if isinstance(budget, int):
        budget = HistoryBudget(total=budget)
    if summarizer is None:
        extended = extend(session, messages, config=config, counter=counter, budget=budget, bounds_of=partial(tier_bounds, config=config))
        if extended is not None:
            made, shown = extended
            return HistoryView(
                messages=shown,
                compressed_count=made.compressed,
                omitted_exchanges=made.omitted,
                tiers=dict(made.tiers),
                verbatim_from=made.verbatim_from,
            )
    spans = exchange_spans(messages)
    exchanges = len(spans)
    protected = protected_indexes(messages)
    bounds = tier_bounds(exchanges, config)
    gist_end, verbatim_start = bounds
    upgrade = is_boundary_call(exchanges, config)
    tiers: dict[str, int] = {t.value: 0 for t in Tier}
    tiers["protected"] = 0
    keep = partial(remember, session, messages, config=config, counter=counter, budget=budget, spans=spans, bounds=bounds)
    if config.compress == "over_budget" and budget is not None:
        whole = totals(messages, counter)
        if budget.within(*whole):
            tiers["protected"] = len(protected)
            tiers[Tier.VERBATIM.value] = len(messages) - len(protected)
            first = max(verbatim_start, 1)
            view = HistoryView(messages=messages, tiers=tiers, verbatim_from=spans[first][0] if first < exchanges else None)
            if summarizer is None:
                keep(
                    result=messages, tiers=tiers, compressed=0, omitted=0,
                    verbatim_from=view.verbatim_from, whole=whole, window=None,
                )
            return view
    rendered: list[list[BaseMessage]] = []
    for number, (start, end) in enumerate(spans):
        tier = Tier.GIST if number < gist_end else Tier.TRIMMED if number < verbatim_start else Tier.VERBATIM
        out: list[BaseMessage] = []
        for index in range(start, end):
            message = messages[index]
            if index in protected:
                out.append(message)
                tiers["protected"] += 1
                continue
            lead = None
            if summarizer is not None and tier is not Tier.VERBATIM:
                text = _plain_text(message)
                if text and _summarizable(text, config, counter):
                    if tier is Tier.TRIMMED:
                        summarizer.prefetch(text, session=session)
                    else:
                        lead = summarizer.lead(text, session=session, upgrade=upgrade)
            out.append(compress_message(message, tier, config=config, counter=counter, lead=lead))
            tiers[tier.value] += 1
        rendered.append(out)
    plan = OmissionPlan()
    notes: Digests | None = None
    if budget is not None and gist_end:
        sizes = [[count_message(m, counter) for m in span] for span in rendered]
        protected_spans = {i for i, (s, e) in enumerate(spans) if any(j in protected for j in range(s, e))}
        members = [
            [i for i in range(k * config.block_size, (k + 1) * config.block_size) if i not in protected_spans]
            for k in range(gist_end // config.block_size)
        ]
        humans = [m for m in messages if isinstance(m, HumanMessage)]
        notes = Digests(
            [tuple(messages[s:e]) for s, e in spans],
            members,
            [sum(sum(sizes[i]) for i in block) for block in members],
            content_text(humans[0].content) if humans else "",
            config,
            counter,
        )
        plan = plan_omission(rendered, sizes, protected_spans, notes, bounds=bounds, budget=budget, config=config)
    result: list[BaseMessage] = []
    compressed = omitted = 0
    noted: set[int] = set()
    verbatim_from: int | None = None
    for number, span in enumerate(rendered):
        if number == max(verbatim_start, 1):
            verbatim_from = len(result)
        block = number // config.block_size
        if notes is not None and block < plan.condensed and number in notes.members(block):
            # one note per block (the archive for all archived blocks), where the block began
            key = 0 if block < plan.archived else block
            if key not in noted:
                noted.add(key)
                note = (
                    notes.archive(plan.archived, plan.archive_tokens)
                    if block < plan.archived
                    else notes.block(block, plan.archived, plan.archive_tokens)
                )
                if note is not None:
                    result.append(note)
            omitted += 1
            tiers[Tier.OMITTED.value] += len(span)
            tiers[Tier.GIST.value] -= len(span)
            continue
        compressed += sum(1 for j, m in zip(range(*spans[number]), span, strict=True) if m is not messages[j])
        result.extend(span)
    if summarizer is None:
        keep(
            result=result, tiers=tiers, compressed=compressed, omitted=omitted,
            verbatim_from=verbatim_from, whole=None, window=plan.holds_while if notes is not None else (),
        )
    return HistoryView(
        messages=result, compressed_count=compressed, omitted_exchanges=omitted, tiers=tiers, verbatim_from=verbatim_from
    )


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
