"""Test setup shared by every package: no network beyond loopback, no real model APIs, no
tracing unless a test turns it on."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest

for _key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "LANGSMITH_API_KEY", "LANGCHAIN_API_KEY"):
    os.environ.pop(_key, None)
os.environ["LANGSMITH_TRACING"] = "false"
os.environ["LANGCHAIN_TRACING_V2"] = "false"
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

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
