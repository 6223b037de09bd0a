"""The semantic answer cache: serve a repeated question's answer without calling the model.

An entry may serve a call when every check below passes, cheapest first:

1. same partition (session, user or tenant, per ``config.cache.scope``) and same signature
   (model, system prompt, tool set, earlier questions) — the store only returns those;
2. not expired (``config.cache.ttl_seconds``);
3. the same question: equal once normalised, or an embedding similarity of at least
   ``config.cache.threshold`` *and* the guard's consent (:mod:`ctxplugin.cache.guard`);
4. nothing new: every fact in the current view and every tool output of the conversation was
   there when the answer was made (facts read from the conversation's own user messages aside:
   the questions already cover them);
5. nothing stale: every fact the answer used is still valid (not superseded) and every ref it
   used is still readable — otherwise the entry is deleted;
6. nothing hidden: the caller may read every fact and tool output the answer was built from
   (matters when answers are shared between sessions).

Answers that call tools, are empty or were cut short (at a token limit, or by a filter or a
safety classifier, as any provider reports it) are never stored, nor answers given after a tool
call of their turn failed.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage

from ctxplugin._untrusted import valid_unicode
from ctxplugin.cache.context import SAID, CallContext, legacy_partition, partition
from ctxplugin.cache.guard import QueryGuard, same_wording, search_text
from ctxplugin.cache.store import (
    AnswerCacheStore,
    CacheEntry,
    MemoryAnswerCacheStore,
    answer_fields,
)
from ctxplugin.cas import CASStore, RefExistence
from ctxplugin.config import CacheConfig
from ctxplugin.errors import ConfigError, RefNotFoundError
from ctxplugin.facts import FactsLedger
from ctxplugin.scope import Scope
from ctxplugin.tokens import content_text

CACHE_META_KEY = "ctxplugin_cache"
"""Key in a served answer's ``response_metadata`` that marks it as cached."""

# Why a provider stopped, under the keys its LangChain class reports it (OpenAI, Mistral and
# Gemini ``finish_reason``, Gemini in capitals; Anthropic ``stop_reason``; Bedrock Converse
# ``stopReason``; Ollama ``done_reason``), when the answer is not whole: cut at a token limit,
# stopped by a filter or a safety classifier, failed (Mistral ``error``), or paused mid-turn
# (Claude ``pause_turn``, resumed by the next call).
_STOP_KEYS = ("finish_reason", "stop_reason", "stopReason", "done_reason")
_CUT_SHORT = frozenset({
    "length", "max_tokens", "max_output_tokens", "model_context_window_exceeded", "model_length",
    "error", "pause_turn",
    "content_filter", "content_filtered", "guardrail_intervened", "refusal",
    "safety", "image_safety", "recitation", "blocklist", "prohibited_content", "spii",
})
_PURGE_EVERY = 256


@dataclass(frozen=True)
class CacheLookup:
    """The outcome of one lookup.

    Attributes:
        hit: whether a cached answer serves the call.
        message: the answer to return instead of calling the model (on a hit).
        entry: the entry that served it.
        similarity: similarity of the best candidate's question (1.0 when equal).
        reason: on a miss, why the best candidate was refused ("no cached answer" if none).
    """

    hit: bool
    message: AIMessage | None = None
    entry: CacheEntry | None = None
    similarity: float = 0.0
    reason: str = ""


