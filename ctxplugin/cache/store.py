"""What a cached answer is (:class:`CacheEntry`), the store port, and the in-memory store.

A store keeps entries and the embeddings of their normalised queries. It knows nothing about
validity beyond expiry: the :class:`~ctxplugin.cache.answer.AnswerCache` decides whether an
entry may serve a call. Every backend passes the same contract suite (``tests/cache``).
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from langchain_core.embeddings import Embeddings
from langchain_core.messages import AIMessage
from pydantic import BaseModel, ConfigDict, Field

from ctxplugin._untrusted import json_text
from ctxplugin.cache.guard import search_text
from ctxplugin.facts.embedding import as_embeddings, document_vectors, query_vector
from ctxplugin.scope import Scope
from ctxplugin.tokens import content_text


class CacheEntry(BaseModel):
    """One cached final answer and what it depended on.

    Attributes:
        key: ``sha256(partition, normalised query, signature)``; storing the same question in
            the same context again replaces the entry.
        partition: who may be served this answer (a session, a user, or everyone in a tenant).
        signature: hash of what must be identical for a hit: model, system prompt, tool set and
            the earlier questions of the conversation.
        query: the user's question as asked.
        query_norm: the question normalised (:func:`~ctxplugin.cache.guard.normalize_query`).
        answer: the answer's ``content``, ``additional_kwargs``, ``response_metadata`` and ``name``.
        owner: the scope of the call that produced the answer.
        facts: id -> content key (``"<key>|<text hash>"``) of every fact placed in that call's view.
        tools: the tool outputs of the conversation: a ref, or ``tool:<hash>`` of a small output.
        refs: refs that must stay readable for the answer to stay valid.
        created_at / expires_at: epoch seconds; an expired entry is never returned.
        hit_count / last_hit_at: how often and when it last served a call.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    partition: str
    signature: str
    query: str
    query_norm: str
    answer: dict[str, Any]
    owner: Scope
    facts: dict[str, str] = Field(default_factory=dict)
    tools: tuple[str, ...] = ()
    refs: tuple[str, ...] = ()
    created_at: float
    expires_at: float
    hit_count: int = 0
    last_hit_at: float | None = None

    @property
    def search_text(self) -> str:
        """What stores embed for this entry (:func:`~ctxplugin.cache.guard.search_text`)."""
        return search_text(self.query_norm)

    @property
    def answer_text(self) -> str:
        """The answer as plain text."""
        return content_text(self.answer.get("content", ""))

    def message(self, *, message_id: str) -> AIMessage:
        """The cached answer as a fresh ``AIMessage`` (new id, no token usage), without what ties
        it to the provider's record of the conversation that made it: the response id (a model
        with OpenAI's ``use_previous_response_id`` would continue that conversation from it), the
        ids of its text output items, and its reasoning items."""
        kwargs = {k: v for k, v in (self.answer.get("additional_kwargs") or {}).items() if k != "reasoning"}
        metadata = {k: v for k, v in (self.answer.get("response_metadata") or {}).items() if k != "id"}
        return AIMessage(
            content=_unlinked(self.answer.get("content", "")),
            additional_kwargs=kwargs,
            response_metadata=metadata,
            name=self.answer.get("name"),
            id=message_id,
        )

    def details_json(self) -> str:
        """Everything except the fields stores keep in their own columns, as JSON (with ``\\u``
        escapes where a scope id holds lone surrogates, which no store takes as text)."""
        return json_text(
            self.model_dump(mode="json", exclude={"key", "partition", "signature", "query", "created_at", "expires_at", "hit_count", "last_hit_at"}),
            separators=(",", ":"),
        )

    @classmethod
    def from_columns(cls, details: str | dict[str, Any], **columns: Any) -> CacheEntry:
        """Rebuild an entry from :meth:`details_json` and the stored columns."""
        data = json.loads(details) if isinstance(details, str) else dict(details)
        return cls.model_validate({**data, **columns})


def _unlinked(content: Any) -> Any:
    """``content`` without reasoning blocks and without the provider ids of its text blocks
    (other blocks keep theirs: a server tool's call needs its id, which its result names)."""
    if not isinstance(content, list):
        return content
    return [
        {k: v for k, v in block.items() if k != "id"} if isinstance(block, dict) and block.get("type") == "text" else block
        for block in content
        if not (isinstance(block, dict) and block.get("type") == "reasoning")
    ]


