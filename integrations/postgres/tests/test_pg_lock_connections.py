"""How many pooled connections the facts write lock takes: a change holding every slot of a
session (a branch left, a withdrawal) takes one connection, whatever the number of slots, so
writers waiting for those slots with the rest of the pool never keep it from finishing."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator

import psycopg
import pytest
from ctxplugin_postgres import PostgresWriteLock, make_pool
from ctxplugin_postgres.locks import lock_key
from langchain_core.messages import HumanMessage

from ctxplugin.errors import StoreUnavailableError
from ctxplugin.facts import FactQuery, FactsLedger, MemoryFactStore
from ctxplugin.facts.locks import owner_slots, slot_lock_name
from ctxplugin.facts.model import visibility_key
from ctxplugin.scope import VISIBILITIES, Scope

pytestmark = [pytest.mark.postgres]

SCOPE = Scope(session_id="s1", user_id="u1", workspace_id="w1")  # four slots: session, user, workspace, tenant
LEFT = HumanMessage("The deploy target is eu-west-2.", id="h2")


def _waiting(dsn: str, application: str, count: int, threads: list[threading.Thread]) -> bool:
    """Wait until ``count`` connections named ``application`` wait for an advisory lock; False
    if one of ``threads`` ended first."""
    query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND wait_event_type = 'Lock'"
    with psycopg.connect(dsn, autocommit=True) as conn:
        while all(t.is_alive() for t in threads):
            row = conn.execute(query, (application,)).fetchone()
            if row is not None and row[0] >= count:
                return True
            time.sleep(0.01)
    return False


def _started(call: Callable[[], object], errors: list[BaseException]) -> threading.Thread:
    def run() -> None:
        try:
            call()
        except BaseException as exc:  # reported by the test's assertion
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.fixture
def ledger(pg_dsn: str) -> Iterator[tuple[FactsLedger, PostgresWriteLock, str]]:
    """A ledger whose lock has a pool of four connections (``PostgresWriteLock.from_dsn``'s),
    named by the returned application name, which gives up on the pool after 3 s."""
    application = f"ctxplugin-slots-{uuid.uuid4().hex[:8]}"
    lock = PostgresWriteLock(
        make_pool(pg_dsn, max_size=4, timeout=3, name=application),
        namespace=f"slots_{uuid.uuid4().hex[:8]}",
        wait_s=20,
        owns_pool=True,
    )
    try:
        yield FactsLedger(MemoryFactStore(), lock=lock), lock, application
    finally:
        lock.close()


def test_a_branch_left_takes_one_connection_for_all_its_slots(
    ledger: tuple[FactsLedger, PostgresWriteLock, str],
) -> None:
    facts, lock, _ = ledger
    lock.pool.resize(1, 1)
    facts.ingest([HumanMessage("The deploy target is eu-west-1.", id="h1"), LEFT], scope=SCOPE)
    assert [f.text for f in facts.leave([LEFT], scope=SCOPE)] == ["The deploy target is eu-west-2."]
    current = facts.current("deploy_target", scope=SCOPE)
    assert current is not None and current.text == "The deploy target is eu-west-1."


def test_writers_waiting_with_the_rest_of_the_pool_do_not_stall_a_branch_left(
    pg_dsn: str, ledger: tuple[FactsLedger, PostgresWriteLock, str]
) -> None:
    """A branch left waits for one of its session's slots (another process writes there); two
    writes of this process wait for the slot the branch took first, each with a pooled
    connection. When the other process is done, the branch left goes on and the writes follow:
    nobody waits for a connection that a waiting writer holds."""
    facts, lock, application = ledger
    facts.ingest([HumanMessage("The deploy target is eu-west-1.", id="h1"), LEFT], scope=SCOPE)
    names = owner_slots(SCOPE)
    first = next(v for v in VISIBILITIES if slot_lock_name(visibility_key(SCOPE, v)) == names[0])
    errors: list[BaseException] = []
    with psycopg.connect(pg_dsn, autocommit=True) as other:  # another process writing the second slot
        other.execute("SELECT pg_advisory_lock(%s)", (lock_key(lock.namespace, names[1]),))
        leaving = _started(lambda: facts.leave([LEFT], scope=SCOPE), errors)
        assert _waiting(pg_dsn, application, 1, [leaving])

        def note(n: int) -> Callable[[], object]:
            return lambda: facts.write(f"Note {n}.", key=f"note{n}", visibility=first, scope=SCOPE)

        writers = [_started(note(n), errors) for n in range(2)]
        assert _waiting(pg_dsn, application, 3, [leaving, *writers])
        other.execute("SELECT pg_advisory_unlock(%s)", (lock_key(lock.namespace, names[1]),))
    for thread in [leaving, *writers]:
        thread.join(60)
    assert errors == []
    assert sorted(f.text for f in facts.store.find(FactQuery(reader=SCOPE, valid=True))) == [
        "Note 0.", "Note 1.", "The deploy target is eu-west-1."
    ]


def test_hold_all_failing_part_way_frees_the_names_it_took_and_its_connection(pg_dsn: str) -> None:
    lock = PostgresWriteLock(make_pool(pg_dsn, max_size=1, timeout=2.0), owns_pool=True, wait_s=0.2)
    other = PostgresWriteLock(make_pool(pg_dsn, max_size=1, timeout=2.0), owns_pool=True, wait_s=0.2)
    try:
        with other.hold("slot-b"), pytest.raises(StoreUnavailableError, match="slot-b"), lock.hold_all(["slot-b", "slot-a"]):
            pytest.fail("slot-b was taken twice")
        with other.hold("slot-a"), pytest.raises(StoreUnavailableError, match="slot-a"), lock.hold("slot-a"):
            pytest.fail("slot-a still counted as held by this thread")  # (it went with the failed transaction)
        with lock.hold_all(["slot-a", "slot-b"]):  # the one pooled connection came back
            pass
    finally:
        lock.close()
        other.close()
