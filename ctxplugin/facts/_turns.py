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

A bare "never mind" takes back the change of the user message before it, unless it drops a
question rather than the change, or has nothing new to take back; it is given no message before
it then, and takes back nothing:

- that message asked something too ("My seat is 14C. Can you check for an upgrade?");
- the agent asked something since ("Got it. Would you also like a window seat?"): it answers the
  agent (not when the question names a value the change stated, "Shall I update your budget to
  $700?": it is about the change, which "never mind" then takes back). The ledger reads no agent message it is not given: the facts stage marks a user message
  said right after the agent asked (:data:`ANSWERING`), and an agent message
  in ``messages`` tells the same;
- that message was a bare retraction itself ("Never mind." said twice): the second one takes
  back nothing new, not the first.

The refs of the user messages that asked, and of those that were bare retractions, are
remembered as the refs are.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ctxplugin._lru import LRU
from ctxplugin._messages import annotation
from ctxplugin.facts._discourse import RETRACTED
from ctxplugin.facts._drafts import _provenance
from ctxplugin.facts._text import identifiers
from ctxplugin.facts._values import typed_values
from ctxplugin.scope import Scope
from ctxplugin.tokens import content_text

ANSWERING = "answering"
"""The annotation the facts stage gives a user message said right after the agent asked something
(``additional_kwargs["ctxplugin"]["answering"]``)."""
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
        self._retracted: LRU[str, tuple[str, ...]] = LRU(_READERS)  # the refs of the bare retractions

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
            asked = self._remembered(self._asked, key, _asking(messages))
            retracted = self._remembered(self._retracted, key, [ref for ref, _ in _retractions(messages)])
        return _answering(messages, before, set(asked) | set(retracted))

    @staticmethod
    def _remembered(refs: LRU[str, tuple[str, ...]], key: str, new: Sequence[str]) -> tuple[str, ...]:
        """The refs ``refs`` holds for ``key`` with ``new`` added (the latest :data:`_DEPTH`)."""
        known = refs.hit(key) or ()
        known += tuple(r for r in new if r not in known)
        refs.put(key, known[-_DEPTH:])
        return known


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_ASKS = re.compile(r"\?[\"')\]]*(?:\s|$)")
"""A sentence that ends with a question mark (not one in a link's query string)."""


def _asking(messages: Sequence[BaseMessage]) -> list[str]:
    """The refs of the user messages of ``messages`` that ask something."""
    return [ref for m in messages if isinstance(m, HumanMessage) and (ref := _provenance(m)) is not None and "?" in content_text(m.content)]


def _retractions(messages: Sequence[BaseMessage]) -> list[tuple[str, int]]:
    """The refs of the user messages of ``messages`` that say "never mind" alone, with their
    places in ``messages``."""
    return [
        (ref, at) for at, m in enumerate(messages)
        if isinstance(m, HumanMessage) and (ref := _provenance(m)) is not None
        and any(RETRACTED.match(s.strip()) for s in _SENTENCE_END.split(content_text(m.content)))
    ]


def answers_agent(messages: Sequence[BaseMessage], at: int) -> bool:
    """Whether the user message at ``at`` in ``messages`` is said right after the agent asked
    something: the last agent message with text before it (after the user's last) asks, and not
    about the change the user's message before made ("Shall I update your budget to $700?" names
    its value: "never mind" then drops the change)."""
    for i in range(at - 1, -1, -1):
        m = messages[i]
        if isinstance(m, HumanMessage):
            return False
        if isinstance(m, AIMessage) and (text := content_text(m.content).strip()):
            return _ASKS.search(text) is not None and not _names_change(text, _said_before(messages, i))
    return False


def _said_before(messages: Sequence[BaseMessage], at: int) -> str:
    """The text of the user's last message before ``at`` in ``messages`` ("" when none)."""
    said = next((m for m in map(messages.__getitem__, range(at - 1, -1, -1)) if isinstance(m, HumanMessage)), None)
    return "" if said is None else content_text(said.content)


def _names_change(question: str, said: str) -> bool:
    """Whether the agent's ``question`` names a value the user's ``said`` stated (``$700``, ``14C``)."""
    if not said:
        return False
    asked = typed_values(question)
    return any(asked.get(kind, frozenset()) & values for kind, values in typed_values(said).items()) or bool(
        set(identifiers(question)) & set(identifiers(said))
    )


def _answering(messages: Sequence[BaseMessage], before: dict[str, str], dropping: set[str]) -> dict[str, str]:
    """``before`` without the user messages of ``messages`` saying "never mind" alone that take
    back no change: after a user message that asked something or was such a retraction itself
    (``dropping``), or said to the agent's question."""
    for ref, at in _retractions(messages):
        if ref in before and (before[ref] in dropping or annotation(messages[at]).get(ANSWERING) is True or answers_agent(messages, at)):
            del before[ref]
    return before


__all__ = ["ANSWERING", "UserTurns", "answers_agent"]
