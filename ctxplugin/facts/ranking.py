"""Ranking retrieved facts: relevance to the turn, combined with a recency/importance prior and
tag overlap. Pure functions; the stores only supply candidates and their similarity.

Strategies (after ADR-006 of the context-assembly design):

- ``recent``: the prior is recency decay alone.
- ``important``: the prior is importance alone.
- ``balanced``: importance weighted by recency decay (their geometric mean).

Relevance is the fusion of two rankings of the candidates (:func:`fuse`): by embedding
similarity and by the lexical BM25 score (:mod:`ctxplugin.facts.lexical`), combined by
reciprocal rank, so neither score's scale has to match the other's. Candidates that name every
identifier the query names come first whatever their score ("Identifiers match exactly first").

Recency decay is hyperbolic, ``1 / (1 + age / half_life)``: one half-life old weighs 0.5, three
half-lives 0.25. Relevance dominates in every strategy, so an unrelated fact never outranks a
related one by recency or importance alone.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from datetime import datetime
from operator import itemgetter

from ctxplugin._lru import Memo, TextKey, text_key
from ctxplugin.config import FactsStrategy
from ctxplugin.facts._text import identifiers, words
from ctxplugin.facts.model import Fact, ScoredFact

RELEVANCE_WEIGHT = 0.65
PRIOR_WEIGHT = 0.25
TAG_WEIGHT = 0.10
RRF_K = 1.0
"""Reciprocal-rank constant: small, so the first places of each ranking stand well apart (a
large one, such as the usual 60, makes fused relevances so flat that the prior decides)."""
DENSE_WEIGHT = 1.0
LEXICAL_WEIGHT = 0.5
"""The lexical ranking counts half as much as the embedding's: chosen on the tuning half of
``benchmarks/facts_labelled.py``."""
REVIEW_PENALTY = 0.8
"""Facts that need review (a fact they depend on changed) keep 80% of their score."""


def decay(created_at: datetime, now: datetime, half_life_hours: float) -> float:
    """Hyperbolic recency decay in (0, 1]; a fact from the future counts as new."""
    age_hours = max(0.0, (now - created_at).total_seconds() / 3600.0)
    return 1.0 / (1.0 + age_hours / half_life_hours)


def prior(fact: Fact, now: datetime, strategy: FactsStrategy, half_life_hours: float) -> float:
    """The strategy's query-independent weight of ``fact`` in [0, 1]."""
    recency = decay(fact.created_at, now, half_life_hours)
    if strategy == "recent":
        return recency
    if strategy == "important":
        return fact.importance
    return math.sqrt(fact.importance * recency)


def tag_overlap(fact_tags: Iterable[str], query_tags: Sequence[str]) -> float:
    """Share of the query's tags the fact carries (0 when the query has none)."""
    if not query_tags:
        return 0.0
    have = set(fact_tags)
    return sum(1 for t in query_tags if t in have) / len(query_tags)


def query_tags(query: str, extra: Sequence[str] | None = None) -> list[str]:
    """Tags of a query: given tags plus the exact identifiers it mentions."""
    tags = [t.lower() for t in (extra or ())]
    have = set(tags)
    for ident in identifiers(query):
        if ident not in have:
            have.add(ident)
            tags.append(ident)
    return tags


def fuse(
    dense: Sequence[tuple[Fact, float]],
    lexical: Sequence[tuple[Fact, float]] = (),
) -> list[tuple[Fact, float]]:
    """One relevance in [0, 1] per candidate from two rankings, best first.

    ``dense`` and ``lexical`` are ``(fact, score)`` lists best first (embedding similarity and
    BM25). Each list gives a fact ``weight / (RRF_K + place)``; the sum is divided by what the
    first place of both lists would get. Without a lexical list, the embedding similarity is the
    relevance (clipped to [0, 1]), as before fusion existed.
    """
    if not lexical:
        return [(fact, min(1.0, max(0.0, score))) for fact, score in dense]
    best = (DENSE_WEIGHT + LEXICAL_WEIGHT) / (RRF_K + 1.0)
    fused: dict[str, float] = {}
    facts: dict[str, Fact] = {}
    for ranking, weight in ((dense, DENSE_WEIGHT), (lexical, LEXICAL_WEIGHT)):
        for place, (fact, _) in enumerate(ranking, start=1):
            facts.setdefault(fact.id, fact)
            fused[fact.id] = fused.get(fact.id, 0.0) + weight / (RRF_K + place)
    ordered = sorted(fused.items(), key=lambda item: item[1], reverse=True)
    return [(facts[i], score / best) for i, score in ordered]


