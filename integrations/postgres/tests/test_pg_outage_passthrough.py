"""Tool outputs passed through while the Postgres CAS table is locked by another session (the
real Postgres on 127.0.0.1:5432): each is summarized at most once, however many steps show it,
every step's report counts them in one warning, and once the lock is let go they are all stored."""

from __future__ import annotations

import importlib
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from ctxplugin_postgres import migrate
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from psycopg import sql
from pytest_mock import MockerFixture

import ctxplugin
from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.guard import GuardedCASStore

pytestmark = pytest.mark.postgres

capture_module = importlib.import_module("ctxplugin.cas.capture")
SCOPE = Scope(session_id="outage", user_id="ops")
OUTPUTS = 5


def output(n: int) -> str:
    return "\n".join(f"worker-{n} request {n * 100 + r} took {r * 7}ms on shard {r % 4}" for r in range(80))


@pytest.fixture
def engine(pg_dsn: str, pg_schema: str, tmp_path: Path) -> Iterator[ContextEngine]:
    migrate(pg_dsn, schema=pg_schema)
    config = ContextConfig(
        postgres_dsn=pg_dsn, postgres_schema=pg_schema, path=str(tmp_path), facts={"enabled": False},
        history={"enabled": False}, budget={"total": 100_000}, stores={"timeout": 0.5, "retry_after": 0.1},
    )
    engine = ctxplugin.connect(config)
    yield engine
    engine.close()


def test_outputs_passed_through_while_the_cas_table_is_locked_are_summarized_once_and_stored_after(
    engine: ContextEngine, pg_dsn: str, pg_schema: str, mocker: MockerFixture
) -> None:
    summarize = mocker.spy(capture_module, "summarize")
    messages: list[BaseMessage] = [HumanMessage("What did the workers do?", id="h0")]
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(sql.Identifier(pg_schema, "ctxplugin_cas_refs")))
        try:
            for n in range(OUTPUTS):
                messages.append(AIMessage("", tool_calls=[{"name": "logs", "args": {"n": n}, "id": f"c{n}"}], id=f"a{n}"))
                messages.append(ToolMessage(output(n), tool_call_id=f"c{n}", name="logs", id=f"t{n}"))
                messages.append(HumanMessage(f"And worker {n}?", id=f"h{n + 1}"))
                engine.prepare(messages, scope=SCOPE)
            for _ in range(3):
                report = engine.prepare(messages, scope=SCOPE).report
                warnings = [w for w in report.warnings if "CAS unavailable" in w]
                assert len(warnings) == 1 and f"{OUTPUTS} tool outputs passed through unstored" in warnings[0], warnings
            assert summarize.call_count <= OUTPUTS, "no output summarized twice"
        finally:
            conn.rollback()
    guard = engine.cas.guard if isinstance(engine.cas, GuardedCASStore) else None
    assert guard is not None
    # the circuit lets a call through after the pause in force: bounded, with room for a loaded machine
    deadline = time.monotonic() + guard.retry_interval + 10
    created: list[str] = []
    while len(created) < OUTPUTS and time.monotonic() < deadline:
        created += engine.prepare(messages, scope=SCOPE).report.refs_created
        time.sleep(0.1)
    assert sorted(engine.expand_ref(ref, SCOPE) for ref in created) == sorted(output(n) for n in range(OUTPUTS))
    assert summarize.call_count == OUTPUTS, "each output summarized once in all"
