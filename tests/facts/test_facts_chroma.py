"""Chroma specifics: persistence, per-tenant collections, errors translated at the adapter, and a
server going away while an agent runs."""

from __future__ import annotations

import gc
import http.server
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import chromadb
import chromadb.errors
import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pytest_mock import MockerFixture

import ctxplugin
from ctxplugin import ConfigError, ContextConfig, ContextEngine, StoreError, StoreUnavailableError
from ctxplugin.cache import ChromaAnswerCacheStore
from ctxplugin.cas import MemoryCASStore
from ctxplugin.config import FactsConfig
from ctxplugin.facts import ChromaFactStore, FactQuery, FactsLedger
from ctxplugin.scope import Scope
from ctxplugin.testing import facts_block as view_facts

S = Scope(session_id="s1", user_id="u1", tenant_id="acme")


def test_one_relative_path_from_two_working_directories_opens_two_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ContextEngine.embedded(".ctxplugin") in two directories of one process: each engine keeps
    # its facts and cached answers in its own directory, not in the first one opened
    config = ContextConfig(cache={"enabled": True})
    first_dir, second_dir = tmp_path / "a", tmp_path / "b"
    first_dir.mkdir()
    second_dir.mkdir()
    monkeypatch.chdir(first_dir)
    with ContextEngine.embedded(".ctxplugin", config) as first:
        first.facts.write("Vendor is Acme", key="vendor", scope=S)
        monkeypatch.chdir(second_dir)
        with ContextEngine.embedded(".ctxplugin", config) as second:
            assert second.facts.current("vendor", scope=S) is None, "the second engine read the first one's facts"
            second.facts.write("Vendor is Globex", key="vendor", scope=S)
        current = first.facts.current("vendor", scope=S)
        assert current is not None and current.text == "Vendor is Acme"
    assert (second_dir / ".ctxplugin" / "chroma" / "chroma.sqlite3").is_file()


def test_facts_survive_reopening_the_directory(tmp_path: Path) -> None:
    with ChromaFactStore.persistent(tmp_path) as store:
        ledger = FactsLedger(store)
        old = ledger.write("Data Team on Project Alpha", key="data_team", scope=S)
        new = ledger.write("Data Team reallocated to Project Beta", key="data_team", scope=S)
    with ChromaFactStore.persistent(tmp_path) as again:
        ledger = FactsLedger(again)
        current = ledger.current("data_team", scope=S)
        assert current is not None and current.id == new.id
        assert [f.id for f in ledger.history("data_team", scope=S)] == [old.id, new.id]
        assert [h.fact.id for h in ledger.search("data team project", scope=S)] == [new.id]


def test_an_empty_path_is_refused_rather_than_the_working_directory_filled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ChromaFactStore.persistent("") put chroma.sqlite3, its index directory and the owner lock
    # in the working directory (ContextEngine.embedded(path="") was already refused)
    monkeypatch.chdir(tmp_path)
    for open_store in (ChromaFactStore.persistent, ChromaAnswerCacheStore.persistent):
        for path in ("", "  "):
            with pytest.raises(ConfigError, match="path is empty"):
                open_store(path)
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(ConfigError, match="cannot be used"):
        ChromaFactStore.persistent(tmp_path / "a-file")


@pytest.mark.parametrize("prefix", ["ctx..facts", "a.."])
def test_a_collection_prefix_chroma_refuses_is_a_config_error(prefix: str) -> None:
    # it passed the configuration, then every facts call failed ("two consecutive periods")
    with pytest.raises(ConfigError, match=r"facts\.collection=.*two periods in a row"):
        ContextConfig(facts={"collection": prefix})
    with pytest.raises(ConfigError, match="two periods in a row"):
        FactsConfig(collection=prefix)


@pytest.mark.parametrize("prefix", ["ctx.facts", "a.b-c_d", "A1."])
def test_a_collection_prefix_the_configuration_takes_is_one_chroma_takes(tmp_path: Path, prefix: str) -> None:
    store = ChromaFactStore.persistent(tmp_path / "chroma", config=FactsConfig(collection=prefix))
    try:
        fact = FactsLedger(store).write("The budget is $40k", key="budget", scope=S)
        assert [f.id for f in store.get([fact.id], reader=S)] == [fact.id]
    finally:
        store.close()


