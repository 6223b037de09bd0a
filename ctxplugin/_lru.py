"""One bounded least-recently-used map, and the key under which texts are memoised.

Everything derived from one message (its token count, its words, its embedding) is computed
once and kept here, keyed by the message text; every map is bounded, so a process serving many
sessions holds at most a fixed number of entries whatever the traffic.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

TextKey = tuple[int, int, str, str]

THREAD_TEXTS = 32_768
"""Entries of a memo of what is read from each text of a conversation (its values, its words,
its alert lines): more than one pass over a long thread reads. A memo smaller than a pass keeps
nothing for the next one, least recently used going first: the first call on a thread of
10,000 messages (14,000 texts with their gists) found the values of every text three times."""


class LRU(OrderedDict[K, V]):
    """A dict that keeps its ``size`` most recently put or read (with :meth:`hit`) entries.

    Not locked: callers that share one across threads hold their own lock around it."""

    def __init__(self, size: int) -> None:
        super().__init__()
        if size < 1:
            raise ValueError(f"LRU size must be at least 1, got {size}")
        self._size = size

    def put(self, key: K, value: V) -> None:
        """Insert or replace ``key``; the least recently used entry goes when full."""
        self[key] = value
        self.move_to_end(key)
        while len(self) > self._size:
            self.popitem(last=False)

    def hit_or_put(self, key: K, make: Callable[[], V]) -> V:
        """The value of ``key`` (marking it recently used), or ``make()`` put under it."""
        value = self.hit(key)
        if value is None:
            value = make()
            self.put(key, value)
        return value

    def hit(self, key: K) -> V | None:
        """The value of ``key`` (marking it recently used), or ``None``."""
        value = self.get(key)
        if value is not None:
            self.move_to_end(key)
        return value


class Memo(Generic[K, V]):
    """An :class:`LRU` of ``size`` entries shared across threads: a value is made outside the
    lock (two threads may both make a missing one; the later put wins), so a slow make never
    holds up lookups of other keys."""

    def __init__(self, size: int) -> None:
        self._entries: LRU[K, V] = LRU(size)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def get_or_make(self, key: K, make: Callable[[], V]) -> V:
        """The value of ``key``, or ``make()`` kept under it."""
        with self._lock:
            value = self._entries.hit(key)
        if value is None:
            value = make()
            with self._lock:
                self._entries.put(key, value)
        return value


def text_key(text: str) -> TextKey:
    """A memo key for ``text`` that does not keep the text: its length, its hash (``str``
    caches it, so a text resent as the same object is not rehashed) and its two ends."""
    return (len(text), hash(text), text[:16], text[-16:])


class PerMessage(Generic[V]):
    """Values derived from one message, found again by the message object itself.

    A host resends its conversation as the same message objects on every call, so a value
    computed once (a token count, the values a message names, its compressed form) is found
    by identity without even hashing the text. An entry holds the message weakly and stands
    only while the message still holds the very content, tool calls, extra fields and id it was
    computed from (compared by identity; a list content also by length), so a message given new
    content is computed again. An entry goes when its message is collected, and the oldest go
    first when the map is full (a lookup is on the path of every message of every call, so it
    takes no lock and does not reorder; a message still in use whose entry went is computed
    once more). Thread-safe.
    """

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"PerMessage size must be at least 1, got {size}")
        self._size = size
        self._entries: OrderedDict[int, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._gone = self._forget  # one callback for every entry
        self._dead: list[_Entry] = []  # entries of collected messages, dropped on the next put

    def get(self, message: Any) -> V | None:
        """The value memoised for ``message`` as it is now, or ``None``."""
        entry = self._entries.get(id(message))  # one C call: safe beside a concurrent put
        if entry is None or entry() is not message:
            return None
        fields = message.__dict__  # a pydantic model's field values (a missing attribute is slow to ask for)
        content = fields["content"]
        if (
            content is not entry.content
            or fields.get("tool_calls") is not entry.tool_calls
            or fields.get("additional_kwargs") is not entry.extra
            or fields.get("id") is not entry.message_id
            or (entry.length >= 0 and len(content) != entry.length)
        ):
            return None
        return entry.value  # type: ignore[no-any-return]

    def put(self, message: Any, value: V) -> None:
        """Remember ``value`` for ``message`` as it is now."""
        key = id(message)
        try:
            entry = _Entry(message, self._gone)
        except TypeError:  # an object that cannot be weakly referenced is not memoised
            return
        fields = message.__dict__
        content = fields["content"]
        entry.key = key
        entry.content = content
        entry.length = -1 if isinstance(content, str) else len(content)
        entry.tool_calls = fields.get("tool_calls")
        entry.extra = fields.get("additional_kwargs")
        entry.message_id = fields.get("id")
        entry.value = value
        with self._lock:
            entries = self._entries
            while self._dead:
                dead = self._dead.pop()
                if entries.get(dead.key) is dead:
                    del entries[dead.key]
            entries.pop(key, None)
            entries[key] = entry
            while len(entries) > self._size:
                entries.popitem(last=False)

    def _forget(self, entry: _Entry) -> None:
        """A memoised message was collected: its entry goes on the next put. (This runs inside
        the garbage collector, maybe while this thread holds the lock: it only appends.)"""
        self._dead.append(entry)

    def __len__(self) -> int:
        return len(self._entries)


class _Entry(weakref.ref):  # type: ignore[type-arg]
    """One :class:`PerMessage` entry: a weak reference to the message that also holds its key,
    its value and what the value was computed from (one object per entry).

    The content, tool calls, extra fields and id are held, not only their ids, so that an id
    of a collected object reused by a new one cannot pass for the old."""

    __slots__ = ("content", "extra", "key", "length", "message_id", "tool_calls", "value")
    key: int
    content: Any
    length: int
    tool_calls: Any
    extra: Any
    message_id: Any
    value: Any


__all__ = ["LRU", "THREAD_TEXTS", "PerMessage", "TextKey", "text_key"]
