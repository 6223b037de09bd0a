"""A received message never carries the mark of a context note.

A context note is a message ctxplugin writes in place of exchanges (``condensed`` or
``omitted`` in its annotation, see :func:`ctxplugin._layout.is_note`); a note goes where
ctxplugin's own texts go, in a system message after the header when the request has no tool
list. A host keeps the metadata a client posts with its messages (a LangGraph server does), so
a user's message carrying that mark would speak in the system prompt's voice: such a message
goes on as a copy without it (the same copy on every call, so what is derived from it is found
by identity).
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage

from ctxplugin._lru import PerMessage
from ctxplugin._messages import META_KEY, annotation

NOTE_MARKS = ("condensed", "omitted")
"""The keys of a note's annotation that make it one."""

_COPIES: PerMessage[BaseMessage] = PerMessage(4096)


def without_note_marks(messages: Sequence[BaseMessage], start: int = 0) -> Sequence[BaseMessage]:
    """``messages``, with the human messages from ``start`` on that carry a note's mark replaced
    by a copy without it: ``messages`` itself when there are none, else a list."""
    out: list[BaseMessage] | None = None
    for index in range(start, len(messages)):
        message = messages[index]
        if isinstance(message, HumanMessage) and any(key in annotation(message) for key in NOTE_MARKS):
            if out is None:
                out = list(messages)
            out[index] = _unmarked(message)
    return messages if out is None else out


def _unmarked(message: BaseMessage) -> BaseMessage:
    copy = _COPIES.get(message)
    if copy is None:
        note = {k: v for k, v in annotation(message).items() if k not in NOTE_MARKS}
        copy = message.model_copy(update={"additional_kwargs": {**message.additional_kwargs, META_KEY: note}})
        _COPIES.put(message, copy)
    return copy


__all__ = ["NOTE_MARKS", "without_note_marks"]
