"""Who may apply the supersession rules at a time: the ledger's write lock port.

A write reads the current facts of its owner slot (same key, stated value, contradicted value),
stores the new fact, then retires the ones it replaces. Two writers doing that for one slot at
the same instant would both see the old fact as current and both stay valid. Within a process
the ledger's own lock prevents it; across processes a :class:`WriteLock` does: the ledger holds
it around every write, named after each slot the write changes (the new fact's, and that of a
fact it replaces in another slot of its owner: see :mod:`ctxplugin.facts._slots`).

``ctxplugin-postgres`` ships :class:`ctxplugin_postgres.PostgresWriteLock` (advisory locks), and
:func:`ctxplugin.connect` uses it whenever a Postgres DSN is configured. Any object with a
``hold(name)`` context manager serves (a Redis or etcd lock, for instance). A lock that can
also take several names at once in one connection has ``hold_all(names)`` (names sorted, each
taken in that order): a change holding several slots (a branch left holds every slot of its
session) then uses it, rather than one ``hold`` (and one connection) per name.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import Protocol, runtime_checkable

from ctxplugin.facts.model import visibility_key
from ctxplugin.scope import VISIBILITIES, Scope


@runtime_checkable
class WriteLock(Protocol):
    """A lock shared by every process writing to the same fact store."""

    def hold(self, name: str) -> AbstractContextManager[None]:
        """Hold the lock called ``name`` for the ``with`` block, waiting for other holders.

        Raises:
            StoreUnavailableError: the lock service cannot be reached or the wait timed out; the
                write does not happen (the engine passes the view through with a warning).
        """
        ...


class HeldNames:
    """The lock names the current thread holds, for a ``hold`` that the holding thread may enter
    again (a write inside a write) without waiting for itself."""

    def __init__(self) -> None:
        self._local = threading.local()

    def _names(self) -> dict[str, int]:
        names: dict[str, int] = self._local.__dict__.setdefault("names", {})
        return names

    def holds(self, name: str) -> bool:
        """Whether this thread holds ``name`` now."""
        return bool(self._names().get(name))

    @contextmanager
    def holding(self, name: str) -> Iterator[None]:
        """Count ``name`` as held by this thread for the ``with`` block (nested blocks count up,
        and the name is free again when the outermost ends)."""
        names = self._names()
        names[name] = names.get(name, 0) + 1
        try:
            yield
        finally:
            names[name] -= 1
            if not names[name]:
                del names[name]

    @contextmanager
    def holding_all(self, names: Iterable[str]) -> Iterator[None]:
        """:meth:`holding` of each of ``names`` for the ``with`` block."""
        with ExitStack() as held:
            for name in names:
                held.enter_context(self.holding(name))
            yield


def slot_lock_name(slot: str) -> str:
    """The lock name of an owner slot (see :func:`ctxplugin.facts.model.visibility_key`)."""
    return f"ctxplugin.facts:{slot}"


def owner_slots(owner: Scope) -> list[str]:
    """The lock names of every slot ``owner`` can write facts to: its session's and tenant's,
    its user's and workspace's when it names them. A change to what ``owner`` stated in any of
    them (a branch left, a withdrawal) holds them all."""
    given = [v for v in VISIBILITIES if (v != "user" or owner.user_id) and (v != "workspace" or owner.workspace_id)]
    return sorted(slot_lock_name(visibility_key(owner, v)) for v in given)


@contextmanager
def holding(lock: WriteLock | None, names: Iterable[str]) -> Iterator[None]:
    """Hold the locks ``names`` of ``lock`` (nothing without one) for the ``with`` block, in
    sorted order: every writer holding several takes them in that order, so two writers never
    each wait for a lock the other holds. Several are taken with the lock's ``hold_all`` when it
    has one (one connection for them all, never one more while holding some), else one
    ``hold`` after another."""
    wanted = sorted(set(names))
    together = getattr(lock, "hold_all", None)
    with ExitStack() as held:
        if lock is not None and len(wanted) > 1 and callable(together):
            held.enter_context(together(wanted))
        elif lock is not None:
            for name in wanted:
                held.enter_context(lock.hold(name))
        yield


def connected(store: object, owner: Scope) -> None:
    """Connect ``store`` for ``owner`` when it has ``open`` (a Chroma server client can take a
    second): done before taking a shared lock, which other processes wait for, rather than while
    holding it."""
    opener = getattr(store, "open", None)
    if callable(opener):
        opener(owner)


def owner_locks(lock: WriteLock | None, store: object, owner: Scope) -> AbstractContextManager[None]:
    """The locks of every slot of ``owner`` (:func:`owner_slots`) on ``lock``, ``store``
    connected first; nothing without a lock."""
    if lock is not None:
        connected(store, owner)
    return holding(lock, owner_slots(owner))


__all__ = ["HeldNames", "WriteLock", "connected", "holding", "owner_locks", "owner_slots", "slot_lock_name"]
