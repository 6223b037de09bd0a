"""Tool outputs captured while the facts store failed, kept whole until a later call reads them.

``capture_tool_result`` reads an output's facts as it stores it; when the facts store fails
then, the conversation holds only the output's summary and ref, which are not read for facts.
The output is kept here (bounded in count and size across sessions) and read, oldest first,
by the scope's next call that reaches the store.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from langchain_core.messages import BaseMessage

from ctxplugin.scope import Scope
from ctxplugin.stages.view import log_degraded
from ctxplugin.tokens import content_text

UNREAD_OUTPUTS = 4096
"""Outputs kept in all, over every session."""
UNREAD_CHARS = 64_000_000
"""Characters of the outputs kept in all: past it (a long outage, many sessions) the oldest go."""


class UnreadOutputs:
    """The outputs kept, by scope; past a bound the output kept longest goes first. Locked:
    one engine serves many threads."""

    def __init__(self, outputs: int = UNREAD_OUTPUTS, chars: int = UNREAD_CHARS) -> None:
        self._outputs = outputs
        self._chars = chars
        self._lock = threading.Lock()
        # scope key -> its session and its outputs, each with its size and the order it came in
        self._kept: dict[str, tuple[str, tuple[tuple[BaseMessage, int, int], ...]]] = {}
        self._seq = 0
        self._count = 0
        self._size = 0

    def keep(self, message: BaseMessage, scope: Scope) -> None:
        """``message`` was not read for facts: kept for the scope's next reading; the oldest
        outputs kept go past the bounds, each logged at WARNING with its session."""
        size = len(content_text(message.content))
        dropped: list[str] = []
        with self._lock:
            key = scope.key()
            _, kept = self._kept.get(key, (scope.session_id, ()))
            self._seq += 1
            self._kept[key] = (scope.session_id, (*kept, (message, size, self._seq)))
            self._count += 1
            self._size += size
            while self._count > self._outputs or self._size > self._chars:
                oldest = min(self._kept, key=lambda k: self._kept[k][1][0][2])  # the output that came first
                session, outputs = self._kept[oldest]
                self._count -= 1
                self._size -= outputs[0][1]
                if outputs[1:]:
                    self._kept[oldest] = (session, outputs[1:])
                else:
                    del self._kept[oldest]
                dropped.append(session)
        for session in dropped:
            log_degraded(Scope(session_id=session), "facts store unavailable; the facts of a tool output captured "
                         "while it was out are not recorded (too many outputs waited for it)")

    def kept(self, scope: Scope) -> list[BaseMessage]:
        """The outputs kept for ``scope``, oldest first: read before the messages of the call
        that reads them (a later output of the same record supersedes them), then
        :meth:`settled`."""
        with self._lock:
            return [item[0] for item in self._kept.get(scope.key(), ("", ()))[1]]

    def settled(self, messages: Sequence[BaseMessage], scope: Scope) -> None:
        """``messages`` (from :meth:`kept`) were read: no longer kept."""
        if not messages:
            return
        with self._lock:
            key = scope.key()
            if key not in self._kept:
                return
            session, outputs = self._kept[key]
            gone = [item for item in outputs if any(item[0] is read for read in messages)]
            left = tuple(item for item in outputs if all(item is not read for read in gone))
            self._count -= len(gone)
            self._size -= sum(item[1] for item in gone)
            if left:
                self._kept[key] = (session, left)
            else:
                del self._kept[key]


__all__ = ["UNREAD_CHARS", "UNREAD_OUTPUTS", "UnreadOutputs"]
