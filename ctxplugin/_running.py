"""Token sums of a conversation that a host resends on every call, counted once per message.

A host sends its conversation again on every call, with new messages at the end and now and
then one replaced, edited or dropped. :class:`Tally` keeps the tokens of each position it has
seen and brings its sums up to date with what changed or was added (see
:class:`ctxplugin._prefix.Prefix`); :class:`SessionTallies` keeps one per session, bounded.
A tally also keeps how many model turns have called tools since the user's latest message, so
that an agent working alone for hundreds of steps is not walked back on every call.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import NamedTuple

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from ctxplugin._layout import from_user
from ctxplugin._lru import LRU
from ctxplugin._prefix import Prefix, Stamp
from ctxplugin.tokens import TokenCounter, count_message

_OTHER, _USER, _CALLS = 0, 1, 2  # what a position holds, for the count of calls since the user


def _kind(message: BaseMessage) -> int:
    if isinstance(message, AIMessage):
        return _CALLS if message.tool_calls else _OTHER
    return _USER if from_user(message) else _OTHER


class Sums(NamedTuple):
    """What a :class:`Tally` knows of a conversation."""

    tokens: int
    tool_tokens: int  # of tool results
    calls_since_user: int  # AI messages calling tools after the latest message from the user (every one, with none)


class Tally:
    """Tokens of a message sequence seen before, by position, and their sums (all, and tool
    results alone), brought up to date with what changed or was added since; and how many AI
    messages calling tools follow the latest message from the user. Not locked."""

    __slots__ = ("calls", "is_tool", "kinds", "last_user", "seen", "tokens", "tool_total", "total")

    def __init__(self) -> None:
        self.seen = Prefix()
        self.tokens: list[int] = []
        self.is_tool: list[bool] = []
        self.total = 0
        self.tool_total = 0
        self.kinds = bytearray()  # _OTHER, _USER or _CALLS by position
        self.last_user = -1  # the position of the latest message from the user (-1: none)
        self.calls = 0  # positions past last_user that are _CALLS

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
        self.kinds.clear()
        self.last_user, self.calls = -1, 0

    def _update(self, messages: Sequence[BaseMessage], counter: TokenCounter, stamp: Stamp | None) -> None:
        changed = self.seen.changed(messages, stamp)
        if changed is None:  # shorter than before: counted again from the start
            self._clear()
            changed = []
        recount = False
        for index in changed:
            self._drop(index)
            self._set(index, messages[index], counter)
            self.seen.replace(index, messages[index])
            recount = self._rekind(index, _kind(messages[index])) or recount
        seen = len(self.tokens)
        self.tokens.extend([0] * (len(messages) - seen))
        self.is_tool.extend([False] * (len(messages) - seen))
        for index in range(seen, len(messages)):
            self._set(index, messages[index], counter)
            kind = _kind(messages[index])
            self.kinds.append(kind)
            if kind == _USER:
                self.last_user, self.calls = index, 0
            elif kind == _CALLS:
                self.calls += 1
        if recount:  # a message from the user replaced, or replacing another: found again (in C)
            self.last_user = self.kinds.rfind(_USER)
            self.calls = self.kinds.count(_CALLS, self.last_user + 1)
        self.seen.extend(messages[seen:], stamp)

    def _rekind(self, index: int, kind: int) -> bool:
        """Take the message at ``index`` (seen before) as of ``kind`` now; True when the
        latest message from the user must be found again."""
        was = self.kinds[index]
        if was == kind:
            return False
        self.kinds[index] = kind
        if _USER in (was, kind):
            return True
        if index > self.last_user:
            self.calls += (kind == _CALLS) - (was == _CALLS)
        return False

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
        tokens, tool_tokens, _ = self.counts(session, messages, counter, stamp)
        return tokens, tool_tokens

    def counts(
        self, session: str, messages: Sequence[BaseMessage], counter: TokenCounter, stamp: Stamp | None = None
    ) -> Sums:
        """:meth:`sums`, and how many AI messages calling tools follow the latest message from
        the user, brought up to date with the messages that changed or were added only."""
        with self._lock:
            lock, tally = self._tallies.hit_or_put(session, lambda: (threading.Lock(), Tally()))
        with lock:
            tally.update(messages, counter, stamp)
            return Sums(tally.total, tally.tool_total, tally.calls)


__all__ = ["SessionTallies", "Sums", "Tally"]
