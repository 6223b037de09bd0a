"""SQLite store specifics: file layout, WAL, several processes, and failures at the boundary."""

from __future__ import annotations

import gc
import multiprocessing
import os
import sqlite3
import subprocess
import sys
import threading
import warnings
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from pytest_mock import MockerFixture

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.cas import SQLiteCASStore
from ctxplugin.cas._sqlite_tables import SCHEMA_VERSION
from ctxplugin.errors import StoreError, StoreUnavailableError
from ctxplugin.facts import FactsLedger, MemoryFactStore
from ctxplugin.testing.cas_contract import hammer_sqlite, make_item

SCOPE = Scope(session_id="s1")
BIG = "\n".join(f"2024-05-01 12:00:{i % 60:02d} INFO step {i} done id=job-{i}" for i in range(400))


def test_creates_file_and_parents_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "cas.sqlite3"
    store = SQLiteCASStore(path)
    store.put(make_item("hello"), SCOPE)
    store.close()
    assert path.is_file()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_survives_reopening(tmp_path: Path) -> None:
    item = make_item("persisted output")
    first = SQLiteCASStore(tmp_path / "cas.sqlite3")
    first.put(item, SCOPE)
    first.close()
    again = SQLiteCASStore(tmp_path / "cas.sqlite3")
    assert again.get(item.ref_id, SCOPE).content == "persisted output"
    assert again.put(item, SCOPE) is False
    again.close()


def test_identical_outputs_are_stored_once(tmp_path: Path) -> None:
    store = SQLiteCASStore(tmp_path / "cas.sqlite3")
    item = make_item("same bytes " * 100)
    for i in range(5):
        store.put(item, Scope(session_id=f"s{i}"))
    assert store.stats()["contents"] == 1
    assert store.stats()["grants"] == 5
    store.close()


def test_purge_removes_orphaned_content(tmp_path: Path) -> None:
    from ctxplugin.testing.cas_contract import FakeClock

    clock = FakeClock()
    store = SQLiteCASStore(tmp_path / "cas.sqlite3", clock=clock)
    store.put(make_item("expiring"), SCOPE, ttl_seconds=5)
    store.put(make_item("staying"), SCOPE)
    clock.advance(6)
    assert store.purge_expired() == 1
    assert store.stats()["contents"] == 1
    store.close()


def _start_method() -> str:
    # fork shares the already imported modules (spawn would re-import the package in every
    # child); where fork is missing, spawn still runs the same workers
    return "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"


