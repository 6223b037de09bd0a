"""A real Chroma server for the facts tests (``chroma run`` on a free loopback port), an engine
``connect`` builds on one, and a user who says something to an engine."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

import ctxplugin
from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.testing.chroma_server import ChromaServer, free_port


@pytest.fixture(scope="session")
def chroma_server(
    tmp_path_factory: pytest.TempPathFactory, launch_chroma: Callable[[Path], ChromaServer]
) -> Iterator[ChromaServer]:
    server = launch_chroma(tmp_path_factory.mktemp("chroma-server") / "data")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def chroma_url(chroma_server: ChromaServer) -> str:
    """URL of the session's Chroma server."""
    return chroma_server.url


@pytest.fixture
def fresh_chroma_server(
    tmp_path: Path, launch_chroma: Callable[[Path], ChromaServer]
) -> Iterator[Callable[[], ChromaServer]]:
    """Start a private Chroma server (for tests that stop it); stopped at teardown."""
    started: list[ChromaServer] = []

    def start() -> ChromaServer:
        server = launch_chroma(tmp_path / f"server-{len(started)}" / "data")
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def on_server(tmp_path: Path) -> Callable[[ChromaServer, float], ContextEngine]:
    """An engine :func:`ctxplugin.connect` builds on a Chroma server, with a facts collection of
    its own and a 2 s store timeout (the pause before a failed server is checked again given)."""

    def connect(server: ChromaServer, retry_after: float) -> ContextEngine:
        return ctxplugin.connect(ContextConfig(
            chroma_url=server.url, path=str(tmp_path / "engine"),
            facts={"collection": f"f{uuid.uuid4().hex[:12]}"}, stores={"timeout": 2.0, "retry_after": retry_after},
        ))

    return connect


@pytest.fixture
def free_tcp_port() -> int:
    """A loopback port nothing listens on."""
    return free_port()


Say = Callable[[ContextEngine, list[BaseMessage], str, Scope], list[str]]


@pytest.fixture
def say() -> Say:
    """The user says ``text`` in ``scope`` (the engine prepares the call, the agent answers):
    the warnings of the step that read it."""

    def said(engine: ContextEngine, messages: list[BaseMessage], text: str, scope: Scope) -> list[str]:
        n = len(messages)
        messages.append(HumanMessage(text, id=f"h{n}"))
        warnings = list(engine.prepare(messages, scope=scope).report.warnings)
        messages.append(AIMessage("Noted.", id=f"a{n}"))
        return warnings

    return said
