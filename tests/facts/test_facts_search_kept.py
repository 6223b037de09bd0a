"""A search asked again while the fact store counts no write since is answered from what the
store answered before; after any write (a fact added, one superseded, one withdrawn) it is read
again, and finds what a ledger searching the store afresh finds. A store that counts nothing (a
server's, which other processes write) is read on every search."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from pytest_mock import MockerFixture

from ctxplugin.config import FactsConfig
from ctxplugin.facts import ChromaFactStore, FactsLedger, MemoryFactStore
from ctxplugin.facts._answers import ANSWERS
from ctxplugin.facts.lexical import LexicalIndex
from ctxplugin.facts.model import FactQuery, ScoredFact
from ctxplugin.scope import Scope
from ctxplugin.testing.chroma_server import ChromaServer

S = Scope(session_id="kept", tenant_id="acme")
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
QUESTION = "Which region does the deploy target and what is the budget for the offsite?"


class Counted:
    """``store``'s searches counted (a real store; its answers are its own)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.searches = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def search(self, text: str, query: FactQuery, *, n: int) -> Any:
        self.searches += 1
        return self.store.search(text, query, n=n)


@pytest.fixture(params=["memory", "embedded_chroma"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        yield MemoryFactStore()
        return
    with ChromaFactStore.persistent(tmp_path / "chroma", config=FactsConfig(embedding="static")) as embedded:
        yield embedded


def _ledger(store: Any) -> FactsLedger:
    return FactsLedger(store, FactsConfig(k=4), clock=lambda: NOW)


def _found(hits: list[ScoredFact]) -> list[tuple[str, float]]:
    return [(hit.fact.text, hit.score) for hit in hits]


def _afresh(store: Any) -> list[tuple[str, float]]:
    """What a ledger that never searched ``store`` finds."""
    return _found(_ledger(store).search(QUESTION, scope=S))


def test_a_search_asked_again_reads_the_store_again_only_after_a_write(store: Any) -> None:
    counted = Counted(store)
    ledger = _ledger(counted)
    ledger.write("The offsite budget is $4,000.", key="offsite_budget", scope=S)
    ledger.write("Maria leads the data team.", scope=S)
    first = _found(ledger.search(QUESTION, scope=S))
    assert counted.searches == 1
    assert _found(ledger.search(QUESTION, scope=S)) == first == _afresh(store)
    assert counted.searches == 1, "nothing was written: the store's answer is kept"
    assert _found(ledger.search(QUESTION, scope=S, k=2)) == first[:2]
    assert counted.searches == 2, "fewer facts asked for: another search"

    steps: list[Callable[[], object]] = [
        # a fact added
        lambda: ledger.write("The deploy target is eu-west-2.", key="deploy_region", scope=S),
        # one superseded by key
        lambda: ledger.write("The offsite budget is $6,500.", key="offsite_budget", scope=S),
        # facts read from a tool output, then withdrawn (the host replaced the output)
        lambda: ledger.ingest([ToolMessage("The deploy target is us-east-1 for the offsite budget app.", tool_call_id="c1", name="settings")], scope=S),
        lambda: ledger.withdraw({"c1": []}, scope=S),
    ]
    seen = [first]
    for step in steps:
        before = counted.searches
        step()
        found = _found(ledger.search(QUESTION, scope=S))
        assert counted.searches == before + 1, "written since: the store is read again"
        assert found == _afresh(store)
        seen.append(found)
    texts = [[text for text, _ in found] for found in seen]
    assert "The deploy target is eu-west-2." in texts[1] and "The deploy target is eu-west-2." not in texts[0]
    assert "The offsite budget is $6,500." in texts[2] and "The offsite budget is $4,000." not in texts[2]
    assert any("us-east-1" in text for text in texts[3])
    assert not any("us-east-1" in text for text in texts[4])


def test_another_ledger_writing_the_same_store_is_seen_by_the_next_search(store: Any) -> None:
    reader, writer = _ledger(store), _ledger(store)
    reader.write("The offsite budget is $4,000.", key="offsite_budget", scope=S)
    before = _found(reader.search(QUESTION, scope=S))
    writer.write("The offsite budget is $6,500.", key="offsite_budget", scope=S)
    after = _found(reader.search(QUESTION, scope=S))
    assert after != before and after == _afresh(store)
    assert [text for text, _ in after] == ["The offsite budget is $6,500."]


def test_what_is_kept_is_bounded(store: Any) -> None:
    ledger = _ledger(store)
    ledger.write("The offsite budget is $4,000.", key="offsite_budget", scope=S)
    for number in range(ANSWERS + 8):
        ledger.search(f"{QUESTION} ({number})", scope=S)
    assert len(ledger._answers._kept) == ANSWERS


def _held_in_the_index(mocker: MockerFixture) -> tuple[threading.Event, threading.Event]:
    """BM25 indexes made to wait while taking facts in: set once one is, and what lets it go on."""
    indexing, go_on = threading.Event(), threading.Event()
    add = LexicalIndex.add

    def slow(index: LexicalIndex, items: Any) -> None:
        indexing.set()
        go_on.wait(10)
        add(index, items)

    mocker.patch.object(LexicalIndex, "add", slow)
    return indexing, go_on


def test_the_count_moves_again_once_a_write_is_whole(mocker: MockerFixture) -> None:
    # counted as the write begins, so a search made while the BM25 index takes the new facts in
    # reads the store; what it read is kept under that count, which the write's end moves on
    store = MemoryFactStore()
    counted = Counted(store)
    reader = _ledger(counted)
    reader.write("The offsite budget is $4,000.", key="offsite_budget", scope=S)
    reader.search(QUESTION, scope=S)
    indexing, go_on = _held_in_the_index(mocker)
    before = store.generation
    writer = threading.Thread(target=lambda: _ledger(store).write("The deploy target is eu-west-2.", scope=S))
    writer.start()
    try:
        assert indexing.wait(10)
        midway = store.generation
        assert midway != before, "counted as the write begins: the answer kept before it is not served"
        searches = counted.searches
        reader.search(QUESTION, scope=S)
        assert counted.searches == searches + 1
    finally:
        go_on.set()
        writer.join(10)
    assert store.generation not in (before, midway), "the count moves again once the write is whole"
    mocker.stopall()
    searches = counted.searches
    after = _found(reader.search(QUESTION, scope=S))
    assert counted.searches == searches + 1, "what was read during the write is not served after it"
    assert after == _afresh(store)
    assert "The deploy target is eu-west-2." in [text for text, _ in after]


@pytest.mark.parametrize("same_ledger", [True, False], ids=["same-ledger", "other-ledger"])
def test_a_search_during_a_superseding_write_finds_the_old_fact_or_the_new_one(store: Any, mocker: MockerFixture, same_ledger: bool) -> None:
    # never the answer kept before the write once the store holds the new fact and the old one
    # superseded: that answer's old fact, no longer current, would be dropped, and no budget shown
    reader = _ledger(store)
    writer = reader if same_ledger else _ledger(store)
    reader.write("The offsite budget is $4,000.", key="offsite_budget", scope=S)
    assert [hit.fact.text for hit in reader.search(QUESTION, scope=S)] == ["The offsite budget is $4,000."]  # kept now
    indexing, go_on = _held_in_the_index(mocker)
    thread = threading.Thread(target=lambda: writer.write("The offsite budget is $6,500.", key="offsite_budget", scope=S))
    thread.start()
    try:
        assert indexing.wait(10)
        found: list[list[str]] = []
        searching = threading.Thread(target=lambda: found.append([hit.fact.text for hit in reader.search(QUESTION, scope=S)]))
        searching.start()
        searching.join(0.5 if same_ledger else 10)  # the same ledger may wait for its own write being sent
    finally:
        go_on.set()
        thread.join(10)
    searching.join(10)
    assert found, "the search never ended"
    # before the write whole, or after it: the budget in force is in the block either way
    assert found[0] in (["The offsite budget is $4,000."], ["The offsite budget is $6,500."]), found[0]


def test_a_store_other_processes_write_is_read_on_every_search(chroma_server: ChromaServer) -> None:
    collection = f"kept{uuid.uuid4().hex[:10]}"
    config = FactsConfig(collection=collection, embedding="static", k=4)
    with ChromaFactStore.http(chroma_server.url, config=config) as mine, ChromaFactStore.http(chroma_server.url, config=config) as elsewhere:
        here = Counted(mine)  # and ``elsewhere``, another process's
        assert here.generation is None
        reader = FactsLedger(here, config, clock=lambda: NOW)
        FactsLedger(elsewhere, config, clock=lambda: NOW).write("The offsite budget is $4,000.", key="offsite_budget", scope=S)
        assert [hit.fact.text for hit in reader.search(QUESTION, scope=S)] == ["The offsite budget is $4,000."]
        FactsLedger(elsewhere, config, clock=lambda: NOW).write("The deploy target is eu-west-2.", key="deploy_region", scope=S)
        assert "The deploy target is eu-west-2." in [hit.fact.text for hit in reader.search(QUESTION, scope=S)]
        assert here.searches == 2
