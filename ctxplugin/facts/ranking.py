"""Ranking retrieved facts: relevance to the turn, combined with a recency/importance prior and
tag overlap. Pure functions; the stores only supply candidates and their similarity.

Strategies (after ADR-006 of the context-assembly design):

- ``recent``: the prior is recency decay alone.
- ``important``: the prior is importance alone.
- ``balanced``: importance weighted by recency decay (their geometric mean).

Recency decay is hyperbolic, ``1 / (1 + age / half_life)``: one half-life old weighs 0.5, three
half-lives 0.25. Relevance dominates in every strategy, so an unrelated fact never outranks a
related one by recency or importance alone.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import datetime

from ctxplugin.config import FactsStrategy
from ctxplugin.facts._text import identifiers
from ctxplugin.facts.model import Fact, ScoredFact

RELEVANCE_WEIGHT = 0.65
PRIOR_WEIGHT = 0.25
TAG_WEIGHT = 0.10
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
    for ident in identifiers(query):
        if ident not in tags:
            tags.append(ident)
    return tags


def rank(
    candidates: Iterable[tuple[Fact, float]],
    *,
    now: datetime,
    strategy: FactsStrategy,
    half_life_hours: float,
    tags: Sequence[str] = (),
    min_relevance: float = 0.0,
    k: int,
) -> list[ScoredFact]:
    """Top ``k`` of ``candidates`` (fact, similarity) by combined score, best first.

    Candidates below ``min_relevance`` similarity are dropped; superseded facts never pass.
    """
    scored: list[ScoredFact] = []
    for fact, similarity in candidates:
        if not fact.is_valid:
            continue
        relevance = min(1.0, max(0.0, similarity))
        if similarity < min_relevance:
            continue
        score = (
            RELEVANCE_WEIGHT * relevance
            + PRIOR_WEIGHT * prior(fact, now, strategy, half_life_hours)
            + TAG_WEIGHT * tag_overlap(fact.tags, tags)
        )
        if fact.needs_review:
            score *= REVIEW_PENALTY
        scored.append(ScoredFact(fact=fact, score=score, relevance=relevance))
    scored.sort(key=lambda s: (s.score, s.fact.created_at), reverse=True)
    return scored[:k]


__all__ = ["decay", "prior", "query_tags", "rank", "tag_overlap"]
