"""Server faults during a run: the agent always completes, nothing is lost, and the stores
recover when the servers come back.

The restart test restarts the local Postgres cluster; it runs only as root with
``pg_ctlcluster`` available and a loopback DSN, and always leaves the server running.
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from ctxplugin_postgres import PostgresCASStore, make_pool
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool, tool

import ctxplugin
from ctxplugin import ContextConfig, ContextEngine, ContextReport, Scope
from ctxplugin.guard import unwrap
from ctxplugin.testing import ScriptedChatModel, tool_call

pytestmark = pytest.mark.postgres

_outputs = itertools.count(1)


@tool
def search_logs(query: str) -> str:
    """Search the service logs for a query."""
    n = next(_outputs)
    return "\n".join(f"2024-05-0{n % 9 + 1}T10:{r:02d}:00 worker-{n} {query}: request {n * 100 + r} took {r * 3}ms" for r in range(60))


def run_agent(engine: ContextEngine, scope: Scope, question: str, searches: int = 2) -> tuple[list[BaseMessage], list[ContextReport]]:
    """A small agent: the model searches the logs ``searches`` times, then answers."""
    script: list[Any] = [AIMessage(content="", tool_calls=[tool_call("search_logs", {"query": f"{question} #{i}"})]) for i in range(searches)]
    model = ScriptedChatModel(script=[*script, AIMessage(content="The slow requests come from worker pools.")])
    tools: list[BaseTool] = [search_logs]
    messages: list[BaseMessage] = [SystemMessage(content="You answer questions about service logs."), HumanMessage(content=question)]
    reports: list[ContextReport] = []
    while True:
        prepared = engine.prepare(messages, tools=tools, scope=scope)
        reports.append(prepared.report)
        reply = model.bind_tools(prepared.tools).invoke(prepared.messages)
        assert isinstance(reply, AIMessage)
        messages.append(reply)
        if not reply.tool_calls:
            return messages, reports
        for call in reply.tool_calls:
            output = search_logs.invoke(call["args"])
            raw = ToolMessage(content=output, tool_call_id=call["id"], name=call["name"], additional_kwargs={"original": output})
            messages.append(engine.capture_tool_result(raw, scope=scope))


def assert_nothing_lost(engine: ContextEngine, messages: list[BaseMessage], scope: Scope) -> None:
    """Every tool output is either stored (and expands to the original) or passed through whole."""
    for message in messages:
        if not isinstance(message, ToolMessage):
            continue
        original = message.additional_kwargs["original"]
        meta = message.additional_kwargs.get("ctxplugin", {})
        if "ref" in meta:
            assert engine.expand_ref(meta["ref"], scope=scope) == original
        else:
            assert message.content == original and "warning" in meta


# --- Postgres restarted during a run ------------------------------------------------------


def _cluster_version() -> str | None:
    root = Path("/etc/postgresql")
    versions = sorted(p.name for p in root.iterdir()) if root.is_dir() else []
    return versions[-1] if versions else None


def _postgres_accepts(dsn: str) -> bool:
    try:
        with psycopg.connect(dsn, connect_timeout=2) as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.OperationalError:
        return False


def _postmaster_started(dsn: str) -> object:
    with psycopg.connect(dsn, connect_timeout=10) as conn:
        row = conn.execute("SELECT pg_postmaster_start_time()").fetchone()
    assert row is not None
    return row[0]


@pytest.fixture
def restartable(pg_dsn: str) -> Iterator[list[str]]:
    """The restart command (``stop``/``start`` replace its last word), and a guarantee that
    Postgres is running after the test."""
    version = _cluster_version()
    if os.geteuid() != 0 or shutil.which("pg_ctlcluster") is None or version is None:
        pytest.skip("restarting Postgres needs root and pg_ctlcluster (a Debian cluster)")
    if urlsplit(pg_dsn).hostname not in ("127.0.0.1", "localhost", "::1"):
        pytest.skip("the test database is not the local cluster")
    yield ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"]
    deadline = time.monotonic() + 60
    while not _postgres_accepts(pg_dsn):
        if time.monotonic() > deadline:
            subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "start"], check=False)
            deadline = time.monotonic() + 60
        time.sleep(0.5)


@pytest.mark.slow
def test_postgres_restart_during_a_run(pg_dsn: str, pg_schema: str, restartable: list[str], tmp_path: Path) -> None:
    config = ContextConfig(postgres_dsn=pg_dsn, postgres_schema=pg_schema, path=str(tmp_path), facts={"extract": False})
    engine = ctxplugin.connect(config)
    scope = Scope(session_id="restart-run")
    try:
        _, before = run_agent(engine, scope, "timeouts before")  # the pool is warm and the schema exists
        cas = unwrap(engine.cas)
        assert isinstance(cas, PostgresCASStore)
        started, opened = _postmaster_started(pg_dsn), cas.pool.get_stats()["connections_num"]
        restarted = threading.Event()
        failures: list[BaseException] = []
        runs: list[list[BaseMessage]] = []

        def keep_working() -> None:
            after_restart = 0
            try:
                while after_restart < 3:
                    messages, _ = run_agent(engine, scope, f"timeouts run {len(runs)}", searches=1)
                    runs.append(messages)
                    if restarted.is_set():
                        after_restart += 1
            except BaseException as exc:  # surfaced below: the agent must never see an error
                failures.append(exc)

        worker = threading.Thread(target=keep_working)
        worker.start()
        try:
            subprocess.run(restartable, check=True, capture_output=True, timeout=120)
        finally:
            restarted.set()
            worker.join()
        assert not failures, failures[0]
        assert all(isinstance(run[-1], AIMessage) and not run[-1].tool_calls for run in runs)  # each run finished
        # writes resume on fresh connections: the last run's outputs were stored, not passed through
        last_outputs = [m for m in runs[-1] if isinstance(m, ToolMessage)]
        assert last_outputs and all("ref" in m.additional_kwargs["ctxplugin"] for m in last_outputs)
        for run in runs:
            assert_nothing_lost(engine, run, scope)
        # the server really restarted, and the pool replaced the connections it killed
        assert _postmaster_started(pg_dsn) != started
        assert cas.pool.get_stats()["connections_num"] > opened
        assert before[0].warnings == []
    finally:
        engine.cas.close()


@pytest.mark.slow
def test_postgres_down_then_back(pg_dsn: str, pg_schema: str, restartable: list[str], tmp_path: Path) -> None:
    """While the server is stopped the agent runs on pass-throughs; once it is back, the same
    engine stores again without being rebuilt."""
    store = PostgresCASStore.from_dsn(pg_dsn, schema=pg_schema, timeout=1.0)  # wait less for a stopped server
    engine = ContextEngine(config=ContextConfig(facts={"enabled": False}), cas=store)
    scope = Scope(session_id="outage-run")
    try:
        run_agent(engine, scope, "warm up", searches=1)
        subprocess.run([*restartable[:-1], "stop"], check=True, capture_output=True, timeout=120)
        try:
            down, reports = run_agent(engine, scope, "during the outage", searches=1)
        finally:
            subprocess.run([*restartable[:-1], "start"], check=True, capture_output=True, timeout=120)
        assert isinstance(down[-1], AIMessage) and not down[-1].tool_calls
        assert any("CAS unavailable" in w for r in reports for w in r.warnings)
        assert_nothing_lost(engine, down, scope)
        back, _ = run_agent(engine, scope, "after the outage", searches=1)
        stored = [m for m in back if isinstance(m, ToolMessage)]
        assert stored and all("ref" in m.additional_kwargs["ctxplugin"] for m in stored)
        assert_nothing_lost(engine, back, scope)
    finally:
        engine.cas.close()


# --- Chroma server down -------------------------------------------------------------------


@pytest.mark.chroma_server
def test_chroma_server_down_skips_facts_with_a_warning(
    own_chroma_server: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = ContextConfig(
        chroma_url=own_chroma_server.url, path=str(tmp_path), facts={"collection": f"down{uuid.uuid4().hex[:8]}"}
    )
    engine = ctxplugin.connect(config)
    scope = Scope(session_id="chroma-down", user_id="ops")
    try:
        engine.facts.write("Slow requests are tracked in ticket OPS-4471", key="tracking_ticket", scope=scope)
        _, reports = run_agent(engine, scope, "which ticket tracks slow requests?")
        assert any(f.key == "tracking_ticket" for r in reports for f in r.facts)
        assert all(not r.warnings for r in reports)

        own_chroma_server.stop()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="ctxplugin"):
            messages, reports = run_agent(engine, scope, "which ticket tracks slow requests now?")
        assert isinstance(messages[-1], AIMessage) and not messages[-1].tool_calls  # the agent finished
        assert all(any("facts store unavailable" in w for w in r.warnings) for r in reports)
        assert all(r.facts == [] for r in reports)
        assert any("facts store unavailable" in rec.getMessage() for rec in caplog.records)
        assert_nothing_lost(engine, messages, scope)  # the CAS on disk kept working
    finally:
        engine.cas.close()


# --- Postgres unreachable from the start --------------------------------------------------


def test_unreachable_postgres_passes_outputs_through(tmp_path: Path) -> None:
    pool = make_pool("postgresql://postgres@127.0.0.1:1/none", timeout=0.3)
    engine = ContextEngine(config=ContextConfig(facts={"enabled": False}), cas=PostgresCASStore(pool, owns_pool=True))
    scope = Scope(session_id="no-db")
    try:
        messages, reports = run_agent(engine, scope, "errors?", searches=1)
        assert isinstance(messages[-1], AIMessage) and not messages[-1].tool_calls
        assert any("CAS unavailable" in w for r in reports for w in r.warnings)
        outputs = [m for m in messages if isinstance(m, ToolMessage)]
        assert outputs and all(m.content == m.additional_kwargs["original"] for m in outputs)
    finally:
        engine.cas.close()
