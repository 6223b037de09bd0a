"""The messages a session sent last time, to tell which of this call's are new.

A host resends its conversation on every call as the same message objects, with a few new ones
at the end. What is derived from the whole conversation (a sum of tokens, the values it used)
can then be carried from one call to the next and brought up to date with the new messages
only, provided the earlier ones are still the very same objects holding the very same content.
:class:`Prefix` checks that with a few C-level passes, without reading any text.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from itertools import compress
from operator import and_, attrgetter, eq, is_, not_
from typing import Any

_content = attrgetter("content")
_deref = weakref.ref.__call__


def _dead() -> None:
    return None


def held_weakly(message: Any) -> Any:
    """A weak reference to ``message``: calling it gives the message while it lives, else
    ``None`` (always ``None`` for an object that cannot be held weakly)."""
    try:
        return weakref.ref(message)
    except TypeError:  # cannot be held weakly: never taken as seen, so it is read again each call
        return _dead


class Prefix:
    """Messages seen before, in order: each held weakly, with the identity and length of its
    content (a message given new content, or whose block list grew, is not the one seen; tool
    calls replaced on a message that keeps its content are not noticed).

    Not locked: the per-session state that owns one holds its own lock."""

    __slots__ = ("_ids", "_lens", "_refs")

    def __init__(self) -> None:
        self._refs: list[Any] = []
        self._ids: list[int] = []
        self._lens: list[int] = []

    def __len__(self) -> int:
        return len(self._refs)

    def changed(self, messages: Sequence[Any]) -> list[int] | None:
        """Positions of the messages seen before that ``messages`` no longer holds as the same
        object with the same content (``[]`` when all still are), or ``None`` when ``messages``
        is shorter than what was seen."""
        seen = len(self._refs)
        if len(messages) < seen:
            return None
        head = messages[:seen]
        contents = list(map(_content, head))
        same = list(
            map(
                and_,
                map(is_, map(_deref, self._refs), head),
                map(and_, map(eq, map(id, contents), self._ids), map(eq, map(len, contents), self._lens)),
            )
        )
        if all(same):
            return []
        return list(compress(range(seen), map(not_, same)))

    def replace(self, index: int, message: Any) -> None:
        """Take ``message`` as the one seen at ``index``."""
        self._refs[index] = held_weakly(message)
        self._ids[index] = id(message.content)
        self._lens[index] = len(message.content)

    def extend(self, messages: Sequence[Any]) -> None:
        """Take ``messages`` as seen after the others."""
        contents = list(map(_content, messages))
        self._refs.extend(map(held_weakly, messages))
        self._ids.extend(map(id, contents))
        self._lens.extend(map(len, contents))

    def clear(self) -> None:
        """Forget every message seen."""
        self._refs.clear()
        self._ids.clear()
        self._lens.clear()


__all__ = ["Prefix", "held_weakly"]
