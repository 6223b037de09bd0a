"""An engine's life in a long-running service: closed, it releases what it opened."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from pytest_mock import MockerFixture

import ctxplugin
from ctxplugin import ContextConfig, ContextEngine, PreparedContext, Scope
from ctxplugin.cas import SQLiteCASStore
from ctxplugin.errors import (
    ConfigWarning,
    EngineClosedError,
    InvalidInputError,
    StoreInUseError,
    StoreUnavailableError,
)
from ctxplugin.guard import unwrap
from ctxplugin.history import BackgroundSummarizer
from ctxplugin.testing.chroma_server import ChromaServer, free_port
from ctxplugin.testing.fault_proxy import FaultProxy

SCOPE = Scope(session_id="s1")


def prepare_in_thread(engine: ContextEngine) -> tuple[threading.Thread, dict[str, Any]]:
    """A prepare call started on a thread of its own; its view or its error lands in the dict."""
    outcome: dict[str, Any] = {}

    def call() -> None:
        try:
            outcome["view"] = engine.prepare([HumanMessage(content="which build number was it?")], scope=SCOPE)
        except Exception as exc:
            outcome["error"] = exc

    running = threading.Thread(target=call)
    running.start()
    return running, outcome


def close_inside_search(engine: ContextEngine, mocker: MockerFixture) -> None:
    """The engine's facts search closes the engine before it searches: a ``close()`` from
    inside one of the engine's own calls, as a callback or tool would."""
    search = engine.facts.store.search

    def closing_search(*args: Any, **kwargs: Any) -> Any:
        engine.close()
        return search(*args, **kwargs)

    mocker.patch.object(engine.facts.store, "search", side_effect=closing_search)


def open_then_fail(engine: ContextEngine) -> list[str]:
    """Two releases registered: one that records itself in the list returned, then one that
    raises (released first, as what was opened last)."""
    released: list[str] = []
    engine.opened(lambda: released.append("opened first"))

    def failing() -> None:
        raise OSError("disk gone")

    engine.opened(failing)
    return released


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


def test_embedded_without_a_path_opens_the_configured_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for config in (ContextConfig(path=str(tmp_path / "from-code")), None):
        if config is None:
            monkeypatch.setenv("CTXPLUGIN_PATH", str(tmp_path / "from-env"))
        with ContextEngine.embedded(config=config) as engine:
            _use(engine)
            assert engine.path is not None and Path(engine.path) == Path(engine.config.path)
    assert (tmp_path / "from-code" / "cas.sqlite3").is_file() and (tmp_path / "from-env" / "cas.sqlite3").is_file()
    assert not (tmp_path / ".ctxplugin").exists(), "the stores went to the default directory, not the configured one"


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


def _closed_calls(engine: ContextEngine, prepared: PreparedContext) -> dict[str, Callable[[], object]]:
    """Every way a user calls an engine, each a call to make after close() (``prepared``: a view
    it made before)."""
    message = ToolMessage(content="more output\n" * 400, tool_call_id="c2", name="run")
    conversation = [HumanMessage(content="and now?")]
    answer = AIMessage(content="It is 4412.")
    return {
        "cached_answer": lambda: engine.cached_answer(conversation, prepared, scope=SCOPE),
        "remember_answer": lambda: engine.remember_answer(conversation, prepared, answer, scope=SCOPE),
        "prepare": lambda: engine.prepare(conversation, scope=SCOPE),
        "aprepare": lambda: asyncio.run(engine.aprepare(conversation, scope=SCOPE)),
        "capture_tool_result": lambda: engine.capture_tool_result(message, SCOPE),
        "acapture_tool_result": lambda: asyncio.run(engine.acapture_tool_result(message, SCOPE)),
        "expand_ref": lambda: engine.expand_ref("ref:run:0123456789abcdef", scope=SCOPE),
        # the model's tool, run by a host that goes on after close(): not an answer telling the
        # model to go on without the output
        "the expand_ref tool": lambda: engine.tools_for_model()[0].invoke(
            {"ref_id": "ref:run:0123456789abcdef"}, {"configurable": {"thread_id": "s1"}}
        ),
        "facts.write": lambda: engine.facts.write("The build number is 4413", key="build", scope=SCOPE),
        "facts.search": lambda: engine.facts.search("build number", scope=SCOPE),
        "facts.current": lambda: engine.facts.current("build", scope=SCOPE),
    }


