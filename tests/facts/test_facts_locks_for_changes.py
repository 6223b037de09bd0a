"""A ledger sharing a write lock takes the locks of the owner's slots (the tenant's among them,
shared by every session of the tenant) only when a branch left or a withdrawal changes facts:
the first call of a session a process did not read before, and a withdrawal of outputs no fact
was read from, find that first and hold nothing."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.facts import ChromaFactStore, FactQuery, FactsLedger, FactStore, MemoryFactStore
from ctxplugin.facts.locks import slot_lock_name
from ctxplugin.facts.model import output_digest, visibility_key

THREAD = Scope(session_id="trip", user_id="u1")
TENANT = slot_lock_name(visibility_key(THREAD, "tenant"))  # only a change to the owner's facts holds it
OLD: list[BaseMessage] = [
    HumanMessage("My budget is $500.", id="h0"),
    AIMessage("Noted.", id="a0"),
    HumanMessage("My seat is 12A.", id="h1"),
    AIMessage("Noted.", id="a1"),
    HumanMessage("Actually, my budget is $900.", id="h2"),
    AIMessage("Noted.", id="a2"),
]


class RecordingLock:
    """A write lock for one process: records the names it holds (nobody else waits)."""

    def __init__(self) -> None:
        self.held: list[str] = []

    @contextmanager
    def hold(self, name: str) -> Iterator[None]:
        self.held.append(name)
        yield


@pytest.fixture(params=["memory", "chroma"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FactStore]:
    if request.param == "memory":
        yield MemoryFactStore()
        return
    with ContextEngine.embedded(tmp_path / "ctx", ContextConfig()) as engine:
        yield engine.facts.store


def current(store: FactStore) -> list[str]:
    return sorted(f.text for f in store.find(FactQuery(reader=THREAD, valid=True)))


def test_a_first_call_takes_the_locks_only_when_it_finds_a_branch_left(store: FactStore) -> None:
    ContextEngine(facts=FactsLedger(store)).prepare(OLD, scope=THREAD)  # read by another process
    lock = RecordingLock()
    ContextEngine(facts=FactsLedger(store, lock=lock)).prepare([*OLD, HumanMessage("Hotels?", id="h3")], scope=THREAD)
    assert TENANT not in lock.held, "nothing was left behind"
    assert current(store) == ["My budget is $900.", "My seat is 12A."]
    ContextEngine(facts=FactsLedger(store, lock=lock)).prepare([*OLD[:4], HumanMessage("Hotels?", id="b2")], scope=THREAD)
    assert TENANT in lock.held
    assert current(store) == ["My budget is $500.", "My seat is 12A."]


def test_a_withdrawal_takes_the_locks_only_when_a_fact_is_to_go(store: FactStore) -> None:
    lock = RecordingLock()
    ledger = FactsLedger(store, lock=lock)
    output = "The deploy target is eu-west-2."
    ledger.ingest([ToolMessage(output, tool_call_id="c1", name="settings")], scope=THREAD)
    assert ledger.withdraw({"c1": [output_digest(output)], "c9": []}, scope=THREAD) == []
    assert TENANT not in lock.held
    assert [f.text for f in ledger.withdraw({"c1": []}, scope=THREAD)] == [output]
    assert TENANT in lock.held
    assert current(store) == []


def test_a_withdrawal_naming_thousands_of_tool_calls_reads_them_in_several_requests(tmp_path: Path) -> None:
    # a branch left after thousands of tool calls: one value per call and slot the owner reads
    # (four here) would pass the 32,766 variables Chroma's SQLite takes in one statement
    owner = Scope(session_id="trip", user_id="u1", workspace_id="w1", tenant_id="acme")
    with ContextEngine.embedded(tmp_path / "ctx", ContextConfig()) as engine:
        store, ledger = engine.facts.store, FactsLedger(engine.facts.store, lock=RecordingLock())
        assert isinstance(store, ChromaFactStore)
        ledger.ingest([ToolMessage("The deploy target is eu-west-2.", tool_call_id="call_8999", name="settings")], scope=owner)
        calls = [f"call_{i}" for i in range(9_000)]
        assert [f.text for f in store.from_outputs(owner, calls)] == ["The deploy target is eu-west-2."]
        assert [f.text for f in ledger.withdraw(dict.fromkeys(calls, ()), scope=owner)] == ["The deploy target is eu-west-2."]
        assert store.find(FactQuery(reader=owner)) == []


class WithoutFinder(MemoryFactStore):
    """A store of one's own with ``withdraw`` but no ``from_outputs``."""

    from_outputs = None  # type: ignore[assignment]


def test_a_store_without_from_outputs_withdraws_under_the_locks() -> None:
    lock = RecordingLock()
    ledger = FactsLedger(WithoutFinder(), lock=lock)
    output = "The deploy target is eu-west-2."
    ledger.ingest([ToolMessage(output, tool_call_id="c1", name="settings")], scope=THREAD)
    lock.held.clear()
    assert [f.text for f in ledger.withdraw({"c1": []}, scope=THREAD)] == [output]
    assert TENANT in lock.held
