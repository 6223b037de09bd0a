"""What a facts search read from its store, kept while the store counts no write since.

A search reads the store twice (the nearest facts, the facts sharing rarer words); both answers
depend on the question, what is asked (reader, state, fact scopes), how many, and what the store
holds, not on the time (the recency prior is applied after, by the ranking). A store that only
this process writes counts its writes (``generation``, see
:class:`~ctxplugin.facts.store.FactStore`): read again at the same count, it answers the same,
so the answers are kept under the count they were read at and used while it holds. A store
that counts nothing (a server's, one other processes write) is read on every search.

An answer is kept only when the count is the same after the read as before it. A write moves the
count as it begins and again once it is whole: a search during it never takes the answer kept
before it, and what it reads is kept under a count the write's end moves on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ctxplugin._lru import LRU
from ctxplugin.facts._batch import Sent
from ctxplugin.facts.model import Fact, FactQuery

Scored = list[tuple[Fact, float]]

ANSWERS = 32
"""Searches whose answers are kept (a turn's question per reader)."""


def generation(store: Any) -> int | None:
    """The store's count of writes, None when it keeps none."""
    counted = getattr(store, "generation", None)
    return counted if isinstance(counted, int) and not isinstance(counted, bool) else None


class Answers:
    """The store's answers to the last searches, by question and count. Thread-safe, bounded."""

    def __init__(self, size: int = ANSWERS) -> None:
        self._kept: LRU[tuple[str, FactQuery, int, bool], tuple[int, tuple[Scored, Scored]]] = LRU(size)
        self._lock = threading.Lock()

    def read(
        self,
        store: Any,
        sent: Sent,
        query: str,
        wanted: FactQuery,
        n: int,
        lexical: Callable[..., Scored] | None,
    ) -> tuple[Scored, Scored]:
        """``store.search`` and ``lexical`` (the store's ``search_lexical``, when used) for
        ``query``, both reading one state of the store (read through ``sent``: again when this
        process sent a write meanwhile), or what they answered at the store's present count."""

        def both() -> tuple[Scored, Scored]:
            return store.search(query, wanted, n=n), lexical(query, wanted, n=n) if lexical is not None else []

        before = generation(store)
        if before is None:
            return sent.read(both)
        key = (query, wanted, n, lexical is not None)
        with self._lock:
            kept = self._kept.hit(key)
        if kept is not None and kept[0] == before:
            return kept[1]
        answer = sent.read(both)
        if generation(store) == before:
            with self._lock:
                self._kept.put(key, (before, answer))
        return answer


__all__ = ["ANSWERS", "Answers", "generation"]
