"""The embedded Chroma directory removed while several threads of one store use it: they open it
again once between them, and closing the store leaves no client open on the directory."""

from __future__ import annotations

import shutil
import sys
import threading
from pathlib import Path

from chromadb.api.shared_system_client import SharedSystemClient

from ctxplugin import Scope
from ctxplugin.facts import ChromaFactStore, Fact, FactQuery

S = Scope(session_id="removed", user_id="u1")


def _waiting_in(threads: list[threading.Thread], function: str) -> bool:
    frames = sys._current_frames()
    names: list[str] = []
    for thread in threads:
        frame = frames.get(thread.ident or -1)
        while frame is not None and frame.f_code.co_name != function:
            frame = frame.f_back
        names.append(frame.f_code.co_name if frame is not None else "")
    return all(name == function for name in names)


def test_threads_seeing_the_directory_removed_at_once_leave_no_client_open(tmp_path: Path) -> None:
    root = tmp_path / "chroma"
    store = ChromaFactStore.persistent(root)
    try:
        store.add([Fact(text="The deploy target is eu-west-3.", owner=S)])
        shutil.rmtree(root)
        directory = store._directory
        assert directory is not None
        found: list[int] = []
        with directory._lock:  # both threads see the directory replaced before either opens it again
            threads = [threading.Thread(target=lambda: found.append(len(store.find(FactQuery(reader=S))))) for _ in range(2)]
            for thread in threads:
                thread.start()
            while not _waiting_in(threads, "reopened"):
                threading.Event().wait(0.01)
        for thread in threads:
            thread.join(30)
        assert found == [0, 0]
        kept = Fact(text="The release deadline is Friday 5pm.", owner=S)
        store.add([kept])
        assert [f.id for f in store.find(FactQuery(reader=S))] == [kept.id]
    finally:
        store.close()
    # every client this store opened is closed with it: nothing holds the directory's files
    assert SharedSystemClient._identifier_to_refcount.get(str(root.resolve()), 0) == 0
