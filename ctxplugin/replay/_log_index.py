"""The conversations of a request log by the keys of their messages: which one a request
continues and whether a request only repeats the start of one, each found in time linear in the
request's length (comparing every request with every earlier conversation made a JSONL file of
10,000 conversations take minutes).

A conversation's keys only grow (a later request or a reply extends them), so every prefix
registered once stays a prefix of that conversation.
"""

from __future__ import annotations

from collections.abc import Sequence


def prefix_hashes(keys: Sequence[str]) -> list[int]:
    """The hash of every prefix of ``keys``, the empty one first."""
    out = [0]
    for key in keys:
        out.append(hash((out[-1], key)))
    return out


class PrefixIndex:
    """The keys of conversations numbered 0, 1, 2... in the order they were first put."""

    def __init__(self) -> None:
        self._keys: list[list[str]] = []
        self._hash: list[int] = []  # per conversation, the hash of its whole keys
        self._whole: dict[int, set[int]] = {}  # hash of a conversation's keys -> those conversations
        self._prefixes: dict[int, int] = {}  # hash of a prefix of some conversation's keys -> that one

    def __len__(self) -> int:
        return len(self._keys)

    def put(self, number: int, keys: list[str]) -> None:
        """Record conversation ``number``'s keys: a new one (``number == len(self)``), or the
        longer keys of one put before (they extend its old ones)."""
        hashes = prefix_hashes(keys)
        if number == len(self._keys):
            self._keys.append(keys)
            self._hash.append(hashes[-1])
        else:
            self._whole[self._hash[number]].discard(number)
            self._keys[number], self._hash[number] = keys, hashes[-1]
        self._whole.setdefault(hashes[-1], set()).add(number)
        for value in hashes:
            self._prefixes.setdefault(value, number)

    def continued(self, keys: list[str]) -> int | None:
        """The latest conversation whose keys ``keys`` begin with."""
        best = -1
        for length, value in enumerate(prefix_hashes(keys)):
            for number in self._whole.get(value, ()):
                if number > best and self._keys[number] == keys[:length]:
                    best = number
        return best if best >= 0 else None

    def begins_one(self, keys: list[str]) -> bool:
        """Whether ``keys`` are the start (or the whole) of a conversation's keys."""
        number = self._prefixes.get(prefix_hashes(keys)[-1])
        return number is not None and self._keys[number][: len(keys)] == keys


__all__ = ["PrefixIndex", "prefix_hashes"]
