"""Which exchanges the budget stage may drop, and in what order; which it keeps whatever happens."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage

from ctxplugin._layout import is_condensed, is_note, is_user_turn
from ctxplugin._messages import annotation, answered
from ctxplugin.history._turns import is_stand_in


def pinned_spans(history: Sequence[BaseMessage], spans: Sequence[tuple[int, int]]) -> set[int]:
    """Indexes of the spans holding a pinned message (``additional_kwargs["ctxplugin"]["pinned"]``)."""
    return {i for i, (s, e) in enumerate(spans) if any(annotation(m).get("pinned") is True for m in history[s:e])}


def protected_spans(history: Sequence[BaseMessage], spans: list[tuple[int, int]]) -> set[int]:
    """Indexes of spans never dropped: the task, the latest human turn and the assistant message
    it answers, the first context note (the archive: it stands for every older exchange), the
    last exchange, and pinned messages. A context note is a human message but no one's turn."""
    keep: set[int] = set()
    human = [i for i, (s, _) in enumerate(spans) if is_user_turn(history[s])]
    if human:
        keep.add(human[0])
        keep.add(human[-1])
        if answered(history, spans[human[-1]][0]) is not None:
            keep.add(human[-1] - 1)  # that message alone is the exchange before the user's turn
    first_note = next((i for i, (s, _) in enumerate(spans) if is_condensed(history[s])), None)
    if first_note is not None:
        keep.add(first_note)
    if spans:
        keep.add(len(spans) - 1)
    return keep | pinned_spans(history, spans)


def drop_order(history: Sequence[BaseMessage], spans: list[tuple[int, int]]) -> tuple[list[int], int]:
    """The droppable spans in the order they go — exchanges oldest first, then context notes
    oldest first — and how many of them are exchanges. A note already stands for many exchanges
    in a few tokens, and the history stage budgeted it: when the exchanges after it are over,
    they go before it."""
    keep = protected_spans(history, spans)
    exchanges: list[int] = []
    notes: list[int] = []
    for i in range(len(spans)):
        if i not in keep and not is_stand_in(history[spans[i][0]]):  # a stand-in goes with the turn before it
            (notes if is_note(history[spans[i][0]]) else exchanges).append(i)
    return exchanges + notes, len(exchanges)


__all__ = ["drop_order", "pinned_spans", "protected_spans"]
