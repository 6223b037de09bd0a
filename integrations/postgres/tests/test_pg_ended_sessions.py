"""Pooled connections whose server sessions were ended while the server stays up: an
administrator's ``pg_terminate_backend``, ``idle_session_timeout``, a connection pooler or a
failover proxy closing idle sessions. The pool holds several such connections at once; the next
step must get a working connection, not wait for the pool to back off from each dead one."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ctxplugin_postgres import AsyncPostgresCASStore, make_async_pool, make_pool, migrate
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from psycopg_pool import ConnectionPool
from pytest_mock import MockerFixture

import ctxplugin
from ctxplugin import ContextConfig, Scope
from ctxplugin.guard import unwrap
from ctxplugin.testing.cas_contract import make_item

pytestmark = pytest.mark.postgres

TIMEOUT = 2.0
IDLE = 3
"""Idle connections ended at once: psycopg's pool waits 1 s after its first failed check and
2 s after the second, so three of them outlast a 2 s ``stores.timeout`` if it backs off."""


def _output(n: int) -> str:
    return "\n".join(f"2026-11-0{n}T10:{r:02d}:00 worker-{n} request {n * 100 + r} took {r * 3}ms" for r in range(60))


def _end_sessions(dsn: str, pids: list[int]) -> None:
    with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
        conn.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", (pids,))
        # the backends are gone once the server no longer lists them
        while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)).fetchone() != (0,):
            conn.execute("SELECT pg_sleep(0.05)")


def _end_idle(pool: ConnectionPool, dsn: str) -> list[int]:
    """Lend ``IDLE`` connections, take them back and end their server sessions: the pool then
    holds ``IDLE`` connections that fail their check; their backend pids."""
    held = [pool.getconn() for _ in range(IDLE)]
    pids = [conn.info.backend_pid for conn in held]
    for conn in held:
        pool.putconn(conn)
    _end_sessions(dsn, pids)
    return pids


def test_a_step_after_the_server_ended_idle_sessions_stores_its_output(pg_dsn: str, pg_schema: str, tmp_path: Path) -> None:
    migrate(pg_dsn, schema=pg_schema)
    config = ContextConfig(
        postgres_dsn=pg_dsn, postgres_schema=pg_schema, path=str(tmp_path), facts={"enabled": False},
        stores={"timeout": TIMEOUT, "retry_after": 0.25},
    )
    engine = ctxplugin.connect(config)
    scope = Scope(session_id="ended-sessions")
    try:
        first, report = engine.capture_with_report(ToolMessage(_output(1), tool_call_id="c1", name="search_logs"), scope)
        assert "ref" in first.additional_kwargs["ctxplugin"] and report.warnings == []
        _end_idle(unwrap(engine.cas).pool, pg_dsn)  # the pool now keeps IDLE dead connections

        original = _output(2)
        compact, report = engine.capture_with_report(ToolMessage(original, tool_call_id="c2", name="search_logs"), scope)

        assert report.warnings == [], "the server is up: the output is stored, not passed through"
        ref = compact.additional_kwargs["ctxplugin"]["ref"]
        assert engine.expand_ref(ref, scope=scope) == original
        assert engine.expand_ref(first.additional_kwargs["ctxplugin"]["ref"], scope=scope) == _output(1)
    finally:
        engine.close()


def test_a_fact_stated_after_the_server_ended_idle_sessions_is_written(pg_dsn: str, pg_schema: str, tmp_path: Path) -> None:
    # the facts write lock is taken on the CAS's pool: its dead connections are replaced too
    migrate(pg_dsn, schema=pg_schema)
    config = ContextConfig(
        postgres_dsn=pg_dsn, postgres_schema=pg_schema, path=str(tmp_path), stores={"timeout": TIMEOUT, "retry_after": 0.25}
    )
    engine = ctxplugin.connect(config)
    scope = Scope(session_id="ended-sessions-facts")
    messages: list[BaseMessage] = [HumanMessage("The deploy target is eu-west-3.", id="h1")]
    try:
        assert engine.prepare(messages, scope=scope).report.warnings == []
        _end_idle(unwrap(engine.cas).pool, pg_dsn)

        messages += [AIMessage("Noted.", id="a1"), HumanMessage("The release deadline is Friday 5pm.", id="h2")]
        assert engine.prepare(messages, scope=scope).report.warnings == []
        assert engine.facts.current("release_deadline", scope=scope) is not None
    finally:
        engine.close()


async def test_the_async_store_gets_past_idle_sessions_the_server_ended(pg_dsn: str, pg_schema: str) -> None:
    scope = Scope(session_id="ended-sessions-async")
    before, after = make_item("the deploy target is eu-west-3\n" * 40), make_item("the freeze starts Friday\n" * 40)
    async with await AsyncPostgresCASStore.from_dsn(pg_dsn, schema=pg_schema, timeout=TIMEOUT) as store:
        await store.put(before, scope)
        held = [await store.pool.getconn() for _ in range(IDLE)]
        pids = [conn.info.backend_pid for conn in held]
        for conn in held:
            await store.pool.putconn(conn)
        _end_sessions(pg_dsn, pids)

        await store.put(after, scope)  # before: StoreUnavailableError, the pool backing off

        assert (await store.get(after.ref_id, scope)).content == after.content
        assert (await store.get(before.ref_id, scope)).content == before.content


def _pool_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("psycopg.pool") and r.levelno >= logging.WARNING]


def test_connections_the_server_ended_are_replaced_without_a_warning_each(
    pg_dsn: str, pg_schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    # a connection that fails its check is expected after a restart: psycopg's own check says
    # so at INFO; handed back as if the caller had closed it, each logged a WARNING. The pool
    # holds only the ended connections (max_size), so the first ones lent fail their check
    pool = make_pool(pg_dsn, min_size=IDLE, max_size=IDLE, timeout=TIMEOUT, name="ended-quiet")
    try:
        pids = _end_idle(pool, pg_dsn)
        with caplog.at_level(logging.INFO, logger="psycopg.pool"), pool.connection() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,) and conn.info.backend_pid not in pids
        assert _pool_warnings(caplog) == []
    finally:
        pool.close()


async def test_the_async_pool_replaces_ended_connections_without_a_warning_each(
    pg_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    pool = make_async_pool(pg_dsn, min_size=IDLE, max_size=IDLE, timeout=TIMEOUT, name="ended-quiet-async")
    await pool.open()
    try:
        held = [await pool.getconn() for _ in range(IDLE)]
        pids = [conn.info.backend_pid for conn in held]
        for conn in held:
            await pool.putconn(conn)
        _end_sessions(pg_dsn, pids)
        with caplog.at_level(logging.INFO, logger="psycopg.pool"):
            async with pool.connection() as conn:
                assert await (await conn.execute("SELECT 1")).fetchone() == (1,) and conn.info.backend_pid not in pids
        assert _pool_warnings(caplog) == []
    finally:
        await pool.close()


def test_a_pool_without_the_quiet_hand_back_still_replaces_ended_connections(
    pg_dsn: str, mocker: MockerFixture
) -> None:
    # another psycopg_pool release may lack the private hand-back the pool uses to stay quiet:
    # the public one (which warns) takes over, and a step still gets a working connection
    original = ConnectionPool._putconn
    quiet_tries: list[bool] = []

    def older(self: ConnectionPool, conn: Any, from_getconn: bool) -> None:
        if from_getconn:
            quiet_tries.append(True)
            raise TypeError("_putconn() got an unexpected keyword argument 'from_getconn'")
        original(self, conn, from_getconn)

    pool = make_pool(pg_dsn, min_size=IDLE, max_size=IDLE, timeout=TIMEOUT, name="ended-public")
    try:
        pids = _end_idle(pool, pg_dsn)
        mocker.patch.object(ConnectionPool, "_putconn", older)
        with pool.connection(timeout=TIMEOUT) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,) and conn.info.backend_pid not in pids
        assert quiet_tries, "a dead connection was handed back"
    finally:
        pool.close()
