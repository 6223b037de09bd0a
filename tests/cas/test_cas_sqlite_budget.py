"""The SQLite CAS under another writer's lock: a step waits for it ``stores.timeout`` in all,
however many outputs it stores (the step budget of :mod:`ctxplugin._deadline`), not that long
once per output."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin._step import step_wait
from ctxplugin.cas import SQLiteCASStore
from ctxplugin.errors import RefNotFoundError, StoreUnavailableError
from ctxplugin.guard import step_budget
from ctxplugin.testing.cas_contract import make_item

SCOPE = Scope(session_id="s1")
OUTPUTS = 8
RELEASE_AFTER = 6.0
"""Seconds the other writer holds the lock: far more than the step's budget of one second, far
less than one second per output."""


def listing(i: int) -> str:
    return "\n".join(f"/src/pkg{i}/file_{j}.py  {j * 37} bytes  modified 2024-01-{j % 28 + 1:02d}" for j in range(300))


def conversation() -> list[BaseMessage]:
    messages: list[BaseMessage] = [HumanMessage("list the packages", id="h0")]
    for i in range(OUTPUTS):
        messages.append(AIMessage("", tool_calls=[{"name": "ls", "args": {"i": i}, "id": f"c{i}"}], id=f"a{i}"))
        messages.append(ToolMessage(listing(i), tool_call_id=f"c{i}", name="ls", id=f"t{i}"))
    return [*messages, AIMessage("Listed.", id="done"), HumanMessage("Which is the largest?", id="h1")]


class Writer:
    """Another connection holding the file's write lock until :meth:`release` (or a timer)."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute("BEGIN IMMEDIATE")
        self._lock = threading.Lock()
        self._held = True
        self.timer = threading.Timer(RELEASE_AFTER, self.release)
        self.timer.start()

    def release(self) -> None:
        with self._lock:
            if self._held:
                self.conn.execute("ROLLBACK")
                self._held = False

    def close(self) -> None:
        self.timer.cancel()
        self.release()
        self.conn.close()


@pytest.mark.parametrize("mode", ["compact", "whole"])
def test_a_step_waits_for_a_locked_file_once_not_once_per_output(tmp_path: Path, mode: str) -> None:
    budget = {"total": 3000} if mode == "whole" else {}  # whole: too long to go whole, so stored
    config = ContextConfig(mode=mode, stores={"timeout": 1.0}, budget=budget)
    with ContextEngine.embedded(tmp_path / "stores", config) as engine:
        writer = Writer(tmp_path / "stores" / "cas.sqlite3")
        try:
            report = engine.prepare(conversation(), scope=SCOPE).report
        finally:
            writer.close()
        # every output was given up on before the writer let go: none stored, each passed through,
        # counted in one warning
        assert report.refs_created == []
        warnings = [w for w in report.warnings if "CAS unavailable" in w]
        assert len(warnings) == 1 and f"{OUTPUTS} tool outputs passed through unstored" in warnings[0]
        # and the next step stores them
        report = engine.prepare(conversation(), scope=SCOPE).report
        assert len(report.refs_created) == OUTPUTS and not report.warnings


def test_a_call_whose_step_budget_is_spent_does_not_wait_for_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "cas.sqlite3"
    store = SQLiteCASStore(path, busy_timeout_ms=30_000)
    writer = Writer(path)
    try:
        with step_budget(0.0), pytest.raises(StoreUnavailableError, match="locked"):
            store.put(make_item("x" * 100), SCOPE)
    finally:
        writer.close()
    store.put(make_item("x" * 100), SCOPE)  # outside a step: the configured wait, and the lock is free
    store.close()


def test_a_stored_output_is_read_while_another_writer_holds_the_lock(tmp_path: Path) -> None:
    """Reading a ref needs no write: it is served beside the writer (its access not counted)."""
    path = tmp_path / "cas.sqlite3"
    store = SQLiteCASStore(path, busy_timeout_ms=200)
    item = make_item("the stored original\n" * 50)
    store.put(item, SCOPE)
    writer = Writer(path)
    try:
        assert store.get(item.ref_id, SCOPE).content == item.content
        with pytest.raises(RefNotFoundError):
            store.get(make_item("never stored").ref_id, SCOPE)
    finally:
        writer.close()
    assert store.get(item.ref_id, SCOPE).access_count == 1  # the reads beside the writer were not counted
    store.close()