def test_several_processes_write_one_file_without_corruption(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    parent = SQLiteCASStore(path)
    parent.put(make_item("written by the parent"), SCOPE)  # the parent holds an open connection
    method = _start_method()
    context: Any = multiprocessing.get_context(method)
    # two workers open the file themselves; with fork, two more reuse the parent's store object,
    # which must open fresh connections in the child instead of sharing the parent's
    inherited: list[str | SQLiteCASStore] = [parent, parent] if method == "fork" else [str(path), str(path)]
    targets: list[str | SQLiteCASStore] = [str(path), str(path), *inherited]
    workers = [context.Process(target=hammer_sqlite, args=(target, w, 40)) for w, target in enumerate(targets)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork from a threaded test process
        for p in workers:
            p.start()
    for p in workers:
        p.join(timeout=120)
    assert [p.exitcode for p in workers] == [0, 0, 0, 0]
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        grants = conn.execute("SELECT count(*) FROM cas_grants").fetchone()[0]
        contents = conn.execute("SELECT count(*) FROM cas_content").fetchone()[0]
    assert grants == 4 * 40 + 1
    assert contents == 20 + 4 * 20 + 1  # the shared half is stored once
    assert parent.get(make_item("written by the parent").ref_id, SCOPE).content == "written by the parent"
    for w in range(4):
        for i in range(1, 40, 2):
            content = f"shared output {i}\n" * 20
            assert parent.get(make_item(content, kind="proc").ref_id, Scope(session_id=f"proc-{w}")).content == content
    parent.close()


def _open_at(path: str, barrier: Any, outcomes: Any) -> None:
    barrier.wait()  # every worker opens the new file at the same moment
    try:
        SQLiteCASStore(path).close()
        outcomes.put("ok")
    except StoreError as exc:
        outcomes.put(str(exc))


def test_processes_opening_a_new_file_at_the_same_moment_all_open_it(tmp_path: Path) -> None:
    # putting a new database in WAL mode does not wait through the busy timeout: without a
    # retry, about one open in fifteen failed with "database is locked"
    context: Any = multiprocessing.get_context(_start_method())
    failed: list[str] = []
    for trial in range(10):
        barrier, outcomes = context.Barrier(6), context.Queue()
        workers = [context.Process(target=_open_at, args=(str(tmp_path / f"new-{trial}.sqlite3"), barrier, outcomes)) for _ in range(6)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork from a threaded test process
            for p in workers:
                p.start()
        failed += [o for o in (outcomes.get(timeout=60) for _ in workers) if o != "ok"]
        for p in workers:
            p.join(timeout=60)
    assert failed == []


def test_a_store_opens_while_another_connection_holds_the_write_lock(tmp_path: Path) -> None:
    """A worker starting while another one writes: the file's schema is there already, so
    opening needs no write lock (it used to wait for one and fail after the busy timeout)."""
    path = tmp_path / "cas.sqlite3"
    SQLiteCASStore(path).close()
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        store = SQLiteCASStore(path, busy_timeout_ms=200)
        assert store.stats()["grants"] == 0  # reads go on beside the writer
        store.close()
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "cas.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="SQLite CAS") as info:
        SQLiteCASStore(path)
    assert isinstance(info.value.__cause__, sqlite3.Error)


def test_a_path_under_a_file_is_unavailable(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreUnavailableError):
        SQLiteCASStore(blocker / "cas.sqlite3")


def test_a_stored_output_whose_bytes_were_damaged_is_a_store_error_the_model_is_told_of(tmp_path: Path) -> None:
    config = ContextConfig()
    engine = ContextEngine(config, cas=SQLiteCASStore(tmp_path / "cas.sqlite3"), facts=FactsLedger(MemoryFactStore(), config.facts))
    output = "\n".join(f"order #W{i:04d} shipped to Lyon" for i in range(400))
    compact = engine.capture_tool_result(ToolMessage(output, tool_call_id="c1", name="orders"), scope=SCOPE)
    ref = compact.additional_kwargs["ctxplugin"]["ref"]
    with closing(sqlite3.connect(tmp_path / "cas.sqlite3", isolation_level=None)) as db:
        db.execute("UPDATE cas_content SET content = x'6f7264657220ff80'")  # no longer UTF-8: a damaged page
    with pytest.raises(StoreError, match="damaged") as info:
        engine.expand_ref(ref, scope=SCOPE)
    assert isinstance(info.value.__cause__, UnicodeDecodeError)
    tool = next(t for t in engine.tools_for_model() if t.name == "expand_ref")
    answer = tool.invoke({"type": "tool_call", "name": "expand_ref", "args": {"ref_id": ref}, "id": "x1"},
                         config={"configurable": {"thread_id": SCOPE.session_id}})
    assert isinstance(answer, ToolMessage)
    assert str(answer.content).startswith("expand_ref: ") and "damaged" in str(answer.content)
    assert "will not help" in str(answer.content) and "try again later" not in str(answer.content)
    engine.close()


def test_disk_errors_become_store_unavailable(tmp_path: Path, mocker: MockerFixture) -> None:
    store = SQLiteCASStore(tmp_path / "cas.sqlite3")
    item = make_item("x" * 100)
    store.put(item, SCOPE)
    mocker.patch("ctxplugin.cas.sqlite.sqlite3.connect", side_effect=sqlite3.OperationalError("disk I/O error"))
    raised: list[BaseException] = []

    def read() -> None:  # a new thread needs a new connection, and connecting fails
        try:
            store.get(item.ref_id, SCOPE)
        except BaseException as exc:  # checked below
            raised.append(exc)

    thread = threading.Thread(target=read)
    thread.start()
    thread.join()
    assert len(raised) == 1 and isinstance(raised[0], StoreUnavailableError)
    assert isinstance(raised[0].__cause__, sqlite3.OperationalError)
    assert store.get(item.ref_id, SCOPE).content == item.content  # this thread's connection still works
    store.close()


class _CommitFailsOnce(sqlite3.Connection):
    """A connection whose first COMMIT fails as on a full disk, the transaction left open (SQLite
    may or may not roll back a transaction whose COMMIT failed with SQLITE_FULL or SQLITE_IOERR)."""

    armed = False

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql == "COMMIT" and _CommitFailsOnce.armed:
            _CommitFailsOnce.armed = False
            raise sqlite3.OperationalError("database or disk is full")
        return super().execute(sql, *args)


def test_a_commit_that_fails_leaves_no_write_lock_held(tmp_path: Path, mocker: MockerFixture) -> None:
    connect = sqlite3.connect
    mocker.patch("ctxplugin.cas.sqlite.sqlite3.connect", side_effect=lambda *a, **k: connect(*a, **k, factory=_CommitFailsOnce))
    store = SQLiteCASStore(tmp_path / "cas.sqlite3", busy_timeout_ms=500)
    _CommitFailsOnce.armed = True
    first, second, third = make_item("x" * 100), make_item("y" * 100), make_item("z" * 100)
    with pytest.raises(StoreUnavailableError, match="disk is full"):
        store.put(first, SCOPE)  # this thread's connection, kept for its next calls, fails its COMMIT
    raised: list[BaseException] = []

    def put_second() -> None:  # another thread, another connection
        try:
            store.put(second, SCOPE)
        except BaseException as exc:  # checked below
            raised.append(exc)

    thread = threading.Thread(target=put_second)
    thread.start()
    thread.join()
    assert raised == [], "the failed write let go of the write lock"
    assert store.put(third, SCOPE), "the connection whose COMMIT failed writes again"
    assert [store.get(i.ref_id, SCOPE).content for i in (second, third)] == [second.content, third.content]
    assert not store.exists(first.ref_id, SCOPE), "nothing of the failed write is kept"
    store.close()


def _engine(tmp_path: Path) -> ContextEngine:
    config = ContextConfig()
    cas = SQLiteCASStore(tmp_path / "cas.sqlite3")
    return ContextEngine(config=config, cas=cas, facts=FactsLedger(MemoryFactStore(), config.facts))


def test_engine_passes_the_original_through_when_the_store_is_closed(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    engine.cas.close()
    original = ToolMessage(content=BIG, tool_call_id="c1", name="logs")
    compact, report = engine.capture_with_report(original, SCOPE)
    assert compact.content == BIG
    assert report.ref_id is None and report.warnings and "CAS unavailable" in report.warnings[0]


def test_engine_passes_the_original_through_when_sqlite_fails(tmp_path: Path, mocker: MockerFixture) -> None:
    engine = _engine(tmp_path)
    mocker.patch.object(engine.cas, "_held", side_effect=StoreUnavailableError("database is locked"))
    original = ToolMessage(content=BIG, tool_call_id="c2", name="logs")
    compact, report = engine.capture_with_report(original, SCOPE)
    assert compact.content == BIG
    assert any("database is locked" in w for w in report.warnings)
    from langchain_core.messages import AIMessage, HumanMessage

    messages = [
        HumanMessage(content="show logs"),
        AIMessage(content="", tool_calls=[{"name": "logs", "args": {}, "id": "c3"}]),
        ToolMessage(content=BIG, tool_call_id="c3", name="logs"),
    ]
    prepared = engine.prepare(messages, scope=SCOPE)
    tool_messages = [m for m in prepared.messages if isinstance(m, ToolMessage)]
    assert tool_messages and "ref:" not in str(tool_messages[0].content)
    assert any("CAS unavailable" in w for w in prepared.report.warnings)


def _open_on(path: Path) -> int:
    """How many descriptors of this process are open on the database file or its journal."""
    count = 0
    for fd in Path("/proc/self/fd").iterdir():
        try:
            count += os.readlink(fd).startswith(str(path))
        except OSError:  # closed since it was listed
            continue
    return count


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts open files through /proc")
def test_a_thread_per_request_keeps_no_file_open_once_its_thread_ends(tmp_path: Path) -> None:
    path = tmp_path / "cas.sqlite3"
    engine = ContextEngine(cas=SQLiteCASStore(path))
    engine.capture_tool_result(ToolMessage(content=BIG, tool_call_id="c0", name="logs"), SCOPE)
    before = _open_on(path)

    def request(number: int) -> None:
        compact = engine.capture_tool_result(ToolMessage(content=f"{BIG}\nrequest {number}", tool_call_id="c", name="logs"), SCOPE)
        assert engine.expand_ref(compact.additional_kwargs["ctxplugin"]["ref"], scope=SCOPE).endswith(f"request {number}")

    for number in range(40):
        thread = threading.Thread(target=request, args=(number,))
        thread.start()
        thread.join()
    # SQLite keeps one descriptor of a closed connection for reuse while another holds a lock
    assert _open_on(path) <= before + 1


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts open files through /proc")
def test_close_closes_the_connections_of_threads_still_running(tmp_path: Path) -> None:
    path = tmp_path / "cas.sqlite3"
    store = SQLiteCASStore(path)
    used, done = threading.Event(), threading.Event()

    def worker() -> None:
        store.put(make_item("from a worker"), SCOPE)
        used.set()
        done.wait()

    thread = threading.Thread(target=worker)
    thread.start()
    used.wait()
    store.close()
    try:
        assert _open_on(path) == 0
    finally:
        done.set()
        thread.join()


_CLOSE_WHILE_IN_USE = """
import sys, threading
from pathlib import Path
from ctxplugin import Scope
from ctxplugin.cas import SQLiteCASStore
from ctxplugin.errors import StoreError
from ctxplugin.testing.cas_contract import make_item

store = SQLiteCASStore(Path(sys.argv[1]) / "cas.sqlite3")
started = threading.Barrier(9)
ends = []

def work(n):
    started.wait()
    try:
        for i in range(2000):
            item = make_item(f"output {n} {i} " + "x" * 2000)
            store.put(item, Scope(session_id=f"s{n}"))
            store.get(item.ref_id, Scope(session_id=f"s{n}"))
    except StoreError as exc:
        ends.append(str(exc))

threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
for thread in threads:
    thread.start()
started.wait()
for _ in range(200):
    store.path.exists()
store.close()
for thread in threads:
    thread.join()
print(len(ends))
"""


def test_close_while_other_threads_are_in_a_statement_ends_their_calls_with_store_errors(tmp_path: Path) -> None:
    # closing a connection another thread is running a statement on crashed the process
    # (SIGSEGV); it runs in a child process so that a crash fails this test, not the run
    done = subprocess.run([sys.executable, "-c", _CLOSE_WHILE_IN_USE, str(tmp_path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "8", "every worker ends with a StoreError once the store is closed"


def test_a_forked_process_opens_its_own_connection_and_never_closes_the_parents(tmp_path: Path) -> None:
    # closing the parent's connection in the child could wait for ever on a lock a thread of
    # the parent held at the fork; the child keeps it, unused, and opens its own
    from ctxplugin.cas.sqlite import _Held

    store = SQLiteCASStore(tmp_path / "cas.sqlite3")
    store.put(make_item("written by the parent"), SCOPE)  # this thread's connection is open
    parents = [held.conn for held in store._connections]
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child, which reports through the pipe
        closed = []
        original = _Held.__del__

        def tracked(held: _Held) -> None:
            closed.append(any(held.conn is conn for conn in parents))
            original(held)

        _Held.__del__ = tracked  # type: ignore[method-assign]
        try:
            store.put(make_item("written by the child"), SCOPE)
            gc.collect()
            ours = [held.conn for held in store._connections]
            verdict = "ok" if not any(closed) and ours and not any(c is p for c in ours for p in parents) else f"bad {closed}"
        except BaseException as exc:  # reported to the parent, which fails the test
            verdict = repr(exc)
        os.write(write, verdict.encode())
        os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    with os.fdopen(read) as pipe:
        assert pipe.read() == "ok"
    assert store.get(make_item("written by the child").ref_id, SCOPE).content == "written by the child"
    store.close()


def test_revoke_leaves_no_copy_in_the_database_file(tmp_path: Path) -> None:
    from ctxplugin.testing.cas_contract import A, make_item

    path = tmp_path / "cas.sqlite3"
    store = SQLiteCASStore(path)
    masked, kept = make_item("email: jane.doe@corp-mail.com\n" * 200), make_item("kept\n" * 200)
    # as SQLite builds without SQLITE_SECURE_DELETE have it (this thread's connection)
    with store._using() as conn:
        conn.execute("PRAGMA secure_delete = OFF")
    store.put(masked, A)
    store.put(kept, A)
    checkpoint = "PRAGMA wal_checkpoint(TRUNCATE)"
    with closing(sqlite3.connect(path)) as db:
        db.execute(checkpoint)
    assert b"jane.doe" in path.read_bytes()
    assert store.revoke(masked.ref_id, A)
    with closing(sqlite3.connect(path)) as db:
        db.execute(checkpoint)
    assert b"jane.doe" not in path.read_bytes(), "the freed pages still hold the revoked output"
    store.close()


def test_a_file_of_a_newer_ctxplugin_is_refused_with_a_clear_error_and_left_as_it_is(tmp_path: Path) -> None:
    SQLiteCASStore(tmp_path / "cas.sqlite3").close()
    with closing(sqlite3.connect(tmp_path / "cas.sqlite3", isolation_level=None)) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")  # written by a later release
    with pytest.raises(StoreError, match=rf"version {SCHEMA_VERSION + 1}, newer than this ctxplugin knows \({SCHEMA_VERSION}\)"):
        SQLiteCASStore(tmp_path / "cas.sqlite3")
    with closing(sqlite3.connect(tmp_path / "cas.sqlite3", isolation_level=None)) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION + 1,), "left for the release that wrote it"


def _open_late(path: str, checked: Any, go: Any) -> None:
    """Opens ``path``, finding the file not there, and removes its stale WAL only after ``go``."""
    import ctxplugin.cas.sqlite as cas_sqlite

    def drop_when_told(path: Path) -> None:
        gone = not path.exists()
        checked.set()
        go.wait(10)
        if gone:
            for suffix in ("-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)

    setattr(cas_sqlite, "drop_stale_journal", drop_when_told)  # noqa: B010 (in the child process only)
    SQLiteCASStore(path).close()


def test_a_process_finding_a_new_file_gone_never_removes_the_wal_another_has_just_made(tmp_path: Path) -> None:
    # the other process found the file not there yet; this one makes it and writes meanwhile:
    # what it wrote is in the file's WAL, which the other must not remove as stale
    context: Any = multiprocessing.get_context(_start_method())
    path = tmp_path / "new.sqlite3"
    checked, go = context.Event(), context.Event()
    other = context.Process(target=_open_late, args=(str(path), checked, go))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork from a threaded test process
        other.start()
    assert checked.wait(30)
    item = make_item("written while the other process opened the file")
    wrote = threading.Thread(target=lambda: _put_and_hold(path, item, go))
    wrote.start()
    wrote.join(30)
    other.join(30)
    assert other.exitcode == 0 and not wrote.is_alive()
    reader = SQLiteCASStore(path)
    found = reader.get(item.ref_id, SCOPE)
    reader.close()
    assert found is not None and found.content == item.content


def _put_and_hold(path: Path, item: Any, go: Any) -> None:
    """Store ``item`` in a new store at ``path`` (its connection stays open), letting the other
    process go on after a moment: at once when it must wait for this open."""
    timer = threading.Timer(0.5, go.set)
    timer.start()
    store = SQLiteCASStore(path)
    store.put(item, SCOPE)
    timer.join()
    store.close()
