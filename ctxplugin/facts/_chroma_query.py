"""Nearest facts read from a Chroma collection: one vector query, or every record a filter
keeps ranked exactly, each kept only when it matches the fact query.
"""

from __future__ import annotations

from typing import Any

from ctxplugin.facts._chroma_codec import from_metadata, may_match
from ctxplugin.facts.embedding import cosine
from ctxplugin.facts.model import Fact, FactQuery, matches, reader_keys

_WIDER = 8


def _rank_exactly(
    collection: Any, vector: list[float], n: int, where: dict[str, Any], query: FactQuery
) -> list[tuple[Fact, float]]:
    """All records the filter keeps, ranked by exact cosine, when there are at most
    ``n * _WIDER`` of them; [] when there are more (then the index's answer stands)."""
    cap = n * _WIDER
    result = collection.get(where=where, limit=cap + 1, include=["documents", "metadatas", "embeddings"])
    ids = result["ids"]
    if len(ids) > cap:
        return []
    readable = frozenset(reader_keys(query.reader))
    ranked: list[tuple[Fact, float]] = []
    for i, doc, meta, emb in zip(ids, result["documents"] or [], result["metadatas"] or [], result["embeddings"] if result["embeddings"] is not None else [], strict=True):
        if not may_match(meta, query, readable):
            continue
        fact = from_metadata(i, doc, meta)
        if matches(fact, query):
            ranked.append((fact, cosine(vector, list(emb))))
    ranked.sort(key=lambda pair: pair[1], reverse=True)
    return ranked[:n]


def _query(
    collection: Any, vector: list[float], n: int, where: dict[str, Any] | None, query: FactQuery
) -> tuple[list[tuple[Fact, float]], bool]:
    """Matching facts among the nearest ``n`` (and whether fewer than ``n`` exist at all)."""
    result = collection.query(
        query_embeddings=[vector], n_results=n, where=where, include=["documents", "metadatas", "distances"]
    )
    ids = result["ids"][0]
    docs = (result["documents"] or [[]])[0]
    metas = (result["metadatas"] or [[]])[0]
    distances = (result["distances"] or [[]])[0]
    out: list[tuple[Fact, float]] = []
    readable = frozenset(reader_keys(query.reader))
    for i, doc, meta, distance in zip(ids, docs, metas, distances, strict=True):
        if not may_match(meta, query, readable):
            continue
        fact = from_metadata(i, doc, meta)
        if matches(fact, query):
            out.append((fact, 1.0 - float(distance)))
    return out, len(ids) < n
