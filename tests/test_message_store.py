"""The embedded conversation store (``engine.history``): concurrent readers and writers."""

from __future__ import annotations

import shutil
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pytest_mock import MockerFixture

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin._message_store import _SCHEMA_VERSION, PendingMessageStore, SQLiteMessageStore
from ctxplugin.errors import InvalidInputError, StoreError


@contextmanager
def held(path: Path) -> Iterator[None]:
    """``path``'s SQLite file held by another connection (``BEGIN EXCLUSIVE``) while the block
    runs: writes through ctxplugin wait past ``stores.timeout``."""
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        yield
        holder.execute("ROLLBACK")
    finally:
        holder.close()


KEY = Scope(session_id="s1").key()


def test_a_reader_in_the_middle_of_a_read_does_not_block_a_writer(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    store = SQLiteMessageStore(path, timeout=0.2)
    store.append(KEY, [HumanMessage("first")])
    reader = sqlite3.connect(path, isolation_level=None)
    try:
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM chat_messages").fetchone() == (1,)  # holds its read
        store.append(KEY, [AIMessage("second")])  # another process reading must not make this fail
    finally:
        reader.close()
    assert [m.content for m in store.load(KEY)] == ["first", "second"]



def test_messages_added_while_another_process_holds_the_file_are_kept_then_written(tmp_path: Path) -> None:
    """A turn ``RunnableWithMessageHistory`` adds while the file stays locked past
    ``stores.timeout`` is not lost, and the chain does not fail: the messages are kept in the
    process, read back in order, and written before the next ones."""
    config = ContextConfig(stores={"timeout": 0.2})
    with ContextEngine.embedded(tmp_path, config=config) as engine:
        engine.history("s1").add_messages([HumanMessage("first"), AIMessage("one")])
        with held(tmp_path / "history.sqlite3"):
            engine.history("s1").add_messages([HumanMessage("second"), AIMessage("two")])
            assert [m.content for m in engine.history("s1").full_messages] == ["first", "one", "second", "two"]
        engine.history("s1").add_messages([HumanMessage("third")])
    with ContextEngine.embedded(tmp_path, config=config) as engine:
        assert [m.content for m in engine.history("s1").full_messages] == ["first", "one", "second", "two", "third"]


def test_a_clear_that_fails_keeps_the_messages_not_yet_written(tmp_path: Path) -> None:
    """``clear`` failing (the file held past ``stores.timeout``) changes nothing: the messages
    kept in the process stay read back after the stored ones, and are written next."""
    config = ContextConfig(stores={"timeout": 0.2})
    with ContextEngine.embedded(tmp_path, config=config) as engine:
        engine.history("s1").add_messages([HumanMessage("first")])
        with held(tmp_path / "history.sqlite3"):
            engine.history("s1").add_messages([HumanMessage("second")])
            with pytest.raises(StoreError):
                engine.history("s1").clear()
        assert [m.content for m in engine.history("s1").full_messages] == ["first", "second"]
        engine.history("s1").add_messages([HumanMessage("third")])
    with ContextEngine.embedded(tmp_path, config=config) as engine:
        assert [m.content for m in engine.history("s1").full_messages] == ["first", "second", "third"]


def test_a_read_while_kept_messages_are_written_misses_none_of_them(tmp_path: Path, mocker: MockerFixture) -> None:
    """A read that found the stored messages just before another thread wrote the kept ones
    (and so no longer keeps them) still returns every message."""
    config = ContextConfig(stores={"timeout": 0.2})
    with ContextEngine.embedded(tmp_path, config=config) as engine:
        history = engine.history("s1")
        history.add_messages([HumanMessage("first")])
        with held(tmp_path / "history.sqlite3"):
            history.add_messages([HumanMessage("second")])  # kept in the process
        store = history.store
        assert isinstance(store, PendingMessageStore)
        inner = store.inner
        load = inner.load
        reads: list[str] = []

        def load_then_a_write_elsewhere(key: str) -> list[BaseMessage]:
            stored = load(key)
            reads.append(key)
            if len(reads) > 1:
                return stored
            writer = threading.Thread(target=engine.history("s1").add_messages, args=([HumanMessage("third")],))
            writer.start()
            writer.join(30)  # the write, on another thread, between this read and the kept ones
            return stored

        mocker.patch.object(inner, "load", side_effect=load_then_a_write_elsewhere)
        seen = [m.content for m in history.full_messages]
        mocker.stopall()
        assert seen[:2] == ["first", "second"], seen
        assert [m.content for m in history.full_messages] == ["first", "second", "third"]


def test_messages_kept_in_the_process_are_written_when_the_engine_closes(tmp_path: Path) -> None:
    """Messages kept because the file was held are written by ``close()`` (the end of the
    ``with`` block) once it is free, not lost with the process when no later turn comes."""
    config = ContextConfig(stores={"timeout": 0.2})
    with ContextEngine.embedded(tmp_path, config=config) as engine:
        engine.history("s1").add_messages([HumanMessage("first")])
        with held(tmp_path / "history.sqlite3"):
            engine.history("s1").add_messages([HumanMessage("second"), AIMessage("two")])
    assert [m.content for m in SQLiteMessageStore(tmp_path / "history.sqlite3").load(KEY)] == ["first", "second", "two"]


def _deep(levels: int) -> dict[str, object]:
    value: dict[str, object] = {}
    for _ in range(levels):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    "odd",
    [
        AIMessage("", tool_calls=[{"name": "t", "args": _deep(5000), "id": "c1"}]),  # RecursionError in json.dumps before
        AIMessage("", tool_calls=[{"name": "t", "args": {"n": 7 ** 6000}, "id": "c1"}]),  # ValueError
        HumanMessage("hi", additional_kwargs={"raw": b"\x89PNG"}),  # TypeError
    ],
    ids=["deep arguments", "huge integer", "bytes"],
)
def test_a_message_json_cannot_hold_is_refused_and_nothing_of_the_turn_is_written(tmp_path: Path, odd: BaseMessage) -> None:
    history = ContextEngine.embedded(tmp_path / "store", ContextConfig()).history("s1")
    history.add_messages([HumanMessage("first")])
    with pytest.raises(InvalidInputError, match=rf"message 1 of the 2 added \({type(odd).__name__}\) cannot be stored"):
        history.add_messages([HumanMessage("second"), odd])
    history.add_messages([AIMessage("third")])
    assert [m.content for m in history.full_messages] == ["first", "third"]


