"""The first call of a session in a process that did not read it before (a restart, another
worker) tells from the facts stored whether its host went back from a branch. Only when it did
does it take the write locks of the owner's slots: the tenant's is shared by every session of
the tenant, so a first call finding nothing to change never waits for another session. So does
a withdrawal: the facts read from the outputs it names are found first."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from ctxplugin_postgres import PostgresWriteLock, make_pool
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin import ContextEngine, PreparedContext, Scope
from ctxplugin.errors import StoreUnavailableError
from ctxplugin.facts import FactQuery, FactsLedger, MemoryFactStore
from ctxplugin.facts.locks import slot_lock_name
from ctxplugin.facts.model import output_digest, visibility_key

pytestmark = [pytest.mark.postgres]

THREAD = Scope(session_id="trip", user_id="u1")
TENANT = slot_lock_name(visibility_key(THREAD, "tenant"))
OLD: list[BaseMessage] = [
    HumanMessage("My budget is $500.", id="h0"),
    AIMessage("Noted.", id="a0"),
    HumanMessage("My seat is 12A.", id="h1"),
    AIMessage("Noted.", id="a1"),
    HumanMessage("Actually, my budget is $900.", id="h2"),
    AIMessage("Noted.", id="a2"),
]
ASK = HumanMessage("Which hotels are near the river?", id="h3")


@pytest.fixture
def locks(pg_dsn: str) -> Iterator[tuple[PostgresWriteLock, PostgresWriteLock]]:
    """Two processes' locks on one namespace: the first holds slots, the second gives up on a
    held one after 0.3 s (a first call waiting for it is then degraded, never hung)."""
    namespace = f"first_{uuid.uuid4().hex[:8]}"
    holder = PostgresWriteLock(make_pool(pg_dsn, max_size=2), namespace=namespace, owns_pool=True)
    here = PostgresWriteLock(
        make_pool(pg_dsn, max_size=2), namespace=namespace, wait_s=0.3, owns_pool=True
    )
    try:
        yield holder, here
    finally:
        holder.close()
        here.close()


def read_by_another_process() -> MemoryFactStore:
    store = MemoryFactStore()
    ContextEngine(facts=FactsLedger(store)).prepare(OLD, scope=THREAD)
    return store


def first_call(store: MemoryFactStore, lock: PostgresWriteLock, messages: list[BaseMessage]) -> PreparedContext:
    """A call of this process, which never read ``THREAD`` before."""
    return ContextEngine(facts=FactsLedger(store, lock=lock)).prepare(messages, scope=THREAD)


def current(store: MemoryFactStore) -> list[str]:
    return sorted(f.text for f in store.find(FactQuery(reader=THREAD, valid=True)))


def unavailable(prepared: PreparedContext) -> list[str]:
    return [w for w in prepared.report.warnings if "facts store unavailable" in w]


def test_a_first_call_with_nothing_left_behind_does_not_wait_for_the_tenant_lock(
    locks: tuple[PostgresWriteLock, PostgresWriteLock],
) -> None:
    holder, here = locks
    store = read_by_another_process()
    with holder.hold(TENANT):  # another session of the tenant changing what it stated
        prepared = first_call(store, here, [*OLD, ASK])
    assert unavailable(prepared) == []
    assert current(store) == ["My budget is $900.", "My seat is 12A."]


def test_a_first_call_finding_a_branch_left_waits_for_the_tenant_lock(
    locks: tuple[PostgresWriteLock, PostgresWriteLock],
) -> None:
    holder, here = locks
    store = read_by_another_process()
    back = [*OLD[:4], HumanMessage("Which hotels are near the river?", id="b2")]  # h2 left behind
    with holder.hold(TENANT):
        prepared = first_call(store, here, back)
    assert [w for w in unavailable(prepared) if "not checked whether stored facts came from messages no longer in the conversation" in w], prepared.report.warnings
    assert current(store) == ["My budget is $900.", "My seat is 12A."], "nothing changed while the lock was held"
    prepared = first_call(store, here, back)  # once it is free, another first call marks the branch left
    assert unavailable(prepared) == []
    assert current(store) == ["My budget is $500.", "My seat is 12A."]


def test_withdrawing_what_no_fact_was_read_from_does_not_wait_for_the_tenant_lock(
    locks: tuple[PostgresWriteLock, PostgresWriteLock],
) -> None:
    holder, here = locks
    ledger = FactsLedger(MemoryFactStore(), lock=here)
    output = "The deploy target is eu-west-2."
    ledger.ingest([ToolMessage(output, tool_call_id="c1", name="settings")], scope=THREAD)
    with holder.hold(TENANT):
        # the output read stands, and no fact was read from c9's
        assert ledger.withdraw({"c1": [output_digest(output)], "c9": []}, scope=THREAD) == []
        with pytest.raises(StoreUnavailableError):  # one to remove: waits
            ledger.withdraw({"c1": []}, scope=THREAD)
    assert [f.text for f in ledger.withdraw({"c1": []}, scope=THREAD)] == [output]
