"""The conversations of a request log by the keys of their messages: which one a request
continues and whether a request only repeats the start of one, each found in time linear in the
request's length (comparing every request with every earlier conversation made a JSONL file of
10,000 conversations take minutes).

A conversation's keys only grow (a later request or a reply extends them), so every prefix
registered once stays a prefix of that conversation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

T = TypeVar("T")


def prefix_hashes(keys: Sequence[str]) -> list[int]:
    """The hash of every prefix of ``keys``, the empty one first."""
    out = [0]
    for key in keys:
        out.append(hash((out[-1], key)))
    return out


class PrefixIndex(Generic[T]):
    """Conversations (any object, by identity) and the keys of their messages."""

    def __init__(self) -> None:
        self._entries: list[T] = []
        self._keys: list[list[str]] = []
        self._hash: list[int] = []  # per position, the hash of its whole keys
        self._whole: dict[int, set[int]] = {}  # hash of a conversation's keys -> its positions
        self._prefixes: dict[int, int] = {}  # hash of a prefix of some conversation's keys -> its position
        self._positions: dict[int, int] = {}  # id(conversation) -> position

    def put(self, entry: T, keys: list[str]) -> None:
        """Add ``entry``, or record that its keys are now ``keys`` (they extend the old ones)."""
        position = self._positions.get(id(entry))
        hashes = prefix_hashes(keys)
        if position is None:
            position = self._positions[id(entry)] = len(self._entries)
            self._entries.append(entry)
            self._keys.append(keys)
            self._hash.append(hashes[-1])
        else:
            self._whole[self._hash[position]].discard(position)
            self._keys[position], self._hash[position] = keys, hashes[-1]
        self._whole.setdefault(hashes[-1], set()).add(position)
        for value in hashes:
            self._prefixes.setdefault(value, position)

    def continued(self, keys: list[str]) -> T | None:
        """The latest conversation whose keys ``keys`` begin with."""
        best = -1
        for length, value in enumerate(prefix_hashes(keys)):
            for position in self._whole.get(value, ()):
                if position > best and self._keys[position] == keys[:length]:
                    best = position
        return self._entries[best] if best >= 0 else None

    def begins_one(self, keys: list[str]) -> bool:
        """Whether ``keys`` are the start (or the whole) of a conversation's keys."""
        position = self._prefixes.get(prefix_hashes(keys)[-1])
        return position is not None and self._keys[position][: len(keys)] == keys


__all__ = ["PrefixIndex", "prefix_hashes"]
