"""Token totals of a conversation that grows, counted from where the previous call stopped.

A host sends its conversation again on every call with messages appended. When this call's
messages begin with the previous call's — the very same objects, holding the very same
content — only the new ones are counted; otherwise all are. Kept per session, bounded.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter, is_
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from ctxplugin._lru import LRU
from ctxplugin.tokens import TokenCounter, count_message

_content = attrgetter("content")


@dataclass(frozen=True, slots=True)
class Totals:
    """What a conversation adds up to.

    Attributes:
        tokens: tokens of every message.
        tool_results: tokens of the tool results among them.
        tools_called: names of the tools its assistant messages called.
    """

    tokens: int = 0
    tool_results: int = 0
    tools_called: frozenset[str] = frozenset()

    def plus(self, messages: Sequence[BaseMessage], counter: TokenCounter) -> Totals:
        """These totals with ``messages`` added."""
        tokens, results = self.tokens, self.tool_results
        called: set[str] = set()
        for message in messages:
            size = count_message(message, counter)
            tokens += size
            if isinstance(message, ToolMessage):
                results += size
            elif isinstance(message, AIMessage) and message.tool_calls:
                called.update(call["name"] for call in message.tool_calls)
        return Totals(tokens, results, self.tools_called | called if called else self.tools_called)


@dataclass(frozen=True, slots=True)
class _Counted:
    counter: TokenCounter
    messages: tuple[BaseMessage, ...]
    contents: tuple[Any, ...]
    totals: Totals


class RunningTotals:
    """:class:`Totals` of each session's conversation, counted once per message.

    Args:
        sessions: how many sessions are remembered (the least recently used go first).
    """

    def __init__(self, sessions: int = 1024) -> None:
        self._last: LRU[str, _Counted] = LRU(sessions)
        self._lock = threading.Lock()

    def totals(self, session: str, messages: Sequence[BaseMessage], counter: TokenCounter) -> Totals:
        """The totals of ``messages``, the conversation of ``session`` as this call has it."""
        with self._lock:
            last = self._last.hit(session)
        start, base = 0, Totals()
        if (
            last is not None
            and last.counter is counter
            and len(messages) >= len(last.messages)
            and all(map(is_, last.messages, messages))
            and all(map(is_, last.contents, map(_content, messages)))
        ):
            start, base = len(last.messages), last.totals
        added = messages[start:]
        totals = base.plus(added, counter) if added else base
        counted = _Counted(counter, (*last.messages, *added) if start and last is not None else tuple(messages), tuple(map(_content, messages)), totals)
        with self._lock:
            self._last.put(session, counted)
        return totals


__all__ = ["RunningTotals", "Totals"]
