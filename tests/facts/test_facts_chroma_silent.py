"""A Chroma server that takes connections and never answers (frozen, or a port held by
something else): the stores built on its URL give up within their timeout, from the very first
connection on (chromadb's own client, whose construction asks the server who the caller is, has
no timeout)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.cache import ChromaAnswerCacheStore
from ctxplugin.errors import StoreUnavailableError
from ctxplugin.facts import ChromaFactStore, FactsLedger

TIMEOUT = 0.5
WAIT = 30.0
"""How long the test waits for a call that should give up after TIMEOUT (a hang fails it)."""


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A port that accepts connections and never sends a byte."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()


def within(fn: Callable[[], Any]) -> Any:
    """``fn()``, run in a thread that must end within WAIT seconds."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as exc:  # handed to the test below
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(WAIT)
    assert not thread.is_alive(), "the call did not give up"
    return out[0]


def test_prepare_on_a_silent_chroma_server_goes_on_without_facts(silent_url: str) -> None:
    config = ContextConfig(stores={"timeout": TIMEOUT})
    store = ChromaFactStore.http(silent_url, config=config.facts, timeout=TIMEOUT)
    engine = ContextEngine(config, facts=FactsLedger(store, config.facts))
    messages: list[BaseMessage] = [HumanMessage("The deploy target is eu-west-3.", id="h0"), AIMessage("Noted.", id="a0"),
                                   HumanMessage("Where do we deploy?", id="h1")]
    for _ in range(2):  # and again: the first attempt left nothing held
        prepared = within(lambda: engine.prepare(messages, scope=Scope(session_id="s")))
        assert any("facts store unavailable" in w for w in prepared.report.warnings), prepared.report.warnings


def test_the_answer_cache_store_on_a_silent_server_gives_up(silent_url: str) -> None:
    store = ChromaAnswerCacheStore.http(silent_url, timeout=TIMEOUT)
    raised = within(lambda: store.purge_expired(0.0))
    assert isinstance(raised, StoreUnavailableError)
