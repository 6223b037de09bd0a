"""The answer-cache store contract: one suite every
:class:`~ctxplugin.cache.AnswerCacheStore` backend passes.

Subclass :class:`AnswerCacheStoreContract` in a test module and implement :meth:`make_store`::

    class TestMyStore(AnswerCacheStoreContract):
        def make_store(self, tmp_path):
            return MyAnswerStore(dsn)

Stores take the time as an argument (``now``), so expiry is tested without sleeping.
Needs pytest.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxplugin.cache import AnswerCacheStore, CacheEntry, normalize_query, search_text
from ctxplugin.scope import Scope

NOW = 1_700_000_000.0
OWNER = Scope(session_id="s-1", user_id="u-1", workspace_id="w-1", tenant_id="t-1")


def make_entry(query: str, *, key: str | None = None, partition: str = "p1", signature: str = "sig1", ttl: float = 60.0, **extra: Any) -> CacheEntry:
    """A well-formed entry for ``query`` answered with ``"answer to <query>"``."""
    norm = normalize_query(query)
    fields: dict[str, Any] = {
        "key": key or f"k-{partition}-{signature}-{norm}",
        "partition": partition,
        "signature": signature,
        "query": query,
        "query_norm": norm,
        "answer": {"content": f"answer to {query}", "additional_kwargs": {}, "response_metadata": {}, "name": None},
        "owner": OWNER,
        "created_at": NOW,
        "expires_at": NOW + ttl,
    }
    fields.update(extra)
    return CacheEntry(**fields)


class AnswerCacheStoreContract:
    """What every answer-cache store must do."""

    def make_store(self, tmp_path: Path) -> AnswerCacheStore:
        raise NotImplementedError

    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[AnswerCacheStore]:
        store = self.make_store(tmp_path)
        yield store
        close = getattr(store, "close", None)
        if callable(close):
            close()

    def test_is_a_store(self, store: AnswerCacheStore) -> None:
        assert isinstance(store, AnswerCacheStore)

    def test_a_stored_entry_is_found_by_its_own_query(self, store: AnswerCacheStore) -> None:
        entry = make_entry("How long do refunds take?")
        store.put(entry)
        found = store.candidates("p1", "sig1", entry.search_text, now=NOW, n=5)
        assert [e.key for e, _ in found] == [entry.key]
        assert found[0][1] == pytest.approx(1.0, abs=1e-4)

    def test_every_field_survives_the_round_trip(self, store: AnswerCacheStore) -> None:
        entry = make_entry(
            "Was kostet Gepäck nach Zürich? 🧳",
            answer={
                "content": [{"type": "text", "text": "40 € pro Koffer"}],
                "additional_kwargs": {"refusal": None},
                "response_metadata": {"model_name": "m-1", "finish_reason": "stop"},
                "name": "assistant",
            },
            facts={"fact_1": "baggage_fee|abc", "fact_2": "|def"},
            tools=("ref:tool:0123456789abcdef", "tool:feedbeef"),
            refs=("ref:tool:0123456789abcdef",),
            hit_count=3,
            last_hit_at=NOW - 5,
        )
        store.put(entry)
        (got, _), = store.candidates("p1", "sig1", entry.search_text, now=NOW, n=1)
        assert got == entry
        assert got.message(message_id="x").content == [{"type": "text", "text": "40 € pro Koffer"}]

    def test_a_question_and_answer_holding_nul_survive_the_round_trip(self, store: AnswerCacheStore) -> None:
        entry = make_entry("Is order W1007\x00 refunded? 15%00 off", key="k-nul", answer={
            "content": "Yes\x00, at 15%.", "additional_kwargs": {}, "response_metadata": {}, "name": None})
        store.put(entry)
        (got, _), = store.candidates("p1", "sig1", entry.search_text, now=NOW, n=1)
        assert got == entry
        twin = make_entry("Is order W1007%00 refunded? 15%00 off", key="k-twin")  # what a percent-encoding of the first spells
        store.put(twin)
        found = store.candidates("p1", "sig1", twin.search_text, now=NOW, n=5)
        assert {e.query for e, _ in found} == {entry.query, twin.query}

    def test_only_the_same_partition_and_signature_are_candidates(self, store: AnswerCacheStore) -> None:
        for partition, signature in (("p1", "sig1"), ("p2", "sig1"), ("p1", "sig2")):
            store.put(make_entry("what is the refund policy", partition=partition, signature=signature))
        found = store.candidates("p1", "sig1", "what is the refund policy", now=NOW, n=10)
        assert [(e.partition, e.signature) for e, _ in found] == [("p1", "sig1")]
        assert store.candidates("p3", "sig1", "what is the refund policy", now=NOW, n=10) == []

    def test_expired_entries_are_never_candidates(self, store: AnswerCacheStore) -> None:
        store.put(make_entry("short lived", ttl=10))
        store.put(make_entry("long lived", ttl=1000))
        assert {e.query for e, _ in store.candidates("p1", "sig1", "lived", now=NOW + 5, n=10)} == {"short lived", "long lived"}
        assert {e.query for e, _ in store.candidates("p1", "sig1", "lived", now=NOW + 10, n=10)} == {"long lived"}

    def test_most_similar_first_and_at_most_n(self, store: AnswerCacheStore) -> None:
        queries = [
            "what is the checked baggage fee for economy",
            "what is the checked baggage fee",
            "how do I change my seat",
            "cancel my reservation please",
        ]
        for query in queries:
            store.put(make_entry(query))
        found = store.candidates("p1", "sig1", search_text("what is the checked baggage fee"), now=NOW, n=2)
        assert [e.query for e, _ in found] == queries[:2][::-1]
        assert found[0][1] >= found[1][1]
        assert store.candidates("p1", "sig1", "anything", now=NOW, n=0) == []

    def test_putting_the_same_key_replaces_the_entry(self, store: AnswerCacheStore) -> None:
        store.put(make_entry("refund policy", key="k"))
        store.put(make_entry("refund policy", key="k", answer={"content": "new", "additional_kwargs": {}, "response_metadata": {}, "name": None}))
        found = store.candidates("p1", "sig1", "refund policy", now=NOW, n=10)
        assert [e.answer_text for e, _ in found] == ["new"]

    def test_hits_are_counted(self, store: AnswerCacheStore) -> None:
        entry = make_entry("refund policy")
        store.put(entry)
        store.record_hit(entry.key, at=NOW + 1)
        store.record_hit(entry.key, at=NOW + 2)
        store.record_hit("unknown-key", at=NOW + 3)
        (got, _), = store.candidates("p1", "sig1", "refund policy", now=NOW, n=1)
        assert (got.hit_count, got.last_hit_at) == (2, NOW + 2)

    def test_delete_and_purge(self, store: AnswerCacheStore) -> None:
        keep, drop, old = make_entry("keep me", ttl=100), make_entry("drop me", ttl=100), make_entry("old one", ttl=1)
        for entry in (keep, drop, old):
            store.put(entry)
        store.delete([drop.key, "unknown-key"])
        store.delete([])
        assert store.purge_expired(NOW + 50) == 1
        assert store.purge_expired(NOW + 50) == 0
        assert [e.key for e, _ in store.candidates("p1", "sig1", "me", now=NOW, n=10)] == [keep.key]


__all__ = ["NOW", "OWNER", "AnswerCacheStoreContract", "make_entry"]
