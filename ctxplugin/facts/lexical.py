"""The lexical side of facts retrieval: an in-process inverted index scored with BM25.

An embedding blurs rare words: "Maria" is one token among eight. BM25 weighs each query term by
its inverse document frequency in the collection, so a name, a code or an identifier that few
facts hold counts for much more than "team" or "budget", and stop words count for nothing.

Terms are what :func:`terms` finds: stems of content words (no stop words, no one-letter
words), exact identifiers kept whole (``w482913``, ``test_refunds.py``, ``db-prod-07``) and the
pieces of each identifier (``db``, ``prod``, ``07``), so an identifier matches exactly first and
by its parts second.

One :class:`LexicalIndex` belongs to one store collection; stores keep it current as they write
and score candidates with it (see ``MemoryFactStore.search_lexical`` and
``ChromaFactStore.search_lexical``).
"""

from __future__ import annotations

import heapq
import itertools
import math
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any

from ctxplugin._lru import LRU, TextKey, text_key
from ctxplugin.facts._text import STOPWORDS, is_identifier, parts_of, stem, words

_K1 = 1.2
_B = 0.75
_PART_WEIGHT = 0.5
"""An identifier's pieces count half: "db-prod-07" asked for finds "db-prod-07" before "db-prod-08"."""
_BROAD = 0.2
"""Terms held by more than this share of the facts only re-score candidates other terms found
(their postings are long and their weight is small)."""


@lru_cache(maxsize=65536)
def _token_terms(token: str) -> tuple[tuple[str, float], ...]:
    if is_identifier(token):
        found = [(token, 1.0)]
        for part in parts_of(token):
            if part not in STOPWORDS and (len(part) > 1 or part.isdigit()):
                found.append((stem(part), _PART_WEIGHT))
        return tuple(found)
    if token in STOPWORDS or (len(token) < 2 and not token.isdigit()):
        return ()
    return ((stem(token), 1.0),)


_TERMS: LRU[TextKey, dict[str, float]] = LRU(1024)
_TERMS_LOCK = threading.Lock()


def terms(text: str) -> dict[str, float]:
    """Weighted terms of ``text``: content-word stems, identifiers whole and their pieces.
    Memoised (bounded): a turn's question is looked up again on every call."""
    key = text_key(text)
    with _TERMS_LOCK:
        hit = _TERMS.hit(key)
    if hit is None:
        hit = _terms(text)
        with _TERMS_LOCK:
            _TERMS.put(key, hit)
    return dict(hit)


