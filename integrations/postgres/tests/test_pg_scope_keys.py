"""Scope keys on Postgres: migration 4 rekeys grants written with pipe-joined keys, its SQL
encoding is the Python one, and the reported collision is closed in the CAS and the answer cache,
which also serves ids Postgres text cannot hold (NUL, lone surrogates) their own answers."""

from __future__ import annotations

import threading

import psycopg
import pytest
from ctxplugin_postgres import LATEST, PostgresCASStore, migrate, schema_version
from ctxplugin_postgres.answer_cache import PostgresAnswerCacheStore
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage
from psycopg import sql

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.cache import AnswerCache
from ctxplugin.cas import MemoryCASStore
from ctxplugin.config import CacheConfig
from ctxplugin.errors import RefNotFoundError
from ctxplugin.facts import FactsLedger, MemoryFactStore
from ctxplugin.scope import scope_key
from ctxplugin.testing import ScriptedChatModel
from ctxplugin.testing.cas_contract import FakeClock, make_item

pytestmark = pytest.mark.postgres

ALICE = Scope(user_id="a", session_id="b|c")
MALLORY = Scope(user_id="a|b", session_id="c")
PLAIN = Scope(session_id="thread 7", tenant_id="acme", user_id="ünï,cødé %7C!")

def _write_v3_grant(conn: psycopg.Connection[object], schema: str, content: str, scope: Scope) -> str:
    item = make_item(content)
    old_key = "|".join([scope.tenant_id or "", scope.workspace_id or "", scope.user_id or "", scope.session_id])
    s = sql.Identifier(schema)
    conn.execute(sql.SQL("INSERT INTO {}.ctxplugin_cas_refs VALUES (%s, %s, %s, 0) ON CONFLICT DO NOTHING").format(s),
                 (item.ref_id, item.content_hash, item.kind))
    conn.execute(sql.SQL("INSERT INTO {}.ctxplugin_cas_content VALUES (%s, %s, %s, 0) ON CONFLICT DO NOTHING").format(s),
                 (item.raw_hash, item.content.encode(), len(item.content)))
    conn.execute(
        sql.SQL("INSERT INTO {}.ctxplugin_cas_grants (ref_id, owner_key, visibility, tenant_id, workspace_id, user_id, "
                "session_id, content_hash, raw_hash, kind, summary, created_at) "
                "VALUES (%s, %s, 'session', %s, %s, %s, %s, %s, %s, %s, 's', 0)").format(s),
        (item.ref_id, old_key, scope.tenant_id, scope.workspace_id, scope.user_id, scope.session_id,
         item.content_hash, item.raw_hash, item.kind),
    )
    return item.ref_id


def test_migration_4_rekeys_old_grants_and_closes_the_collision(pg_dsn: str, pg_schema: str) -> None:
    assert migrate(pg_dsn, schema=pg_schema, target=3) == [1, 2, 3]
    with psycopg.connect(pg_dsn) as conn:
        balance = _write_v3_grant(conn, pg_schema, "Mallory's balance: 1,024.00", MALLORY)
        plain = _write_v3_grant(conn, pg_schema, "an output of an ordinary session", PLAIN)
    assert migrate(pg_dsn, schema=pg_schema) == [4]
    with PostgresCASStore.from_dsn(pg_dsn, schema=pg_schema) as store:
        assert store.get(plain, PLAIN).content == "an output of an ordinary session"
        assert store.get(balance, MALLORY).content == "Mallory's balance: 1,024.00"
        with pytest.raises(RefNotFoundError):
            store.get(balance, ALICE)
        assert store.put(make_item("Mallory's balance: 1,024.00"), ALICE) is True  # its own grant now
    with psycopg.connect(pg_dsn) as conn:
        keys = {r[0] for r in conn.execute(sql.SQL("SELECT owner_key FROM {}.ctxplugin_cas_grants").format(sql.Identifier(pg_schema)))}
    assert keys == {MALLORY.key(), ALICE.key(), PLAIN.key()}