def answer_fields(message: AIMessage) -> dict[str, Any]:
    """What of an ``AIMessage`` is kept: content, extra kwargs, provider metadata, name.

    ctxplugin's own per-call report is dropped from ``response_metadata`` (it described the
    original call, not the one being served)."""
    metadata = {k: v for k, v in message.response_metadata.items() if not k.startswith("ctxplugin")}
    fields: dict[str, Any] = json.loads(
        json.dumps(
            {
                "content": message.content,
                "additional_kwargs": message.additional_kwargs,
                "response_metadata": metadata,
                "name": message.name,
            },
            default=str,
        )
    )
    return fields


@runtime_checkable
class AnswerCacheStore(Protocol):
    """Where cached answers live. Five methods; synchronous; safe to share between threads.

    Backend failures surface as :class:`~ctxplugin.errors.StoreError` (or
    :class:`~ctxplugin.errors.StoreUnavailableError`), chained with ``from``; the engine then
    calls the model as if the cache were off and records a warning.
    """

    def put(self, entry: CacheEntry) -> None:
        """Store ``entry``, replacing any entry with the same key (embedding ``entry.search_text``)."""
        ...

    def candidates(self, partition: str, signature: str, query: str, *, now: float, n: int) -> list[tuple[CacheEntry, float]]:
        """Up to ``n`` unexpired entries of ``partition`` with ``signature``, the most similar to
        ``query`` (a search text, see :attr:`CacheEntry.search_text`) first, each with its cosine
        similarity."""
        ...

    def record_hit(self, key: str, *, at: float) -> None:
        """Count one served hit of ``key`` (unknown keys are ignored)."""
        ...

    def delete(self, keys: Sequence[str]) -> None:
        """Remove entries (unknown keys are ignored)."""
        ...

    def purge_expired(self, now: float) -> int:
        """Remove entries expired at ``now``; returns how many."""
        ...


class MemoryAnswerCacheStore:
    """Cached answers in a dict; exact cosine over the entries of one partition and signature
    (a scan: fine for tests and one process, use Chroma or Postgres for many entries).

    Args:
        embedding: a LangChain ``Embeddings`` or a ``list[str] -> vectors`` callable; the
            offline :class:`~ctxplugin.facts.HashingEmbedding` when omitted.
    """

    def __init__(self, embedding: Embeddings | Callable[[list[str]], Any] | None = None) -> None:
        self.embedding = as_embeddings(embedding)
        self._entries: dict[str, tuple[CacheEntry, dict[int, float]]] = {}
        self._lock = threading.Lock()

    def put(self, entry: CacheEntry) -> None:
        vector = _unit(document_vectors(self.embedding, [entry.search_text])[0])
        with self._lock:
            self._entries[entry.key] = (entry, vector)

    def candidates(self, partition: str, signature: str, query: str, *, now: float, n: int) -> list[tuple[CacheEntry, float]]:
        if n <= 0:
            return []
        with self._lock:
            pool = [
                (entry, vector)
                for entry, vector in self._entries.values()
                if entry.partition == partition and entry.signature == signature and entry.expires_at > now
            ]
        if not pool:
            return []
        wanted = _unit(query_vector(self.embedding, query))
        scored = [(entry, _dot(wanted, vector)) for entry, vector in pool]
        scored.sort(key=lambda pair: pair[1], reverse=True)
        return scored[:n]

    def record_hit(self, key: str, *, at: float) -> None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                entry, vector = found
                self._entries[key] = (entry.model_copy(update={"hit_count": entry.hit_count + 1, "last_hit_at": at}), vector)

    def delete(self, keys: Sequence[str]) -> None:
        with self._lock:
            for key in keys:
                self._entries.pop(key, None)

    def purge_expired(self, now: float) -> int:
        with self._lock:
            expired = [key for key, (entry, _) in self._entries.items() if entry.expires_at <= now]
            for key in expired:
                del self._entries[key]
        return len(expired)

    def get(self, key: str) -> CacheEntry | None:
        """The entry stored under ``key`` (expired or not), for inspection."""
        with self._lock:
            found = self._entries.get(key)
        return found[0] if found else None

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


def _unit(vector: Sequence[float]) -> dict[int, float]:
    """The non-zero components of ``vector`` scaled to length 1 (hashed vectors are sparse,
    so a dot product over them is cosine similarity at a fraction of the cost)."""
    norm = math.sqrt(sum(x * x for x in vector))
    return {i: x / norm for i, x in enumerate(vector) if x} if norm else {}


def _dot(a: dict[int, float], b: dict[int, float]) -> float:
    if len(a) > len(b):
        a, b = b, a
    return sum(x * b[i] for i, x in a.items() if i in b)


__all__ = ["AnswerCacheStore", "CacheEntry", "MemoryAnswerCacheStore", "answer_fields"]
