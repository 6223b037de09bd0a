"""Every fact store backend passes the shared contract."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxplugin.config import FactsConfig
from ctxplugin.facts import ChromaFactStore, FactStore, MemoryFactStore
from ctxplugin.testing.facts_contract import FactStoreContract


class TestMemoryFactStore(FactStoreContract):
    @pytest.fixture
    def store(self) -> FactStore:
        return MemoryFactStore()


class TestChromaEmbeddedFactStore(FactStoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[FactStore]:
        with ChromaFactStore.persistent(tmp_path / "chroma", config=FactsConfig()) as store:
            yield store


class TestChromaPerTenantFactStore(FactStoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[FactStore]:
        config = FactsConfig(collection_per_tenant=True)
        with ChromaFactStore.persistent(tmp_path / "chroma", config=config) as store:
            yield store


@pytest.mark.chroma_server
class TestChromaServerFactStore(FactStoreContract):
    @pytest.fixture
    def store(self, chroma_url: str) -> Iterator[FactStore]:
        config = FactsConfig(collection=f"t{uuid.uuid4().hex[:12]}")
        with ChromaFactStore.http(chroma_url, config=config) as store:
            yield store
