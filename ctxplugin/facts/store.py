"""The fact store port and its in-memory backend.

A store keeps facts and their vectors; it knows nothing of supersession, which the
:class:`~ctxplugin.facts.ledger.FactsLedger` decides. Every backend passes the same contract
suite (``ctxplugin.testing.facts_contract``).
"""

from __future__ import annotations

import heapq
import threading
from array import array
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from itertools import chain
from operator import itemgetter
from typing import Any, Protocol, runtime_checkable

from langchain_core.embeddings import Embeddings

from ctxplugin._lru import LRU
from ctxplugin.facts._memory_slots import Slot, slot_of
from ctxplugin.facts._shared_fields import share_fields_set
from ctxplugin.facts._vectors import Vectors
from ctxplugin.facts.embedding import as_embeddings, document_vectors, query_vector
from ctxplugin.facts.model import (
    Fact,
    FactQuery,
    matches,
    reader_keys,
    revises,
    withdrawn,
)
from ctxplugin.scope import Scope


@runtime_checkable
class FactStore(Protocol):
    """Where facts live. Five methods; errors of the backend surface as ``StoreError``.

    A store that connects lazily may also have ``open(reader: Scope) -> None``, which connects
    to where ``reader``'s facts live: the ledger calls it before taking a write lock that other
    processes wait for, so the lock is not held while connecting.

    A store whose writes cost a request each may also have
    ``write(added: Sequence[Fact], updated: Sequence[Fact]) -> None``: ``add(added)`` and
    ``update(updated)`` in as few requests as it can, each all or nothing; an ingest or a write
    that replaces facts uses it, so that a search meanwhile never finds the old fact and the new
    one both current.
    And ``lookup(reader, *, keys, hashes) -> list[Fact]``: the facts ``reader`` may read whose
    key is among ``keys`` or text hash among ``hashes``, in any state, in one request; an
    ingest reads what its decisions will look up that way first.
    And ``withdraw(owner, outputs) -> list[Fact]``: delete, in one request or as few as it can,
    the facts ``owner`` read from tool outputs its host has since replaced (see
    :func:`~ctxplugin.facts.model.withdrawn`) and return them; the ledger's ``withdraw`` uses it.
    With it, ``from_outputs(owner, call_ids) -> list[Fact]``: the facts ``owner`` read from these
    calls' outputs, in any state (the ledger takes no write lock when a withdrawal removes none).
    And ``from_messages(owner, refs) -> list[Fact]``: the facts ``owner`` read from the user
    messages whose source refs are ``refs`` (:func:`~ctxplugin.facts._said.said_by`), in any
    state, in one request or as few as it can; an ingest reading a message the host edited uses
    it to mark not current what the old text stated and the new one does not.
    And ``said_after(owner, ids) -> list[Fact]``: the facts ``owner`` read from the user messages
    said right after the messages ``ids`` (their ``source.after``), in any state; a process that
    did not read a thread's old branch tells by it that the host went back from it.

    A store that only this process writes may also have ``generation: int``, a number that
    changes with every write: what was read from it at the same generation still stands, so a
    reader may keep it. A write moves it before the store changes and again once it is whole,
    so nothing kept before it is taken during it. And ``revisions: int`` (moved likewise), which changes with every write that can change
    what is in force other than by adding a current fact: an update (a fact superseded, refused
    or flagged) or a fact stored not current or provisional (:func:`~ctxplugin.facts.model.revises`).
    The facts stage keeps the facts in force, and the facts block it froze, while it stands.

    A store other processes write may also keep the facts blocks of ``placement="window"`` for
    them all (see :mod:`ctxplugin.stages._shared_window`): ``window_blocks(reader, keys) ->
    dict[str, str]``, the blocks stored under these keys for ``reader``, in one request; and
    ``offer_window_block(reader, key, block) -> str``, which stores ``block`` unless one is
    stored under ``key`` already, never replacing it, and returns the one stored.
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


NEAREST = 16
"""Questions whose nearest facts the in-memory store keeps (see :meth:`MemoryFactStore.search`)."""


class MemoryFactStore:
    """Facts in dicts; exact cosine search and BM25. For tests and short-lived processes.

    Facts are kept per owner slot (the session, user, workspace or tenant whose readers may see
    them, :func:`~ctxplugin.facts.model.visibility_key`), so a lookup reads only the slots its
    reader can see, never the facts of other sessions: a process serving many sessions does
    the same work per lookup whatever their number. Within a slot, facts are also found by key
    and by text hash. BM25 statistics are per slot.

    Args:
        embedding: a LangChain ``Embeddings``, a Chroma embedding function or a callable;
            the offline :class:`~ctxplugin.facts.static.StaticEmbedding` when omitted.
    """

    def __init__(self, embedding: Embeddings | Callable[[list[str]], Any] | None = None) -> None:
        self.embedding = as_embeddings(embedding)
        self._facts: dict[str, Fact] = {}
        self._vectors = Vectors()  # rows of numbers: nothing for the collector to walk, scored as arrays
        self._order: dict[str, int] = {}  # id -> when first stored: equal times keep that order
        self._slots: dict[str, Slot] = {}
        self._lock = threading.Lock()
        # per question asked lately (what, its vector, how many): the list it was asked over,
        # how long it was, and the nearest facts found (see search)
        self._nearest: LRU[tuple[FactQuery, bytes, int], tuple[list[Fact], int, list[tuple[Fact, float]]]] = LRU(NEAREST)
        self.generation = 0
        """Changes with every write: what was read at the same generation still stands (only
        this process writes here)."""
        self.revisions = 0
        """Changes with every write that can change what is in force (see :class:`FactStore`)."""

    def add(self, facts: Sequence[Fact]) -> None:
        self.write(facts, ())

    def update(self, facts: Sequence[Fact]) -> None:
        self.write((), facts)

    def write(self, added: Sequence[Fact], updated: Sequence[Fact]) -> None:
        """:meth:`add` ``added`` and :meth:`update` ``updated`` as one change: a search in
        another thread sees a replacement whole (the new fact and the old one superseded) or
        not at all, never both facts current."""
        vectors = document_vectors(self.embedding, [f.text for f in added]) if added else []
        touched: dict[str, list[Fact]] = {}
        revised = True  # a write that failed part way may have changed anything
        try:
            with self._lock:
                self._vectors.check(vectors)
                revised = bool(updated) or any(revises(f) or f.id in self._facts for f in added)
                self.generation += 1  # counted at both ends: no answer kept before the write is served during it
                self.revisions += revised
                for fact, vector in zip(added, vectors, strict=True):
                    self._put(fact)
                    self._vectors.put(fact.id, vector)
                    touched.setdefault(slot_of(fact), []).append(fact)
                for fact in updated:
                    if fact.id in self._facts:
                        self._put(fact)
                lexical = [(self._slots[slot].lexical, group) for slot, group in touched.items()]
            for index, group in lexical:
                index.add((f.id, f.text, None) for f in group)
        finally:  # and again once the BM25 index holds them too: what a search read meanwhile is kept under a count gone
            with self._lock:
                self.generation += 1
                self.revisions += revised

    def lookup(self, reader: Scope, *, keys: Sequence[str], hashes: Sequence[str]) -> list[Fact]:
        """The facts ``reader`` may read whose key is among ``keys`` or text hash among
        ``hashes``, in any state, in the order they were first stored."""
        found: dict[str, Fact] = {}
        with self._lock:
            for slot_key in dict.fromkeys(reader_keys(reader)):
                slot = self._slots.get(slot_key)
                if slot is not None:
                    for key in keys:
                        found.update(slot.by_key.get(key, {}))
                    for digest in hashes:
                        found.update(slot.by_hash.get(digest, {}))
            facts = sorted(found.values(), key=lambda f: self._order[f.id])
        return [f for f in facts if reader.can_read(f.owner, f.visibility)]

    def withdraw(self, owner: Scope, outputs: Mapping[str, Collection[str]]) -> list[Fact]:
        """Delete the facts ``owner`` read from the tool outputs ``outputs`` names, except those
        read from the content that stands (see :func:`~ctxplugin.facts.model.withdrawn`)."""
        with self._lock:
            found = {f.id: f for f in self._read_from(owner, outputs) if withdrawn(f, owner, outputs)}
            if not found:
                return []
            self.generation += 1
            self.revisions += 1
            for fact in found.values():
                slot = self._slots[slot_of(fact)]
                slot.remove(fact)
                slot.lexical.remove([fact.id])
                del self._facts[fact.id]
                self._vectors.drop(fact.id)
        return list(found.values())

    def from_outputs(self, owner: Scope, call_ids: Sequence[str]) -> list[Fact]:
        """The facts ``owner`` read from the outputs of ``call_ids``, in any state, in the order first stored."""
        with self._lock:
            return sorted((f for f in self._read_from(owner, call_ids) if f.owner.key() == owner.key()), key=lambda f: self._order[f.id])

    def _read_from(self, owner: Scope, call_ids: Iterable[str]) -> list[Fact]:
        """The facts of the slots ``owner`` can read that were read from the outputs of ``call_ids`` (the caller holds the lock)."""
        slots = [slot for key in dict.fromkeys(reader_keys(owner)) if (slot := self._slots.get(key)) is not None]
        return list({f.id: f for slot in slots for call_id in dict.fromkeys(call_ids) for f in slot.by_call.get(call_id, {}).values()}.values())

    def from_messages(self, owner: Scope, refs: Sequence[str]) -> list[Fact]:
        """The facts ``owner`` read from the user messages ``refs``, in any state, in the order
        they were first stored."""
        return self._said(owner, refs, after=False)

    def said_after(self, owner: Scope, ids: Sequence[str]) -> list[Fact]:
        """The facts ``owner`` read from the user messages said right after the messages ``ids``
        (their ``source.after``), in any state, in the order they were first stored."""
        return self._said(owner, ids, after=True)

    def _said(self, owner: Scope, refs: Sequence[str], *, after: bool) -> list[Fact]:
        owner_key = owner.key()
        with self._lock:
            found = {
                fact.id: fact
                for slot_key in dict.fromkeys(reader_keys(owner)) if (slot := self._slots.get(slot_key)) is not None
                for ref in dict.fromkeys(refs)
                for fact in (slot.by_after if after else slot.by_message).get(ref, {}).values()
                if fact.owner.key() == owner_key
            }
            return sorted(found.values(), key=lambda f: self._order[f.id])

    def _put(self, fact: Fact) -> None:
        share_fields_set(fact)
        share_fields_set(fact.source)
        old = self._facts.get(fact.id)
        if old is not None:
            self._slots[slot_of(old)].remove(old)
        self._facts[fact.id] = fact
        last = fact.id not in self._order  # stored after every other (an id stored before keeps its place)
        self._order.setdefault(fact.id, len(self._order))
        slot = self._slots.get(slot_of(fact))
        if slot is None:
            slot = self._slots[slot_of(fact)] = Slot()
        slot.insert(fact, last=last)

    def get(self, ids: Sequence[str], *, reader: Scope) -> list[Fact]:
        with self._lock:
            found = [self._facts.get(i) for i in ids]
        return [f for f in found if f is not None and reader.can_read(f.owner, f.visibility)]

    def _pool(self, query: FactQuery) -> list[Fact]:
        """Facts matching ``query``, in the order they were first stored; only the slots
        ``query.reader`` can see are read."""
        with self._lock:
            return self._matching(query)[0]

    def _matching(self, query: FactQuery) -> tuple[list[Fact], list[Fact] | None]:
        """:meth:`_pool` (the caller holds the lock), and the list the slot holding them all keeps
        for ``query`` (see :meth:`Slot.matching`; None when several slots hold some)."""
        order = self._order
        found: list[Fact] = []
        kept: list[Fact] | None = None
        slots = 0
        for key in dict.fromkeys(reader_keys(query.reader)):
            slot = self._slots.get(key)
            if slot is not None and (matching := slot.matching(query, order)):
                found.extend(matching)
                kept = matching
                slots += 1
        if slots > 1:
            found.sort(key=lambda f: order[f.id])
        return found, kept if slots == 1 else None

    def find(self, query: FactQuery, *, limit: int | None = None) -> list[Fact]:
        facts = self._pool(query)
        facts.sort(key=lambda f: f.created_at, reverse=True)
        return facts if limit is None else facts[:limit]

    def search(self, text: str, query: FactQuery, *, n: int) -> list[tuple[Fact, float]]:
        if n <= 0:
            return []
        vector = query_vector(self.embedding, text)
        asked = (query, array("d", vector).tobytes(), n)
        with self._lock:
            facts, kept = self._matching(query)
            # a question asked again over a slot's list that has only grown since (a list is
            # replaced, not changed, when a fact in it is updated or removed): the facts it took
            # in since are scored, against the first n found before, which no older fact beats
            last = self._nearest.hit(asked) if kept is not None else None
            if last is not None and last[0] is kept and last[1] <= len(facts):
                fresh = facts[last[1] :]
                scored: Iterable[tuple[Fact, float]] = chain(last[2], zip(fresh, self._vectors.cosines([f.id for f in fresh], vector), strict=True))
            else:
                scored = zip(facts, self._vectors.cosines([f.id for f in facts], vector), strict=True)
            # the first n of a stable sort, best first, without sorting the rest
            best = heapq.nlargest(n, scored, key=itemgetter(1))
            if kept is not None:
                self._nearest.put(asked, (kept, len(facts), best))
        return best

    def search_lexical(self, text: str, query: FactQuery, *, n: int) -> list[tuple[Fact, float]]:
        """Up to ``n`` facts matching ``query`` sharing rarer terms with ``text``, best BM25 first
        (scored within each slot the reader can see)."""
        facts = self._facts

        def readable(doc_id: str) -> bool:
            fact = facts.get(doc_id)
            return fact is not None and matches(fact, query)

        with self._lock:
            indexes = [self._slots[k].lexical for k in dict.fromkeys(reader_keys(query.reader)) if k in self._slots]
        hits: list[tuple[str, float]] = []
        for index in indexes:
            hits.extend(index.search(text, n=n, allow=lambda doc_id, _: readable(doc_id)))
        if len(indexes) > 1:
            hits.sort(key=lambda hit: hit[1], reverse=True)
        return [(facts[doc_id], score) for doc_id, score in hits[:n]]

    def __len__(self) -> int:
        return len(self._facts)


__all__ = ["FactStore", "MemoryFactStore"]