def test_an_upgrade_applied_on_first_use_is_not_cut_by_the_statement_timeout(
    pg_dsn: str, pg_schema: str
) -> None:
    # migration 4 rewrites every grant, which on a large table takes far longer than the store's
    # statements may (stores.timeout): here another session holds the table for three timeouts
    assert migrate(pg_dsn, schema=pg_schema, target=3) == [1, 2, 3]
    with psycopg.connect(pg_dsn) as conn:
        ref = _write_v3_grant(conn, pg_schema, "an output stored before the upgrade", PLAIN)
    timeout = 1.0
    holder = psycopg.connect(pg_dsn)
    grants = sql.SQL("{}.ctxplugin_cas_grants").format(sql.Identifier(pg_schema))
    holder.execute(sql.SQL("LOCK TABLE {} IN SHARE MODE").format(grants))
    release = threading.Timer(3 * timeout, holder.close)  # closing ends its transaction
    release.start()
    try:
        with PostgresCASStore.from_dsn(pg_dsn, schema=pg_schema, timeout=timeout) as store:
            assert store.get(ref, PLAIN).content == "an output stored before the upgrade"
    finally:
        release.join()
    assert schema_version(pg_dsn, schema=pg_schema) == LATEST


# Postgres text holds neither NUL nor lone surrogates; every other string must encode alike
_pg_text = st.text(alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=10)
_part = st.one_of(st.none(), st.sampled_from(["", "|", "a|b", ",", "!", "%7C", "~_.-"]), _pg_text)


def test_the_sql_key_function_is_the_python_one(pg_dsn: str, pg_schema: str) -> None:
    migrate(pg_dsn, schema=pg_schema)
    function = sql.SQL("SELECT {}.ctxplugin_scope_key(%s, %s, %s, %s)").format(sql.Identifier(pg_schema))
    with psycopg.connect(pg_dsn, autocommit=True) as conn:

        @settings(max_examples=300, deadline=None)
        @given(_part, _part, _part, _pg_text)
        def same(tenant: str | None, workspace: str | None, user: str | None, session: str) -> None:
            row = conn.execute(function, (tenant, workspace, user, session)).fetchone()
            assert row is not None and row[0] == scope_key(tenant, workspace, user, session)

        same()


# ---------------------------------------------------------------------- answer cache, facts
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


def test_postgres_answer_cache_serves_no_colliding_scope(pg_dsn: str, pg_schema: str) -> None:
    config = ContextConfig(cache=CacheConfig(enabled=True))
    clock = FakeClock()
    engine = ContextEngine(
        config,
        cas=MemoryCASStore(clock=clock),
        facts=FactsLedger(MemoryFactStore(), config.facts),
        answer_cache=AnswerCache(PostgresAnswerCacheStore.from_dsn(pg_dsn, schema=pg_schema), config.cache, clock=clock),
    )
    assert _ask(engine, MALLORY, "Your balance is 1,024.00") == "Your balance is 1,024.00"
    assert _ask(engine, ALICE, "Your balance is 7.50") == "Your balance is 7.50"
    assert _ask(engine, ALICE, "not asked") == "Your balance is 7.50"


@pytest.mark.parametrize("odd", ["\x00", "\ud800"])
def test_the_answer_cache_serves_odd_ids_their_own_answers(pg_dsn: str, pg_schema: str, odd: str) -> None:
    config = ContextConfig(cache=CacheConfig(enabled=True))
    clock = FakeClock()
    store = PostgresAnswerCacheStore.from_dsn(pg_dsn, schema=pg_schema)
    engine = ContextEngine(
        config,
        cas=MemoryCASStore(clock=clock),
        facts=FactsLedger(MemoryFactStore(), config.facts),
        answer_cache=AnswerCache(store, config.cache, clock=clock),
    )
    odd_scope, plain = Scope(session_id=f"b{odd}", user_id=f"u{odd}"), Scope(session_id="b", user_id="u")
    try:
        assert _ask(engine, odd_scope, "Your balance is 1,024.00") == "Your balance is 1,024.00"
        assert _ask(engine, plain, "Your balance is 7.50") == "Your balance is 7.50"
        assert _ask(engine, odd_scope, "not asked") == "Your balance is 1,024.00"
        assert _ask(engine, plain, "not asked") == "Your balance is 7.50"
    finally:
        store.close()
    with psycopg.connect(pg_dsn) as conn:
        details = [r[0] for r in conn.execute(sql.SQL("SELECT details FROM {}.semantic_cache").format(sql.Identifier(pg_schema)))]
    # the ordinary scope's answer is stored as before: a JSON object with its owner
    assert sorted(d["owner"]["session_id"] for d in details if "owner" in d) == ["b"]
    assert len(details) == 2