def _terms(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    # a word said again adds no term and no weight: each is looked at once, first time first
    for token in dict.fromkeys(words(text)):
        for term, weight in _token_terms(token):
            out[term] = max(out.get(term, 0.0), weight)
    return out


def _counts(text: str) -> Counter[str]:
    counted: Counter[str] = Counter()
    for token in words(text):
        for term, _ in _token_terms(token):
            counted[term] += 1
    return counted


class LexicalIndex:
    """Terms of stored texts, their document frequencies, and BM25 search over them.

    Thread-safe. Each document carries an opaque ``tag`` the caller filters on (a store keeps
    the metadata that tells who may read a fact and whether it is current).

    Args:
        order: how equal scores rank: a key of a document's id and its tag when it is added,
            smaller first. When omitted, in the order the documents were added (not by their
            ids, which are random), so the same conversation ranks the same way on every run.
            An index kept by each of several processes over one shared collection needs a key
            stored with the documents: each process adds its own writes at once and the
            others' when it catches up, in orders of its own.
    """

    def __init__(self, order: Callable[[str, Any], Any] | None = None) -> None:
        self._postings: dict[str, dict[str, int]] = {}
        self._lengths: dict[str, int] = {}
        self._tags: dict[str, Any] = {}
        self._terms: dict[str, tuple[str, ...]] = {}
        self._order_of = order
        self._order: dict[str, Any] = {}  # doc id -> its rank among equal scores
        self._added = itertools.count()
        self._total = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._lengths)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._lengths

    def ids(self) -> set[str]:
        """Ids of the indexed documents."""
        with self._lock:
            return set(self._lengths)

    def add(self, items: Iterable[tuple[str, str, Any]]) -> None:
        """Index ``(id, text, tag)`` documents; an id already indexed is replaced."""
        prepared = [(doc_id, _counts(text), tag) for doc_id, text, tag in items]
        with self._lock:
            for doc_id, counted, tag in prepared:
                if doc_id in self._lengths:
                    self._remove(doc_id)
                for term, count in counted.items():
                    self._postings.setdefault(term, {})[doc_id] = count
                length = sum(counted.values())
                self._lengths[doc_id] = length
                self._total += length
                self._tags[doc_id] = tag
                self._terms[doc_id] = tuple(counted)
                self._order[doc_id] = next(self._added) if self._order_of is None else self._order_of(doc_id, tag)

    def order(self, doc_id: str) -> Any:
        """The rank of ``doc_id`` among equal scores (see ``order`` above)."""
        return self._order.get(doc_id)

    def retag(self, doc_id: str, tag: Any) -> None:
        """Replace the tag of an indexed document (nothing happens for an unknown id)."""
        with self._lock:
            if doc_id in self._tags:
                self._tags[doc_id] = tag

    def remove(self, ids: Iterable[str]) -> None:
        """Forget documents."""
        with self._lock:
            for doc_id in ids:
                if doc_id in self._lengths:
                    self._remove(doc_id)

    def _remove(self, doc_id: str) -> None:
        for term in self._terms.pop(doc_id, ()):
            posting = self._postings.get(term)
            if posting is not None:
                posting.pop(doc_id, None)
                if not posting:
                    del self._postings[term]
        self._total -= self._lengths.pop(doc_id)
        self._tags.pop(doc_id, None)
        self._order.pop(doc_id, None)

    def search(
        self, text: str, *, n: int, allow: Callable[[str, Any], bool] | None = None
    ) -> list[tuple[str, float]]:
        """Up to ``n`` ``(id, BM25 score)`` best first, among the documents holding at least one
        of the query's terms that ``allow(id, tag)`` accepts (all when ``allow`` is None)."""
        wanted = terms(text)
        if not wanted or n <= 0:
            return []
        with self._lock:
            docs = len(self._lengths)
            if docs == 0:
                return []
            scores = self._scores(wanted, docs)
            order = self._order

            def ranked(item: tuple[str, float]) -> tuple[float, Any]:  # best first, then the index's order
                return -item[1], order[item[0]]

            if allow is None:
                return heapq.nsmallest(n, scores.items(), key=ranked)
            # most candidates are readable: look at a few times n first, the rest only if needed
            first = heapq.nsmallest(4 * n, scores.items(), key=ranked)
            out: list[tuple[str, float]] = []
            if self._take(first, allow, n, out) or len(first) == len(scores):
                return out
            # sorting every candidate is the costly part: done only when the first few fell short
            rest = sorted(scores.items(), key=ranked)[len(first) :]
            self._take(rest, allow, n, out)
            return out

    def _take(
        self, ranked: list[tuple[str, float]], allow: Callable[[str, Any], bool], n: int, out: list[tuple[str, float]]
    ) -> bool:
        """Append the allowed of ``ranked`` to ``out`` until it holds ``n``; whether it does."""
        for doc_id, score in ranked:
            if allow(doc_id, self._tags.get(doc_id)):
                out.append((doc_id, score))
                if len(out) == n:
                    return True
        return False

    def _scores(self, wanted: dict[str, float], docs: int) -> dict[str, float]:
        average = self._total / docs
        weighted: list[tuple[float, dict[str, int]]] = []
        for term, weight in wanted.items():
            posting = self._postings.get(term)
            if posting:
                idf = math.log(1.0 + (docs - len(posting) + 0.5) / (len(posting) + 0.5))
                weighted.append((weight * idf, posting))
        weighted.sort(key=lambda pair: len(pair[1]))
        scores: dict[str, float] = {}
        lengths = self._lengths
        # the length part of a document's norm, worked out once per document rather than once
        # per query term it holds (a pasted task asks hundreds of terms)
        lengthy: dict[str, float] = {}
        saturation = _K1 + 1.0
        broad = max(64, _BROAD * docs)
        scored = scores.get
        norm = lengthy.get
        for weight, posting in weighted:
            counts = [(d, posting[d]) for d in scores if d in posting] if len(posting) > broad and scores else posting.items()
            for doc_id, tf in counts:
                length = norm(doc_id)
                if length is None:
                    length = lengthy[doc_id] = _K1 * (1.0 - _B + _B * lengths[doc_id] / average)
                scores[doc_id] = scored(doc_id, 0.0) + weight * tf * saturation / (tf + length)
        return scores


def best_share(scored: Sequence[tuple[Any, float]]) -> list[tuple[Any, float]]:
    """Scores divided by the best one (so the top is 1.0), order kept."""
    if not scored:
        return []
    top = max(s for _, s in scored)
    if top <= 0.0:
        return [(item, 0.0) for item, _ in scored]
    return [(item, s / top) for item, s in scored]


__all__ = ["LexicalIndex", "best_share", "terms"]
