"""Scope keys: one injective encoding, used by every store, with old (pipe-joined) data migrated.

The collision that must never come back: user ``a`` with session ``b|c`` and user ``a|b`` with
session ``c`` were one key, so the second was served the first's cached answer and could not
get a grant of its own.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage
from pytest_mock import MockerFixture

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin._message_store import SQLiteMessageStore
from ctxplugin.cache import (
    AnswerCache,
    AnswerCacheStore,
    ChromaAnswerCacheStore,
    MemoryAnswerCacheStore,
)
from ctxplugin.cache.context import legacy_partition, partition
from ctxplugin.cas import MemoryCASStore, SQLiteCASStore
from ctxplugin.config import CacheConfig
from ctxplugin.errors import RefNotFoundError
from ctxplugin.facts import ChromaFactStore, FactsLedger, MemoryFactStore
from ctxplugin.facts.model import reader_keys, visibility_key
from ctxplugin.facts.store import FactStore
from ctxplugin.scope import legacy_scope_key, scope_key, scope_key_parts
from ctxplugin.testing import ScriptedChatModel
from ctxplugin.testing.cas_contract import FakeClock, make_item

ALICE = Scope(user_id="a", session_id="b|c")
MALLORY = Scope(user_id="a|b", session_id="c")

ids = st.one_of(st.none(), st.text(max_size=12), st.sampled_from(["", "|", "||", ",", "!", "%7C", "%", "a|b", "é"]))
scopes = st.builds(
    Scope,
    session_id=st.text(min_size=1, max_size=12).filter(lambda s: s.strip() != ""),
    user_id=ids,
    workspace_id=ids,
    tenant_id=ids,
)


# ---------------------------------------------------------------------- the encoding
@settings(max_examples=400, deadline=None)
@given(st.lists(ids, min_size=1, max_size=5), st.lists(ids, min_size=1, max_size=5))
def test_distinct_part_sequences_have_distinct_keys(first: list[str | None], second: list[str | None]) -> None:
    assert (scope_key(*first) == scope_key(*second)) == (first == second)


any_ids = st.one_of(ids, st.text(st.characters(exclude_categories=[]), max_size=8), st.sampled_from(["\x00", "a\ud800", "\udcff,!"]))


@settings(max_examples=400, deadline=None)
@given(st.lists(any_ids, min_size=1, max_size=5))
def test_a_key_gives_back_its_parts(parts: list[str | None]) -> None:
    # stores whose columns cannot hold every id (Postgres text) read the exact ids from the key
    assert scope_key_parts(scope_key(*parts)) == tuple(parts)


@settings(max_examples=400, deadline=None)
@given(scopes, scopes)
def test_distinct_scopes_have_distinct_keys_everywhere(first: Scope, second: Scope) -> None:
    same = first == second
    assert (first.key() == second.key()) == same
    for mode in ("session", "user", "global"):
        if same:
            assert partition(first, mode) == partition(second, mode)
    for vis in ("session", "user", "workspace", "tenant"):
        if visibility_key(first, vis) == visibility_key(second, vis) and vis == "session":
            assert (first.tenant_id, first.session_id) == (second.tenant_id, second.session_id)


@settings(max_examples=200, deadline=None)
@given(scopes)
def test_new_keys_never_meet_old_ones(scope: Scope) -> None:
    assert "|" not in scope.key() and scope.key().isascii()
    old = scope.legacy_key()
    assert old is None or (old.count("|") == 3 and old != scope.key())


def test_the_reported_collision_is_gone() -> None:
    assert ALICE.key() != MALLORY.key()
    assert partition(ALICE, "session") != partition(MALLORY, "session")
    assert legacy_partition(ALICE, "session") == legacy_partition(MALLORY, "session")  # the old bug
    assert ALICE.legacy_key() is None and MALLORY.legacy_key() is None  # ambiguous: not read through
    assert Scope(session_id="s").key() != Scope(session_id="s", tenant_id="").key()
    assert legacy_scope_key(None, None, None, "s") == "|||s"
    assert scope_key("s", "acme", "a|b") == "s,acme,a%7Cb"
    assert scope_key("\udcff\x00") == "%ED%B3%BF%00"


# ---------------------------------------------------------------------- answer cache
def _engine(store: AnswerCacheStore, mode: str = "session") -> ContextEngine:
    config = ContextConfig(cache=CacheConfig(enabled=True, scope=mode))
    clock = FakeClock()
    return ContextEngine(
        config,
        cas=MemoryCASStore(clock=clock),
        facts=FactsLedger(MemoryFactStore(), config.facts),
        answer_cache=AnswerCache(store, config.cache, clock=clock),
    )


def _ask(engine: ContextEngine, scope: Scope, answer: str) -> str:
    model = ScriptedChatModel(script=[AIMessage(content=answer)], default=None)
    messages = [HumanMessage(content="What is my account balance?")]
    prepared = engine.prepare(messages, scope=scope)
    cached = engine.cached_answer(messages, prepared, scope=scope, model=model)
    if cached is not None:
        return str(cached.content)
    reply = model.invoke(prepared.messages)
    engine.remember_answer(messages, prepared, reply, scope=scope, model=model)
    return str(reply.content)


@pytest.fixture(params=["memory", "chroma"])
def cache_store(request: pytest.FixtureRequest, tmp_path: Path) -> AnswerCacheStore:
    if request.param == "memory":
        return MemoryAnswerCacheStore()
    return ChromaAnswerCacheStore.persistent(tmp_path / "chroma")


def test_cached_answers_are_not_served_across_colliding_scopes(cache_store: AnswerCacheStore) -> None:
    engine = _engine(cache_store)
    assert _ask(engine, MALLORY, "Your balance is 1,024.00") == "Your balance is 1,024.00"
    assert _ask(engine, ALICE, "Your balance is 7.50") == "Your balance is 7.50"
    assert _ask(engine, ALICE, "not asked: served from the cache") == "Your balance is 7.50"
    assert _ask(engine, MALLORY, "not asked: served from the cache") == "Your balance is 1,024.00"


def test_old_entries_serve_their_owner_and_never_a_colliding_scope(cache_store: AnswerCacheStore, mocker: MockerFixture) -> None:
    engine = _engine(cache_store)
    written = mocker.spy(cache_store, "put")
    _ask(engine, MALLORY, "Your balance is 1,024.00")
    entry = written.call_args.args[0]
    # rewrite the entry as earlier versions stored it: under the pipe-joined partition
    cache_store.delete([entry.key])
    cache_store.put(entry.model_copy(update={"partition": legacy_partition(MALLORY, "session"), "key": "old-key"}))
    assert _ask(engine, MALLORY, "not asked: the old entry still serves") == "Your balance is 1,024.00"
    assert _ask(engine, ALICE, "Your balance is 7.50") == "Your balance is 7.50"


# ---------------------------------------------------------------------- CAS migration
_V1_GRANT = (
    "INSERT INTO cas_grants (ref_id, owner_key, visibility, tenant_id, workspace_id, user_id, session_id, "
    "content_hash, raw_hash, kind, summary, created_at) VALUES (?, ?, 'session', ?, ?, ?, ?, ?, ?, ?, ?, 0)"
)


def test_sqlite_cas_written_with_old_keys_is_rekeyed_and_the_collision_is_closed(tmp_path: Path) -> None:
    path = tmp_path / "cas.sqlite3"
    SQLiteCASStore(path).close()
    balance, plain = make_item("Mallory's balance: 1,024.00"), make_item("an output of a plain session")
    with sqlite3.connect(path) as db:  # the file as the earlier version left it
        db.execute("PRAGMA user_version = 1")
        for item, scope in ((balance, MALLORY), (plain, Scope(session_id="s-1", tenant_id="acme"))):
            db.execute("INSERT INTO cas_content VALUES (?, ?, ?, 0)", (item.raw_hash, item.content.encode(), len(item.content)))
            old_key = "|".join([scope.tenant_id or "", scope.workspace_id or "", scope.user_id or "", scope.session_id])
            db.execute(_V1_GRANT, (item.ref_id, old_key, scope.tenant_id, scope.workspace_id, scope.user_id, scope.session_id,
                                   item.content_hash, item.raw_hash, item.kind, b"s"))
    store = SQLiteCASStore(path)
    try:
        assert store.get(plain.ref_id, Scope(session_id="s-1", tenant_id="acme")).content == plain.content
        assert store.get(balance.ref_id, MALLORY).content == balance.content
        with pytest.raises(RefNotFoundError):
            store.get(balance.ref_id, ALICE)
        # the old collision blocked the other scope's own grant; now it gets one
        assert store.put(balance, ALICE) is True
        keys = {row[0] for row in sqlite3.connect(path).execute("SELECT owner_key FROM cas_grants")}
        assert keys == {MALLORY.key(), ALICE.key(), Scope(session_id="s-1", tenant_id="acme").key()}
    finally:
        store.close()


# ---------------------------------------------------------------------- message store
def test_message_store_moves_unambiguous_old_conversations_and_leaves_colliding_ones(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    SQLiteMessageStore(path)
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 0")
        db.execute("INSERT INTO chat_messages (scope_key, body) VALUES (?, ?)", ("|||thread-1", _body("hello from thread-1")))
        db.execute("INSERT INTO chat_messages (scope_key, body) VALUES (?, ?)", ("acme||u1|t2", _body("hello from t2")))
        db.execute("INSERT INTO chat_messages (scope_key, body) VALUES (?, ?)", ("||a|b|c", _body("whose is this?")))
    store = SQLiteMessageStore(path)
    assert [m.content for m in store.load(Scope(session_id="thread-1").key())] == ["hello from thread-1"]
    assert [m.content for m in store.load(Scope(session_id="t2", user_id="u1", tenant_id="acme").key())] == ["hello from t2"]
    assert store.load(ALICE.key()) == [] and store.load(MALLORY.key()) == []
    store.append(ALICE.key(), [HumanMessage(content="alice's")])
    store.append(MALLORY.key(), [HumanMessage(content="mallory's")])
    assert [m.content for m in store.load(ALICE.key())] == ["alice's"]
    assert [m.content for m in store.load(MALLORY.key())] == ["mallory's"]


def _body(text: str) -> str:
    import json

    from langchain_core.messages import message_to_dict

    return json.dumps(message_to_dict(HumanMessage(content=text)))


# ---------------------------------------------------------------------- facts
@pytest.fixture(params=["memory", "chroma"])
def fact_store(request: pytest.FixtureRequest, tmp_path: Path) -> FactStore:
    if request.param == "memory":
        return MemoryFactStore()
    return ChromaFactStore.persistent(tmp_path / "chroma")


def test_facts_of_colliding_scopes_neither_leak_nor_supersede_each_other(fact_store: FactStore) -> None:
    ledger = FactsLedger(fact_store)
    ledger.write("account balance is 1024.00", scope=MALLORY, key="balance")
    ledger.write("account balance is 7.50", scope=ALICE, key="balance")
    alice = [s.fact.text for s in ledger.search("account balance", scope=ALICE)]
    mallory = [s.fact.text for s in ledger.search("account balance", scope=MALLORY)]
    assert alice == ["account balance is 7.50"]
    assert mallory == ["account balance is 1024.00"]
    current = ledger.current("balance", scope=MALLORY)
    assert current is not None and current.text == "account balance is 1024.00" and current.superseded_by is None


def test_reader_keys_still_find_facts_stored_under_old_keys() -> None:
    keys = reader_keys(Scope(session_id="s", tenant_id="t", user_id="u"))
    assert {"s|t|s", "t|t", "u|t|u"} <= set(keys)
    assert visibility_key(Scope(session_id="s", tenant_id="t"), "session") in keys