@pytest.mark.parametrize("kind", ["embedded", "in memory"])
def test_a_closed_engine_refuses_every_call_and_closing_twice_is_harmless(kind: str, tmp_path: Path) -> None:
    # a closed engine used to answer: prepare returned a view warning that a store "was closed",
    # and capture passed the output through; now each call says the engine is closed
    engine = ContextEngine.embedded(tmp_path, CONFIG) if kind == "embedded" else ContextEngine(CONFIG)
    _use(engine)
    prepared = engine.prepare([HumanMessage(content="and now?")], scope=SCOPE)
    engine.close()
    engine.close()
    assert engine.closed
    refused = {}
    for name, call in _closed_calls(engine, prepared).items():
        with pytest.raises(EngineClosedError) as raised:
            call()
        refused[name] = str(raised.value)
    assert all("ContextEngine was closed" in text and "new engine" in text for text in refused.values()), refused
    assert issubclass(EngineClosedError, InvalidInputError) and issubclass(EngineClosedError, ValueError)


def test_an_engine_closed_by_its_with_block_refuses_calls(tmp_path: Path) -> None:
    with ContextEngine.embedded(tmp_path, CONFIG) as engine:
        _use(engine)
    with pytest.raises(EngineClosedError, match="with block"):
        engine.prepare([HumanMessage(content="again?")], scope=SCOPE)


def test_close_waits_for_the_calls_running_and_refuses_new_ones(tmp_path: Path, mocker: MockerFixture) -> None:
    # closed while a call was in its facts search, the engine closed the Chroma client under it
    # and the call failed with an AttributeError from inside Chroma
    engine = ContextEngine.embedded(tmp_path, CONFIG)
    _use(engine)
    store = engine.facts.store
    searching, go_on = threading.Event(), threading.Event()
    search = store.search

    def slow_search(*args: Any, **kwargs: Any) -> Any:
        searching.set()
        go_on.wait()
        return search(*args, **kwargs)

    mocker.patch.object(store, "search", side_effect=slow_search)
    running, outcome = prepare_in_thread(engine)
    assert searching.wait(30)
    closing = threading.Thread(target=engine.close)
    closing.start()
    while not engine.closed:
        threading.Event().wait(0.01)
    with pytest.raises(EngineClosedError):
        engine.prepare([HumanMessage(content="a new call")], scope=SCOPE)
    go_on.set()
    running.join()
    closing.join()
    assert "error" not in outcome, repr(outcome.get("error"))
    assert isinstance(outcome["view"], PreparedContext)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks a child")
def test_a_child_forked_while_a_call_runs_does_not_wait_for_it_to_close(mocker: MockerFixture) -> None:
    # the parent's running call is not the child's: its close() has nothing to wait for
    engine = ContextEngine(CONFIG)
    _use(engine)
    searching, go_on = threading.Event(), threading.Event()
    search = engine.facts.store.search

    def slow_search(*args: Any, **kwargs: Any) -> Any:
        searching.set()
        go_on.wait()
        return search(*args, **kwargs)

    mocker.patch.object(engine.facts.store, "search", side_effect=slow_search)
    running = threading.Thread(target=lambda: engine.prepare([HumanMessage(content="which build?")], scope=SCOPE))
    running.start()
    assert searching.wait(30)
    child = multiprocessing.get_context("fork").Process(target=engine.close)
    child.start()
    child.join(30)  # a deadlock detector, not a measure: close() would wait 60 s for the parent's call
    hung = child.is_alive()
    if hung:
        child.kill()
        child.join()
    go_on.set()
    running.join()
    engine.close()
    assert not hung and child.exitcode == 0


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


def _in_forked_child(engine: ContextEngine, other: str, results: Any) -> None:
    outcome: dict[str, object] = {}
    try:
        text = "output the child's tool printed\n" * 400
        compact = engine.capture_tool_result(ToolMessage(content=text, tool_call_id="k1", name="run"), SCOPE)
        outcome["ref"] = compact.additional_kwargs["ctxplugin"].get("ref")
        outcome["expanded"] = engine.expand_ref(str(outcome["ref"]), scope=SCOPE) == text
        report = engine.prepare([HumanMessage(content="The deploy target is eu-west-3.")], scope=SCOPE).report
        outcome["prepare_warnings"] = list(report.warnings)
        try:
            engine.facts.write("The child build number is 7", key="child_build", scope=SCOPE)
        except StoreInUseError as exc:
            outcome["write_error"] = str(exc)
        try:
            ContextEngine.embedded(engine.path or "", CONFIG).close()
        except StoreInUseError as exc:
            outcome["reopen_error"] = str(exc)
        with ContextEngine.embedded(other, CONFIG) as own:
            own.facts.write("The child build number is 7", key="child_build", scope=SCOPE)
            outcome["own_facts"] = [hit.fact.text for hit in own.facts.search("child build number", scope=SCOPE, k=1)]
        engine.close()
    except BaseException as exc:  # reported to the parent, which fails the test
        outcome["error"] = repr(exc)
    results.put(outcome)


