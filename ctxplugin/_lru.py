"""One bounded least-recently-used map, and the key under which texts are memoised.

Everything derived from one message (its token count, its words, its embedding) is computed
once and kept here, keyed by the message text; every map is bounded, so a process serving many
sessions holds at most a fixed number of entries whatever the traffic.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import TypeVar

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


__all__ = ["LRU", "TextKey", "text_key"]
