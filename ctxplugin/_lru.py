"""One bounded least-recently-used map, and the key under which texts are memoised.

Everything derived from one message (its token count, its words, its embedding) is computed
once and kept here, keyed by the message text; every map is bounded, so a process serving many
sessions holds at most a fixed number of entries whatever the traffic.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

TextKey = tuple[int, int, str, str]


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

    def hit(self, key: K) -> V | None:
        """The value of ``key`` (marking it recently used), or ``None``."""
        value = self.get(key)
        if value is not None:
            self.move_to_end(key)
        return value


def text_key(text: str) -> TextKey:
    """A memo key for ``text`` that does not keep the text: its length, its hash (``str``
    caches it, so a text resent as the same object is not rehashed) and its two ends."""
    return (len(text), hash(text), text[:16], text[-16:])


Guard = tuple[int, int, int, int, int, int]


def _guard(message: Any) -> Guard:
    """What a value derived from ``message`` depends on, cheaply: the identity of its content,
    tool calls, extra fields and id, and the content's hash and length (``str`` caches its hash, so
    this costs nothing for a text already hashed)."""
    fields = message.__dict__  # a pydantic model's field values (a missing attribute is slow to ask for)
    content = fields["content"]
    return (
        id(content),
        hash(content) if isinstance(content, str) else -1,
        len(content),
        id(fields.get("tool_calls")),
        id(fields.get("additional_kwargs")),
        id(fields.get("id")),
    )


class PerMessage(Generic[V]):
    """Values derived from one message, found again by the message object itself.

    A host resends its conversation as the same message objects on every call, so a value
    computed once (a token count, the values a message names, its compressed form) is found
    by identity without even hashing the text. An entry holds the message weakly and stands
    only while the message still holds the very content, tool calls and extra fields it was
    computed from (a message given new content is computed again). Bounded: the oldest entries
    go first (a lookup is on the path of every message of every call, so it takes no lock and
    does not reorder; a message still in use whose entry went is computed once more).
    Thread-safe.
    """

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"PerMessage size must be at least 1, got {size}")
        self._size = size
        self._entries: OrderedDict[int, tuple[weakref.ref[Any], Guard, V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, message: Any) -> V | None:
        """The value memoised for ``message`` as it is now, or ``None``."""
        entry = self._entries.get(id(message))  # one C call: safe beside a concurrent put
        if entry is None or entry[0]() is not message or entry[1] != _guard(message):
            return None
        return entry[2]

    def put(self, message: Any, value: V) -> None:
        """Remember ``value`` for ``message`` as it is now."""
        try:
            ref = weakref.ref(message)
        except TypeError:  # an object that cannot be weakly referenced is not memoised
            return
        entry = (ref, _guard(message), value)
        key = id(message)
        with self._lock:
            entries = self._entries
            entries.pop(key, None)
            entries[key] = entry
            while len(entries) > self._size:
                entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


__all__ = ["LRU", "PerMessage", "TextKey", "text_key"]