def test_collection_per_tenant_keeps_tenants_in_separate_collections(tmp_path: Path) -> None:
    with ChromaFactStore.persistent(tmp_path, config=FactsConfig(collection_per_tenant=True)) as store:
        ledger = FactsLedger(store)
        ledger.write("Acme budget is 50k", scope=S)
        ledger.write("Globex budget is 10k", scope=Scope(session_id="s1", user_id="u1", tenant_id="globex"))
        acme, globex = store.raw_collection("acme"), store.raw_collection("globex")
        assert acme.name != globex.name
        assert (acme.count(), globex.count()) == (1, 1)
        assert [h.fact.text for h in ledger.search("budget", scope=S)] == ["Acme budget is 50k"]


def test_a_tenant_id_with_undecodable_bytes_gets_its_own_collection(tmp_path: Path) -> None:
    # an id decoded with surrogateescape holds lone surrogates: a tenant like any other
    odd = Scope(session_id="s1", user_id="u1", tenant_id="acme\udcff")
    config = ContextConfig(facts=FactsConfig(collection_per_tenant=True))
    engine = ContextEngine.embedded(tmp_path, config=config)
    store = engine.facts.store
    assert isinstance(store, ChromaFactStore)
    with store:
        prepared = engine.prepare([HumanMessage("Our budget is 10k.", id="h1")], scope=odd)
        assert not any("facts" in w for w in prepared.report.warnings)
        engine.facts.write("Acme budget is 50k", scope=S)
        assert [h.fact.text for h in engine.facts.search("budget", scope=odd)] == ["Our budget is 10k."]
        assert store.raw_collection(odd.tenant_id).name != store.raw_collection(S.tenant_id).name


def test_a_closed_store_says_so(tmp_path: Path) -> None:
    store = ChromaFactStore.persistent(tmp_path)
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.find(FactQuery(reader=S))


@pytest.mark.parametrize(
    "url", ["127.0.0.1:8000", "ftp://host", "http://", "http://127.0.0.1:8000/chroma", "http://127.0.0.1:8000/?tenant=a",
            # a bare ValueError from urllib where the client was built, naming no setting
            "http://127.0.0.1:8000 ", "http://127.0.0.1:99999", "http://127.0.0.1:abc", "http://127.0.0.1:0"]
)
def test_server_url_is_validated_when_built(url: str) -> None:
    with pytest.raises(ConfigError, match="http://host:port"):
        ChromaFactStore.http(url)
    with pytest.raises(ConfigError, match="http://host:port"):
        ChromaAnswerCacheStore.http(url)


@pytest.mark.parametrize("timeout", [0, -1.0, float("nan"), float("inf"), "5"])
def test_a_timeout_that_is_no_positive_number_is_refused_when_built(timeout: object) -> None:
    # 0 was taken for a server that does not answer; the others failed on the first request
    # with a ValueError, OverflowError or TypeError of the HTTP client
    builds: list[Callable[..., object]] = [ChromaFactStore.http, ChromaAnswerCacheStore.http]
    for build in builds:
        with pytest.raises(ConfigError, match="timeout must be a number of seconds above 0"):
            build("http://127.0.0.1:8000", timeout=timeout)


