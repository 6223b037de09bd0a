"""Facts ledger: small facts kept current, the relevant ones put before every model call.

- :class:`Fact` / :class:`ScoredFact`: the record and a retrieval hit (``.fact``, ``.score``).
- :class:`FactsLedger` (``engine.facts``): ``write``, ``search``, ``get``, ``current``,
  ``history``, ``ingest``; supersession by id, by key, by correction, aware of authority and
  fact scope; :class:`WriteLock` serialises supersession across processes.
- Stores: :class:`MemoryFactStore`, :class:`ChromaFactStore` (embedded or server); the port is
  :class:`FactStore`.
- :class:`HashingEmbedding`: the offline default embedding (no weights, no download).
- :class:`RuleExtractor` and :func:`as_extractor`: zero-LLM extraction, and how a model-backed
  extractor plugs in.
- :func:`mark_outdated`: notes on old messages that state a superseded value (view only).
- :func:`words` and :func:`identifiers`: how the ledger splits a text (the answer cache
  compares questions the same way); :func:`chroma_embedding_function`: an embedding as Chroma
  calls it (the answer cache's Chroma store uses it too).
"""

from ctxplugin.facts._text import identifiers, words
from ctxplugin.facts.chroma import ChromaFactStore
from ctxplugin.facts.chroma import _chroma_function as chroma_embedding_function
from ctxplugin.facts.embedding import HashingEmbedding, as_embeddings
from ctxplugin.facts.extract import Extractor, ExtractorLike, FactDraft, as_extractor, combine
from ctxplugin.facts.ledger import FactsLedger
from ctxplugin.facts.locks import WriteLock
from ctxplugin.facts.model import (
    AUTHORITY_RANK,
    Authority,
    Fact,
    FactKind,
    FactQuery,
    FactScope,
    MemoryType,
    ScoredFact,
    Source,
    SourceType,
    output_digest,
)
from ctxplugin.facts.outdated import mark_outdated
from ctxplugin.facts.rules import RuleExtractor
from ctxplugin.facts.store import FactStore, MemoryFactStore

__all__ = [
    "AUTHORITY_RANK",
    "Authority",
    "ChromaFactStore",
    "Extractor",
    "ExtractorLike",
    "Fact",
    "FactDraft",
    "FactKind",
    "FactQuery",
    "FactScope",
    "FactStore",
    "FactsLedger",
    "HashingEmbedding",
    "MemoryFactStore",
    "MemoryType",
    "RuleExtractor",
    "ScoredFact",
    "Source",
    "SourceType",
    "WriteLock",
    "as_embeddings",
    "as_extractor",
    "chroma_embedding_function",
    "combine",
    "identifiers",
    "mark_outdated",
    "output_digest",
    "words",
]
