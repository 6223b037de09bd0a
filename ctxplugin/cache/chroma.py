"""Chroma backend of the answer cache: embedded (``PersistentClient``) or a server (``HttpClient``).

One collection holds every partition; lookups filter on partition, signature and expiry in
Chroma's ``where`` and rank by the query embedding. Vectors come from the store's embedding (the
offline hashing one by default) and are passed explicitly; the collection gets the same
embedding as its function, so Chroma never loads or downloads a model of its own.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from ctxplugin._chroma import (
    http_client,
    keep_from_parent,
    reconnect_in_forked_children,
    same_process,
    translated,
)
from ctxplugin._server_url import client_settings
from ctxplugin.cache.store import CacheEntry
from ctxplugin.errors import StoreError
from ctxplugin.facts import chroma_embedding_function
from ctxplugin.facts._chroma_directory import EmbeddedDirectory, claim_embedded
from ctxplugin.facts.embedding import (
    as_embeddings,
    document_vectors,
    embedding_identity,
    query_vector,
)

DEFAULT_COLLECTION = "ctxplugin_answers"


class ChromaAnswerCacheStore:
    """Cached answers in a Chroma collection.

    Hit counts are written in batches (every :attr:`HIT_BATCH` hits, on :meth:`purge_expired`
    and on :meth:`close`); entries returned by this store include the counts not yet written.

    Build it with :meth:`persistent` (embedded, on disk), :meth:`http` (a Chroma server) or
    directly from any Chroma client (or a function returning one, connected on first use).

    Args:
        client: a Chroma client, or a zero-argument function returning one.
        collection: collection name prefix (the embedding's identity is appended).
        embedding: a LangChain ``Embeddings`` or a ``list[str] -> vectors`` callable; the
            offline :class:`~ctxplugin.facts.HashingEmbedding` when omitted.
    """

    HIT_BATCH = 64

    def __init__(
        self,
        client: Any,
        *,
        collection: str = DEFAULT_COLLECTION,
        embedding: Embeddings | Callable[[list[str]], Any] | None = None,
    ) -> None:
        self.embedding = as_embeddings(embedding)
        lazy = callable(client) and not hasattr(client, "get_or_create_collection")
        self._factory: Callable[[], Any] | None = client if lazy else None
        self._client: Any = None if lazy else client
        self.name = f"{collection}_{embedding_identity(self.embedding)}"
        self._collection: Any = None
        self._closed = False
        self._hits: dict[str, tuple[int, float]] = {}
        self._lock = threading.Lock()
        self._release: Callable[[], None] = lambda: None
        self._opened_in: int | None = None  # the process of an embedded client (see same_process)
        self._directory: EmbeddedDirectory | None = None  # an embedded client's, opened again if removed

    @classmethod
    def persistent(
        cls,
        path: str | Path,
        *,
        collection: str = DEFAULT_COLLECTION,
        embedding: Embeddings | Callable[[list[str]], Any] | None = None,
        wait_s: float = 5.0,
    ) -> ChromaAnswerCacheStore:
        """An embedded store on disk under ``path`` (created if missing; may be the facts'
        Chroma directory: the collections are separate), claimed for this process until
        :meth:`close`, as :meth:`ctxplugin.facts.ChromaFactStore.persistent` does.

        Raises:
            StoreInUseError: another process has the directory open (use a Chroma server).
            ConfigError: ``path`` is empty or cannot be a directory.
        """
        directory, release = claim_embedded(path, wait_s)
        store = cls(directory.open, collection=collection, embedding=embedding)
        store._release, store._opened_in, store._directory = release, os.getpid(), directory
        return store

    @classmethod
    def http(
        cls,
        url: str,
        *,
        collection: str = DEFAULT_COLLECTION,
        embedding: Embeddings | Callable[[list[str]], Any] | None = None,
        timeout: float = 5.0,
        headers: dict[str, str] | None = None,
        tenant: str | None = None,
        database: str | None = None,
    ) -> ChromaAnswerCacheStore:
        """A store on a Chroma server, e.g. ``http://127.0.0.1:8000`` (connected on first use;
        every HTTP request bounded by ``timeout`` seconds); ``headers`` go with every request (a
        token), ``tenant`` and ``database`` default to Chroma's.

        Raises:
            ConfigError: ``url`` is not an ``http(s)://[user:password@]host[:port]`` URL (a user
                and password in it are sent as Basic auth), or has them and ``headers`` an
                ``Authorization`` header too.
        """
        url, headers = client_settings(url, headers, timeout)  # a user and password in it: Authorization: Basic
        import chromadb  # noqa: F401  (imported now, not within the first call's deadline)

        def connect() -> Any:
            return http_client(url, timeout, headers, tenant, database)

        store = cls(connect, collection=collection, embedding=embedding)
        reconnect_in_forked_children(store)  # connected again, on its own, in a forked process
        return store

    def close(self) -> None:
        """Release the Chroma client if this store created it (``persistent`` / ``http``); a
        client passed in stays open for its owner. Later calls raise ``StoreError``."""
        here = self._opened_in in (None, os.getpid())  # not a parent's client, inherited by a fork
        if not self._closed and here:
            self.flush_hits()
        with self._lock:
            client, owned = self._client, self._factory is not None
            self._collection, self._factory, self._closed = None, None, True
            if owned:
                self._client = None
        if owned and client is not None and here and self._directory is not None:
            self._directory.close(client)  # unless the directory, opened again, closed it already
        elif owned and client is not None and here and callable(getattr(client, "close", None)):
            client.close()
        elif client is not None and not here:
            keep_from_parent(client)  # a parent's, inherited by a fork: never destroyed here
        self._release()

    def __enter__(self) -> ChromaAnswerCacheStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ AnswerCacheStore
    def put(self, entry: CacheEntry) -> None:
        vector = document_vectors(self.embedding, [entry.search_text])[0]
        with translated("store a cached answer", forget=self._forget):
            self._open().upsert(ids=[entry.key], documents=[entry.query], embeddings=[vector], metadatas=[_metadata(entry)])

    def candidates(self, partition: str, signature: str, query: str, *, now: float, n: int) -> list[tuple[CacheEntry, float]]:
        if n <= 0:
            return []
        vector = query_vector(self.embedding, query)
        where = {"$and": [{"partition": partition}, {"signature": signature}, {"expires_at": {"$gt": now}}]}
        with translated("look up cached answers", forget=self._forget):
            result = self._open().query(
                query_embeddings=[vector], n_results=n, where=where, include=["documents", "metadatas", "distances"]
            )
        rows = zip(result["ids"][0], (result["documents"] or [[]])[0], (result["metadatas"] or [[]])[0], (result["distances"] or [[]])[0], strict=True)
        with self._lock:
            pending = dict(self._hits)
        out: list[tuple[CacheEntry, float]] = []
        for key, doc, meta, distance in rows:
            entry = _entry(key, doc, meta)
            if key in pending:  # counted but not yet written
                count, at = pending[key]
                entry = entry.model_copy(update={"hit_count": entry.hit_count + count, "last_hit_at": at})
            out.append((entry, 1.0 - float(distance)))
        return out

    def record_hit(self, key: str, *, at: float) -> None:
        # a write costs an embedded Chroma tens of milliseconds, far more than the lookup: hits
        # are counted here and written every HIT_BATCH hits, on purge and on close
        with self._lock:
            count, _ = self._hits.get(key, (0, at))
            self._hits[key] = (count + 1, at)
            due = sum(c for c, _ in self._hits.values()) >= self.HIT_BATCH
        if due:
            self.flush_hits()

    def flush_hits(self) -> None:
        """Write the hit counts gathered since the last flush (read-modify-write: two processes
        flushing the same entry at the same instant may lose one's counts)."""
        with self._lock:
            pending, self._hits = self._hits, {}
        if not pending:
            return
        with translated("count cache hits", forget=self._forget):
            collection = self._open()
            found = collection.get(ids=list(pending), include=["metadatas"])
            keys, metas = [], []
            for key, meta in zip(found["ids"], found["metadatas"] or [], strict=True):
                count, at = pending[key]
                updated = dict(meta or {})
                updated["hit_count"] = int(updated.get("hit_count", 0)) + count
                updated["last_hit_at"] = float(at)
                keys.append(key)
                metas.append(updated)
            if keys:
                collection.update(ids=keys, metadatas=metas)

    def delete(self, keys: Sequence[str]) -> None:
        if keys:
            with self._lock:
                for key in keys:
                    self._hits.pop(key, None)
            with translated("delete cached answers", forget=self._forget):
                self._open().delete(ids=list(keys))

    def purge_expired(self, now: float) -> int:
        self.flush_hits()
        with translated("purge expired cached answers", forget=self._forget):
            result = self._open().delete(where={"expires_at": {"$lte": now}})
        deleted = result.get("deleted", 0) if isinstance(result, dict) else 0
        return int(deleted or 0)

    def count(self) -> int:
        """Entries stored, expired or not."""
        with translated("count cached answers", forget=self._forget):
            return int(self._open().count())

    # ------------------------------------------------------------------ internals
    def _forget(self) -> None:  # the collection gone from the server is opened (created) again
        self._collection = None

    def _open(self) -> Any:
        same_process(self._opened_in)
        if self._directory is not None and self._client is not None and (fresh := self._directory.reopened(self._client, self._forget)) is not None:
            self._client = fresh
        if self._collection is not None:
            return self._collection
        with self._lock:
            if self._closed:
                raise StoreError("this ChromaAnswerCacheStore was closed; build a new one")
            if self._collection is None:
                if self._client is None and self._factory is not None:
                    self._client = self._factory()
                self._collection = self._client.get_or_create_collection(
                    self.name,
                    embedding_function=chroma_embedding_function(self.embedding),
                    configuration={"hnsw": {"space": "cosine"}},
                )
        return self._collection


def _metadata(entry: CacheEntry) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "partition": entry.partition,
        "signature": entry.signature,
        "created_at": float(entry.created_at),
        "expires_at": float(entry.expires_at),
        "hit_count": entry.hit_count,
        "details": entry.details_json(),
    }
    if entry.last_hit_at is not None:
        meta["last_hit_at"] = float(entry.last_hit_at)
    return meta


def _entry(key: str, query: str | None, meta: Any) -> CacheEntry:
    m = dict(meta or {})
    return CacheEntry.from_columns(
        str(m.get("details", "{}")),
        key=key,
        query=query or "",
        partition=m.get("partition", ""),
        signature=m.get("signature", ""),
        created_at=float(m.get("created_at", 0.0)),
        expires_at=float(m.get("expires_at", 0.0)),
        hit_count=int(m.get("hit_count", 0)),
        last_hit_at=m.get("last_hit_at"),
    )


__all__ = ["DEFAULT_COLLECTION", "ChromaAnswerCacheStore"]
