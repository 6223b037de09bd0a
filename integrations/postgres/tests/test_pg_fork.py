"""A Postgres-backed engine across a fork (gunicorn ``--preload``, ``multiprocessing`` "fork"):
each process talks to Postgres on connections of its own, and the parent's stay untouched."""

from __future__ import annotations

import multiprocessing
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from ctxplugin_postgres import PostgresCASStore, make_pool
from langchain_core.messages import HumanMessage, ToolMessage
from psycopg_pool import ConnectionPool

import ctxplugin
from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.errors import RefNotFoundError, StoreError
from ctxplugin.testing.chroma_server import ChromaServer

pytestmark = [pytest.mark.postgres, pytest.mark.chroma_server]

ROUNDS = 6
REF = re.compile(r"ref:[a-z_]+:[0-9a-f]{16}")


def _output(who: str, i: int) -> str:
    return "\n".join(f"row {r}: {who} item {i}-{r} status=ok" for r in range(120))


def _work(engine: ContextEngine, who: str, scope: Scope) -> dict[str, Any]:
    """Capture, expand and write facts ``ROUNDS`` times; what came back and any warnings."""
    refs: list[str] = []
    warnings: list[str] = []
    for i in range(ROUNDS):
        compact = engine.capture_tool_result(ToolMessage(content=_output(who, i), tool_call_id=f"{who}-{i}", name="run"), scope)
        text = str(compact.content)
        found = REF.search(text)
        if found is None:
            warnings.append(f"capture {i} passed through: {text[:200]}")
            continue
        ref = found.group(0)
        refs.append(ref)
        if engine.expand_ref(ref, scope=scope) != _output(who, i):
            warnings.append(f"expand {i} differs")
        engine.facts.write(f"{who} finished batch {i}", key=f"{who}_batch", scope=scope)
    prepared = engine.prepare([HumanMessage(content=f"what did {who} finish?")], scope=scope)
    warnings.extend(prepared.report.warnings)
    return {"refs": refs, "warnings": warnings}


def _in_child(engine: ContextEngine, who: str, results: Any) -> None:
    outcome: dict[str, Any] = {"who": who}
    try:
        outcome.update(_work(engine, who, Scope(session_id=who)))
        engine.close()  # closes this process's connections only
    except BaseException as exc:  # reported to the parent, which fails the test
        outcome["error"] = repr(exc)
    results.put(outcome)


def test_forked_workers_use_connections_of_their_own_and_leave_the_parents_alone(
    pg_dsn: str, pg_schema: str, chroma_server: ChromaServer, tmp_path: Path
) -> None:
    config = ContextConfig(
        postgres_dsn=pg_dsn,
        postgres_schema=pg_schema,
        chroma_url=chroma_server.url,
        path=str(tmp_path / "unused"),
        facts={"collection": f"fork{uuid.uuid4().hex[:12]}", "extract": False},
        stores={"timeout": 10.0},
    )
    engine = ctxplugin.connect(config)
    parent = Scope(session_id="parent")
    before = _work(engine, "parent0", parent)  # the pool is connected and lent out before the fork
    assert before["warnings"] == []
    fork = multiprocessing.get_context("fork")
    results = fork.Queue()
    children = [fork.Process(target=_in_child, args=(engine, f"child{n}", results)) for n in range(2)]
    for child in children:
        child.start()
    during = _work(engine, "parent1", parent)  # the parent goes on meanwhile, on its own pool
    for child in children:
        child.join(120)
    hung = [child for child in children if child.is_alive()]
    for child in hung:
        child.kill()
    assert not hung, "a forked child hung on the parent's connections"
    outcomes = sorted((results.get(timeout=10) for _ in children), key=lambda o: str(o["who"]))
    assert [(o.get("error"), o.get("warnings")) for o in outcomes] == [(None, []), (None, [])], outcomes
    assert during["warnings"] == []
    # what each child stored is there, readable from its own session and no other
    for n, outcome in enumerate(outcomes):
        who = f"child{n}"
        assert len(outcome["refs"]) == ROUNDS
        for i, ref in enumerate(outcome["refs"]):
            assert engine.expand_ref(ref, scope=Scope(session_id=who)) == _output(who, i)
            with pytest.raises(RefNotFoundError):
                engine.expand_ref(ref, scope=parent)
        current = engine.facts.current(f"{who}_batch", scope=Scope(session_id=who))
        assert current is not None and current.text == f"{who} finished batch {ROUNDS - 1}"
        assert len(engine.facts.history(f"{who}_batch", scope=Scope(session_id=who))) == ROUNDS
        assert engine.facts.current(f"{who}_batch", scope=parent) is None
    # the children's exit (and their close()) ended none of the parent's server sessions
    after = _work(engine, "parent2", parent)
    assert after["warnings"] == []
    for i, ref in enumerate(before["refs"]):
        assert engine.expand_ref(ref, scope=parent) == _output("parent0", i)
    engine.close()