def exact_hits(fact: Fact, wanted: Sequence[str]) -> int:
    """How many of the identifiers ``wanted`` (lower case) ``fact``'s text holds exactly."""
    if not wanted:
        return 0
    held = _held(fact.text)
    return sum(1 for ident in wanted if ident in held)


_HELD: Memo[TextKey, frozenset[str]] = Memo(16_384)


def _held(text: str) -> frozenset[str]:
    """The identifiers and words of a fact's text, memoised (bounded): every search ranks the
    same facts again, against the same question until the user speaks again."""
    return _HELD.get_or_make(text_key(text), lambda: frozenset(identifiers(text)).union(words(text)))


def _counted(held: AbstractSet[str], wanted: Sequence[str], counts: Counter[str]) -> int:
    """How many entries of ``wanted`` (``counts`` holds how often each appears) are in
    ``held``, read from whichever side is shorter: a question can name dozens of identifiers,
    a fact holds a handful."""
    if len(held) < len(wanted):
        return sum(counts[word] for word in held if word in counts)
    return sum(1 for ident in wanted if ident in held)


def rank(
    candidates: Iterable[tuple[Fact, float]],
    *,
    now: datetime,
    strategy: FactsStrategy,
    half_life_hours: float,
    tags: Sequence[str] = (),
    min_relevance: float = 0.0,
    exact: Sequence[str] = (),
    k: int,
) -> list[ScoredFact]:
    """Top ``k`` of ``candidates`` (fact, relevance) by combined score, best first.

    Candidates holding more of the identifiers ``exact`` come before those holding fewer.
    Candidates below ``min_relevance`` are dropped; superseded facts never pass.
    """
    # (hits, score, created_at) ranks; a ScoredFact is made only for the k returned
    scored: list[tuple[tuple[int, int], float, datetime, Fact, float]] = []
    # the question's side of each overlap, counted once for all candidates
    exact_counts = Counter(exact)
    tag_counts = Counter(tags)
    for fact, similarity in candidates:
        if not fact.is_valid:
            continue
        relevance = min(1.0, max(0.0, similarity))
        if similarity < min_relevance:
            continue
        score = (
            RELEVANCE_WEIGHT * relevance
            + PRIOR_WEIGHT * prior(fact, now, strategy, half_life_hours)
            + TAG_WEIGHT * _tag_overlap(fact.tags, tags, tag_counts)
        )
        if fact.needs_review:
            score *= REVIEW_PENALTY
        # a fact about the identifier (its key names it) before one that only mentions it
        hits = (_counted(_held(fact.text), exact, exact_counts) if exact else 0, _key_hits(fact, exact))
        scored.append((hits, score, fact.created_at, fact, relevance))
    scored.sort(key=_RANKED, reverse=True)
    return [ScoredFact(fact=fact, score=score, relevance=relevance) for _, score, _, fact, relevance in scored[:k]]


_RANKED = itemgetter(0, 1, 2)
"""A candidate's place: its identifier hits, its score, then the newer first."""


def _tag_overlap(fact_tags: Sequence[str], wanted: Sequence[str], counts: Counter[str]) -> float:
    """:func:`tag_overlap` with the query's tags counted beforehand (``counts``)."""
    if not wanted or not fact_tags:
        return 0.0
    return _counted(set(fact_tags), wanted, counts) / len(wanted)


def _key_hits(fact: Fact, wanted: Sequence[str]) -> int:
    """How many of the identifiers ``wanted`` (lower case) ``fact``'s key names."""
    if not wanted or not fact.key:
        return 0
    key = fact.key.lower()
    return sum(1 for ident in wanted if ident in key)


__all__ = ["decay", "exact_hits", "fuse", "prior", "query_tags", "rank", "tag_overlap"]