def test_a_history_file_deleted_while_the_engine_runs_is_made_again(tmp_path: Path) -> None:
    engine = ContextEngine.embedded(path=tmp_path / "ctx")
    try:
        engine.history("s1").add_messages([HumanMessage("my budget is 400 euros"), AIMessage("Noted.")])
        for file in (tmp_path / "ctx").glob("history.sqlite3*"):
            file.unlink()
        engine.history("s1").add_messages([HumanMessage("my seat is 12A"), AIMessage("Noted too.")])
        assert [m.content for m in engine.history("s1").full_messages] == ["my seat is 12A", "Noted too."]
    finally:
        engine.close()
    again = ContextEngine.embedded(path=tmp_path / "ctx")
    try:
        assert [m.content for m in again.history("s1").full_messages] == ["my seat is 12A", "Noted too."]
    finally:
        again.close()


def test_a_history_whose_directory_was_removed_while_in_use_is_made_again_in_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = SQLiteMessageStore(tmp_path / "ctx" / "history.sqlite3")
    store.append(KEY, [HumanMessage("my budget is 400 euros")])
    shutil.rmtree(tmp_path / "ctx")
    with caplog.at_level("WARNING", logger="ctxplugin"):
        store.append(KEY, [HumanMessage("my seat is 12A")])
    assert [r.getMessage() for r in caplog.records] == [
        f"the chat history file {tmp_path / 'ctx' / 'history.sqlite3'} was deleted (or its directory removed) "
        "while in use; made it again: the conversations stored before are not in it"
    ], "the conversations lost are told of"
    again = SQLiteMessageStore(tmp_path / "ctx" / "history.sqlite3")
    assert [m.content for m in again.load(KEY)] == ["my seat is 12A"]


