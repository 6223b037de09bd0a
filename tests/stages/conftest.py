"""Fixtures of the stage tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxplugin import ContextConfig, ContextEngine
from ctxplugin.testing import memory_engine


@pytest.fixture(params=["memory", "embedded"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ContextEngine]:
    """A whole-mode engine on in-memory stores, then on the embedded SQLite CAS with Chroma on
    disk: a test taking ``engine`` runs on both."""
    config = ContextConfig(mode="whole")
    if request.param == "memory":
        with memory_engine(config) as eng:
            yield eng
    else:
        with ContextEngine.embedded(tmp_path / "stores", config) as eng:
            yield eng
