"""A Chroma server killed mid-session and started again on the same port: with its data, or on
an empty directory (a container without a volume). The same engine gets facts again without a
restart, and a fact stated while the server was down is read once it is back."""

from __future__ import annotations

import gc
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, SystemMessage

from ctxplugin import ContextEngine, Scope
from ctxplugin.testing.chroma_server import ChromaServer, chroma_executable, heartbeat

pytestmark = [
    pytest.mark.chroma_server,
    pytest.mark.slow,
    # chromadb's HttpClient leaves its httpx session open: collected inside the test, ignored
    pytest.mark.filterwarnings("ignore:Exception ignored in. <socket.socket:pytest.PytestUnraisableExceptionWarning"),
]

S = Scope(session_id="restarted")
RETRY = 0.25


@pytest.fixture
def restart(tmp_path: Path) -> Iterator[Callable[[int, Path], None]]:
    """Start ``chroma run`` again on a port and a data path; stopped at teardown."""
    started: list[subprocess.Popen[bytes]] = []

    def run(port: int, path: Path) -> None:
        command = [str(chroma_executable()), "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)]
        started.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + 60
        while not heartbeat(port):
            assert time.monotonic() < deadline and started[-1].poll() is None, "chroma run did not start again"
            time.sleep(0.1)

    yield run
    for process in started:
        process.terminate()
        process.wait(timeout=15)


@pytest.mark.parametrize("data", ["kept", "lost"])
def test_the_engine_gets_facts_again_from_a_server_started_again(
    data: str, tmp_path: Path, fresh_chroma_server: Callable[[], ChromaServer], restart: Callable[[int, Path], None],
    on_server: Callable[[ChromaServer, float], ContextEngine], say: Any,
) -> None:
    server = fresh_chroma_server()
    port = int(server.url.rsplit(":", 1)[1])
    engine = on_server(server, RETRY)
    messages: list[BaseMessage] = [SystemMessage("You help with releases.")]
    try:
        assert say(engine, messages, "The deploy target is eu-west-3.", S) == []
        server.process.kill()
        server.process.wait(timeout=15)
        down = say(engine, messages, "The release deadline is Friday 5pm.", S)
        assert any(w.startswith("facts store unavailable") for w in down), down

        restart(port, server_path(server) if data == "kept" else tmp_path / "empty")
        time.sleep(2 * RETRY)  # the background check finds the server within retry_after
        first = say(engine, messages, "Thanks.", S)
        assert say(engine, messages, "Anything else?", S) == []
        if data == "kept":
            assert first == []
            assert engine.facts.current("deploy_target", scope=S) is not None
        else:  # one step says the collection was lost; it is made again on the next
            assert all("opened again on the next call" in w for w in first), first
        # the fact stated while the server was down was read again once it was back
        assert engine.facts.current("release_deadline", scope=S) is not None
    finally:
        engine.close()
        gc.collect()


def server_path(server: ChromaServer) -> Path:
    """The data path ``server`` was started on (its command line)."""
    args = list(map(str, server.process.args))  # type: ignore[arg-type]
    return Path(args[args.index("--path") + 1])
