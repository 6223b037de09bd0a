"""A thread gone back to an earlier point after a restart: the new engine, over the same stores,
never read the old branch, yet what the user said on it is no longer current. A history whose
front was trimmed keeps what it dropped, after a restart as before one."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.cas import MemoryCASStore
from ctxplugin.facts import FactsLedger, HashingEmbedding, MemoryFactStore
from ctxplugin.facts.model import FactQuery

THREAD = Scope(session_id="trip", user_id="u1")
OLD: list[BaseMessage] = [
    SystemMessage("You are the travel agent.", id="sys"),
    HumanMessage("My budget is $500.", id="h0"),
    AIMessage("Noted.", id="a0"),
    HumanMessage("My seat is 12A.", id="h1"),
    AIMessage("Noted.", id="a1"),
    HumanMessage("Actually, my budget is $900.", id="h2"),
    AIMessage("Noted.", id="a2"),
]


def current(path: Path) -> list[str]:
    with ContextEngine.embedded(path, ContextConfig()) as engine:
        return sorted(f.text for f in engine.facts.store.find(FactQuery(reader=THREAD, valid=True, scopes=("global", "session"))))


def read_then_restart(path: Path, then: list[BaseMessage]) -> list[str]:
    """What is current once one engine read the old branch and a new one, over the same stores, was
    handed ``then``."""
    with ContextEngine.embedded(path, ContextConfig()) as first:
        first.prepare(OLD, scope=THREAD)
    assert current(path) == ["My budget is $900.", "My seat is 12A."], current(path)
    with ContextEngine.embedded(path, ContextConfig()) as second:
        second.prepare(then, scope=THREAD)
    return current(path)


def test_going_back_before_a_change_after_a_restart_makes_the_old_value_current_again(tmp_path: Path) -> None:
    now = read_then_restart(tmp_path / "ctx", [*OLD[:5], HumanMessage("Which hotels are near the river?", id="b2")])
    assert now == ["My budget is $500.", "My seat is 12A."], now


def test_going_back_further_after_a_restart_leaves_every_later_statement_behind(tmp_path: Path) -> None:
    now = read_then_restart(tmp_path / "ctx", [*OLD[:3], HumanMessage("Which hotels are near the river?", id="b1")])
    assert now == ["My budget is $500."], now


def test_a_history_trimmed_at_the_front_after_a_restart_keeps_what_it_dropped(tmp_path: Path) -> None:
    # the system message stays, what follows it up to the latest exchange is dropped
    now = read_then_restart(tmp_path / "ctx", [OLD[0], OLD[6], HumanMessage("Which hotels are near the river?", id="h3")])
    assert now == ["My budget is $900.", "My seat is 12A."], now


def test_a_history_without_its_first_messages_after_a_restart_keeps_what_it_dropped(tmp_path: Path) -> None:
    now = read_then_restart(tmp_path / "ctx", [*OLD[4:], HumanMessage("Which hotels are near the river?", id="h3")])
    assert now == ["My budget is $900.", "My seat is 12A."], now


def test_the_old_branch_sent_again_after_a_restart_is_current_again(tmp_path: Path) -> None:
    path = tmp_path / "ctx"
    read_then_restart(path, [*OLD[:5], HumanMessage("Which hotels are near the river?", id="b2")])
    with ContextEngine.embedded(path, ContextConfig()) as third:
        third.prepare([*OLD, HumanMessage("Thanks.", id="h3")], scope=THREAD)
    assert current(path) == ["My budget is $900.", "My seat is 12A."], current(path)


def test_facts_stored_before_messages_were_anchored_stay_current_as_they_did(tmp_path: Path) -> None:
    """A fact stored without the message before its own (by an earlier version) reads back
    without it, and a branch gone back from after a restart leaves it current, as before."""
    path = tmp_path / "ctx"
    with ContextEngine.embedded(path, ContextConfig()) as first:
        first.prepare(OLD, scope=THREAD)
        collection = first.facts.store.raw_collection("")  # type: ignore[attr-defined]
        stored = collection.get(include=["metadatas", "documents", "embeddings"])
        assert any(m.get("av") for m in stored["metadatas"])
        old = []
        for meta in stored["metadatas"]:
            body = json.loads(meta["fact"])
            body["source"] = body["source"][:5]
            old.append({**{k: v for k, v in meta.items() if k not in ("av", "avs")}, "fact": json.dumps(body)})
        collection.delete(ids=stored["ids"])
        collection.add(ids=stored["ids"], metadatas=old, documents=stored["documents"], embeddings=stored["embeddings"])
        assert all(f.source.after is None for f in first.facts.store.find(FactQuery(reader=THREAD)))
    with ContextEngine.embedded(path, ContextConfig()) as second:
        second.prepare([*OLD[:5], HumanMessage("Which hotels are near the river?", id="b2")], scope=THREAD)
    assert current(path) == ["My budget is $900.", "My seat is 12A."], current(path)


def test_a_new_engine_over_the_same_memory_store_leaves_the_old_branch_behind() -> None:
    config = ContextConfig()
    store, cas = MemoryFactStore(), MemoryCASStore()
    ContextEngine(config, cas=cas, facts=FactsLedger(store, config.facts)).prepare(OLD, scope=THREAD)
    second = ContextEngine(config, cas=cas, facts=FactsLedger(store, config.facts))
    second.prepare([*OLD[:5], HumanMessage("Which hotels are near the river?", id="b2")], scope=THREAD)
    now = sorted(f.text for f in store.find(FactQuery(reader=THREAD, valid=True, scopes=("global", "session"))))
    assert now == ["My budget is $500.", "My seat is 12A."], now


class _HeldQuery(HashingEmbedding):
    """The offline embedding, holding the embedding of one question until let go (a slow API)."""

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question, self.held, self.go = question, threading.Event(), threading.Event()

    def embed_query(self, text: str) -> list[float]:
        if self.question in text:
            self.held.set()
            self.go.wait(30)
        return super().embed_query(text)


def test_two_calls_of_one_thread_at_once_leave_nothing_behind() -> None:
    """Two calls of the same thread at once in one engine (parallel branches of a graph, each with
    its own last message): neither is a process new to the thread, neither is a fork."""
    config = ContextConfig()
    embedding = _HeldQuery("Lisbon")
    store = MemoryFactStore(embedding=embedding)
    engine = ContextEngine(config, cas=MemoryCASStore(), facts=FactsLedger(store, config.facts))
    engine.prepare(OLD, scope=THREAD)
    first = threading.Thread(target=engine.prepare, args=([*OLD, HumanMessage("My destination is Lisbon.", id="t1")],), kwargs={"scope": THREAD})
    first.start()
    try:
        assert embedding.held.wait(30)  # the first call stored what it read, and searches
        engine.prepare([*OLD, HumanMessage("Find hotels near the river.", id="t2")], scope=THREAD)
    finally:
        embedding.go.set()
        first.join(30)
    now = sorted(f.text for f in store.find(FactQuery(reader=THREAD, valid=True, scopes=("global", "session"))))
    assert "My destination is Lisbon." in now, now
