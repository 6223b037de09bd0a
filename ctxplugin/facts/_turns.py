"""Which user message came just before which, for "let's do that".

"OK, let's do that" takes up a hypothetical only when the user supposed it in the message just
before (see :func:`~ctxplugin.facts._revisions.revised`): after "no, let's not", a question or
anything else the user said since, it takes up nothing. The ledger stores facts, not messages,
and a message that states nothing leaves no trace in it; so it remembers, per reader, the refs
of the last user messages it read, in order, whatever they stated.

Within one ingest the messages are in order, so the one before is known (a new process reading
a thread again reads it whole). The first user message of an ingest finds the one before among
those remembered: the latest when it is new, the one before it when it was read before (a host
that trimmed the front of its history sends it again); none when it is older than all of them
(a long thread read again), and only what follows the last message read before is new. When nothing is remembered — a process
that did not see the message before — it is unknown, and "let's do that" takes up the writer's
latest statement when it is a hypothetical, as it always did.

A bare "never mind" takes back the change of the user message before it, unless that message
asked something too ("My seat is 14C. Can you check for an upgrade?"): it drops the question
then, so it is given no message before it and takes back nothing. The refs of the user messages
that asked are remembered as the refs are. (The ledger reads no agent message: a "never mind"
answering the agent's question is not told apart.)
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage

from ctxplugin._lru import LRU
from ctxplugin.facts._discourse import RETRACTED
from ctxplugin.facts._drafts import _provenance
from ctxplugin.scope import Scope
from ctxplugin.tokens import content_text

_READERS = 1024
"""Readers remembered, least recently used going first."""
_DEPTH = 64
"""User messages remembered per reader: those a host may send again after trimming its front."""


class UserTurns:
    """The refs of the last user messages read, per reader (bounded, thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._refs: LRU[str, tuple[str, ...]] = LRU(_READERS)
        self._asked: LRU[str, tuple[str, ...]] = LRU(_READERS)  # the refs of those that asked something

    def read(self, messages: Sequence[BaseMessage], owner: Scope) -> dict[str, str]:
        """The ref of the user message said just before each user message of ``messages``
        (by its ref), where it is known; ``messages`` are remembered as read by ``owner``."""
        refs = [ref for m in messages if isinstance(m, HumanMessage) and (ref := _provenance(m)) is not None]
        if not refs:
            return {}
        before = dict(zip(refs[1:], refs, strict=False))
        key = owner.key()
        with self._lock:
            known = self._refs.hit(key) or ()
            read = [i for i, ref in enumerate(refs) if ref in known]
            if refs[0] in known:  # read before: the one before it then
                at = known.index(refs[0])
                if at > 0:
                    before[refs[0]] = known[at - 1]
            elif known and not read:
                before[refs[0]] = known[-1]
            # what follows the last of them read before is new; those before it are older than
            # the last remembered (a long thread read again), however many were forgotten
            fresh = tuple(refs[read[-1] + 1 :] if read else refs)
            self._refs.put(key, (known + fresh)[-_DEPTH:])
            asked = self._asked.hit(key) or ()
            asked += tuple(r for r in _asking(messages) if r not in asked)
            self._asked.put(key, asked[-_DEPTH:])
        return _answering(messages, before, set(asked))


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _asking(messages: Sequence[BaseMessage]) -> list[str]:
    """The refs of the user messages of ``messages`` that ask something."""
    return [ref for m in messages if isinstance(m, HumanMessage) and (ref := _provenance(m)) is not None and "?" in content_text(m.content)]


def _answering(messages: Sequence[BaseMessage], before: dict[str, str], asked: set[str]) -> dict[str, str]:
    """``before`` without the user messages of ``messages`` saying "never mind" alone after a
    user message that asked something (``asked``): it drops the question, not the change."""
    for m in messages:
        ref = _provenance(m) if isinstance(m, HumanMessage) else None
        if ref in before and before[ref] in asked and any(RETRACTED.match(s.strip()) for s in _SENTENCE_END.split(content_text(m.content))):
            del before[ref]
    return before


__all__ = ["UserTurns"]
