"""The in-memory fact store's slots: the facts of one owner slot by id, key, text hash, state,
the facts they depend on and where they were read from, its BM25 index and the matching facts
of its last queries (see :class:`~ctxplugin.facts.store.MemoryFactStore`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

from ctxplugin._lru import LRU
from ctxplugin.facts._said import said_by
from ctxplugin.facts.lexical import LexicalIndex
from ctxplugin.facts.model import Fact, FactQuery, matches, visibility_key

K = TypeVar("K")

POOLS = 8
"""Queries by state whose matching facts a slot keeps (see :meth:`Slot.matching`)."""


def _drop(index: dict[K, dict[str, Fact]], value: K, fact_id: str) -> None:
    group = index.get(value)
    if group is not None:
        group.pop(fact_id, None)
        if not group:
            del index[value]


def slot_of(fact: Fact) -> str:
    return visibility_key(fact.owner, fact.visibility)


class Slot:
    """The facts of one owner slot, by id, by key, by text hash, by state (valid or not, and
    fact scope) and by the facts they depend on, and their BM25 index."""

    def __init__(self) -> None:
        self.facts: dict[str, Fact] = {}
        self.by_key: dict[str | None, dict[str, Fact]] = {}
        self.by_hash: dict[str, dict[str, Fact]] = {}
        # every call reads the superseded facts and the provisional ones: few beside the rest
        self.by_state: dict[tuple[bool, str], dict[str, Fact]] = {}
        self.by_dependency: dict[str, dict[str, Fact]] = {}  # a superseded fact's dependents are flagged
        self.by_call: dict[str, dict[str, Fact]] = {}  # tool call id -> facts read from its output
        self.by_message: dict[str, dict[str, Fact]] = {}  # user message ref -> facts read from it
        self.by_after: dict[str, dict[str, Fact]] = {}  # message id -> facts read from the user message after it
        self.lexical = LexicalIndex()
        # the facts matching each query by state asked lately, in the order first stored: every
        # call of a long session asks the same few of a slot that only grows between most calls
        self.pools: LRU[FactQuery, list[Fact]] = LRU(POOLS)

    def matching(self, query: FactQuery, order: Mapping[str, int]) -> list[Fact]:
        """The facts of this slot that match ``query``, in the order first stored (``order``;
        the list kept for the query: read it, do not change it)."""
        kept = query.key is None and query.text_hash is None and query.depends_on is None
        pool = self.pools.hit(query) if kept else None
        if pool is None:
            pool = [f for f in self.candidates(query) if matches(f, query)]
            pool.sort(key=lambda f: order[f.id])
            if kept:
                self.pools.put(query, pool)
        return pool

    def insert(self, fact: Fact, *, last: bool = False) -> None:
        """Take ``fact`` in; ``last``: it was stored after every fact stored before (the
        queries kept take it at their end, else they are found again)."""
        if last:
            for query, pool in self.pools.items():
                if matches(fact, query):
                    pool.append(fact)
        else:
            self.pools.clear()
        self.facts[fact.id] = fact
        self.by_key.setdefault(fact.key, {})[fact.id] = fact
        self.by_hash.setdefault(fact.text_hash, {})[fact.id] = fact
        self.by_state.setdefault((fact.is_valid, fact.scope), {})[fact.id] = fact
        for dependency in fact.depends_on:
            self.by_dependency.setdefault(dependency, {})[fact.id] = fact
        if fact.source.call_id is not None:
            self.by_call.setdefault(fact.source.call_id, {})[fact.id] = fact
        if (ref := said_by(fact)) is not None:
            self.by_message.setdefault(ref, {})[fact.id] = fact
            if fact.source.after is not None:
                self.by_after.setdefault(fact.source.after, {})[fact.id] = fact

    def remove(self, fact: Fact) -> None:
        self.pools.clear()
        self.facts.pop(fact.id, None)
        _drop(self.by_key, fact.key, fact.id)
        _drop(self.by_hash, fact.text_hash, fact.id)
        _drop(self.by_state, (fact.is_valid, fact.scope), fact.id)
        for dependency in fact.depends_on:
            _drop(self.by_dependency, dependency, fact.id)
        if fact.source.call_id is not None:
            _drop(self.by_call, fact.source.call_id, fact.id)
        if (ref := said_by(fact)) is not None:
            _drop(self.by_message, ref, fact.id)
            if fact.source.after is not None:
                _drop(self.by_after, fact.source.after, fact.id)

    def candidates(self, query: FactQuery) -> Iterable[Fact]:
        """A superset of the facts of this slot that match ``query`` (the narrowest index)."""
        if query.key is not None:
            return list(self.by_key.get(query.key, {}).values())
        if query.text_hash is not None:
            return list(self.by_hash.get(query.text_hash, {}).values())
        if query.depends_on is not None:
            return list(self.by_dependency.get(query.depends_on, {}).values())
        if query.valid is not None and query.scopes is not None:
            groups = (self.by_state.get((query.valid, scope), {}) for scope in dict.fromkeys(query.scopes))
            return [fact for group in groups for fact in group.values()]
        if query.valid is not None:
            return [fact for (valid, _), group in self.by_state.items() if valid == query.valid for fact in group.values()]
        return list(self.facts.values())


__all__ = ["POOLS", "Slot", "slot_of"]
