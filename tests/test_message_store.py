"""The embedded conversation store (``engine.history``): concurrent readers and writers."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage

from ctxplugin import Scope
from ctxplugin._message_store import SQLiteMessageStore

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

