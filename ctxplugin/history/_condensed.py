"""The tiered history put together: each exchange as shown, the condensed blocks as their notes.

A long thread's view is mostly condensed blocks: a block whose every exchange is condensed is
passed over as one, so assembling the view costs its blocks, not its exchanges.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage

from ctxplugin.history._showing import Showing
from ctxplugin.history._turns import Turns
from ctxplugin.history.omission import Digests, OmissionPlan


@dataclass(frozen=True)
class Assembled:
    """The history as the model sees it and what was done to it.

    Attributes:
        messages: the view.
        compressed: messages shown changed (trimmed or gisted).
        omitted: exchanges condensed into notes.
        omitted_messages: the messages of those exchanges.
        verbatim_from: where in ``messages`` exchange ``first_window`` begins (None when the
            view has no such exchange).
    """

    messages: tuple[BaseMessage, ...]
    compressed: int
    omitted: int
    omitted_messages: int
    verbatim_from: int | None


def assemble(
    shown: Showing,
    spans: Sequence[tuple[int, int]],
    notes: Digests | None,
    plan: OmissionPlan,
    block_size: int,
    first_window: int,
    short: Sequence[int] | None = None,
    source: Sequence[BaseMessage] = (),
) -> Assembled:
    """The view of exchanges ``spans`` as ``shown`` shows them, the blocks ``plan`` condenses
    standing as one note each (the archive for all archived blocks, where the first of them
    began); exchanges of a condensed block that are not among its members (protected ones)
    stay where they are. ``short``: the blocks short of members, in order, when the caller
    knows them: the archived blocks between two are passed over at once (a long thread has
    thousands). ``source``: the conversation ``spans`` index; where what is condensed after a
    kept assistant turn held a user turn and an assistant turn is kept next, a short user turn
    stands for it (see :mod:`ctxplugin.history._turns`)."""
    exchanges = len(spans)
    result: list[BaseMessage] = []
    turns = Turns(result, source)
    verbatim_from: int | None = None

    def keep(number: int) -> int:
        """Add exchange ``number`` as shown; how many of its messages are shown changed."""
        nonlocal verbatim_from
        span, _, changed = shown.entry(number)
        if (at := turns.kept(spans[number][0], span)) is not None and verbatim_from is not None and verbatim_from >= at:
            verbatim_from += 1
        if number == first_window:
            verbatim_from = len(result)
        result.extend(span)
        return changed

    compressed = omitted = omitted_messages = 0
    condensed_end = min(plan.condensed * block_size, exchanges) if notes is not None else 0
    noted: set[int] = set()
    number = 0
    while number < condensed_end and notes is not None:
        block = number // block_size
        members = notes.members(block)
        end = min((block + 1) * block_size, condensed_end)
        if len(members) == end - number == block_size:  # the whole block is condensed: its note alone
            if short is not None and block < plan.archived:  # and the whole blocks after it, up to a short one
                stop = min(plan.archived, condensed_end // block_size, *short[bisect_right(short, block) : bisect_right(short, block) + 1])
                end = max(stop, block + 1) * block_size
            turns.gone(spans[number][0])
            _note_once(result, noted, notes, block, plan)
            omitted += end - number
            omitted_messages += spans[end - 1][1] - spans[number][0]
            number = end
            continue
        if number in members:
            if number == first_window:
                verbatim_from = len(result)
            turns.gone(spans[number][0])
            _note_once(result, noted, notes, block, plan)
            omitted += 1
            omitted_messages += spans[number][1] - spans[number][0]
        else:
            compressed += keep(number)
        number += 1
    for later in range(number, exchanges):
        compressed += keep(later)
    return Assembled(tuple(result), compressed, omitted, omitted_messages, verbatim_from)


def _note_once(result: list[BaseMessage], noted: set[int], notes: Digests, block: int, plan: OmissionPlan) -> None:
    """Append the note that stands for condensed ``block`` unless it is already in ``result``:
    the archive when ``plan`` merges the block into it, else the block's own (nothing when the
    note lists nothing)."""
    key = 0 if block < plan.archived else block
    if key not in noted:
        noted.add(key)
        note = notes.archive(plan.archived, plan.archive_tokens) if block < plan.archived else notes.block(block, plan.archived, plan.archive_tokens)
        if note is not None:
            result.append(note)


__all__ = ["Assembled", "assemble"]