@pytest.mark.parametrize(
    ("url", "wrong"), [("127.0.0.1:8000", "http://host:port, got"), ("http://127.0.0.1:8000/chroma", "no path"),
                       ("http://127.0.0.1:8000 ", "a port from 1 to 65535"), ("http://127.0.0.1:80000", "a port from 1 to 65535")]
)
def test_a_malformed_server_url_at_connect_names_the_setting_and_its_variable(
    url: str, wrong: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The URL came from the environment or the config: the error names both, as the Postgres
    DSN's does, so a user who exported the variable finds what to fix."""
    monkeypatch.setenv("CTXPLUGIN_CHROMA_URL", url)
    for config in (ContextConfig(path=str(tmp_path)), ContextConfig(chroma_url=url, path=str(tmp_path))):
        with pytest.raises(ConfigError) as raised:
            ctxplugin.connect(config)
        text = str(raised.value)
        assert text.startswith("Chroma server URL (chroma_url, CTXPLUGIN_CHROMA_URL) must look like"), text
        assert wrong in text and repr(url) in text, text


@pytest.mark.chroma_server
def test_a_path_in_the_server_url_fails_at_connect_rather_than_being_dropped(tmp_path: Path, chroma_url: str) -> None:
    with pytest.raises(ConfigError, match="no path"):
        ctxplugin.connect(ContextConfig(chroma_url=f"{chroma_url}/chroma", path=str(tmp_path)))


class _NotFound(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_error(404)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_url_that_is_no_chroma_server_fails_at_connect(tmp_path: Path) -> None:
    """A web server that answers the heartbeat with 404 (another service on that port) is no
    outage that passes: the URL is wrong."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(ConfigError, match="HTTP 404"):
            ctxplugin.connect(ContextConfig(chroma_url=url, path=str(tmp_path), stores={"timeout": 2.0}))
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.chroma_server
def test_an_https_url_for_a_plain_http_server_fails_at_connect(tmp_path: Path, chroma_url: str) -> None:
    url = chroma_url.replace("http://", "https://", 1)
    with pytest.raises(ConfigError, match=r"cannot be used: .*(TLS|SSL)") as raised:
        ctxplugin.connect(ContextConfig(chroma_url=url, path=str(tmp_path), stores={"timeout": 2.0}))
    assert isinstance(raised.value.__cause__, StoreUnavailableError)


def test_chroma_errors_become_store_errors_chained(tmp_path: Path, mocker: MockerFixture) -> None:
    with ChromaFactStore.persistent(tmp_path) as store:
        collection = store.raw_collection("acme")
        mocker.patch.object(type(collection), "query", side_effect=chromadb.errors.InternalError("disk on fire"))
        with pytest.raises(StoreError, match="disk on fire") as info:
            store.search("x", FactQuery(reader=S), n=3)
        assert isinstance(info.value.__cause__, chromadb.errors.InternalError)


@pytest.mark.parametrize("failure", [
    RuntimeError("Cannot return the results in a contigious 2D array. Probably ef or M is too small"),  # hnswlib
    sqlite3.OperationalError("database is locked"),  # embedded Chroma's own SQLite
    OSError(28, "No space left on device"),  # its index files
], ids=["hnswlib", "sqlite", "disk"])
def test_failures_of_chromas_own_storage_are_store_errors(tmp_path: Path, mocker: MockerFixture, failure: Exception) -> None:
    """Embedded Chroma fails with errors that are not ChromaError: its HNSW index raises
    RuntimeError, its SQLite sqlite3 errors, its files OSError. They are store failures, so a
    step degrades with a warning instead of failing the agent."""
    with ChromaFactStore.persistent(tmp_path) as store:
        collection = store.raw_collection("acme")
        mocker.patch.object(type(collection), "query", side_effect=failure)
        with pytest.raises(StoreError) as info:
            store.search("x", FactQuery(reader=S), n=3)
        assert info.value.__cause__ is failure
    with ContextEngine.embedded(tmp_path / "engine") as engine:
        engine.facts.write("The budget is $50k", key="budget", scope=S)
        embedded = engine.facts.store
        assert isinstance(embedded, ChromaFactStore)
        mocker.patch.object(type(embedded.raw_collection("acme")), "query", side_effect=failure)
        mocker.patch.object(type(embedded.raw_collection("acme")), "get", side_effect=failure)
        conversation: list[BaseMessage] = [HumanMessage("We use MySQL."), AIMessage("ok"), HumanMessage("What is the budget?")]
        prepared = engine.prepare(conversation, scope=S)
        assert prepared.messages[-1] is conversation[-1]
        assert any("facts store unavailable" in w for w in prepared.report.warnings), prepared.report.warnings


def test_unknown_errors_propagate(tmp_path: Path, mocker: MockerFixture) -> None:
    with ChromaFactStore.persistent(tmp_path) as store:
        collection = store.raw_collection("acme")
        mocker.patch.object(type(collection), "get", side_effect=KeyError("bug"))
        with pytest.raises(KeyError):
            store.find(FactQuery(reader=S))


@pytest.mark.parametrize("bug", [NotImplementedError("not written yet"), RecursionError("maximum recursion depth exceeded")],
                         ids=["not-implemented", "recursion"])
def test_a_runtime_error_that_is_a_bug_propagates(tmp_path: Path, mocker: MockerFixture, bug: Exception) -> None:
    # both are RuntimeErrors, as hnswlib's index failures are, but say that code is wrong, not
    # that the storage failed: they are not degraded into a warning
    with ChromaFactStore.persistent(tmp_path) as store:
        collection = store.raw_collection("acme")
        mocker.patch.object(type(collection), "get", side_effect=bug)
        with pytest.raises(type(bug)):
            store.find(FactQuery(reader=S))


def test_an_unreachable_server_is_store_unavailable(free_tcp_port: int) -> None:
    store = ChromaFactStore.http(f"http://127.0.0.1:{free_tcp_port}")
    with pytest.raises(StoreUnavailableError, match="unreachable") as info:
        store.find(FactQuery(reader=S))
    assert info.value.__cause__ is not None


class RecordingLock:
    """A write lock for one process: records the names it holds (nobody else waits)."""

    def __init__(self) -> None:
        self.held: list[str] = []

    @contextmanager
    def hold(self, name: str) -> Iterator[None]:
        self.held.append(name)
        yield


def test_the_ledger_connects_before_it_takes_the_write_lock(chroma_url: str, free_tcp_port: int) -> None:
    # other processes wait for the lock: a server that is down fails the write before it is taken
    lock = RecordingLock()
    down = FactsLedger(ChromaFactStore.http(f"http://127.0.0.1:{free_tcp_port}"), lock=lock)
    with pytest.raises(StoreUnavailableError, match="unreachable"):
        down.write("CI runs on Python 3.11", key="ci_python", scope=S)
    assert lock.held == []
    config = FactsConfig(collection=f"t{uuid.uuid4().hex[:12]}")
    with ChromaFactStore.http(chroma_url, config=config) as store:
        ledger = FactsLedger(store, config, lock=lock)
        ledger.write("CI runs on Python 3.11", key="ci_python", scope=S)
        ledger.write("CI runs on Python 3.12", key="ci_python", scope=S)
        current = ledger.current("ci_python", scope=S)
    assert current is not None and current.text == "CI runs on Python 3.12"
    assert len(lock.held) == 2 and len(set(lock.held)) == 1


# chromadb's HttpClient leaves its httpx session open: the socket is reported when collected;
# collect it inside the test that made it, where it is ignored
@pytest.mark.chroma_server
@pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <socket.socket:pytest.PytestUnraisableExceptionWarning"
)
def test_a_collection_the_server_lost_is_created_again(chroma_url: str) -> None:
    # a server restarted without its data (a container without a volume) no longer knows the
    # collection the store opened: one call says so, and the store opens a new one after it
    config = FactsConfig(collection=f"t{uuid.uuid4().hex[:12]}")
    with ChromaFactStore.http(chroma_url, config=config) as store:
        ledger = FactsLedger(store, config)
        ledger.write("CI runs on Python 3.11", key="ci_python", scope=S)
        host, port = chroma_url.removeprefix("http://").split(":")
        name = store.raw_collection(S.tenant_id).name
        chromadb.HttpClient(host=host, port=int(port)).delete_collection(name)
        with pytest.raises(StoreError, match="opened again on the next call"):
            ledger.search("CI Python", scope=S)
        ledger.write("CI runs on Python 3.12", key="ci_python", scope=S)
        found = ledger.search("CI Python", scope=S)
        assert [h.fact.text for h in found] == ["CI runs on Python 3.12"]
    gc.collect()


def conversation(question: str) -> list[BaseMessage]:
    return [
        HumanMessage("The data team is on Project Alpha.", id="h1"),
        AIMessage("Noted."),
        HumanMessage("Actually, the data team moved to Project Beta.", id="h2"),
        AIMessage("Updated."),
        HumanMessage(question, id="h3"),
    ]


@pytest.mark.chroma_server
@pytest.mark.slow
def test_server_going_down_skips_facts_with_a_warning(fresh_chroma_server: Callable[[], Any]) -> None:
    server = fresh_chroma_server()
    config = ContextConfig(facts=FactsConfig(collection=f"t{uuid.uuid4().hex[:12]}"))
    store = ChromaFactStore.http(server.url, config=config.facts)
    engine = ContextEngine(config=config, cas=MemoryCASStore(), facts=FactsLedger(store, config.facts))
    try:
        up = engine.prepare(conversation("Which project is the data team on?"), scope=S)
        facts_block = view_facts(up.messages)
        assert "Project Beta" in facts_block and "Project Alpha" not in facts_block
        assert not any("facts" in w for w in up.report.warnings)

        server.stop()
        down = engine.prepare(conversation("And who leads it?"), scope=S)
        assert any("facts store unavailable" in w for w in down.report.warnings)
        assert down.report.facts == []
        assert [m.content for m in down.messages if isinstance(m, HumanMessage)][-1] == "And who leads it?"
    finally:
        store.close()


@pytest.mark.chroma_server
def test_engine_on_a_chroma_server_never_shows_a_superseded_fact(chroma_url: str) -> None:
    config = ContextConfig(facts=FactsConfig(collection=f"t{uuid.uuid4().hex[:12]}"))
    with ChromaFactStore.http(chroma_url, config=config.facts) as store:
        engine = ContextEngine(config=config, cas=MemoryCASStore(), facts=FactsLedger(store, config.facts))
        prepared = engine.prepare(conversation("Which project is the data team on?"), scope=S)
        block = view_facts(prepared.messages)
        assert block.startswith("Known facts") and "Project Beta" in block and "Project Alpha" not in block
        marked = [m for m in prepared.messages if "[outdated:" in str(m.content)]
        assert [m.id for m in marked] == ["h1"]


@pytest.mark.parametrize("key", ["door\ud800code", "door\x00code"], ids=["lone-surrogate", "nul"])
def test_a_key_the_store_cannot_keep_is_read_back_by_the_key_it_was_written_with(tmp_path: Path, key: str) -> None:
    """A key with a lone surrogate or NUL is stored with U+FFFD in their place; ``current`` and
    ``history`` given the same key find the fact (and do not send Chroma a filter it refuses)."""
    with ChromaFactStore.persistent(tmp_path) as store:
        ledger = FactsLedger(store, FactsConfig())
        fact = ledger.write("The door code is 4417", key=key, scope=S)
        current = ledger.current(key, scope=S)
        assert current is not None and current.id == fact.id
        assert [f.id for f in ledger.history(key, scope=S)] == [fact.id]


def test_what_a_session_finds_does_not_change_as_other_users_write_to_the_collection(tmp_path: Path) -> None:
    # BM25 weighs a term by how few facts hold it: scored over every user's facts of the tenant's
    # collection, one session's ranking changed as others wrote (its facts block with it)
    questions = ["what is the budget for the hotel", "flight refund", "vendor invoice deadline", "seat upgrade"]
    words = ["budget", "flight", "hotel", "meeting", "vendor", "invoice", "deadline", "seat", "meal", "refund", "upgrade", "lounge", "visa", "car"]
    with ChromaFactStore.persistent(tmp_path) as store:
        ledger = FactsLedger(store)
        for i in range(60):
            ledger.write(f"The {words[i % 14]} {words[i * 5 % 14]} for item {i} is {i * 37 % 999} dollars", key=f"k{i}", scope=S)

        def found() -> list[list[str]]:
            query = FactQuery(reader=S, valid=True)
            return [[f.id for f, _ in store.search_lexical(q, query, n=12)] for q in questions] + [
                [h.fact.id for h in ledger.search(q, scope=S)] for q in questions
            ]

        before = found()
        for user in range(20):
            other = Scope(session_id=f"other-{user}", user_id=f"user-{user}", tenant_id="acme")
            for i in range(30):
                ledger.write(f"The {words[(i + user) % 14]} of note {i} is {i * user % 999}", key=f"x{i}", scope=other)
        assert found() == before
