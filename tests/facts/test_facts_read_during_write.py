"""A search made while a fact is being replaced, by another thread of the process, never shows
the old fact and the new one as both current.

The stores below are the real stores with a probe: after a request it runs another thread and
waits for it. After each write request that thread searches the ledger, so the search lands
between two requests of one replacement when a replacement takes two (the new fact added, then
the old one marked); after a search's first read it replaces the fact, between the two reads
of one search.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, ToolMessage

from ctxplugin.config import FactsConfig
from ctxplugin.facts import ChromaFactStore, FactsLedger, MemoryFactStore
from ctxplugin.scope import Scope

S = Scope(session_id="s1")


def _probed(base: type[Any], requests: tuple[str, ...] = ("add", "update", "write")) -> type[Any]:
    """``base`` whose ``requests`` (those of them it has) each run ``store.probe`` in another
    thread once answered, and wait for it."""

    def after(name: str) -> Callable[..., None]:
        def sent(self: Any, *args: Any, **kwargs: Any) -> Any:
            answer = getattr(base, name)(self, *args, **kwargs)
            if self.probe is not None:
                other = threading.Thread(target=self.probe)
                other.start()
                other.join()
            return answer

        return sent

    methods: dict[str, Any] = {name: after(name) for name in requests if hasattr(base, name)}
    return type(f"Probed{base.__name__}", (base,), {"probe": None, **methods})


def _store(kind: str, tmp_path: Path, requests: tuple[str, ...]) -> Iterator[Any]:
    if kind == "memory":
        yield _probed(MemoryFactStore, requests)()
        return
    with _probed(ChromaFactStore, requests).persistent(tmp_path) as chroma:
        yield chroma


@pytest.fixture(params=["memory", "chroma"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    yield from _store(request.param, tmp_path, ("add", "update", "write"))


@pytest.fixture(params=["memory", "chroma"])
def searched(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A store whose vector search is followed by ``probe``: its lexical search comes after."""
    yield from _store(request.param, tmp_path, ("search",))


def test_a_search_during_a_replacement_shows_one_current_fact(store: Any) -> None:
    ledger = FactsLedger(store)
    ledger.write("The budget is 100 dollars", key="budget", scope=S)
    seen: list[list[str]] = []

    def probe() -> None:
        hits = ledger.search("what is the budget", scope=S)
        seen.append([hit.fact.text for hit in hits if hit.fact.key == "budget"])

    store.probe = probe
    ledger.write("The budget is 250 dollars", key="budget", scope=S)
    assert seen, "the probe ran"
    assert all(len(texts) == 1 for texts in seen), f"searches during the replacement saw {seen}"
    assert seen[-1] == ["The budget is 250 dollars"]


def test_a_search_during_an_ingest_that_replaces_a_fact_shows_one_current_fact(store: Any) -> None:
    ledger = FactsLedger(store)
    ledger.ingest([HumanMessage("The budget is 100 dollars.", id="m1")], scope=S)
    seen: list[list[str]] = []

    def probe() -> None:
        hits = ledger.search("what is the budget", scope=S)
        seen.append([hit.fact.text for hit in hits if "budget" in hit.fact.text.lower()])

    store.probe = probe
    ledger.ingest([HumanMessage("The budget is 250 dollars now.", id="m2")], scope=S)
    assert seen, "the probe ran"
    assert all(len(texts) == 1 for texts in seen), f"searches during the ingest saw {seen}"
    assert "250" in seen[-1][0]


def test_a_replacement_between_the_two_reads_of_a_search_leaves_one_current_fact(searched: Any) -> None:
    # the search reads the nearest facts, then the ones sharing its words: a replacement sent
    # in between must not make each read give a different fact of the key
    ledger = FactsLedger(searched)
    ledger.write("The budget is 100 dollars", key="budget", scope=S)

    def replace() -> None:
        searched.probe = None
        ledger.write("The budget is 250 dollars", key="budget", scope=S)

    searched.probe = replace
    hits = ledger.search("what is the budget", scope=S)
    assert searched.probe is None, "the replacement ran"
    assert [hit.fact.text for hit in hits if hit.fact.key == "budget"] == ["The budget is 250 dollars"]


