"""Who may apply the supersession rules at a time: the ledger's write lock port.

A write reads the current facts of its owner slot (same key, stated value, contradicted value),
stores the new fact, then retires the ones it replaces. Two writers doing that for one slot at
the same instant would both see the old fact as current and both stay valid. Within a process
the ledger's own lock prevents it; across processes a :class:`WriteLock` does: the ledger holds
it, named after the slot, around every write.

``ctxplugin-postgres`` ships :class:`ctxplugin_postgres.PostgresWriteLock` (advisory locks), and
:func:`ctxplugin.connect` uses it whenever a Postgres DSN is configured. Any object with a
``hold(name)`` context manager serves (a Redis or etcd lock, for instance).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable


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


def slot_lock_name(slot: str) -> str:
    """The lock name of an owner slot (see :func:`ctxplugin.facts.model.visibility_key`)."""
    return f"ctxplugin.facts:{slot}"


__all__ = ["WriteLock", "slot_lock_name"]
