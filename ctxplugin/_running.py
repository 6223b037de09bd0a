"""Token sums of a conversation that a host resends on every call, counted once per message.

A host sends its conversation again on every call, with new messages at the end and now and
then one replaced, edited or dropped. :class:`Tally` keeps the tokens of each position it has
seen and brings its sums up to date with what changed or was added (see
:class:`ctxplugin._prefix.Prefix`); :class:`SessionTallies` keeps one per session, bounded.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from langchain_core.messages import BaseMessage, ToolMessage

from ctxplugin._lru import LRU
from ctxplugin._prefix import Prefix, Stamp
from ctxplugin.tokens import TokenCounter, count_message


class Tally:
    """Tokens of a message sequence seen before, by position, and their sums (all, and tool
    results alone), brought up to date with what changed or was added since. Not locked."""

    __slots__ = ("is_tool", "seen", "tokens", "tool_total", "total")

    def __init__(self) -> None:
        self.seen = Prefix()
        self.tokens: list[int] = []
        self.is_tool: list[bool] = []
        self.total = 0
        self.tool_total = 0

    def update(self, messages: Sequence[BaseMessage], counter: TokenCounter, stamp: Stamp | None = None) -> None:
        """Count what changed in ``messages`` (stamped ``stamp``, when known) or was added
        since the previous update.

        An update that does not finish (a ``KeyboardInterrupt`` while counting, a counter that
        raises) leaves the tally empty, counted again from the start next time: half brought up
        to date, its sums would be wrong for every later call of the session."""
        try:
            self._update(messages, counter, stamp)
        except BaseException:
            self._clear()
            raise

    def _clear(self) -> None:
        self.seen.clear()
        self.tokens.clear()
        self.is_tool.clear()
        self.total = self.tool_total = 0

    def _update(self, messages: Sequence[BaseMessage], counter: TokenCounter, stamp: Stamp | None) -> None:
        changed = self.seen.changed(messages, stamp)
        if changed is None:  # shorter than before: counted again from the start
            self._clear()
            changed = []
        for index in changed:
            self._drop(index)
            self._set(index, messages[index], counter)
            self.seen.replace(index, messages[index])
        seen = len(self.tokens)
        self.tokens.extend([0] * (len(messages) - seen))
        self.is_tool.extend([False] * (len(messages) - seen))
        for index in range(seen, len(messages)):
            self._set(index, messages[index], counter)
        self.seen.extend(messages[seen:], stamp)

    def _drop(self, index: int) -> None:
        self.total -= self.tokens[index]
        if self.is_tool[index]:
            self.tool_total -= self.tokens[index]

    def _set(self, index: int, message: BaseMessage, counter: TokenCounter) -> None:
        tokens = count_message(message, counter)
        is_tool = isinstance(message, ToolMessage)
        self.tokens[index], self.is_tool[index] = tokens, is_tool
        self.total += tokens
        if is_tool:
            self.tool_total += tokens


class SessionTallies:
    """A :class:`Tally` per session: the least recently used of more than ``sessions`` go (and
    are counted again from the start should they come back). Thread-safe."""

    def __init__(self, sessions: int = 1024) -> None:
        self._tallies: LRU[str, tuple[threading.Lock, Tally]] = LRU(sessions)
        self._lock = threading.Lock()

    def sums(
        self, session: str, messages: Sequence[BaseMessage], counter: TokenCounter, stamp: Stamp | None = None
    ) -> tuple[int, int]:
        """``(tokens, tool-result tokens)`` of ``messages`` (stamped ``stamp``, when known),
        ``session``'s conversation now."""
        with self._lock:
            lock, tally = self._tallies.hit_or_put(session, lambda: (threading.Lock(), Tally()))
        with lock:
            tally.update(messages, counter, stamp)
            return tally.total, tally.tool_total


__all__ = ["SessionTallies", "Tally"]
