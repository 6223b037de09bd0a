"""With the shared write lock of a Postgres deployment, an LCEL list without message ids that
goes back leaves what the user said only on the branch left, and takes it back when the branch
returns, as the in-process ledger does."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from ctxplugin_postgres import PostgresWriteLock, make_pool
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ctxplugin import ContextEngine, Scope
from ctxplugin.facts import FactQuery, FactsLedger, MemoryFactStore

pytestmark = [pytest.mark.postgres]

CHAT = Scope(session_id="c1", user_id="u1")


@pytest.fixture
def lock(pg_dsn: str) -> Iterator[PostgresWriteLock]:
    held = PostgresWriteLock(make_pool(pg_dsn, max_size=2), namespace=f"noid_{uuid.uuid4().hex[:8]}", owns_pool=True)
    try:
        yield held
    finally:
        held.close()


def test_a_branch_left_and_taken_back_under_the_shared_lock(lock: PostgresWriteLock) -> None:
    store = MemoryFactStore()
    engine = ContextEngine(facts=FactsLedger(store, lock=lock))
    main: list[BaseMessage] = [SystemMessage("You are the travel assistant."), HumanMessage("My budget is $500."),
                               AIMessage("Noted."), HumanMessage("My seat is 12A.")]

    def current() -> list[str]:
        return sorted(f.text for f in store.find(FactQuery(reader=CHAT, valid=True, scopes=("global", "session"))))

    reply, said = AIMessage("Noted."), HumanMessage("Actually, my budget is $700.")
    engine.prepare([*main, reply, said], scope=CHAT)
    assert current() == ["My budget is $700.", "My seat is 12A."]
    engine.prepare([*main, AIMessage("Noted."), HumanMessage("Also, my meal is vegetarian.")], scope=CHAT)
    assert current() == ["Also, my meal is vegetarian.", "My budget is $500.", "My seat is 12A."]
    engine.prepare([*main, reply, said, AIMessage("OK."), HumanMessage("Thanks.")], scope=CHAT)
    assert current() == ["My budget is $700.", "My seat is 12A."]
