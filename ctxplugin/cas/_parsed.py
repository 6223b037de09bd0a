"""Stored JSON outputs as parsed for reading back, kept for the next read.

A model pages through a large JSON output with ``expand_ref`` call after call (``offset``,
``pattern``, ``fields``), and each read needs the parsed value: over a second for 10 MB of JSON.
The value is kept here for the next read of the same output, keyed by its ref and the sha256 of
the exact text read (the stored variant's ``raw_hash`` and how it was read), never by the ref
alone: two scopes may hold two variants of one ref. A read reaches this memo only after the
store has granted it, so the memo grants nothing.

Bounded, whatever the traffic: at most :data:`PARSED_ENTRIES` outputs and :data:`PARSED_CHARS`
characters of JSON text together (a parsed value takes about five times its text in memory,
so about 160 MB at most). An output under :data:`PARSED_MIN_CHARS` parses in milliseconds and
is not kept; one over :data:`PARSED_CHARS` is parsed on every read. Values are shared between
reads, which never change them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any

from ctxplugin._lru import LRU

PARSED_ENTRIES = 4
"""Outputs whose parsed value is kept."""

PARSED_CHARS = 32 * 1024 * 1024
"""Characters of JSON text whose parsed values are kept, all entries together."""

PARSED_MIN_CHARS = 64 * 1024
"""Texts shorter than this are parsed on every read."""

Parsed = tuple[bool, Any]


class ParsedMemo:
    """The last few large texts parsed, by a key naming the exact text. Safe across threads."""

    def __init__(self, entries: int = PARSED_ENTRIES, chars: int = PARSED_CHARS, min_chars: int = PARSED_MIN_CHARS) -> None:
        self._lock = threading.Lock()
        self._kept: LRU[Hashable, tuple[int, Parsed]] = LRU(entries)
        self._chars = chars
        self._min_chars = min_chars

    def parsed(self, key: Hashable | None, text: str, parse: Callable[[str], Parsed]) -> Parsed:
        """``parse(text)``, or what it gave for ``key`` before; ``key`` names ``text`` exactly
        (None: parsed, not kept)."""
        if key is None or not self._min_chars <= len(text) <= self._chars:
            return parse(text)
        with self._lock:
            hit = self._kept.hit(key)
        if hit is not None:
            return hit[1]
        value = parse(text)
        with self._lock:
            self._kept.put(key, (len(text), value))
            while len(self._kept) > 1 and sum(size for size, _ in self._kept.values()) > self._chars:
                self._kept.popitem(last=False)
        return value


__all__ = ["PARSED_CHARS", "PARSED_ENTRIES", "PARSED_MIN_CHARS", "ParsedMemo"]
