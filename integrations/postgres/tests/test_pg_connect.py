"""One configuration switch: ``ctxplugin.connect()`` gives embedded or server stores from the
environment alone, with the same isolation rules either way."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ctxplugin_postgres import PostgresCASStore, PostgresWriteLock
from langchain_core.messages import ToolMessage

import ctxplugin
from ctxplugin import ContextConfig, ContextEngine, MissingDependencyError, Scope
from ctxplugin.cas import SQLiteCASStore
from ctxplugin.errors import ConfigError, RefNotFoundError
from ctxplugin.facts import ChromaFactStore
from ctxplugin.guard import unwrap

pytestmark = [pytest.mark.postgres, pytest.mark.chroma_server]

OUTPUT = "\n".join(f"issue #{n}: crash in parser.py line {n * 7} (reported by user{n})" for n in range(120))
ALICE = Scope(session_id="thread-1", user_id="alice", tenant_id="acme")
ALICE_LATER = Scope(session_id="thread-2", user_id="alice", tenant_id="acme")
BOB = Scope(session_id="thread-1", user_id="bob", tenant_id="acme")
OTHER_TENANT = Scope(session_id="thread-1", user_id="alice", tenant_id="globex")


@pytest.fixture
def server_env(monkeypatch: pytest.MonkeyPatch, pg_dsn: str, pg_schema: str, chroma_server: Any, tmp_path: Path) -> Iterator[None]:
    """The environment of a deployment on server stores (a fresh schema and collection)."""
    monkeypatch.setenv("CTXPLUGIN_POSTGRES_DSN", pg_dsn)
    monkeypatch.setenv("CTXPLUGIN_POSTGRES_SCHEMA", pg_schema)
    monkeypatch.setenv("CTXPLUGIN_CHROMA_URL", chroma_server.url)
    monkeypatch.setenv("CTXPLUGIN_FACTS__COLLECTION", f"t{uuid.uuid4().hex[:12]}")
    monkeypatch.setenv("CTXPLUGIN_PATH", str(tmp_path / "unused"))
    yield


def _close(*engines: ContextEngine) -> None:
    # Only the Postgres pools are closed: chromadb's HTTP client leaves its sockets open when
    # closed, and their ResourceWarning would surface in whatever test runs next.
    for engine in engines:
        engine.cas.close()


def _ref(message: ToolMessage) -> str:
    meta = message.additional_kwargs["ctxplugin"]
    assert "ref" in meta, meta
    return str(meta["ref"])


def test_nothing_configured_means_embedded_stores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CTXPLUGIN_POSTGRES_DSN", "CTXPLUGIN_CHROMA_URL"):
        monkeypatch.delenv(name, raising=False)
    engine = ctxplugin.connect(ContextConfig(path=str(tmp_path / "local")))
    try:
        assert isinstance(unwrap(engine.cas), SQLiteCASStore)
        assert engine.facts.lock is None, "one process: the ledger's own lock serialises writes"
        compact = engine.capture_tool_result(ToolMessage(content=OUTPUT, tool_call_id="c1", name="issues"), scope=ALICE)
        assert engine.expand_ref(_ref(compact), scope=ALICE) == OUTPUT
        assert (tmp_path / "local" / "cas.sqlite3").exists() and (tmp_path / "local" / "chroma").is_dir()
    finally:
        _close(engine)


def test_the_environment_moves_every_store_to_the_servers(server_env: None, tmp_path: Path) -> None:
    web, worker = ctxplugin.connect(), ContextEngine.from_config()  # two processes of one deployment
    try:
        assert isinstance(unwrap(web.cas), PostgresCASStore) and isinstance(unwrap(worker.cas), PostgresCASStore)
        assert isinstance(unwrap(web.facts.store), ChromaFactStore)
        lock = unwrap(web.facts.lock)
        assert isinstance(lock, PostgresWriteLock) and lock.pool is unwrap(web.cas).pool
        assert not (tmp_path / "unused").exists()  # nothing on local disk

        ref = _ref(web.capture_tool_result(ToolMessage(content=OUTPUT, tool_call_id="c1", name="issues"), scope=ALICE))
        assert worker.expand_ref(ref, scope=ALICE) == OUTPUT
        for reader in (ALICE_LATER, BOB, OTHER_TENANT):
            with pytest.raises(RefNotFoundError):
                worker.expand_ref(ref, scope=reader)

        fact = web.facts.write("The deploy target is eu-west-3", key="deploy_target", scope=ALICE, visibility="user")
        web.facts.write("Bob prefers staging", key="bob_pref", scope=BOB)
        hits = worker.facts.search("where do we deploy?", scope=ALICE_LATER, k=5)
        assert [h.fact.id for h in hits] == [fact.id]
        assert worker.facts.search("where do we deploy?", scope=BOB, k=5)[0].fact.key == "bob_pref"
        assert all(h.fact.key != "deploy_target" for h in worker.facts.search("deploy", scope=BOB, k=5))
        assert worker.facts.search("deploy target", scope=OTHER_TENANT, k=5) == []

        newer = worker.facts.write("The deploy target is us-east-1", key="deploy_target", scope=ALICE, visibility="user")
        current = web.facts.current("deploy_target", scope=ALICE_LATER)
        assert current is not None and current.id == newer.id
    finally:
        _close(web, worker)


def test_only_a_chroma_url_keeps_the_cas_on_disk(
    monkeypatch: pytest.MonkeyPatch, chroma_server: Any, tmp_path: Path
) -> None:
    monkeypatch.delenv("CTXPLUGIN_POSTGRES_DSN", raising=False)
    config = ContextConfig(
        chroma_url=chroma_server.url,
        path=str(tmp_path / "local"),
        facts={"collection": f"t{uuid.uuid4().hex[:12]}"},
    )
    engine = ctxplugin.connect(config)
    try:
        assert isinstance(unwrap(engine.cas), SQLiteCASStore) and engine.path == tmp_path / "local"
        engine.facts.write("Release freeze starts Friday", key="freeze", scope=ALICE)
        assert engine.facts.search("when is the freeze?", scope=ALICE, k=3)[0].fact.key == "freeze"
        assert not (tmp_path / "local" / "chroma").exists()
    finally:
        _close(engine)


def test_the_answer_cache_follows_the_facts_to_the_server(chroma_server: Any, tmp_path: Path) -> None:
    from ctxplugin.cache import ChromaAnswerCacheStore

    engine = ctxplugin.connect(ContextConfig(chroma_url=chroma_server.url, path=str(tmp_path), cache={"enabled": True}))
    try:
        assert engine.cache is not None and isinstance(unwrap(engine.cache.store), ChromaAnswerCacheStore)
        assert not (tmp_path / "chroma").exists()
    finally:
        _close(engine)


def test_a_dsn_without_the_package_names_the_install_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "ctxplugin_postgres", None)  # as if not installed
    with pytest.raises(MissingDependencyError, match="ctxplugin-postgres") as raised:
        ctxplugin.connect(ContextConfig(postgres_dsn="postgresql://nowhere/db", path=str(tmp_path)))
    # ctxplugin-postgres is not published: a bare `pip install ctxplugin-postgres` would fetch
    # whatever a package index holds under that name
    assert "pip install ctxplugin-postgres" not in str(raised.value)
    assert "integrations/postgres" in str(raised.value)


def test_a_bad_schema_name_is_rejected_when_configured() -> None:
    with pytest.raises(ValueError, match="postgres_schema"):
        ContextConfig(postgres_dsn="postgresql://db/x", postgres_schema="Robert'); DROP")


@pytest.mark.parametrize("schema", ["pg_ctxplugin", "information_schema"])
def test_a_system_schema_is_rejected_before_any_table_is_made(pg_dsn: str, schema: str) -> None:
    # Postgres refuses to create pg_* schemas (every step then degraded), and information_schema
    # exists: the tables went in among the server's own
    with pytest.raises(ConfigError, match="system schema"):
        ContextConfig(postgres_dsn=pg_dsn, postgres_schema=schema)
    with pytest.raises(ConfigError, match="system schema"):
        PostgresCASStore.from_dsn(pg_dsn, schema=schema)
    with psycopg.connect(pg_dsn) as conn:
        made = conn.execute(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname LIKE 'ctxplugin%%'", (schema,)
        ).fetchone()
    assert made == (0,)
