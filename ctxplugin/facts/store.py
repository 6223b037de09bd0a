"""The fact store port and its in-memory backend.

A store keeps facts and their vectors; it knows nothing of supersession, which the
:class:`~ctxplugin.facts.ledger.FactsLedger` decides. Every backend passes the same contract
suite (``ctxplugin.testing.facts_contract``).
"""

from __future__ import annotations

import math
import operator
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from langchain_core.embeddings import Embeddings

from ctxplugin.facts.embedding import as_embeddings
from ctxplugin.facts.lexical import LexicalIndex
from ctxplugin.facts.model import Fact, FactQuery, matches
from ctxplugin.scope import Scope


@runtime_checkable
class FactStore(Protocol):
    """Where facts live. Five methods; errors of the backend surface as ``StoreError``.

    A store that connects lazily may also have ``open(reader: Scope) -> None``, which connects
    to where ``reader``'s facts live: the ledger calls it before taking a write lock that other
    processes wait for, so the lock is not held while connecting.
    """

    def add(self, facts: Sequence[Fact]) -> None:
        """Store new facts (embedding their text). An existing id is replaced."""
        ...

    def update(self, facts: Sequence[Fact]) -> None:
        """Store changed status fields of facts already stored (text and vector unchanged)."""
        ...

    def get(self, ids: Sequence[str], *, reader: Scope) -> list[Fact]:
        """The facts with these ids that ``reader`` may read, in the order asked."""
        ...

    def find(self, query: FactQuery, *, limit: int | None = None) -> list[Fact]:
        """Facts matching ``query``, newest first."""
        ...

    def search(self, text: str, query: FactQuery, *, n: int) -> list[tuple[Fact, float]]:
        """Up to ``n`` facts matching ``query``, most similar to ``text`` first, with their
        cosine similarity.

        A store may also have ``search_lexical(text, query, *, n) -> list[tuple[Fact, float]]``:
        up to ``n`` facts matching ``query`` that share rarer words or identifiers with
        ``text``, best BM25 score first (see :mod:`ctxplugin.facts.lexical`). The ledger fuses
        the two rankings when it is there.
        """
        ...


class MemoryFactStore:
    """Facts in a dict; exact cosine search and BM25 over every fact. For tests and
    short-lived processes.

    Args:
        embedding: a LangChain ``Embeddings``, a Chroma embedding function or a callable;
            the offline :class:`~ctxplugin.facts.static.StaticEmbedding` when omitted.
    """

    def __init__(self, embedding: Embeddings | Callable[[list[str]], Any] | None = None) -> None:
        self.embedding = as_embeddings(embedding)
        self._facts: dict[str, Fact] = {}
        self._vectors: dict[str, list[float]] = {}
        self._norms: dict[str, float] = {}
        self._lexical = LexicalIndex()
        self._lock = threading.Lock()

    def add(self, facts: Sequence[Fact]) -> None:
        vectors = self.embedding.embed_documents([f.text for f in facts]) if facts else []
        with self._lock:
            for fact, vector in zip(facts, vectors, strict=True):
                self._facts[fact.id] = fact
                self._vectors[fact.id] = vector
                self._norms[fact.id] = math.sqrt(sum(map(operator.mul, vector, vector)))
        self._lexical.add((f.id, f.text, None) for f in facts)

    def update(self, facts: Sequence[Fact]) -> None:
        with self._lock:
            for fact in facts:
                if fact.id in self._facts:
                    self._facts[fact.id] = fact

    def get(self, ids: Sequence[str], *, reader: Scope) -> list[Fact]:
        with self._lock:
            found = [self._facts.get(i) for i in ids]
        return [f for f in found if f is not None and reader.can_read(f.owner, f.visibility)]

    def find(self, query: FactQuery, *, limit: int | None = None) -> list[Fact]:
        with self._lock:
            facts = [f for f in self._facts.values() if matches(f, query)]
        facts.sort(key=lambda f: f.created_at, reverse=True)
        return facts if limit is None else facts[:limit]

    def search(self, text: str, query: FactQuery, *, n: int) -> list[tuple[Fact, float]]:
        if n <= 0:
            return []
        vector = self.embedding.embed_query(text)
        norm = math.sqrt(sum(map(operator.mul, vector, vector)))
        with self._lock:
            pool = [(f, self._vectors[f.id], self._norms[f.id]) for f in self._facts.values() if matches(f, query)]
        # as cosine() computes it, with each stored vector's norm computed once, when it is added
        scored = [
            (fact, sum(map(operator.mul, vector, v)) / (norm * n) if norm and n else 0.0) for fact, v, n in pool
        ]
        scored.sort(key=lambda item: item[1], reverse=True)
        return scored[:n]

    def search_lexical(self, text: str, query: FactQuery, *, n: int) -> list[tuple[Fact, float]]:
        """Up to ``n`` facts matching ``query`` sharing rarer terms with ``text``, best BM25 first."""
        facts = self._facts

        def readable(doc_id: str) -> bool:
            fact = facts.get(doc_id)
            return fact is not None and matches(fact, query)

        hits = self._lexical.search(text, n=n, allow=lambda doc_id, _: readable(doc_id))
        return [(facts[doc_id], score) for doc_id, score in hits]

    def __len__(self) -> int:
        return len(self._facts)


__all__ = ["FactStore", "MemoryFactStore"]
