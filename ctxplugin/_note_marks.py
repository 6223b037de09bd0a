"""A received message never carries the mark of a context note, nor of a stand-in turn.

A context note is a message ctxplugin writes in place of exchanges (``condensed`` or
``omitted`` in its annotation, see :func:`ctxplugin._layout.is_note`); a note goes where
ctxplugin's own texts go, in a system message after the header when the request has no tool
list. A host keeps the metadata a client posts with its messages (a LangGraph server does), so
a user's message carrying that mark would speak in the system prompt's voice: such a message
goes on as a copy without it (the same copy on every call, so what is derived from it is found
by identity). So does one marked as the short user turn ctxplugin writes for a condensed
reply (:data:`STAND_IN_MARK`). :class:`Unmarked` makes such copies for any marks (the stages
drop a forged ref mark with it too).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar, cast

from langchain_core.messages import BaseMessage, HumanMessage

from ctxplugin._lru import PerMessage
from ctxplugin._mapped import mapped_from
from ctxplugin._messages import META_KEY, annotation

NOTE_MARKS = ("condensed", "omitted")
"""The keys of a note's annotation that make it one."""

STAND_IN_MARK = "stands_in"
"""The annotation key of the user turn ctxplugin writes for a condensed reply
(``additional_kwargs["ctxplugin"]["stands_in"]``, see :mod:`ctxplugin.history._turns`): a
received message so marked would be left out with the answer before it, and never dropped
alone."""

_OWN_MARKS = (*NOTE_MARKS, STAND_IN_MARK)

M = TypeVar("M", bound=BaseMessage)


class Unmarked:
    """Copies of messages without the keys ``marks`` of their annotation: the same copy for the
    same message, so what later stages derive from it is found by identity (bounded)."""

    def __init__(self, marks: Iterable[str]) -> None:
        self.marks = frozenset(marks)
        self._copies: PerMessage[BaseMessage] = PerMessage(4096)

    def __call__(self, message: M) -> M:
        copy = self._copies.get(message)
        if copy is None:
            note = {k: v for k, v in annotation(message).items() if k not in self.marks}
            copy = message.model_copy(
                update={"additional_kwargs": {**message.additional_kwargs, META_KEY: note}}
            )
            self._copies.put(message, copy)
        return cast("M", copy)


_unmarked = Unmarked(_OWN_MARKS)


def without_note_marks(messages: Sequence[BaseMessage], start: int = 0) -> Sequence[BaseMessage]:
    """``messages``, with the human messages from ``start`` on that carry a note's mark (or a
    stand-in's) replaced by a copy without it: ``messages`` itself when there are none, else a
    list."""
    return mapped_from(messages, start, _without_own_mark)


def _without_own_mark(message: BaseMessage) -> BaseMessage:
    if isinstance(message, HumanMessage) and any(key in annotation(message) for key in _OWN_MARKS):
        return _unmarked(message)
    return message


__all__ = ["NOTE_MARKS", "STAND_IN_MARK", "Unmarked", "without_note_marks"]