def test_a_forked_child_keeps_the_cas_and_is_told_to_open_its_own_chroma(tmp_path: Path) -> None:
    engine = ContextEngine.embedded(tmp_path / "parent", CONFIG)
    _use(engine)
    fork = multiprocessing.get_context("fork")
    results = fork.Queue()
    child = fork.Process(target=_in_forked_child, args=(engine, str(tmp_path / "child"), results))
    child.start()
    child.join(120)
    if child.is_alive():
        child.kill()
        child.join()
        pytest.fail("the forked child hung on the parent's stores")
    outcome = results.get(timeout=10)
    assert "error" not in outcome, outcome
    assert outcome["expanded"] is True
    assert any("fork" in str(w) for w in outcome["prepare_warnings"])
    for error in (outcome["write_error"], outcome["reopen_error"]):
        assert "CTXPLUGIN_CHROMA_URL" in str(error)
    assert "after the fork" in str(outcome["write_error"])
    assert outcome["own_facts"] == ["The child build number is 7"]
    # the parent's stores are untouched: the child's output is there, and its facts still answer
    assert engine.expand_ref(str(outcome["ref"]), scope=SCOPE) == "output the child's tool printed\n" * 400
    assert [hit.fact.key for hit in engine.facts.search("build number", scope=SCOPE, k=1)] == ["build"]
    engine.facts.write("The build number is 4413", key="build", scope=SCOPE)
    engine.close()


def _write_from_forked_child(engine: ContextEngine, number: int, results: Any) -> None:
    outcome: dict[str, object] = {}
    try:
        for i in range(15):
            engine.facts.write(f"Worker {number} finished batch {i}", key=f"worker_{number}_batch", scope=SCOPE)
        current = engine.facts.current(f"worker_{number}_batch", scope=SCOPE)
        outcome["found"] = current.text if current is not None else None
        outcome["warnings"] = engine.prepare([HumanMessage(content="The deploy target is eu-west-3.")], scope=SCOPE).report.warnings
        engine.close()
    except BaseException as exc:  # reported to the parent, which fails the test
        outcome["error"] = repr(exc)
    results.put(outcome)


def test_forked_workers_of_a_server_engine_talk_to_the_server_on_their_own_connections(
    tmp_path: Path, launch_chroma: Callable[[Path], ChromaServer]
) -> None:
    server = launch_chroma(tmp_path / "server" / "data")
    try:
        engine = ctxplugin.connect(ContextConfig(chroma_url=server.url, path=str(tmp_path / "local"), stores={"timeout": 5.0}))
        engine.facts.write("The build number is 4412", key="build", scope=SCOPE)  # connected before the fork
        fork = multiprocessing.get_context("fork")
        results = fork.Queue()
        workers = [fork.Process(target=_write_from_forked_child, args=(engine, n, results)) for n in range(2)]
        for worker in workers:
            worker.start()
        for i in range(15):  # the parent goes on meanwhile, on the same server
            engine.facts.write(f"The parent finished batch {i}", key="parent_batch", scope=SCOPE)
        for worker in workers:
            worker.join(120)
        assert not any(worker.is_alive() for worker in workers)
        outcomes = [results.get(timeout=10) for _ in workers]
        assert all("error" not in o and o["warnings"] == [] for o in outcomes), outcomes
        assert sorted(str(o["found"]) for o in outcomes) == ["Worker 0 finished batch 14", "Worker 1 finished batch 14"]
        for key, who in (("worker_0_batch", "Worker 0"), ("worker_1_batch", "Worker 1"), ("parent_batch", "The parent")):
            current = engine.facts.current(key, scope=SCOPE)
            assert current is not None and current.text == f"{who} finished batch 14"
            assert len(engine.facts.history(key, scope=SCOPE)) == 15
        engine.close()
    finally:
        server.stop()


def _write_once_the_server_is_back(engine: ContextEngine, results: Any) -> None:
    outcome: dict[str, object] = {"tries": 0}
    try:
        for _ in range(100):  # checks run every 0.2 s: the circuit closes within a few tries
            outcome["tries"] = int(str(outcome["tries"])) + 1
            try:
                engine.facts.write("The child build number is 7", key="child_build", scope=SCOPE)
            except StoreUnavailableError as exc:
                outcome["last"] = str(exc)
                threading.Event().wait(0.2)
                continue
            outcome["written"] = True
            break
        engine.close()
    except BaseException as exc:  # reported to the parent, which fails the test
        outcome["error"] = repr(exc)
    results.put(outcome)


