"""The semantic answer cache on Postgres: the ``semantic_cache`` table.

:class:`PostgresAnswerCacheStore` implements the :class:`ctxplugin.cache.AnswerCacheStore` port
so that every process of a deployment serves the same cached answers. It needs no extension:
query embeddings are ``real[]`` columns, stored at unit length, and similarity is a dot product
computed by Postgres over the rows of one partition and context signature (the lookup index
narrows to those first). It creates its table on first use (``CREATE ... IF NOT EXISTS`` under
an advisory lock, so concurrent first uses are safe); it does not need the package migrations.

    from ctxplugin_postgres.answer_cache import PostgresAnswerCacheStore
    engine = ContextEngine(config, cas=..., facts=...,
                           answer_cache=PostgresAnswerCacheStore.from_dsn(dsn))
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.embeddings import Embeddings
from psycopg_pool import ConnectionPool

from ctxplugin.cache import CacheEntry
from ctxplugin.facts.embedding import as_embeddings, document_vectors, query_vector
from ctxplugin_postgres._db import (
    DEFAULT_SCHEMA,
    POOL_TIMEOUT_S,
    Plan,
    Stmt,
    column_text,
    compose,
    json_column,
    json_value,
)
from ctxplugin_postgres._store import PooledStore, owned_pool

TABLE = "semantic_cache"

_DDL = (
    "SELECT pg_advisory_xact_lock(hashtext('ctxplugin-semantic-cache:' || %(schema)s))",
    "CREATE SCHEMA IF NOT EXISTS {s}",
    """CREATE TABLE IF NOT EXISTS {s}.semantic_cache (
        cache_key TEXT PRIMARY KEY,             -- hash(partition + query + context signature)
        partition_key TEXT NOT NULL,            -- who may be served: a session, a user, a tenant
        query_text TEXT NOT NULL,
        query_embedding REAL[] NOT NULL,        -- unit length: a dot product is the cosine
        answer_text TEXT NOT NULL,
        context_signature TEXT NOT NULL,        -- model, system prompt, tools, earlier questions
        used_refs TEXT[] NOT NULL DEFAULT '{{}}', -- CAS refs that must stay readable
        details JSONB NOT NULL,                 -- the answer, its facts, tool outputs and owner
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        ttl_expires_at TIMESTAMPTZ,
        hit_count INT NOT NULL DEFAULT 0,
        last_hit_at TIMESTAMPTZ
    )""",
    "CREATE INDEX IF NOT EXISTS semantic_cache_lookup_idx ON {s}.semantic_cache (partition_key, context_signature)",
    "CREATE INDEX IF NOT EXISTS semantic_cache_ttl_idx ON {s}.semantic_cache (ttl_expires_at) WHERE ttl_expires_at IS NOT NULL",
)
_COLUMNS = (
    "cache_key, partition_key, query_text, answer_text, context_signature, details, "
    "extract(epoch FROM created_at)::float8, extract(epoch FROM ttl_expires_at)::float8, hit_count, "
    "extract(epoch FROM last_hit_at)::float8"
)


class PostgresAnswerCacheStore(PooledStore):
    """Cached answers in the ``semantic_cache`` table of ``schema``.

    Args:
        pool: a psycopg ``ConnectionPool``.
        schema: the Postgres schema holding the table (created if missing).
        embedding: a LangChain ``Embeddings`` or a ``list[str] -> vectors`` callable; the offline
            :class:`~ctxplugin.facts.HashingEmbedding` when omitted. Every process sharing the
            table must use the same one.
        owns_pool: close ``pool`` in :meth:`close`.
    """

    _closed_message = "this PostgresAnswerCacheStore was closed; build a new one"
    _ready_what = "create the semantic_cache table"

    def __init__(
        self,
        pool: ConnectionPool,
        *,
        schema: str = DEFAULT_SCHEMA,
        embedding: Embeddings | Callable[[list[str]], Any] | None = None,
        owns_pool: bool = False,
    ) -> None:
        super().__init__(pool, schema=schema, owns_pool=owns_pool)
        self.embedding = as_embeddings(embedding)
        self._ddl = [compose(statement, schema) for statement in _DDL]
        table = "{s}.semantic_cache"
        self._put = compose(
            f"INSERT INTO {table} (cache_key, partition_key, query_text, query_embedding, answer_text, "
            "context_signature, used_refs, details, created_at, ttl_expires_at, hit_count, last_hit_at) "
            "VALUES (%(key)s, %(partition)s, %(query)s, %(vector)s, %(answer)s, %(signature)s, %(refs)s, "
            "%(details)s, to_timestamp(%(created)s), to_timestamp(%(expires)s), %(hits)s, to_timestamp(%(last_hit)s)) "
            "ON CONFLICT (cache_key) DO UPDATE SET partition_key = EXCLUDED.partition_key, "
            "query_text = EXCLUDED.query_text, query_embedding = EXCLUDED.query_embedding, "
            "answer_text = EXCLUDED.answer_text, context_signature = EXCLUDED.context_signature, "
            "used_refs = EXCLUDED.used_refs, details = EXCLUDED.details, created_at = EXCLUDED.created_at, "
            "ttl_expires_at = EXCLUDED.ttl_expires_at, hit_count = EXCLUDED.hit_count, last_hit_at = EXCLUDED.last_hit_at",
            schema,
        )
        self._candidates = compose(
            f"SELECT {_COLUMNS}, (SELECT sum(a * b) FROM unnest(query_embedding, %(vector)s::real[]) AS v(a, b)) AS similarity "
            f"FROM {table} WHERE partition_key = %(partition)s AND context_signature = %(signature)s "
            "AND ttl_expires_at > to_timestamp(%(now)s) ORDER BY similarity DESC NULLS LAST LIMIT %(n)s",
            schema,
        )
        self._hit = compose(
            f"UPDATE {table} SET hit_count = hit_count + 1, last_hit_at = to_timestamp(%(at)s) WHERE cache_key = %(key)s",
            schema,
        )
        self._delete = compose(f"DELETE FROM {table} WHERE cache_key = ANY(%(keys)s)", schema)
        self._purge = compose(f"DELETE FROM {table} WHERE ttl_expires_at <= to_timestamp(%(now)s)", schema)

    @classmethod
    def from_dsn(
        cls,
        dsn: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        embedding: Embeddings | Callable[[list[str]], Any] | None = None,
        timeout: float = POOL_TIMEOUT_S,
    ) -> PostgresAnswerCacheStore:
        """A store with its own small pool on ``dsn`` (closed with it)."""
        pool = owned_pool(dsn, schema=schema, max_size=4, timeout=timeout, name="ctxplugin-answers")
        return cls(pool, schema=schema, embedding=embedding, owns_pool=True)

    def close(self) -> None:
        """Close the pool if this store created it. Later calls raise ``StoreError``."""
        super().close()

    def __enter__(self) -> PostgresAnswerCacheStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ AnswerCacheStore
    def put(self, entry: CacheEntry) -> None:
        details = entry.model_dump(mode="json", include=_DETAILS)
        query = column_text(entry.query)
        if query != entry.query:  # a question with NUL: its column is encoded, the exact one kept beside
            details[_EXACT_QUERY] = entry.query
        params = {
            "key": entry.key,
            "partition": entry.partition,
            "query": query,
            "vector": _unit(document_vectors(self.embedding, [entry.search_text])[0]),
            "answer": column_text(entry.answer_text),  # never read back: the answer is in details
            "signature": entry.signature,
            "refs": list(entry.refs),
            # JSON text for a value JSONB refuses (a scope id or an answer with NUL or lone surrogates)
            "details": json_column(details),
            "created": entry.created_at,
            "expires": entry.expires_at,
            "hits": entry.hit_count,
            "last_hit": entry.last_hit_at,
        }

        def plan() -> Plan[None]:
            yield Stmt(self._put, params)

        self._run("store a cached answer", plan)

    def candidates(self, partition: str, signature: str, query: str, *, now: float, n: int) -> list[tuple[CacheEntry, float]]:
        if n <= 0:
            return []
        params = {
            "vector": _unit(query_vector(self.embedding, query)),
            "partition": partition,
            "signature": signature,
            "now": now,
            "n": n,
        }

        def plan() -> Plan[list[tuple[CacheEntry, float]]]:
            result = yield Stmt(self._candidates, params)
            return [(_entry(row), float(row[-1] or 0.0)) for row in result.rows]

        found: list[tuple[CacheEntry, float]] = self._run("look up cached answers", plan)
        return found

    def record_hit(self, key: str, *, at: float) -> None:
        def plan() -> Plan[None]:
            yield Stmt(self._hit, {"key": key, "at": at})

        self._run("count a cache hit", plan)

    def delete(self, keys: Sequence[str]) -> None:
        if not keys:
            return

        def plan() -> Plan[None]:
            yield Stmt(self._delete, {"keys": list(keys)})

        self._run("delete cached answers", plan)

    def purge_expired(self, now: float) -> int:
        def plan() -> Plan[int]:
            result = yield Stmt(self._purge, {"now": now})
            return max(0, result.rowcount)

        purged: int = self._run("purge expired cached answers", plan)
        return purged

    # ------------------------------------------------------------------ internals
    def _ready_plan(self) -> Plan[None]:
        # this table is created on demand rather than by the package migrations
        lock, *rest = self._ddl
        yield Stmt(lock, {"schema": self.schema})
        for statement in rest:
            yield Stmt(statement)


_DETAILS = {"query_norm", "answer", "owner", "facts", "tools", "refs"}
_EXACT_QUERY = "query"
"""The key of ``details`` holding the question when its ``query_text`` column is encoded."""


def _unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else [0.0 for _ in vector]


def _entry(row: tuple[Any, ...]) -> CacheEntry:
    key, partition, query, _answer, signature, stored, created, expires, hits, last_hit = row[:10]
    details = dict(json_value(stored))
    return CacheEntry.from_columns(
        details,
        key=key,
        partition=partition,
        query=details.pop(_EXACT_QUERY, query),
        signature=signature,
        created_at=float(created),
        expires_at=float(expires),
        hit_count=int(hits),
        last_hit_at=None if last_hit is None else float(last_hit),
    )


__all__ = ["TABLE", "PostgresAnswerCacheStore"]
