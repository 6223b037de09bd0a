"""The SQLite CAS file deleted or replaced while an engine runs on it (a cleanup of the cache
directory, a restore from a backup): the store opens the file at its path again, made anew when
it is gone, instead of writing on into a file nothing can open any more. What is stored after
that is there for the next process; nothing else is lost than what the deletion took."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage
from pytest_mock import MockerFixture

from ctxplugin import ContextEngine, Scope
from ctxplugin.cas import CASItem, SQLiteCASStore
from ctxplugin.errors import StoreUnavailableError
from ctxplugin.testing.cas_contract import make_item

S = Scope(session_id="replaced")


def _output(n: int) -> str:
    return "\n".join(f"order #W{n}{i:03d} shipped to Lyon on 2026-11-{i % 28 + 1:02d}" for i in range(120))


def _ref(engine: ContextEngine, n: int) -> str:
    compact = engine.capture_tool_result(ToolMessage(_output(n), tool_call_id=f"c{n}", name="orders"), scope=S)
    return str(compact.additional_kwargs["ctxplugin"]["ref"])


def _files(path: Path) -> list[Path]:
    return [p for p in path.iterdir() if p.name.startswith("cas.sqlite3")]


def _delete_the_files(directory: Path) -> None:
    for file in _files(directory):
        file.unlink()


@pytest.mark.parametrize(
    ("make", "remove"),
    [
        pytest.param(lambda path: ContextEngine.embedded(path=path), _delete_the_files, id="file deleted"),
        # no other store of this engine lives in the directory (as with a Chroma server): nothing else makes it again
        pytest.param(lambda path: ContextEngine(cas=SQLiteCASStore(path / "cas.sqlite3")), shutil.rmtree, id="directory removed"),
    ],
)
def test_outputs_captured_after_the_file_or_its_directory_was_removed_are_stored_in_the_file_at_its_path(
    tmp_path: Path, make: Callable[[Path], ContextEngine], remove: Callable[[Path], object]
) -> None:
    engine = make(tmp_path / "ctx")
    try:
        _ref(engine, 1)
        remove(tmp_path / "ctx")
        after = _ref(engine, 2)
        assert engine.expand_ref(after, scope=S) == _output(2)
        threaded = asyncio.run(engine.acapture_tool_result(ToolMessage(_output(3), tool_call_id="c3", name="orders"), scope=S))
        assert engine.expand_ref(threaded.additional_kwargs["ctxplugin"]["ref"], scope=S) == _output(3)
    finally:
        engine.close()
    reopened = SQLiteCASStore(tmp_path / "ctx" / "cas.sqlite3")
    try:
        assert reopened.get(after, S).content == _output(2), "stored in the file a new process opens"
    finally:
        reopened.close()


def test_a_file_restored_from_a_copy_is_read_and_written(tmp_path: Path) -> None:
    engine = ContextEngine.embedded(path=tmp_path / "ctx")
    try:
        first = _ref(engine, 1)
        backup = tmp_path / "backup.sqlite3"
        with closing(sqlite3.connect(tmp_path / "ctx" / "cas.sqlite3")) as source:  # a consistent copy
            source.execute(f"VACUUM INTO '{backup}'")
        second = _ref(engine, 2)
        for file in _files(tmp_path / "ctx"):
            file.unlink()
        shutil.copy(backup, tmp_path / "ctx" / "cas.sqlite3")
        assert engine.expand_ref(first, scope=S) == _output(1)
        third = _ref(engine, 3)
    finally:
        engine.close()
    reopened = SQLiteCASStore(tmp_path / "ctx" / "cas.sqlite3")
    try:
        assert reopened.get(third, S).content == _output(3)
        assert not reopened.exists(second, S), "the restored copy does not hold what came after it"
    finally:
        reopened.close()


def test_threads_opening_the_file_again_at_once_keep_each_others_writes(tmp_path: Path, mocker: MockerFixture) -> None:
    # a thread that found the file gone removes its stale WAL: it must not remove the WAL of the
    # file another thread has just made anew and written to
    store = SQLiteCASStore(tmp_path / "cas.sqlite3")
    store.put(make_item("before"), S)
    for file in tmp_path.iterdir():
        file.unlink()
    real_unlink = Path.unlink
    first_in = threading.Event()

    def slow_first(self: Path, missing_ok: bool = False) -> None:
        if self.name.endswith("-wal") and not first_in.is_set():
            first_in.set()
            time.sleep(0.3)  # found the file gone; the other thread opens it meanwhile, if it may
        real_unlink(self, missing_ok=missing_ok)

    mocker.patch.object(Path, "unlink", autospec=True, side_effect=slow_first)
    items = [make_item("first thread's output " * 20), make_item("second thread's output " * 20)]

    checked = threading.Event()
    written = threading.Semaphore(0)

    def write(item: CASItem) -> None:
        store.put(item, S)
        written.release()
        checked.wait(10)  # a worker thread lives on, its connection open

    one = threading.Thread(target=write, args=(items[0],))
    one.start()
    first_in.wait(5)
    two = threading.Thread(target=write, args=(items[1],))
    two.start()
    assert written.acquire(timeout=10) and written.acquire(timeout=10)  # both outputs written

    other = SQLiteCASStore(tmp_path / "cas.sqlite3")  # another process's view, while this one runs
    try:
        assert [other.get(item.ref_id, S).content for item in items] == [item.content for item in items]
    finally:
        checked.set()
        one.join(10)
        two.join(10)
        other.close()
        store.close()


def test_a_directory_that_cannot_be_read_any_more_passes_outputs_through_and_the_model_is_told(tmp_path: Path) -> None:
    # the file's identity cannot be read (here a file stands where the directory was; a stale
    # network mount or a failing disk raise other OSErrors there): a store error, never an OSError
    engine = ContextEngine(cas=SQLiteCASStore(tmp_path / "ctx" / "cas.sqlite3"))
    try:
        ref = _ref(engine, 1)
        shutil.rmtree(tmp_path / "ctx")
        (tmp_path / "ctx").write_text("not a directory")
        compact = engine.capture_tool_result(ToolMessage(_output(2), tool_call_id="c2", name="orders"), scope=S)
        assert compact.content == _output(2), "passed through whole"
        assert "Not a directory" in compact.additional_kwargs["ctxplugin"]["warning"]
        tool = next(t for t in engine.tools_for_model() if t.name == "expand_ref")
        answer = tool.invoke({"type": "tool_call", "name": "expand_ref", "args": {"ref_id": ref}, "id": "x1"},
                             config={"configurable": {"thread_id": S.session_id}})
        assert isinstance(answer, ToolMessage) and str(answer.content).startswith("expand_ref: the store is unavailable")
    finally:
        engine.close()


def test_a_directory_unreadable_as_a_threads_first_connection_opens_is_a_store_error(tmp_path: Path, mocker: MockerFixture) -> None:
    store = SQLiteCASStore(tmp_path / "cas.sqlite3")
    mocker.patch("ctxplugin.cas.sqlite.file_identity", side_effect=PermissionError(13, "Permission denied"))
    raised: list[BaseException] = []

    def put() -> None:  # another thread: its first connection is opened now
        try:
            store.put(make_item("x" * 100), S)
        except BaseException as exc:  # checked below
            raised.append(exc)

    thread = threading.Thread(target=put)
    thread.start()
    thread.join()
    store.close()
    assert len(raised) == 1 and isinstance(raised[0], StoreUnavailableError), raised
    assert "Permission denied" in str(raised[0])
