"""Exploratory spans: the messages of a brainstorm or thought experiment the user opened.

"Let's brainstorm. This is just exploratory." opens one, "OK, enough brainstorming for now,
back to real commitments" closes it; what was said in between is hypothetical, so facts read
from it are never current and the history marks it (see :mod:`ctxplugin.facts.outdated`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

from ctxplugin._lru import LRU, TextKey, text_key
from ctxplugin.tokens import content_text

_OPENS = re.compile(
    r"\b(?:brainstorm\w*|exploratory|just exploring|sandbox|thought experiment|what[- ]if (?:scenario|exercise)|"
    r"let'?s (?:imagine|pretend|play with|explore))\b",
    re.IGNORECASE,
)
_CLOSES = re.compile(
    r"\b(?:enough\b.{0,60}\bfor now|back to (?:reality|real\w*|business|the real)|let'?s talk about (?:real|actual)|"
    r"real commitments|end of (?:the )?(?:brainstorm\w*|exercise|hypothetical)|for real now)\b",
    re.IGNORECASE,
)


def exploratory_spans(body: Sequence[BaseMessage]) -> dict[int, str]:
    """Indexes of messages inside an exploratory span a user opened, as ``hypothetical``, and of
    the user message closing it, as ``closing``.

    A user message that announces exploration ("let's brainstorm", "this is just exploratory",
    "a sandbox") opens a span; the next user message that returns to what is real ("enough ...
    for now", "back to reality", "let's talk about real commitments") closes it. A span left
    open stays open: everything after the opening is exploratory until the user says otherwise.
    """
    exploring = Exploring()
    exploring.extend(body)
    return exploring.spans


class Exploring:
    """:func:`exploratory_spans` read one message at a time: the span of a message depends only
    on the messages up to it, so a conversation that grows is read only where it grew."""

    __slots__ = ("opened", "seen", "spans")

    def __init__(self) -> None:
        self.spans: dict[int, str] = {}
        self.opened = False
        self.seen = 0

    def extend(self, body: Sequence[BaseMessage]) -> None:
        """Read the messages of ``body`` past those read so far (``body`` starts with them)."""
        spans = self.spans
        for index in range(self.seen, len(body)):
            message = body[index]
            human = isinstance(message, HumanMessage)
            opens, closes = _signals(content_text(message.content)) if human else (False, False)
            if human and self.opened and closes:
                spans[index] = "closing"
                self.opened = False
            elif human and not self.opened and opens and not closes:
                spans[index] = "hypothetical"
                self.opened = True
            elif self.opened and not isinstance(message, ToolMessage):
                spans[index] = "hypothetical"
        self.seen = len(body)


_OPENS_LOWER = re.compile(_OPENS.pattern)
_CLOSES_LOWER = re.compile(_CLOSES.pattern)
_SIGNALS: LRU[TextKey, tuple[bool, bool]] = LRU(4096)
_SIGNALS_LOCK = threading.Lock()


def _signals(text: str) -> tuple[bool, bool]:
    """Whether ``text`` opens and whether it closes an exploratory span; once per text (the
    user's messages are read again on every call)."""
    key = text_key(text)
    with _SIGNALS_LOCK:
        hit = _SIGNALS.hit(key)
    if hit is None:
        if text.isascii():
            # the patterns' words are in lower case: in ASCII text, a search that heeds case
            # finds them in the lowered text where one that ignores it would, in half the time
            lowered = text.lower()
            hit = (_OPENS_LOWER.search(lowered) is not None, _CLOSES_LOWER.search(lowered) is not None)
        else:
            hit = (_OPENS.search(text) is not None, _CLOSES.search(text) is not None)
        with _SIGNALS_LOCK:
            _SIGNALS.put(key, hit)
    return hit


__all__ = ["Exploring", "exploratory_spans"]
