"""Semantic answer cache: a repeated question in the same context is answered without the model.

Off by default; ``ContextConfig(cache=CacheConfig(enabled=True))`` or
``CTXPLUGIN_CACHE__ENABLED=true`` turns it on. The engine then exposes ``engine.cache`` and the
host adapters consult it before each model call (:meth:`ContextEngine.cached_answer`) and store
final answers after it (:meth:`ContextEngine.remember_answer`).

- :class:`AnswerCache`: lookup and store, with the checks that make a hit safe.
- :class:`CacheEntry`, :class:`CacheLookup`, :class:`CallContext`: the records involved.
- Stores: :class:`MemoryAnswerCacheStore`, :class:`ChromaAnswerCacheStore`; the port is
  :class:`AnswerCacheStore` (the Postgres store ships with ``ctxplugin-postgres``).
- Guards: :func:`same_wording` (default) and :func:`same_specifics`.
"""

from ctxplugin.cache.answer import (
    CACHE_META_KEY,
    AnswerCache,
    CacheLookup,
    make_answer_cache,
    uncacheable,
)
from ctxplugin.cache.chroma import ChromaAnswerCacheStore
from ctxplugin.cache.context import CacheScope, CallContext, call_context, model_identity, partition
from ctxplugin.cache.guard import (
    QueryGuard,
    normalize_query,
    same_specifics,
    same_wording,
    search_text,
    wording,
)
from ctxplugin.cache.store import AnswerCacheStore, CacheEntry, MemoryAnswerCacheStore

__all__ = [
    "CACHE_META_KEY",
    "AnswerCache",
    "AnswerCacheStore",
    "CacheEntry",
    "CacheLookup",
    "CacheScope",
    "CallContext",
    "ChromaAnswerCacheStore",
    "MemoryAnswerCacheStore",
    "QueryGuard",
    "call_context",
    "make_answer_cache",
    "model_identity",
    "normalize_query",
    "partition",
    "same_specifics",
    "same_wording",
    "search_text",
    "uncacheable",
    "wording",
]
