"""A message sequence with some of its messages read anew, copied only when one is."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

_M = TypeVar("_M")


def mapped_from(messages: Sequence[_M], start: int, read: Callable[[_M], _M]) -> Sequence[_M]:
    """``messages`` with each message from ``start`` on replaced by ``read(message)`` when that
    is another object: ``messages`` itself when none is (no copy made), else a list."""
    out: list[_M] | None = None
    for index in range(start, len(messages)):
        message = messages[index]
        now = read(message)
        if now is not message:
            if out is None:
                out = list(messages)
            out[index] = now
    return messages if out is None else out


__all__ = ["mapped_from"]
