"""A write holds the shared lock of every owner slot it changes: a user-wide fact replacing a
session one holds the session's lock too, so a writer of that slot in another process (holding
only the session's lock) waits for it instead of replacing the same fact beside it. A write that
changes only its own slot holds that one lock, once."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import pytest
from langchain_core.messages import HumanMessage, ToolMessage

from ctxplugin import Scope
from ctxplugin.facts import Fact, FactQuery, FactsLedger, MemoryFactStore, _slots
from ctxplugin.facts._polls import call_identity
from ctxplugin.facts.locks import WriteLock, slot_lock_name
from ctxplugin.facts.model import visibility_key
from ctxplugin.guard import GuardedWriteLock, StoreGuard

OWNER = Scope(session_id="trip", user_id="u1")
SESSION = slot_lock_name(visibility_key(OWNER, "session"))
USER = slot_lock_name(visibility_key(OWNER, "user"))


class HeldLock:
    """A write lock for one process: records each ``hold`` and knows the names held now."""

    def __init__(self) -> None:
        self.held: list[str] = []
        self.now: set[str] = set()

    @contextmanager
    def hold(self, name: str) -> Iterator[None]:
        self.held.append(name)
        self.now.add(name)
        try:
            yield
        finally:
            self.now.discard(name)


class Watched(MemoryFactStore):
    """A store noting, for each fact written, the lock names held while it was."""

    def __init__(self, lock: HeldLock) -> None:
        super().__init__()
        self.lock = lock
        self.written_under: dict[str, set[str]] = {}

    def _note(self, facts: Sequence[Fact]) -> None:
        for fact in facts:
            self.written_under[fact.id] = set(self.lock.now)

    def add(self, facts: Sequence[Fact]) -> None:
        self._note(facts)
        super().add(facts)

    def update(self, facts: Sequence[Fact]) -> None:
        self._note(facts)
        super().update(facts)

    def write(self, added: Sequence[Fact], updated: Sequence[Fact]) -> None:
        self._note([*added, *updated])
        super().write(added, updated)


def current(store: MemoryFactStore, key: str) -> list[str]:
    return sorted(f.text for f in store.find(FactQuery(reader=OWNER, key=key, valid=True)))


@pytest.mark.parametrize("guarded", [False, True], ids=["lock", "guarded"])
def test_a_user_wide_write_replacing_a_session_fact_holds_the_sessions_lock_too(guarded: bool) -> None:
    lock = HeldLock()
    store = Watched(lock)
    shared: WriteLock = GuardedWriteLock(lock, StoreGuard("test", timeout=5)) if guarded else lock
    ledger = FactsLedger(store, lock=shared)
    old = ledger.write("My budget for this trip is $500.", key="budget", scope=OWNER)
    assert lock.held == [SESSION]
    new = ledger.write("My budget is $700.", supersedes=old.id, visibility="user", scope=OWNER)
    assert new.visibility == "user" and new.supersedes == old.id
    assert store.written_under[old.id] >= {SESSION, USER}, (
        "the session's fact changed under the session's lock"
    )
    assert store.written_under[new.id] >= {SESSION, USER}
    assert current(store, "budget") == ["My budget is $700."]
    assert lock.now == set()


def test_a_write_replacing_a_fact_of_its_own_slot_or_nothing_holds_one_lock_once() -> None:
    lock = HeldLock()
    ledger = FactsLedger(store := Watched(lock), lock=lock)
    ledger.write("My budget is $500.", key="budget", scope=OWNER)
    first = ledger.write("My budget is $700.", key="budget", scope=OWNER)
    ledger.write("Our seat preference is the aisle.", key="seat", visibility="user", scope=OWNER)
    ledger.write("The budget is now $900.", supersedes=first.id, scope=OWNER)
    assert lock.held == [SESSION, SESSION, USER, SESSION]
    assert current(store, "budget") == ["The budget is now $900."]


def test_a_correction_read_from_a_message_holds_the_lock_of_the_preference_it_corrects() -> None:
    # "not economy, business" corrects the user's preference: it holds where that held
    lock = HeldLock()
    ledger = FactsLedger(store := Watched(lock), lock=lock)
    old = ledger.write(
        "My seat class is economy.", key="seat_class", visibility="user", scope=OWNER
    )
    [new] = ledger.ingest([HumanMessage("Not economy, business class.", id="h1")], scope=OWNER)
    assert (new.visibility, new.supersedes) == ("user", old.id)
    assert store.written_under[old.id] >= {USER}, "the user's fact changed under the user's lock"
    assert current(store, "seat_class") == ["Not economy, business class."]


def test_a_message_stating_new_facts_holds_the_lock_of_its_slot_only() -> None:
    lock = HeldLock()
    ledger = FactsLedger(Watched(lock), lock=lock)
    ledger.ingest(
        [
            HumanMessage("My budget is $500.", id="h1"),
            HumanMessage("Actually, my budget is $900.", id="h2"),
        ],
        scope=OWNER,
    )
    assert lock.held == [SESSION, SESSION]


def test_a_revision_read_from_a_message_holds_the_lock_of_what_it_revises() -> None:
    # "change that to $900" revises the user's budget where it holds, whichever slot that is
    lock = HeldLock()
    ledger = FactsLedger(store := Watched(lock), lock=lock)
    old = ledger.write("My budget is $500.", key="budget", visibility="user", scope=OWNER)
    [new] = ledger.ingest([HumanMessage("Change that to $900.", id="h1")], scope=OWNER)
    assert (new.visibility, new.supersedes) == ("user", old.id)
    assert store.written_under[old.id] >= {USER}, "the user's fact changed under the user's lock"
    assert current(store, "budget") == ["Change that to $900."]


@pytest.mark.parametrize("attempts", [2, _slots.ATTEMPTS])
def test_a_write_reaching_a_new_slot_each_time_is_decided_last_holding_every_slot(
    attempts: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the session's budget, a workspace fact worked out from it, a tenant fact from that:
    # replacing the budget with a user-wide one flags both, each found only once the slot before
    # it is held; after ``attempts`` tries the write takes every slot of its owner, those not
    # asked for yet too
    monkeypatch.setattr(_slots, "ATTEMPTS", attempts)
    owner = Scope(session_id="trip", user_id="u1", workspace_id="w1")
    slots = {
        v: slot_lock_name(visibility_key(owner, v))
        for v in ("session", "user", "workspace", "tenant")
    }
    lock = HeldLock()
    ledger = FactsLedger(store := Watched(lock), lock=lock)
    old = ledger.write("My budget for this trip is $500.", key="budget", scope=owner)
    team = ledger.write(
        "The team cap is $500.", key="cap", visibility="workspace", depends_on=[old.id], scope=owner
    )
    firm = ledger.write(
        "The firm cap is $500.",
        key="firm_cap",
        visibility="tenant",
        depends_on=[team.id],
        scope=owner,
    )
    lock.held.clear()
    store.written_under.clear()
    new = ledger.write("My budget is $700.", supersedes=old.id, visibility="user", scope=owner)
    asked = [
        {slots["user"]},
        {slots["user"], slots["session"]},
        {slots["user"], slots["session"], slots["workspace"]},
    ]
    tries, held = [], list(lock.held)
    for names in asked[:attempts]:  # each try takes its names in sorted order, then lets them go
        tries.append(held[: len(names)])
        del held[: len(names)]
    assert [set(t) for t in tries] == asked[:attempts] and all(t == sorted(t) for t in tries)
    assert held == sorted(slots.values()), "the last try holds every slot of the owner"
    assert set(store.written_under) == {new.id, old.id, team.id, firm.id}, "sent once, whole"
    assert all(names == set(slots.values()) for names in store.written_under.values())
    flagged = [ledger.get(f.id, scope=owner) for f in (team, firm)]
    assert all(f is not None and f.needs_review and f.is_valid for f in flagged)
    assert lock.now == set()


def test_a_message_settling_a_call_made_again_holds_the_lock_of_what_it_replaces() -> None:
    # the user's standing preference goes to the user's slot; reading it settles the order status
    # polled twice before it, whose first answer is in the session's
    lock = HeldLock()
    ledger = FactsLedger(store := Watched(lock), lock=lock)
    same = call_identity("get_order_status", {"order": "7731"})
    ledger.polls.asked([("c1", same), ("c2", same)], scope=OWNER)
    for call_id, status in (("c1", "processing"), ("c2", "shipped")):
        message = ToolMessage(
            json.dumps({"status": status}),
            tool_call_id=call_id,
            name="get_order_status",
            id=f"m-{call_id}",
        )
        ledger.ingest([message], scope=OWNER)
    [first] = [f for f in store.find(FactQuery(reader=OWNER)) if f.source.call_id == "c1"]
    [preference] = ledger.ingest([HumanMessage("I prefer aisle seats.", id="h1")], scope=OWNER)
    assert preference.visibility == "user"
    assert not store.get([first.id], reader=OWNER)[0].is_valid, "the first answer is replaced"
    assert store.written_under[first.id] >= {SESSION}, "changed under the session's lock"
