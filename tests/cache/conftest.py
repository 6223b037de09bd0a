"""Fixtures of the answer-cache tests: a real ``chroma run`` server on a free loopback port."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ctxplugin.testing.chroma_server import ChromaServer


@pytest.fixture(scope="module")
def chroma_url(
    tmp_path_factory: pytest.TempPathFactory, launch_chroma: Callable[[Path], ChromaServer]
) -> Iterator[str]:
    """URL of a ``chroma run`` server started for this module."""
    server = launch_chroma(tmp_path_factory.mktemp("cache-chroma") / "data")
    try:
        yield server.url
    finally:
        server.stop()