class _HeldWhileWriting(SQLiteMessageStore):
    """A chat history file whose write of conversation ``a`` is held (as by another process)
    until conversation ``b`` was written beside it, or the test gives up waiting."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.b_written = threading.Event()
        self.b_written_while_a_held: list[bool] = []

    def append(self, key: str, messages: Sequence[BaseMessage]) -> None:
        if key == "a":
            self.b_written_while_a_held.append(self.b_written.wait(10))
        super().append(key, messages)
        if key == "b":
            self.b_written.set()


def test_a_conversation_is_written_while_another_ones_write_is_held(tmp_path: Path) -> None:
    # six chains answering at once while another process held the file: each add waited for the
    # one before it to time out, so the last waited six timeouts
    inner = _HeldWhileWriting(tmp_path / "history.sqlite3")
    store = PendingMessageStore(inner)
    a = threading.Thread(target=store.append, args=("a", [HumanMessage("question a")]))
    a.start()
    store.append("b", [HumanMessage("question b")])
    a.join()
    assert inner.b_written_while_a_held == [True]
    assert [m.content for m in store.load("a")] == ["question a"]
    assert [m.content for m in store.load("b")] == ["question b"]
    assert not store._writers, "no lock is kept per conversation once written"


def test_conversations_added_to_while_the_file_is_held_are_all_kept_then_written(tmp_path: Path) -> None:
    with ContextEngine.embedded(tmp_path, config=ContextConfig(stores={"timeout": 0.2})) as engine:
        engine.history("s0").add_messages([HumanMessage("first")])

        def turn(n: int) -> None:
            engine.history(f"s{n}").add_messages([HumanMessage(f"question {n}"), AIMessage(f"answer {n}")])

        with held(tmp_path / "history.sqlite3"):
            threads = [threading.Thread(target=turn, args=(n,)) for n in range(6)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            for n in range(6):
                assert [m.content for m in engine.history(f"s{n}").full_messages][-2:] == [f"question {n}", f"answer {n}"]
    with ContextEngine.embedded(tmp_path) as engine:
        for n in range(6):
            assert [m.content for m in engine.history(f"s{n}").full_messages][-2:] == [f"question {n}", f"answer {n}"], "written at close"


def test_a_history_file_of_a_newer_ctxplugin_is_refused_with_a_clear_error_and_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    SQLiteMessageStore(path).append(KEY, [HumanMessage("my seat is 12A")])
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.execute(f"PRAGMA user_version = {_SCHEMA_VERSION + 1}")  # written by a later release
    with pytest.raises(StoreError, match=rf"version {_SCHEMA_VERSION + 1}, newer than this ctxplugin knows \({_SCHEMA_VERSION}\)"):
        SQLiteMessageStore(path)
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (_SCHEMA_VERSION + 1,), "left for the release that wrote it"
        assert db.execute("SELECT count(*) FROM chat_messages").fetchone() == (1,)


def test_a_history_file_made_empty_under_the_store_gets_its_table_again(tmp_path: Path) -> None:
    # deleted between the store's look for it and its connection: SQLite makes an empty file
    # there, which every later call found without its table (``no such table: chat_messages``)
    path = tmp_path / "history.sqlite3"
    store = SQLiteMessageStore(path)
    store.append(KEY, [HumanMessage("my budget is 400 euros")])
    path.unlink()
    path.touch()
    store.append(KEY, [HumanMessage("my seat is 12A")])
    assert [m.content for m in SQLiteMessageStore(path).load(KEY)] == ["my seat is 12A"]