class AnswerCache:
    """Cached final answers over an :class:`~ctxplugin.cache.store.AnswerCacheStore`.

    Args:
        store: where entries live (memory, Chroma, Postgres).
        config: threshold, TTL and sharing scope.
        guard: vetoes near-duplicate questions that need different answers;
            :func:`~ctxplugin.cache.guard.same_wording` by default.
        clock: current time in epoch seconds (for tests and replays).
        candidates: how many similar entries are checked per lookup.
    """

    def __init__(
        self,
        store: AnswerCacheStore,
        config: CacheConfig | None = None,
        *,
        guard: QueryGuard = same_wording,
        clock: Callable[[], float] = time.time,
        candidates: int = 8,
    ) -> None:
        if not isinstance(store, AnswerCacheStore):
            raise ConfigError(f"store must implement AnswerCacheStore, got {type(store).__name__}")
        if candidates < 1:
            raise ConfigError(f"candidates must be at least 1, got {candidates}")
        self.store = store
        self.config = config or CacheConfig(enabled=True)
        self.guard = guard
        self.clock = clock
        self.candidates = candidates
        self._puts = 0

    # ------------------------------------------------------------------ lookup
    def lookup(self, call: CallContext, *, cas: CASStore, ledger: FactsLedger | None) -> CacheLookup:
        """The cached answer that may serve ``call``, if any.

        Raises:
            StoreError: a store (cache, CAS or facts) failed.
        """
        now = self.clock()
        query = search_text(call.query_norm)
        found = self.store.candidates(call.partition, call.signature, query, now=now, n=self.candidates)
        old = legacy_partition(call.scope, call.mode)
        # answers stored by earlier versions, under the pipe-joined key; never one with undecodable
        # bytes (a lone surrogate) or NUL, which no store kept and a filter refuses as a whole
        if old != call.partition and valid_unicode(old) is old and "\x00" not in old:
            found += self.store.candidates(old, call.signature, query, now=now, n=self.candidates)
            found.sort(key=lambda pair: pair[1], reverse=True)
            found = found[: self.candidates]
        reasons: list[str] = []
        for entry, similarity in found:
            reason = self._refusal(entry, similarity, call, now)
            if reason is None:
                reason, stale = self._verify(entry, call, cas, ledger)
                if stale:
                    self.store.delete([entry.key])
            if reason is None:
                self.store.record_hit(entry.key, at=now)
                return CacheLookup(hit=True, message=_served(entry, similarity), entry=entry, similarity=similarity)
            reasons.append(reason)
        best = found[0][1] if found else 0.0
        return CacheLookup(hit=False, similarity=best, reason=reasons[0] if reasons else "no cached answer")

    def _refusal(self, entry: CacheEntry, similarity: float, call: CallContext, now: float) -> str | None:
        if partition(entry.owner, call.mode) != call.partition:
            # only an entry stored under an ambiguous key of earlier versions gets here
            return "the cached answer belongs to another scope"
        if entry.expires_at <= now or entry.created_at + self.config.ttl_seconds <= now:
            return "expired"  # by the TTL it was stored under, or by today's, if shorter
        if entry.query_norm != call.query_norm:
            if similarity < self.config.threshold:
                return f"similarity {similarity:.3f} below {self.config.threshold}"
            vetoed = self.guard(entry.query, call.query)
            if vetoed:
                return vetoed
        if not call.tools <= set(entry.tools):
            return "the conversation has tool outputs the cached answer did not see"
        if not _knowledge(call.facts) <= _knowledge(entry.facts):
            return "the view has facts the cached answer did not see"
        return None

    def _verify(self, entry: CacheEntry, call: CallContext, cas: CASStore, ledger: FactsLedger | None) -> tuple[str | None, bool]:
        """Checks 5 and 6: ``(reason, stale)``; a stale entry is deleted by the caller."""
        if entry.facts:
            if ledger is None:
                return "facts are off: the facts the answer used cannot be checked", False
            current = {f.id: f for f in ledger.store.get(list(entry.facts), reader=entry.owner)}
            for fact_id in entry.facts:
                fact = current.get(fact_id)
                if fact is None or ledger.withholds(fact):
                    return f"fact {fact_id} the answer used was withdrawn", True
                if not fact.is_valid or fact.superseded_by is not None:
                    return f"fact {fact_id} the answer used was superseded", True
        foreign = call.scope != entry.owner
        for ref in entry.refs:
            if _readable(cas, ref, call.scope):
                continue
            if foreign and _readable(cas, ref, entry.owner):
                return f"the cached answer used {ref}, which this caller may not read", False
            return f"ref {ref} the answer used has expired", True
        if not foreign:
            return None, False
        # a small tool output (no ref) lives only in the conversation that produced it
        if any(a not in call.tools and not a.startswith("ref:") for a in entry.tools):
            return "the cached answer used tool outputs this caller has not seen", False
        known = _knowledge(call.facts)
        unseen = [i for i, content in entry.facts.items() if not content.startswith(SAID) and content not in known]
        if unseen and ledger is not None:
            readable = {f.id for f in ledger.store.get(unseen, reader=call.scope)}
            if not set(unseen) <= readable:
                return "the cached answer used facts this caller may not read", False
        return None, False

    # ------------------------------------------------------------------ store
    def store_answer(self, call: CallContext, answer: BaseMessage) -> CacheEntry | None:
        """Cache ``answer`` as the reply to ``call``; ``None`` when it may not be cached
        (see :func:`uncacheable`) or a tool call since the question failed (``call.failed``).

        Raises:
            StoreError: the cache store failed.
        """
        if call.failed or uncacheable(answer) is not None or not isinstance(answer, AIMessage):
            return None
        now = self.clock()
        entry = CacheEntry(
            key=call.key,
            partition=call.partition,
            signature=call.signature,
            query=call.query,
            query_norm=call.query_norm,
            answer=answer_fields(answer),
            owner=call.scope,
            facts=dict(call.facts),
            tools=tuple(sorted(call.tools)),
            refs=tuple(sorted(call.refs)),
            created_at=now,
            expires_at=now + self.config.ttl_seconds,
        )
        self.store.put(entry)
        self._puts += 1
        if self._puts % _PURGE_EVERY == 0:
            self.store.purge_expired(now)
        return entry


