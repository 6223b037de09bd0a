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

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
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


def slot_lock_name(slot: str) -> str:
    """The lock name of an owner slot (see :func:`ctxplugin.facts.model.visibility_key`)."""
    return f"ctxplugin.facts:{slot}"


__all__ = ["HeldNames", "WriteLock", "slot_lock_name"]
