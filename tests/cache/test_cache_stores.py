"""The answer-cache store contract against the memory store and real Chroma (embedded and server)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import chromadb
import pytest

from ctxplugin.cache import AnswerCacheStore, ChromaAnswerCacheStore, MemoryAnswerCacheStore
from ctxplugin.errors import ConfigError, StoreError, StoreUnavailableError
from ctxplugin.testing.cache_contract import NOW, AnswerCacheStoreContract, make_entry


class TestMemoryAnswerCacheStore(AnswerCacheStoreContract):
    def make_store(self, tmp_path: Path) -> AnswerCacheStore:
        return MemoryAnswerCacheStore()


class TestChromaAnswerCacheStoreEmbedded(AnswerCacheStoreContract):
    def make_store(self, tmp_path: Path) -> AnswerCacheStore:
        return ChromaAnswerCacheStore.persistent(tmp_path / "chroma")


# chromadb's HttpClient.close() leaves its httpx session open (chromadb 1.5): the socket is
# reported when collected; collect it inside the test that made it, where it is ignored.
@pytest.mark.chroma_server
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Exception ignored in. <socket.socket:pytest.PytestUnraisableExceptionWarning")
class TestChromaAnswerCacheStoreServer(AnswerCacheStoreContract):
    @pytest.fixture(autouse=True)
    def _server(self, chroma_url: str) -> Iterator[None]:
        self.url = chroma_url
        yield
        gc.collect()

    def make_store(self, tmp_path: Path) -> AnswerCacheStore:
        # one server for the module: a collection per test keeps the tests apart
        return ChromaAnswerCacheStore.http(self.url, collection=f"answers_{tmp_path.name[-40:]}".replace("-", "_"))


def test_embedded_entries_survive_a_new_client(tmp_path: Path) -> None:
    entry = make_entry("what is the refund policy")
    ChromaAnswerCacheStore.persistent(tmp_path / "chroma").put(entry)
    reopened = ChromaAnswerCacheStore.persistent(tmp_path / "chroma")
    assert [e.key for e, _ in reopened.candidates("p1", "sig1", entry.query_norm, now=NOW, n=3)] == [entry.key]
    assert reopened.count() == 1


def test_a_server_that_is_down_is_reported_as_unavailable(tmp_path: Path) -> None:
    store = ChromaAnswerCacheStore.http("http://127.0.0.1:9")  # connected on first use: building it is fine
    with pytest.raises(StoreUnavailableError, match="unreachable"):
        store.candidates("p1", "sig1", "refund policy", now=NOW, n=3)


def test_a_malformed_server_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="http://host:port"):
        ChromaAnswerCacheStore.http("127.0.0.1:8000")


def test_a_closed_store_says_so(tmp_path: Path) -> None:
    with ChromaAnswerCacheStore.persistent(tmp_path / "chroma") as store:
        store.put(make_entry("refund policy"))
    with pytest.raises(StoreError, match="closed"):
        store.candidates("p1", "sig1", "refund policy", now=NOW, n=1)


def test_chroma_writes_hit_counts_in_batches_and_on_close(tmp_path: Path) -> None:
    entry = make_entry("refund policy")
    with ChromaAnswerCacheStore.persistent(tmp_path / "chroma") as store:
        store.put(entry)
        for second in range(3):
            store.record_hit(entry.key, at=NOW + second)
    reopened = ChromaAnswerCacheStore.persistent(tmp_path / "chroma")
    (got, _), = reopened.candidates("p1", "sig1", entry.search_text, now=NOW, n=1)
    assert (got.hit_count, got.last_hit_at) == (3, NOW + 2)
    for second in range(ChromaAnswerCacheStore.HIT_BATCH):  # a full batch is written at once
        reopened.record_hit(entry.key, at=NOW + 10 + second)
    (got, _), = ChromaAnswerCacheStore.persistent(tmp_path / "chroma").candidates("p1", "sig1", entry.search_text, now=NOW, n=1)
    assert got.hit_count == 3 + ChromaAnswerCacheStore.HIT_BATCH


@pytest.mark.chroma_server
@pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <socket.socket:pytest.PytestUnraisableExceptionWarning"
)
def test_a_collection_the_server_lost_is_created_again(chroma_url: str, tmp_path: Path) -> None:
    # a server restarted without its data no longer knows the collection the store opened:
    # one call says so, and the store opens a new one after it
    name = f"answers_{tmp_path.name[-40:]}".replace("-", "_")
    store = ChromaAnswerCacheStore.http(chroma_url, collection=name)
    store.put(make_entry("what is the refund policy"))
    host, port = chroma_url.removeprefix("http://").split(":")
    chromadb.HttpClient(host=host, port=int(port)).delete_collection(store.name)
    with pytest.raises(StoreError, match="opened again on the next call"):
        store.candidates("p1", "sig1", "refund policy", now=NOW, n=3)
    entry = make_entry("how do I reset my password")
    store.put(entry)
    found = store.candidates("p1", "sig1", entry.query_norm, now=NOW, n=3)
    assert [e.key for e, _ in found] == [entry.key]
    store.close()
    gc.collect()
