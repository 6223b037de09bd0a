"""An engine's life in a long-running service: closed, it releases what it opened."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

import ctxplugin
from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.errors import StoreError, StoreUnavailableError
from ctxplugin.history import BackgroundSummarizer
from ctxplugin.testing.chroma_server import ChromaServer, free_port

SCOPE = Scope(session_id="s1")
CHROMA_FILES = ("chroma.sqlite3", "chroma.sqlite3-wal", "chroma.sqlite3-shm")
CONFIG = ContextConfig(stores={"timeout": 1.0})
_OPEN = """
import sys
from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.errors import StoreInUseError
try:
    engine = ContextEngine.embedded(sys.argv[1], ContextConfig(stores={"timeout": 0.5}))
except StoreInUseError:
    sys.exit(3)
engine.facts.search("anything", scope=Scope(session_id="s1"))
"""


def _use(engine: ContextEngine) -> None:
    compact = engine.capture_tool_result(
        ToolMessage(content="line of output\n" * 400, tool_call_id="c1", name="run"), SCOPE
    )
    call = AIMessage(content="", tool_calls=[{"name": "run", "args": {}, "id": "c1"}])
    engine.prepare(
        [HumanMessage(content="run it"), call, compact, HumanMessage(content="and now?")],
        scope=SCOPE,
    )
    engine.facts.write("The build number is 4412", key="build", scope=SCOPE)


def _open_under(root: Path) -> list[str]:
    """The files under ``root`` this process has open."""
    opened = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed since it was listed
            continue
        if target.startswith(str(root)):
            opened.append(target)
    return opened


def test_a_closed_embedded_engine_lets_another_process_open_its_directory(tmp_path: Path) -> None:
    with ContextEngine.embedded(tmp_path, CONFIG) as engine:
        _use(engine)
        held = subprocess.run([sys.executable, "-c", _OPEN, str(tmp_path)], check=False)
        assert held.returncode == 3  # open here: the other process is refused
    freed = subprocess.run([sys.executable, "-c", _OPEN, str(tmp_path)], check=False)
    assert freed.returncode == 0


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts open files through /proc")
def test_engines_opened_and_closed_one_after_another_keep_no_files_open(tmp_path: Path) -> None:
    for number in range(4):
        engine = ContextEngine.embedded(tmp_path / f"tenant-{number}", CONFIG)
        _use(engine)
        assert _open_under(tmp_path / f"tenant-{number}")  # while open, it holds its files
        engine.close()
    # Chroma's own database files are let go by its Rust side once the client is stopped, on a
    # thread of its own; the CAS and the claim on the directory are closed by close() itself
    assert [name for name in _open_under(tmp_path) if not name.endswith(CHROMA_FILES)] == []


def test_a_closed_engine_says_so_and_closing_twice_is_harmless(tmp_path: Path) -> None:
    engine = ContextEngine.embedded(tmp_path, CONFIG)
    _use(engine)
    engine.close()
    engine.close()
    compact = engine.capture_tool_result(
        ToolMessage(content="more output\n" * 400, tool_call_id="c2", name="run"), SCOPE
    )
    assert "closed" in compact.additional_kwargs["ctxplugin"]["warning"]
    with pytest.raises(StoreError, match="closed"):
        engine.facts.search("build number", scope=SCOPE)


def test_close_stops_the_summarizer_thread_the_engine_started() -> None:
    engine = ContextEngine(summarizer=lambda text: text[:20])
    summarizer = engine.summarizer
    assert summarizer is not None
    summarizer.prefetch("some old message text " * 20, session=SCOPE.session_id)
    assert summarizer.drain(10)
    engine.close()
    thread = summarizer._thread
    assert thread is None or not thread.is_alive()


def test_a_summarizer_passed_in_stays_open_for_its_owner() -> None:
    mine = BackgroundSummarizer(lambda text: text[:20])
    ContextEngine(summarizer=mine).close()
    mine.prefetch("some old message text " * 20, session=SCOPE.session_id)
    assert mine.drain(10)
    assert mine.stats.completed == 1
    mine.close()


def _engine_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("ctxplugin-") and t.is_alive()]


def test_close_stops_the_checks_of_a_chroma_server_that_went_away(
    tmp_path: Path, launch_chroma: Callable[[Path], ChromaServer]
) -> None:
    before = set(_engine_threads())
    server = launch_chroma(tmp_path / "server" / "data")
    config = ContextConfig(chroma_url=server.url, path=str(tmp_path / "local"), stores={"timeout": 2.0, "retry_after": 0.2})
    engine = ctxplugin.connect(config)
    try:
        engine.facts.write("The build number is 4412", key="build", scope=SCOPE)
    finally:
        server.stop()
    with pytest.raises(StoreUnavailableError):  # the server is gone: the circuit opens and checks start
        engine.facts.search("build number", scope=SCOPE)
    assert any(t.name.startswith("ctxplugin-check") for t in _engine_threads())
    engine.close()
    assert [t.name for t in _engine_threads() if t not in before] == []


def test_close_stops_the_checks_of_a_chroma_server_down_at_connect(tmp_path: Path) -> None:
    before = set(_engine_threads())
    url = f"http://127.0.0.1:{free_port()}"
    engine = ctxplugin.connect(ContextConfig(chroma_url=url, path=str(tmp_path), stores={"timeout": 2.0, "retry_after": 0.2}))
    assert any(t.name.startswith("ctxplugin-check") for t in _engine_threads())
    engine.close()
    assert [t.name for t in _engine_threads() if t not in before] == []
