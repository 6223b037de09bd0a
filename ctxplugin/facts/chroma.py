"""Chroma backend of the fact store: embedded (``PersistentClient``) or a server (``HttpClient``).

Vectors are computed by the store's embedding and passed to Chroma explicitly; the collection
is also given that embedding as its embedding function, so Chroma never loads (or downloads)
its own default model. Chroma's errors are translated here, chained with ``from``.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from ctxplugin._chroma import keep_from_parent, reconnect_in_forked_children, same_process
from ctxplugin.config import FactsConfig, facts_settings
from ctxplugin.errors import StoreError
from ctxplugin.facts._chroma_clients import (
    _close_http_session,
    _http_connector,
    _open_persistent,
    legacy_embedding,
)
from ctxplugin.facts._chroma_codec import (
    find_where,
    from_metadata,
    lookup_wheres,
    may_match,
    search_where,
)
from ctxplugin.facts._chroma_directory import EmbeddedDirectory, bump, writes_counter
from ctxplugin.facts._chroma_embedding import _chroma_function as _chroma_function
from ctxplugin.facts._chroma_embedding import _translated
from ctxplugin.facts._chroma_lexical import _LexicalIndexes, _tag
from ctxplugin.facts._chroma_messages import MessageFacts
from ctxplugin.facts._chroma_query import _WIDER, _query, _rank_exactly
from ctxplugin.facts._chroma_windows import SharedWindows
from ctxplugin.facts._chroma_write import batch_size, delete_withdrawn, grouped, upsert
from ctxplugin.facts.embedding import (
    as_embeddings,
    document_vectors,
    embedding_identity,
    query_vector,
)
from ctxplugin.facts.lexical import terms
from ctxplugin.facts.model import Fact, FactQuery, matches, reader_keys, revises
from ctxplugin.scope import Scope

_RETRY_UNFILTERED = 32
_MEMO_READERS = 4096


class ChromaFactStore(SharedWindows, MessageFacts):
    """Facts in a Chroma collection: one shared collection filtered by tenant metadata, or one
    collection per tenant (``config.collection_per_tenant``).

    Build it with :meth:`persistent` (embedded, on disk), :meth:`http` (a Chroma server) or
    :meth:`from_client` (any Chroma client you configured).

    Args:
        client: a Chroma client, or a function returning one (connected on first use).
        config: facts configuration (collection name, embedding size, per-tenant collections).
        embedding: a LangChain ``Embeddings``, a Chroma embedding function or a callable; when
            omitted, the one ``config.embedding`` names: with ``"auto"`` (the default) the
            offline :class:`~ctxplugin.facts.static.StaticEmbedding`, or the
            :class:`~ctxplugin.facts.embedding.HashingEmbedding` when the client already holds
            this deployment's facts collection built with it and none built with the static one
            (decided when the client connects, so facts written before keep being found).
    """

    def __init__(
        self,
        client: Any,
        *,
        config: FactsConfig | None = None,
        embedding: Embeddings | Callable[[list[str]], Any] | None = None,
    ) -> None:
        self.config = facts_settings(config)  # a ContextConfig's facts settings too
        self.embedding = as_embeddings(embedding, self.config.embedding_dims, self.config.embedding)
        self._auto = embedding is None and self.config.embedding == "auto"
        self._client_factory: Callable[[], Any] | None = client if callable(client) and not hasattr(client, "get_or_create_collection") else None
        self._client: Any = None if self._client_factory is not None else client
        self._collections: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._base = f"{self.config.collection}_{embedding_identity(self.embedding)}"
        self._owns_client = False
        self._release: Callable[[], None] = lambda: None
        self._opened_in: int | None = None  # the process of an embedded client (see same_process)
        self._directory: EmbeddedDirectory | None = None  # an embedded client's, opened again if removed
        # readers whose facts are a small share of the collection: search with the filter at once
        self._filter_first: dict[str, int] = {}
        # collection name -> (lexical index, when it last checked for others' writes)
        self._lexical = _LexicalIndexes()
        self._writes: list[int] | None = None  # this process's writes, when no other process writes

    @property
    def generation(self) -> int | None:
        """Changes with every write (see :class:`~ctxplugin.facts.store.FactStore`): counted for an
        embedded store, which only this process writes; None for a server's or a client passed in."""
        return None if self._writes is None else self._writes[0]

    @property
    def revisions(self) -> int | None:
        """Changes with every write that can change what is in force (see ``generation``)."""
        return None if self._writes is None else self._writes[1]

    # ------------------------------------------------------------------ construction
    @classmethod
    def persistent(
        cls,
        path: str | Path,
        *,
        config: FactsConfig | None = None,
        embedding: Embeddings | Callable[[list[str]], Any] | None = None,
        wait_s: float = 5.0,
    ) -> ChromaFactStore:
        """An embedded store on disk under ``path`` (created if missing), for this process alone.
        The directory is claimed for this process until :meth:`close` (see
        :func:`ctxplugin._chroma.claim_directory`); another process waits up to ``wait_s``
        seconds for it, then is refused.

        Raises:
            StoreInUseError: another process has the directory open (use a Chroma server).
            StoreError: Chroma cannot open the directory (``ConfigError``: ``path`` is empty or no directory).
        """
        client, release, directory = _open_persistent(path, wait_s)
        store = cls(client, config=config, embedding=embedding)
        store._owns_client, store._release, store._opened_in = True, release, os.getpid()
        store._writes, store._directory = writes_counter(path), directory
        return store

    @classmethod
    def http(
        cls,
        url: str,
        *,
        config: FactsConfig | None = None,
        embedding: Embeddings | Callable[[list[str]], Any] | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 5.0,
        tenant: str | None = None,
        database: str | None = None,
    ) -> ChromaFactStore:
        """A store on a Chroma server (``chroma run``), e.g. ``http://127.0.0.1:8000``; ``headers``
        go with every request (a token), ``tenant`` and ``database`` default to Chroma's.

        The connection is made on first use, so an engine can start while the server is down;
        each failing call raises :class:`~ctxplugin.errors.StoreUnavailableError`, which the
        engine reports as "facts skipped". A forked process connects again, on its own.
        Every HTTP request is bounded by ``timeout`` seconds (``stores.timeout`` through
        :func:`ctxplugin.connect`).

        Raises:
            ConfigError: ``url`` is not ``http(s)://[user:password@]host[:port]`` (a user and password sent as Basic auth), or has them and ``headers`` an Authorization.
        """
        connect = _http_connector(url, headers, timeout, tenant, database)
        store = cls(connect, config=config, embedding=embedding)
        store._owns_client = True
        reconnect_in_forked_children(store)
        return store

    @classmethod
    def from_client(
        cls,
        client: Any,
        *,
        config: FactsConfig | None = None,
        embedding: Embeddings | Callable[[list[str]], Any] | None = None,
    ) -> ChromaFactStore:
        """A store on a Chroma client you built (``PersistentClient``, ``HttpClient``...)."""
        return cls(client, config=config, embedding=embedding)

    def close(self) -> None:
        """Release the Chroma client if this store created it (``persistent`` / ``http``);
        a client passed to :meth:`from_client` stays open for its owner."""
        with self._lock:
            client, owned = self._client, self._owns_client
            self._forget()
            if owned:
                self._client = None
        if owned and client is not None and self._opened_in in (None, os.getpid()):  # not a parent's
            if self._directory is not None:
                self._directory.close(client)  # unless the directory, opened again, closed it already
            else:
                client.close()
            _close_http_session(client)
        elif client is not None:
            keep_from_parent(client)  # a parent's, inherited by a fork: never destroyed here
        if owned:
            self._release()

    def __enter__(self) -> ChromaFactStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ FactStore
    def add(self, facts: Sequence[Fact]) -> None:
        self.write(facts, ())

    def update(self, facts: Sequence[Fact]) -> None:
        self.write((), facts)

    def write(self, added: Sequence[Fact], updated: Sequence[Fact]) -> None:
        """:meth:`add` ``added`` and :meth:`update` ``updated`` in one upsert per collection and
        batch (a Chroma write costs milliseconds however few records it holds), each all or
        nothing. The changed facts keep the vectors stored with them (read back, not computed
        again), so the store ends as the two calls would leave it."""
        if not (groups := grouped(added, updated)):
            return
        revised = bool(updated) or any(map(revises, added))
        bump(self._writes, revised=revised)  # counted at both ends: no answer kept before the write is served during it
        try:
            with _translated("store facts", self._forget):
                self._client_now()  # the embedding is settled once connected
                texts = [f.text for f in added]
                vectors = {f.id: v for f, v in zip(added, document_vectors(self.embedding, texts) if texts else [], strict=True)}
                for tenant, (new, changed) in groups.items():
                    collection = self._collection(tenant)
                    index = self._lexical.get(collection.name)
                    upsert(collection, new, changed, vectors, max(1, batch_size(self._client_now())), index[0] if index else None)
        finally:  # and once done (or failed part way): what a search read meanwhile is kept under a count gone
            bump(self._writes, revised=revised)

    def withdraw(self, owner: Scope, outputs: Mapping[str, Collection[str]]) -> list[Fact]:
        """Delete the facts :func:`~ctxplugin.facts.model.withdrawn` names: one read, one delete (more for thousands)."""
        try:
            with _translated("withdraw facts", self._forget):
                collection = self._collection(owner.tenant_id or "")
                index = self._lexical.get(collection.name)
                bump(self._writes if outputs else None, revised=True)  # counted at both ends, as a write
                return delete_withdrawn(collection, owner, outputs, index[0] if index else None) if outputs else []
        finally:  # as after a write: what a search read meanwhile is kept under a count gone
            bump(self._writes if outputs else None, revised=True)

    def get(self, ids: Sequence[str], *, reader: Scope) -> list[Fact]:
        if not ids:
            return []
        found = {f.id: f for f in self._fetch(reader, ids=list(ids))}
        ordered = [found[i] for i in ids if i in found]
        return [f for f in ordered if reader.can_read(f.owner, f.visibility)]

    def find(self, query: FactQuery, *, limit: int | None = None) -> list[Fact]:
        facts = [f for f in self._fetch(query.reader, find_where(query)) if matches(f, query)]
        facts.sort(key=lambda f: f.created_at, reverse=True)
        return facts if limit is None else facts[:limit]

    def lookup(self, reader: Scope, *, keys: Sequence[str], hashes: Sequence[str]) -> list[Fact]:
        """The facts ``reader`` may read whose key is among ``keys`` or text hash among
        ``hashes``, in any state, in one request (what an ingest's decisions will look up)."""
        found = {f.id: f for where in lookup_wheres(reader, keys, hashes) for f in self._fetch(reader, where)}
        return [f for f in found.values() if reader.can_read(f.owner, f.visibility)]

    def _fetch(self, reader: Scope, where: dict[str, Any] | None = None, ids: list[str] | None = None) -> list[Fact]:
        """The facts of ``reader``'s collection matching ``where`` or with these ``ids``."""
        with _translated("read facts", self._forget):
            result = self._collection(reader.tenant_id or "").get(ids=ids, where=where, include=["documents", "metadatas"])
        return [from_metadata(i, doc, meta) for i, doc, meta in zip(result["ids"], result["documents"] or [], result["metadatas"] or [], strict=True)]

    def search(self, text: str, query: FactQuery, *, n: int) -> list[tuple[Fact, float]]:
        """Nearest facts matching ``query``.

        Chroma evaluates a metadata filter by listing every matching record, which costs more
        than the vector search itself when the filter keeps most of a collection (one user's
        facts). So the nearest ``n``, then ``8n``, are fetched unfiltered and filtered here; that
        answer stands when it holds ``n`` matches or ranked every record. Else (a collection shared
        by many readers, many superseded facts) the query is repeated with the filter, so what a
        reader finds never depends on others' facts; such a reader is filtered for at once later.
        """
        if n <= 0:
            return []
        memo_key = "\x00".join(reader_keys(query.reader))
        with _translated("search facts", self._forget):
            collection = self._collection(query.reader.tenant_id or "")
            vector = query_vector(self.embedding, text)
            tries = self._filter_first.get(memo_key, 0)
            if tries == 0 or tries % _RETRY_UNFILTERED == 0:
                for wide in (n, n * _WIDER):
                    found, _ = _query(collection, vector, wide, None, query)
                    # a short answer stands only when every stored record was ranked (the count
                    # is asked only then: it costs as much as a third of the query at 10k facts)
                    if len(found) >= n or wide >= collection.count():
                        self._filter_first.pop(memo_key, None)
                        return found[:n]
            self._remember_filter(memo_key)
            where = search_where(query)
            found, _ = _query(collection, vector, n, where, query)
            if len(found) < n:
                # a filter that keeps only a few records is where the index's filtered search
                # can come back short: rank those few exactly instead
                found = _rank_exactly(collection, vector, n, where, query) or found
            return found

    def search_lexical(self, text: str, query: FactQuery, *, n: int) -> list[tuple[Fact, float]]:
        """Up to ``n`` facts matching ``query`` that share rarer words or identifiers with
        ``text``, best BM25 score first.

        Chroma's own sparse index is not available to a local client, and its document filter
        (``$contains``) is case-sensitive and takes 5-15 ms per term at 10k facts, so the store
        keeps a :class:`~ctxplugin.facts.lexical.LexicalIndex` per owner slot of each collection
        in the process (a reader's scores never depend on others' facts): read once on the first lexical search (reading 10k facts from Chroma takes about 0.15 s,
        indexing them longer), kept current by this store's writes, and brought up to date with
        facts other processes wrote when the collection's count differs from it (checked at most
        every two seconds). The hits are read back from Chroma: their validity is the stored one.
        """
        if n <= 0 or not terms(text):
            return []
        readable = frozenset(reader_keys(query.reader))
        with _translated("search facts", self._forget):
            collection = self._collection(query.reader.tenant_id or "")
            index = self._lexical.current(collection)
            hits = index.search(text, n=n, slots=readable, allow=lambda _, tag: may_match(tag, query, readable))
            if not hits:
                return []
            result = collection.get(ids=[i for i, _ in hits], include=["documents", "metadatas"])
        found: dict[str, Fact] = {}
        for i, doc, meta in zip(result["ids"], result["documents"] or [], result["metadatas"] or [], strict=True):
            index.retag(i, _tag(meta))
            if may_match(meta, query, readable):
                fact = from_metadata(i, doc, meta)
                if matches(fact, query):
                    found[i] = fact
        return [(found[i], score) for i, score in hits if i in found]

    def _forget(self) -> None:  # a collection gone from the server is opened (created) again
        self._collections.clear()
        self._lexical.clear()

    def _remember_filter(self, memo_key: str) -> None:
        with self._lock:
            self._filter_first[memo_key] = self._filter_first.get(memo_key, 0) + 1
            while len(self._filter_first) > _MEMO_READERS:
                self._filter_first.pop(next(iter(self._filter_first)))

    def open(self, reader: Scope) -> None:
        """Connect and open the collection ``reader``'s facts live in, as the first read or write would:
        the ledger calls it before taking a write lock others wait for (a client connects in about 1 s).

        Raises:
            StoreUnavailableError: the server cannot be reached.
        """
        self.raw_collection(reader.tenant_id)

    # ------------------------------------------------------------------ internals
    def collection_name(self, tenant_id: str | None) -> str:
        """The Chroma collection holding ``tenant_id``'s facts (lone surrogates in it kept)."""
        if not self.config.collection_per_tenant:
            return self._base
        digest = hashlib.sha1(tenant_id.encode(errors="surrogatepass")).hexdigest()[:12] if tenant_id else "default"
        return f"{self._base}_t{digest}"

    def raw_collection(self, tenant_id: str | None = None) -> Any:
        """The underlying Chroma collection (for benchmarks and inspection)."""
        with _translated("open the facts collection", self._forget):
            return self._collection(tenant_id or "")

    def _client_now(self) -> Any:
        same_process(self._opened_in)
        if self._client is None:
            if self._client_factory is None:
                raise StoreError("this ChromaFactStore was closed; build a new one")
            with self._lock:
                if self._client is None:
                    self._client = self._client_factory()
        elif self._directory is not None and (fresh := self._directory.reopened(self._client, self._forget)) is not None:
            self._client = fresh
        if self._auto:
            self._settle_embedding(self._client)
        return self._client

    def _settle_embedding(self, client: Any) -> None:
        """``embedding="auto"``: keep the hashing embedding where this deployment's facts were
        written with it (its collection exists and no static one does)."""
        with self._lock:
            if not self._auto:
                return
            legacy = legacy_embedding(client, self.config, self._base)
            if legacy is not None:
                self.embedding, self._base = legacy
            self._auto = False

    def _collection(self, tenant: str) -> Any:
        client = self._client_now()  # settles the embedding, and so the collection name
        name = self.collection_name(tenant or None)
        found = self._collections.get(name)
        if found is not None:
            return found
        with self._lock:
            found = self._collections.get(name)
            if found is None:
                found = self._collections[name] = client.get_or_create_collection(name, embedding_function=_chroma_function(self.embedding), configuration={"hnsw": {"space": "cosine"}})
        return found


__all__ = ["ChromaFactStore"]
