"""Messages owed to the facts ledger while its Postgres write lock was held elsewhere: the real
Postgres on 127.0.0.1:5432, the advisory lock held from a second connection (as a process stuck
mid-write holds it), so that each step's facts write gives up.

Once it is let go, the owed messages are read a bounded portion per step, oldest first, each
message under the lock; an output captured while older ones are still owed never loses to them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from ctxplugin_postgres import migrate
from ctxplugin_postgres.locks import lock_key
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

import ctxplugin
from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.facts.locks import slot_lock_name
from ctxplugin.facts.model import visibility_key
from ctxplugin.stages._backlog import OWED_PER_STEP

pytestmark = pytest.mark.postgres

SCOPE = Scope(session_id="backlog", user_id="ops")
KEY = "reservation:OBUT9V"


def _engine(dsn: str, schema: str, path: Path) -> ContextEngine:
    migrate(dsn, schema=schema)
    config = ContextConfig(
        mode="whole",
        postgres_dsn=dsn,
        postgres_schema=schema,
        path=str(path),
        stores={"timeout": 0.6, "retry_after": 0.1},
    )
    return ctxplugin.connect(config)


@contextmanager
def _held(dsn: str, schema: str) -> Iterator[None]:
    """The write lock of ``SCOPE``'s facts held by another session."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        key = lock_key(schema, slot_lock_name(visibility_key(SCOPE, "session")))
        conn.execute("SELECT pg_advisory_lock(%s)", (key,))
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))


def reservation_lookup(call_id: str, cabin: str) -> tuple[AIMessage, ToolMessage]:
    """A lookup of reservation OBUT9V and its output, the value changing with ``cabin``."""
    args = {"reservation_id": "OBUT9V"}
    payload = {**args, "origin": "IAH", "destination": "DEN", "cabin": cabin}
    ask = AIMessage("", tool_calls=[{"name": "get_reservation_details", "args": args, "id": call_id}])
    return ask, ToolMessage(json.dumps(payload), tool_call_id=call_id, name="get_reservation_details")


def _owed(engine: ContextEngine, messages: list[BaseMessage]) -> bool:
    return any(
        "owed to the facts ledger" in w
        for w in engine.prepare(messages, scope=SCOPE).report.warnings
    )


def test_an_output_captured_while_the_ledger_catches_up_stays_current(
    pg_dsn: str, pg_schema: str, tmp_path: Path
) -> None:
    with _engine(pg_dsn, pg_schema, tmp_path) as engine:
        messages: list[BaseMessage] = [HumanMessage("Keep an eye on reservation OBUT9V", id="h0")]
        with _held(pg_dsn, pg_schema):
            for step in range(OWED_PER_STEP // 2 + 1):  # more messages owed than one step reads
                messages += [
                    *reservation_lookup(f"c{step}", f"fare{step}"),
                    HumanMessage(f"Again ({step})", id=f"h{step + 1}"),
                ]
                warnings = engine.prepare(messages, scope=SCOPE).report.warnings
                assert any("facts store unavailable" in w for w in warnings)
        assert _owed(engine, messages)  # the lock is free: the oldest portion is read
        fact = engine.facts.current(KEY, scope=SCOPE)
        assert fact is not None and f"fare{OWED_PER_STEP // 2}" not in fact.text
        ask, output = reservation_lookup("new", "premium")
        compact = engine.capture_tool_result(output, scope=SCOPE)
        messages += [ask, compact, HumanMessage("Which cabin now?", id="hn")]
        for step in range(4):
            if not _owed(engine, messages):
                break
            messages += [
                AIMessage("Working on it.", id=f"w{step}"),
                HumanMessage(f"Still? ({step})", id=f"v{step}"),
            ]
        assert not _owed(engine, messages)
        fact = engine.facts.current(KEY, scope=SCOPE)
        assert fact is not None and "cabin=premium" in fact.text