def _paused(base: type[Any]) -> type[Any]:
    """``base`` whose vector search, made by the thread ``store.ingesting``, signals ``reached``
    and waits for ``release`` first: the ingest stops right after the writes it sent before it."""

    def search(self: Any, *args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is self.ingesting:
            self.reached.set()
            self.release.wait(10)
        found = base.search(self, *args, **kwargs)
        if self.probe is not None and threading.current_thread() is threading.main_thread():
            probe, self.probe = self.probe, None
            probe()
        return found

    return type(f"Paused{base.__name__}", (base,), {"probe": None, "ingesting": None, "search": search})


@pytest.fixture(params=["memory", "chroma"])
def paused(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        yield _paused(MemoryFactStore)()
        return
    with _paused(ChromaFactStore).persistent(tmp_path) as chroma:
        yield chroma


def test_a_search_straddling_the_writes_an_ingest_sends_before_its_end_shows_one_current_fact(paused: Any) -> None:
    # "Friday, not Thursday" looks for the statement of Thursday: the ingest sends the budget's
    # replacement first, then searches; a search whose two reads straddle that send read again
    ledger = FactsLedger(paused)
    ledger.ingest([HumanMessage("The budget is 100 dollars. The meeting is on Thursday.", id="m1")], scope=S)
    paused.reached, paused.release = threading.Event(), threading.Event()
    changed = [HumanMessage("The budget is 100 dollars. The meeting is on Thursday.", id="m1"),
               HumanMessage("The budget is 250 dollars now. We fly out Friday, not Thursday.", id="m2")]
    ingest = threading.Thread(target=lambda: ledger.ingest(changed, scope=S))

    def probe() -> None:  # after the search's nearest-facts read
        paused.ingesting = ingest
        ingest.start()
        assert paused.reached.wait(10), "the ingest searched"

    paused.probe = probe
    try:
        hits = ledger.search("what is the budget in dollars", scope=S)
    finally:
        paused.release.set()
        ingest.join(10)
    assert paused.reached.is_set()
    assert len([hit.fact.text for hit in hits if "budget" in hit.fact.text.lower()]) == 1, [hit.fact.text for hit in hits]


def _lagging(base: type[Any]) -> type[Any]:
    """``base`` whose vector search, once ``store.lagging`` is set, answers as it did the last
    time before: an index that has not taken in a write already sent (seen on embedded Chroma
    with several threads writing), while the store's other reads see it."""

    def search(self: Any, text: str, query: Any, *, n: int) -> Any:
        if self.lagging:
            return self.answered[(text, n)]
        found = base.search(self, text, query, n=n)
        self.answered[(text, n)] = found
        return found

    return type(f"Lagging{base.__name__}", (base,), {"lagging": False, "search": search})


@pytest.fixture(params=["memory", "chroma", "chroma server"])
def lagging(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        store = _lagging(MemoryFactStore)()
        store.answered = {}
        yield store
        return
    if request.param == "chroma server":
        url = request.getfixturevalue("chroma_url")
        with _lagging(ChromaFactStore).http(url, config=FactsConfig(collection=f"t{uuid.uuid4().hex[:12]}")) as server:
            server.answered = {}
            yield server
        return
    with _lagging(ChromaFactStore).persistent(tmp_path) as chroma:
        chroma.answered = {}
        yield chroma


def test_a_vector_index_behind_a_finished_replacement_does_not_show_the_replaced_fact(lagging: Any) -> None:
    ledger = FactsLedger(lagging)
    ledger.write("The budget is 100 dollars", key="budget", scope=S)
    assert [hit.fact.text for hit in ledger.search("what is the budget", scope=S)] == ["The budget is 100 dollars"]
    ledger.write("The budget is 250 dollars", key="budget", scope=S)
    lagging.lagging = True  # the nearest facts come from before the replacement, the shared words after it
    hits = ledger.search("what is the budget", scope=S)
    assert [hit.fact.text for hit in hits if hit.fact.key == "budget"] == ["The budget is 250 dollars"]


def test_a_branch_left_between_the_two_reads_of_a_search_leaves_one_current_fact(searched: Any) -> None:
    # the thread went back to before "$700": $500 is current again while the search reads
    ledger = FactsLedger(searched)
    said = HumanMessage("My budget is $700 dollars now.", id="m2")
    ledger.ingest([HumanMessage("My budget is $500 dollars.", id="m1"), said], scope=S)

    def leave() -> None:
        searched.probe = None
        ledger.leave([said], scope=S)

    searched.probe = leave
    hits = ledger.search("what is my budget in dollars", scope=S)
    assert searched.probe is None, "the branch was left"
    assert [hit.fact.text for hit in hits if "budget" in hit.fact.text.lower()] == ["My budget is $500 dollars."]


def test_a_withdrawal_between_the_two_reads_of_a_search_is_not_shown(searched: Any) -> None:
    ledger = FactsLedger(searched)
    card = ToolMessage("The card on file is 4111 1111 1111 1111.", tool_call_id="c1", id="t1")
    assert ledger.ingest([card], scope=S), "the tool output stated a fact"

    def withdraw() -> None:
        searched.probe = None
        ledger.withdraw({"c1": ()}, scope=S)

    searched.probe = withdraw
    hits = ledger.search("what card is on file", scope=S)
    assert searched.probe is None, "the fact was withdrawn"
    assert [hit.fact.text for hit in hits] == []