def test_a_worker_forked_while_the_chroma_server_is_down_gets_back_to_it(
    tmp_path: Path, launch_chroma: Callable[[Path], ChromaServer]
) -> None:
    server = launch_chroma(tmp_path / "server" / "data")
    proxy = FaultProxy("127.0.0.1", int(server.url.rsplit(":", 1)[1]))
    try:
        proxy.refuse()  # down when the service starts: connect() opens the circuit and checks
        url = f"http://127.0.0.1:{proxy.port}"
        config = ContextConfig(chroma_url=url, path=str(tmp_path / "local"), stores={"timeout": 2.0, "retry_after": 0.2})
        engine = ctxplugin.connect(config)
        fork = multiprocessing.get_context("fork")
        results = fork.Queue()
        worker = fork.Process(target=_write_once_the_server_is_back, args=(engine, results))
        worker.start()
        proxy.heal()
        worker.join(120)
        assert not worker.is_alive()
        outcome = results.get(timeout=10)
        assert outcome.get("written") is True, outcome
        current = engine.facts.current("child_build", scope=SCOPE)
        assert current is not None and current.text == "The child build number is 7"
        engine.close()
    finally:
        proxy.close()
        server.stop()


class _Destroyed:
    """Writes the id of the process it is destroyed in to ``fd``."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.cycle = self

    def __del__(self) -> None:
        os.write(self.fd, f"{os.getpid()}\n".encode())


def test_garbage_of_a_process_that_used_chroma_is_collected_before_a_fork_not_in_the_child(tmp_path: Path) -> None:
    # garbage holding an embedded client, collected in a forked child, would wait there for
    # ever on a lock a thread of the parent held at the fork: it is collected before the fork
    import gc

    engine = ContextEngine.embedded(tmp_path / "store")
    engine.facts.write("The build number is 4412", key="build", scope=SCOPE)  # Chroma loaded and used
    engine.close()
    read, write = os.pipe()
    enabled = gc.isenabled()
    gc.disable()  # the cycle stays uncollected until a collection is asked for
    try:
        _Destroyed(write)
        child = os.fork()
        if child == 0:  # the child collects what it inherited, then leaves at once
            gc.collect()
            os._exit(0)
        os.waitpid(child, 0)
    finally:
        if enabled:
            gc.enable()
    gc.collect()
    os.close(write)
    with os.fdopen(read) as pipe:
        destroyed_in = [int(line) for line in pipe.read().split()]
    assert destroyed_in == [os.getpid()]


def test_an_engine_on_a_relative_path_keeps_its_stores_after_the_working_directory_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the CAS opens one SQLite connection per thread, the chat history one per operation: a
    # relative path read after a chdir named another directory's files
    home, elsewhere = tmp_path / "app", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(home)
    text = "a line the tool printed\n" * 400
    with ContextEngine.embedded(".ctxplugin", CONFIG) as engine:
        compact = engine.capture_tool_result(ToolMessage(content=text, tool_call_id="k1", name="run"), SCOPE)
        ref = str(compact.additional_kwargs["ctxplugin"]["ref"])
        monkeypatch.chdir(elsewhere)
        read: list[str] = []
        worker = threading.Thread(target=lambda: read.append(engine.expand_ref(ref, scope=SCOPE)))
        worker.start()
        worker.join(timeout=30)
        assert read == [text], "a new thread read another directory's CAS"
        engine.history("h1").add_messages([HumanMessage("hello")])
        assert [m.content for m in engine.history("h1").full_messages] == ["hello"]
        assert engine.path == home / ".ctxplugin"
    assert (home / ".ctxplugin" / "history.sqlite3").is_file()
    assert not (elsewhere / ".ctxplugin").exists()


def test_close_called_inside_a_call_of_the_engine_returns_and_releases_when_the_call_ends(mocker: MockerFixture) -> None:
    # a callback or tool closing the engine from inside its own prepare: close() waited its whole
    # drain time (60 s) for the call that was running it
    engine = ContextEngine(CONFIG)
    _use(engine)
    released: list[str] = []
    engine.opened(lambda: released.append("released"))
    search = engine.facts.store.search
    seen: dict[str, Any] = {}

    def closing_search(*args: Any, **kwargs: Any) -> Any:
        engine.close()
        seen["closed"], seen["released"] = engine.closed, list(released)
        return search(*args, **kwargs)

    mocker.patch.object(engine.facts.store, "search", side_effect=closing_search)
    running, outcome = prepare_in_thread(engine)
    running.join(30)  # a deadlock detector, not a measure
    hung = running.is_alive()
    running.join()
    assert not hung
    assert "error" not in outcome, repr(outcome.get("error"))
    assert isinstance(outcome["view"], PreparedContext)
    assert seen == {"closed": True, "released": []}  # nothing released under the running call
    assert released == ["released"]  # released once the call ended
    with pytest.raises(EngineClosedError):
        engine.prepare([HumanMessage(content="a new call")], scope=SCOPE)
    engine.close()
    assert released == ["released"]


def test_a_release_failing_after_a_close_inside_a_call_leaves_the_call_its_result(
    mocker: MockerFixture, caplog: pytest.LogCaptureFixture
) -> None:
    # what a close() inside a call left is released as that call ends: a release that raised
    # there replaced the call's finished result with its error, and the releases after it never ran
    engine = ContextEngine(CONFIG)
    _use(engine)
    released = open_then_fail(engine)
    close_inside_search(engine, mocker)
    with caplog.at_level("WARNING", logger="ctxplugin"):
        running, outcome = prepare_in_thread(engine)
        running.join()
    assert "error" not in outcome, repr(outcome.get("error"))
    assert isinstance(outcome["view"], PreparedContext)
    assert released == ["opened first"]  # the release after the failing one still ran
    assert any("disk gone" in record.getMessage() for record in caplog.records)


def test_close_runs_every_release_and_raises_the_first_failure() -> None:
    engine = ContextEngine(CONFIG)
    released = open_then_fail(engine)
    with pytest.raises(OSError, match="disk gone"):
        engine.close()
    assert released == ["opened first"]


def test_close_returns_only_once_what_a_close_inside_a_call_left_is_released(mocker: MockerFixture) -> None:
    # closed inside a call, the engine releases when the call ends; a close() from another thread
    # meanwhile returned at once, with the stores still being released (the embedded Chroma
    # directory not yet free for another process)
    engine = ContextEngine(CONFIG)
    _use(engine)
    releasing, closed_elsewhere = threading.Event(), threading.Event()
    returned_during_release: list[bool] = []

    def release() -> None:
        releasing.set()
        returned_during_release.append(closed_elsewhere.wait(2))  # bounded: the fixed close() waits for this

    engine.opened(release)
    close_inside_search(engine, mocker)
    running, outcome = prepare_in_thread(engine)
    assert releasing.wait(30)  # a deadlock detector, not a measure
    engine.close()
    closed_elsewhere.set()
    running.join()
    assert "error" not in outcome, repr(outcome.get("error"))
    assert returned_during_release == [False]


def test_calls_on_two_threads_that_each_close_the_engine_both_return() -> None:
    # each close() inside a call waited for the other thread's call, which could not end before
    # its own close() returned: both waited the whole drain time (60 s)
    engine = ContextEngine(CONFIG)
    released: list[str] = []
    engine.opened(lambda: released.append("released"))
    both_inside = threading.Barrier(2)
    errors: list[BaseException] = []

    def call_that_closes() -> None:
        try:
            with engine.in_use():
                both_inside.wait(30)
                engine.close()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=call_that_closes) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)  # a deadlock detector, not a measure: close() would wait 60 s
    hung = [t for t in threads if t.is_alive()]
    for thread in hung:
        thread.join()
    assert not hung and not errors, errors
    assert released == ["released"]


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"postgres_dsn": "postgresql://app@127.0.0.1:5432/ctx"}, ["a Postgres DSN (CTXPLUGIN_POSTGRES_DSN)"]),
        ({"chroma_url": "http://127.0.0.1:8000"}, ["a Chroma server (CTXPLUGIN_CHROMA_URL)"]),
    ],
)
def test_embedded_warns_that_it_does_not_use_the_servers_the_configuration_names(tmp_path: Path, settings: dict[str, str], named: list[str]) -> None:
    with pytest.warns(ConfigWarning, match="connect\\(\\)") as caught:
        engine = ContextEngine.embedded(tmp_path, ContextConfig(**settings))  # type: ignore[arg-type]
    try:
        assert [str(w.message) for w in caught if named[0] in str(w.message)]
        assert isinstance(unwrap(engine.cas), SQLiteCASStore)  # the local stores, as asked
    finally:
        engine.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ContextEngine.embedded(tmp_path / "plain", ContextConfig()).close()  # nothing named: no warning
