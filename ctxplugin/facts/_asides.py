"""Asides: the messages of an interruption the user has opened and then left.

"Hold on - ..." opens one, "..., back to the ticket" ends it; what was said in between is not
the current task, so the history marks it (see :mod:`ctxplugin.facts.outdated`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

from ctxplugin.tokens import content_text

_INTERRUPTS = re.compile(
    r"^\W*(?:hold on|hang on|wait a (?:sec(?:ond)?|moment)|one (?:sec(?:ond)?|moment)|quick interruption|"
    r"sorry to interrupt|side ?note|sidebar|switching gears|before i forget)\b",
    re.IGNORECASE,
)
_RESUMES = re.compile(
    r"(?:^|[,.;:!?\u2013\u2014-])\s*(?:(?:ok(?:ay)?|anyway|now|so|right)\W+)?back to (?!normal\b|square one\b)\w+|"
    r"\bwhere were we\b|\bresum(?:e|ing) (?:the|our|with|where)\b|"
    r"^\W*(?:(?:ok(?:ay)?|anyway|right)\W+)?continuing\b(?:\s+(?:with|on))?\s+\w",
    re.IGNORECASE,
)
"""A return stated as its own clause ("VIP handled, back to the ticket", "Back to planning",
"Continuing the Wayne proposal"), not "let's go back to the first option" (a change of mind
within the task)."""


def aside_spans(body: Sequence[BaseMessage]) -> dict[int, str]:
    """Indexes of the messages of an interruption the user has left, as ``aside``.

    A user message that opens with an interruption ("Hold on - ...", "Quick interruption: ...",
    "Switching gears ...") starts one; a later user message that returns ("... back to the
    ticket", "where were we", "resuming the review", "Continuing the proposal") ends it. The
    messages from the opening up to the return are the aside; the return itself is not. An
    interruption not yet left is the current topic and is not marked.
    """
    asides = Asides()
    asides.extend(body)
    return asides.spans


class Asides:
    """:func:`aside_spans` read one message at a time, so that a conversation that grows is
    read only where it grew."""

    __slots__ = ("seen", "spans", "start")

    def __init__(self) -> None:
        self.spans: dict[int, str] = {}
        self.start: int | None = None  # the opening of an interruption not yet left
        self.seen = 0

    def extend(self, body: Sequence[BaseMessage]) -> int:
        """Read the messages of ``body`` past those read so far (``body`` starts with them);
        return the first index whose span changed (``len(body)`` when none did): a return
        makes the interruption before it an aside."""
        changed = len(body)
        for index in range(self.seen, len(body)):
            message = body[index]
            if not isinstance(message, HumanMessage):
                continue
            text = content_text(message.content)
            if self.start is not None and _RESUMES.search(text):
                self.spans.update(
                    (i, "aside") for i in range(self.start, index) if not isinstance(body[i], ToolMessage)
                )
                changed = min(changed, self.start)
                self.start = None
            elif self.start is None and _INTERRUPTS.search(text):
                self.start = index
        self.seen = len(body)
        return changed


__all__ = ["Asides", "aside_spans"]
