"""Test setup shared by every package: no network beyond loopback, no real model APIs, no
tracing unless a test turns it on."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxplugin.errors import MissingDependencyError
from ctxplugin.testing.chroma_server import ChromaServer, start_chroma

for _key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "LANGSMITH_API_KEY", "LANGCHAIN_API_KEY"):
    os.environ.pop(_key, None)
os.environ["LANGSMITH_TRACING"] = "false"
os.environ["LANGCHAIN_TRACING_V2"] = "false"
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
# Most tests exercise one mechanism (tiers, refs, notes, the budget stage) on short conversations,
# which the default mode sends whole; they run in the compact mode, which compresses from the
# first call. Tests of the defaults themselves remove this (tests/test_defaults.py).
os.environ.setdefault("CTXPLUGIN_MODE", "compact")

_real_connect = socket.socket.connect


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    if self.family in (socket.AF_INET, socket.AF_INET6):
        host = address[0]
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = host == "localhost"
        if not loopback:
            raise ConnectionRefusedError(f"tests may not reach {host}: the network is blocked")
    return _real_connect(self, address)


@pytest.fixture(autouse=True, scope="session")
def _block_network() -> Iterator[None]:
    socket.socket.connect = _guarded_connect  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        socket.socket.connect = _real_connect  # type: ignore[method-assign]


@pytest.fixture(scope="session")
def launch_chroma() -> Callable[[Path], ChromaServer]:
    """Start a real ``chroma run`` server with its data under a path; skips the test when the
    ``chroma`` command is not installed. The caller stops the server."""

    def launch(path: Path) -> ChromaServer:
        try:
            return start_chroma(path)
        except MissingDependencyError as exc:
            pytest.skip(str(exc))

    return launch