def _child_closes(pool: Any, results: Any) -> None:
    try:
        pool.close()
        results.put("closed")
    except BaseException as exc:  # reported to the parent, which fails the test
        results.put(repr(exc))


def test_a_child_closing_an_inherited_pool_leaves_the_parents_connections_open(pg_dsn: str, pg_schema: str) -> None:
    store = PostgresCASStore(make_pool(pg_dsn, max_size=1, timeout=5.0), schema=pg_schema, owns_pool=True)
    assert store.stats()["contents"] == 0
    with store.pool.connection() as conn:
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()
    fork = multiprocessing.get_context("fork")
    results = fork.Queue()
    child = fork.Process(target=_child_closes, args=(store.pool, results))
    child.start()
    child.join(60)
    assert results.get(timeout=10) == "closed"
    with store.pool.connection() as conn:  # the same server session, still open
        assert conn.execute("SELECT pg_backend_pid()").fetchone() == backend
    store.close()


def _child_uses_a_plain_pool(store: PostgresCASStore, results: Any) -> None:
    try:
        store.stats()
        results.put("used the parent's connections")
    except StoreError as exc:
        store.close()  # drops the inherited pool without ending the parent's sessions
        results.put(str(exc))


def test_a_store_on_a_plain_pool_refuses_a_forked_process_with_what_to_do(pg_dsn: str, pg_schema: str) -> None:
    pool: ConnectionPool = ConnectionPool(pg_dsn, min_size=1, max_size=1, open=True)
    store = PostgresCASStore(pool, schema=pg_schema, owns_pool=True)
    store.stats()
    with pool.connection() as conn:
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()
    fork = multiprocessing.get_context("fork")
    results = fork.Queue()
    child = fork.Process(target=_child_uses_a_plain_pool, args=(store, results))
    child.start()
    child.join(60)
    said = results.get(timeout=10)
    assert "make_pool" in said and "forked" in said
    with pool.connection() as conn:
        assert conn.execute("SELECT pg_backend_pid()").fetchone() == backend
    store.close()


def _child_of_a_borrowing_thread(pool: Any, conn: Any, results: Any) -> None:
    try:
        pool.putconn(conn)  # the end of the parent's `with pool.connection()` block, run here too
        with pool.connection() as own:
            results.put(own.execute("SELECT pg_backend_pid()").fetchone())
        pool.close()
    except BaseException as exc:  # reported to the parent, which fails the test
        results.put(repr(exc))


def test_a_fork_inside_a_borrowed_connection_keeps_it_the_parents(pg_dsn: str) -> None:
    pool = make_pool(pg_dsn, max_size=1, timeout=5.0)
    fork = multiprocessing.get_context("fork")
    results = fork.Queue()
    with pool.connection() as conn:
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()
        child = fork.Process(target=_child_of_a_borrowing_thread, args=(pool, conn, results))
        child.start()
        child.join(60)
        child_backend = results.get(timeout=10)
        assert conn.execute("SELECT pg_backend_pid()").fetchone() == backend
    assert isinstance(child_backend, tuple) and child_backend != backend
    with pool.connection() as conn:
        assert conn.execute("SELECT pg_backend_pid()").fetchone() == backend
    pool.close()
