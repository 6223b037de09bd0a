"""Two processes replacing one fact at the same instant, one from another slot (a user-wide
write naming a session fact with ``supersedes=``, a correction read in a session of the user's
preference), the other writing to the fact's own slot: each holds the lock of every slot its
write changes, so one decides after the other and one value stays current."""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator, Sequence

import pytest
from ctxplugin_postgres import PostgresWriteLock, make_pool
from langchain_core.messages import HumanMessage

from ctxplugin.facts import Fact, FactQuery, FactsLedger, MemoryFactStore
from ctxplugin.scope import Scope

pytestmark = [pytest.mark.postgres]

OWNER = Scope(session_id="trip", user_id="u1")


class Meeting(MemoryFactStore):
    """A store where two writers meet before either sends its write (each waits up to a
    second for the other): both have decided by then, unless one waits for the other's lock."""

    def __init__(self) -> None:
        super().__init__()
        self.meeting: threading.Barrier | None = None

    def _meet(self) -> None:
        # broken after a second: the other writer waits for a lock this one holds
        if self.meeting is not None:
            with contextlib.suppress(threading.BrokenBarrierError):
                self.meeting.wait(1.0)

    def add(self, facts: Sequence[Fact]) -> None:
        self._meet()
        super().add(facts)

    def write(self, added: Sequence[Fact], updated: Sequence[Fact]) -> None:
        self._meet()
        super().write(added, updated)


@pytest.fixture
def locks(pg_dsn: str) -> Iterator[tuple[PostgresWriteLock, PostgresWriteLock]]:
    """Two processes' locks on one namespace, each on its own pool."""
    namespace = f"slots_{uuid.uuid4().hex[:8]}"
    first = PostgresWriteLock(make_pool(pg_dsn, max_size=2), namespace=namespace, owns_pool=True)
    second = PostgresWriteLock(make_pool(pg_dsn, max_size=2), namespace=namespace, owns_pool=True)
    try:
        yield first, second
    finally:
        first.close()
        second.close()


def _race(writers: Sequence[threading.Thread]) -> None:
    """Start the writers together and wait for both (30 s each at most: none may hang)."""
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(30)
    assert not any(w.is_alive() for w in writers)


def test_a_user_write_and_a_session_write_replacing_one_fact_leave_one_current(
    locks: tuple[PostgresWriteLock, PostgresWriteLock],
) -> None:
    store = Meeting()
    here, there = FactsLedger(store, lock=locks[0]), FactsLedger(store, lock=locks[1])
    old = here.write("My budget for this trip is $500.", key="budget", scope=OWNER)
    store.meeting = threading.Barrier(2)
    writers = [
        threading.Thread(
            target=lambda: here.write(
                "My budget is $700.", supersedes=old.id, visibility="user", scope=OWNER
            )
        ),
        threading.Thread(
            target=lambda: there.write("My budget for this trip is $900.", key="budget", scope=OWNER)
        ),
    ]
    _race(writers)
    facts = store.find(FactQuery(reader=OWNER, key="budget"))
    assert len(facts) == 3, "both writes are stored"
    replaced = [f.supersedes for f in facts if f.supersedes]
    assert replaced and len(replaced) == len(set(replaced)), "each fact was replaced once at most"
    assert not any(f.is_valid for f in facts if f.id in replaced), "what was replaced is not current"
    assert len([f for f in facts if f.is_valid and f.visibility == "session"]) <= 1, "one value per slot"


def test_a_correction_read_in_a_session_and_a_user_write_leave_one_current(
    locks: tuple[PostgresWriteLock, PostgresWriteLock],
) -> None:
    """A correction read in a session ("not economy, business") holds where the user's
    preference it corrects held, while another process writes that preference anew."""
    store = Meeting()
    here, there = FactsLedger(store, lock=locks[0]), FactsLedger(store, lock=locks[1])
    here.write("My seat class is economy.", key="seat_class", visibility="user", scope=OWNER)
    store.meeting = threading.Barrier(2)
    said = HumanMessage("Not economy, business class.", id="h1")
    writers = [
        threading.Thread(target=lambda: here.ingest([said], scope=OWNER)),
        threading.Thread(
            target=lambda: there.write(
                "My seat class is premium economy.",
                key="seat_class",
                visibility="user",
                scope=OWNER,
            )
        ),
    ]
    _race(writers)
    facts = store.find(FactQuery(reader=OWNER, key="seat_class"))
    assert len(facts) == 3, "both writes are stored"
    assert len([f for f in facts if f.is_valid]) == 1, "one value is current"