def test_the_expand_ref_tool_reads_a_stored_output_while_the_file_is_locked(tmp_path: Path) -> None:
    config = ContextConfig(stores={"timeout": 0.3})
    with ContextEngine.embedded(tmp_path / "stores", config) as engine:
        original = listing(1)
        compact = engine.capture_tool_result(ToolMessage(original, tool_call_id="c1", name="ls"), scope=SCOPE)
        ref = compact.additional_kwargs["ctxplugin"]["ref"]
        writer = Writer(tmp_path / "stores" / "cas.sqlite3")
        try:
            assert engine.expand_ref(ref, scope=SCOPE) == original
            tool = engine.tools_for_model()[0]
            shown = tool.invoke({"ref_id": ref, "limit": 3}, config={"configurable": {"thread_id": SCOPE.session_id}})
            assert "/src/pkg1/file_0.py" in str(shown)
        finally:
            writer.close()


def test_a_file_held_past_the_wait_is_not_waited_for_whole_again_until_a_write_gets_through(tmp_path: Path) -> None:
    # a backup or a `sqlite3` shell left in a transaction for minutes: each capture and each
    # prepare waited stores.timeout for it, every step, however long it held the file
    path = tmp_path / "cas.sqlite3"
    store = SQLiteCASStore(path, busy_timeout_ms=1000)
    writer = Writer(path)
    try:
        with step_budget(1.0), pytest.raises(StoreUnavailableError, match="locked"):
            store.put(make_item("first " * 50), SCOPE)  # waits the whole second: held past the wait
        with step_budget(1.0):
            with pytest.raises(StoreUnavailableError, match="locked"):
                store.put(make_item("second " * 50), SCOPE)
            # the next step tried the file for 50 ms, not its whole store time again
            assert store._local.held.conn.execute("PRAGMA busy_timeout").fetchone()[0] == 50
    finally:
        writer.close()
    with step_budget(1.0):
        assert store.put(make_item("second " * 50), SCOPE)  # let go: the first write gets through
    writer = Writer(path)  # held again later: waited for whole, as the first time
    try:
        with step_budget(1.0):
            with pytest.raises(StoreUnavailableError, match="locked"):
                store.put(make_item("third " * 50), SCOPE)
            assert step_wait(1.0) < 0.5
    finally:
        writer.close()
    assert store.get(make_item("second " * 50).ref_id, SCOPE).content == "second " * 50
    store.close()


class _FailingBegin:
    """A connection whose next ``BEGIN IMMEDIATE`` fails as a failing disk makes it fail."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.failed = False

    def __getattr__(self, name: str) -> object:
        return getattr(self.conn, name)

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        if sql == "BEGIN IMMEDIATE" and not self.failed:
            self.failed = True
            raise sqlite3.OperationalError("disk I/O error")
        return self.conn.execute(sql, params)


def test_a_write_failing_for_another_cause_than_a_held_file_leaves_the_next_writes_their_whole_wait(tmp_path: Path) -> None:
    # a disk I/O error is not another process holding the file: the writes after it must still
    # wait for a writer of another process as long as configured, not 50 ms
    store = SQLiteCASStore(tmp_path / "cas.sqlite3", busy_timeout_ms=1000)
    assert store.put(make_item("first " * 50), SCOPE)
    held = store._local.held
    held.conn = _FailingBegin(held.conn)
    with pytest.raises(StoreUnavailableError, match="disk I/O error"):
        store.put(make_item("second " * 50), SCOPE)
    held.conn = held.conn.conn
    writer = Writer(tmp_path / "cas.sqlite3")
    try:
        with step_budget(1.0), pytest.raises(StoreUnavailableError, match="locked"):
            store.put(make_item("third " * 50), SCOPE)
        assert held.conn.execute("PRAGMA busy_timeout").fetchone()[0] > 50
    finally:
        writer.close()
    store.close()