def uncacheable(message: BaseMessage) -> str | None:
    """Why ``message`` must not be cached, or ``None`` if it may be: only complete, non-empty
    final answers are (no tool calls, not cut short, not itself served from the cache)."""
    if not isinstance(message, AIMessage):
        return f"a {type(message).__name__} is not a model answer"
    if message.tool_calls or message.invalid_tool_calls or message.additional_kwargs.get("tool_calls") or message.additional_kwargs.get("function_call"):
        return "it calls tools"
    if CACHE_META_KEY in message.response_metadata:
        return "it was served from the cache"
    if not content_text(message.content).strip():
        return "it is empty"
    metadata = message.response_metadata
    for key in _STOP_KEYS:
        finish = metadata.get(key)
        if isinstance(finish, str) and finish.lower() in _CUT_SHORT:
            return f"it was cut short ({finish})"
    if metadata.get("status") == "incomplete":  # the OpenAI Responses API
        return "it was cut short (incomplete)"
    return None


def make_answer_cache(spec: AnswerCache | AnswerCacheStore | None, config: CacheConfig) -> AnswerCache | None:
    """The engine's cache: ``None`` unless ``config.enabled``; a store is wrapped; in memory
    when nothing is given.

    Raises:
        ConfigError: ``spec`` is neither an ``AnswerCache`` nor an ``AnswerCacheStore``.
    """
    if not config.enabled:
        return None
    if isinstance(spec, AnswerCache):
        return spec
    if spec is None:
        return AnswerCache(MemoryAnswerCacheStore(), config)
    return AnswerCache(spec, config)


def _knowledge(facts: dict[str, str]) -> set[str]:
    """Content keys of facts that are not read from the conversation's own user messages."""
    return {content for content in facts.values() if not content.startswith(SAID)}


def _readable(cas: CASStore, ref: str, scope: Scope) -> bool:
    """Whether a ref an answer relied on is still readable: without loading it or counting an
    access when the store can say so (``RefExistence``), else by reading it."""
    if isinstance(cas, RefExistence):
        return cas.exists(ref, scope)
    try:
        cas.get(ref, scope)
    except RefNotFoundError:
        return False
    return True


def _served(entry: CacheEntry, similarity: float) -> AIMessage:
    message = entry.message(message_id=f"ctxplugin-cache-{uuid.uuid4().hex}")
    marker = {
        "hit": True,
        "key": entry.key,
        "similarity": round(similarity, 4),
        "query": entry.query,
        "created_at": entry.created_at,
        "hits": entry.hit_count + 1,
    }
    return message.model_copy(update={"response_metadata": {**message.response_metadata, CACHE_META_KEY: marker}})


__all__ = ["CACHE_META_KEY", "AnswerCache", "CacheLookup", "make_answer_cache", "uncacheable"]
