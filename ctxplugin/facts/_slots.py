"""Which owner slots a write changes, so which shared locks it holds.

A fact is stored in one slot of its owner (its session's, user's, workspace's or tenant's, by
its visibility), and most writes change only that slot: the fact replaced by key, by an
implicit match or by a correction lives there too. Some reach another: ``supersedes=`` naming a
session fact from a user-wide write, a correction or a revision that holds where what it
corrects held. Holding only the new fact's slot, such a write and a writer of the other slot
(holding only that slot's lock) would both find the old fact current and both replace it,
leaving two values current for one key.

So a write is decided under its own slot's lock, in a :class:`SlotBatch` that refuses a change
to any slot it does not hold (raising :class:`Unheld`, before anything of it is sent). The
write is then decided again under the locks of every slot it asked for, taken together in
sorted order as every writer takes several (:func:`~ctxplugin.facts.locks.holding`); what it
read before may have changed meanwhile, so it is checked again, a bounded number of times, the
last under the locks of every slot of the owner. The common write (one that replaces nothing,
or a fact of its own slot) holds one lock, once.

The facts read from one message are decided and sent together (an ingest's batch, along with
what they settle of tool calls made again), so they are not decided again alone: the locks an
ingest takes for a message are told beforehand, from its drafts (:func:`reached`) and from the
calls it settles (:meth:`~ctxplugin.facts._polls.Polls.reached`). Two changes an ingest makes
are not told so and take no lock of their own: a fact of another slot worked out from one the
ingest replaced (flagged for review, or pointed at what restates it), and what an edited
message no longer states marked not current where it was stored.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import TypeVar

from ctxplugin.facts._batch import Sent, WriteBatch
from ctxplugin.facts.extract import FactDraft
from ctxplugin.facts.locks import WriteLock, connected, holding, owner_slots, slot_lock_name
from ctxplugin.facts.model import Fact, visibility_key
from ctxplugin.facts.store import FactStore
from ctxplugin.scope import Scope

_T = TypeVar("_T")

ATTEMPTS = 3
"""Times a write is decided under the locks asked for before it takes every slot of its owner."""


def slot_of(fact: Fact) -> str:
    """The lock name of the owner slot ``fact`` is stored in."""
    return slot_lock_name(visibility_key(fact.owner, fact.visibility))


class Unheld(Exception):
    """A write would change a fact of a slot whose lock is not held: ``names`` is every lock it
    needs so far. Caught by :func:`under_slot_locks`, never raised to a caller."""

    def __init__(self, names: frozenset[str]) -> None:
        super().__init__(sorted(names))
        self.names = names


class SlotBatch(WriteBatch):
    """A :class:`WriteBatch` that takes changes only to the slots ``held`` (every slot when None)."""

    def __init__(self, store: FactStore, sent: Sent | None, held: frozenset[str] | None) -> None:
        super().__init__(store, sent)
        self.held = held

    def _check(self, facts: Sequence[Fact]) -> None:
        if self.held is None:
            return
        wanted = {slot_of(f) for f in facts}
        if not wanted <= self.held:
            raise Unheld(self.held | wanted)

    def add(self, facts: Sequence[Fact]) -> None:
        self._check(facts)
        super().add(facts)

    def update(self, facts: Sequence[Fact]) -> None:
        self._check(facts)
        super().update(facts)


def reached(owner: Scope, drafts: Sequence[FactDraft]) -> list[str]:
    """The lock names of the slots that writing ``drafts`` (the facts ``owner`` read from one
    message) may change, sorted: each draft's own; the user's too for a correction in a session
    ("not economy, business" corrects the user's preference where it holds); every slot of
    ``owner`` for a revision ("make that the 24th", "never mind": it holds where what it revises
    held, whichever slot that is)."""
    names = {slot_lock_name(visibility_key(owner, d.visibility or "session")) for d in drafts}
    if any(d.revises is not None for d in drafts):
        names.update(owner_slots(owner))
    elif owner.user_id and any(
        d.replaces is not None and (d.visibility or "session") == "session" for d in drafts
    ):
        names.add(slot_lock_name(visibility_key(owner, "user")))
    return sorted(names)


def under_slot_locks(
    lock: WriteLock,
    store: object,
    owner: Scope,
    first: Collection[str],
    decide: Callable[[frozenset[str] | None], _T],
) -> _T:
    """``decide(held)`` under the locks of ``lock`` named ``first`` (``store`` connected for
    ``owner`` before, see :func:`~ctxplugin.facts.locks.connected`), then, while it raises
    :class:`Unheld`, again under those it asked for too (at most :data:`ATTEMPTS` times), and
    last under those and every slot of ``owner`` with ``held`` None (nothing refused)."""
    connected(store, owner)
    names = frozenset(first)
    for _ in range(ATTEMPTS):
        try:
            with holding(lock, names):
                return decide(names)
        except Unheld as unheld:
            names = names | unheld.names
    with holding(lock, names | set(owner_slots(owner))):
        return decide(None)


__all__ = [
    "ATTEMPTS",
    "SlotBatch",
    "Unheld",
    "reached",
    "slot_of",
    "under_slot_locks",
]
