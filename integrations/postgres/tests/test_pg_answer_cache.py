"""The answer cache on Postgres: the store contract, the table, and an engine serving from it."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ctxplugin_postgres.answer_cache import PostgresAnswerCacheStore
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.cache import AnswerCacheStore
from ctxplugin.config import CacheConfig
from ctxplugin.errors import StoreUnavailableError
from ctxplugin.testing.cache_contract import NOW, AnswerCacheStoreContract, make_entry

pytestmark = pytest.mark.postgres


class TestPostgresAnswerCacheStore(AnswerCacheStoreContract):
    @pytest.fixture(autouse=True)
    def _database(self, pg_dsn: str, pg_schema: str) -> None:
        self.dsn, self.schema = pg_dsn, pg_schema

    def make_store(self, tmp_path: Path) -> AnswerCacheStore:
        return PostgresAnswerCacheStore.from_dsn(self.dsn, schema=self.schema)


def test_the_table_of_the_seed_is_created_once_even_by_concurrent_first_uses(pg_dsn: str, pg_schema: str) -> None:
    stores = [PostgresAnswerCacheStore.from_dsn(pg_dsn, schema=pg_schema) for _ in range(4)]
    errors: list[BaseException] = []

    def first_use(store: PostgresAnswerCacheStore, n: int) -> None:
        try:
            store.put(make_entry(f"question {n}"))
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=first_use, args=(s, n)) for n, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for store in stores:
        store.close()
    assert errors == []
    with psycopg.connect(pg_dsn) as conn:
        columns = {r[0] for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = 'semantic_cache'",
            (pg_schema,),
        ).fetchall()}
        count = conn.execute(f'SELECT count(*) FROM "{pg_schema}".semantic_cache').fetchone()
    assert {"cache_key", "query_text", "query_embedding", "answer_text", "context_signature", "used_refs",
            "created_at", "ttl_expires_at", "hit_count", "last_hit_at"} <= columns
    assert count == (4,)


@pytest.mark.parametrize("question", ["What is the return window?", "What is the return\x00 window?"])
def test_an_engine_serves_answers_stored_by_another_process(pg_dsn: str, pg_schema: str, question: str) -> None:
    config = ContextConfig(cache=CacheConfig(enabled=True, scope="user"))
    scope_a, scope_b = Scope(session_id="a", user_id="u1"), Scope(session_id="b", user_id="u1")
    messages: list[Any] = [SystemMessage(content="Be brief."), HumanMessage(content=question)]
    with PostgresAnswerCacheStore.from_dsn(pg_dsn, schema=pg_schema) as first_store:
        first = ContextEngine(config, answer_cache=first_store)
        prepared = first.prepare(messages, scope=scope_a)
        assert first.cached_answer(messages, prepared, scope=scope_a, model="m") is None
        assert first.remember_answer(messages, prepared, AIMessage(content="30 days."), scope=scope_a, model="m")
    with PostgresAnswerCacheStore.from_dsn(pg_dsn, schema=pg_schema) as second_store:
        second = ContextEngine(config, answer_cache=second_store)  # another engine, as in another process
        prepared = second.prepare(messages, scope=scope_b)
        served = second.cached_answer(messages, prepared, scope=scope_b, model="m")
        assert served is not None and served.content == "30 days." and prepared.report.cached_answer
        other_user = Scope(session_id="c", user_id="u2")
        prepared = second.prepare(messages, scope=other_user)
        assert second.cached_answer(messages, prepared, scope=other_user, model="m") is None


def test_a_server_that_is_down_is_a_miss_with_a_warning() -> None:
    store = PostgresAnswerCacheStore.from_dsn("postgresql://postgres@127.0.0.1:1/test", timeout=0.5)
    try:
        with pytest.raises(StoreUnavailableError):
            store.candidates("p1", "sig1", "refund policy", now=NOW, n=3)
        engine = ContextEngine(ContextConfig(cache=CacheConfig(enabled=True)), answer_cache=store)
        messages: list[Any] = [HumanMessage(content="What is the refund policy?")]
        prepared = engine.prepare(messages, scope=Scope(session_id="s"))
        assert engine.cached_answer(messages, prepared, scope=Scope(session_id="s")) is None
        assert any("answer cache unavailable" in w for w in prepared.report.warnings)
    finally:
        store.close()

