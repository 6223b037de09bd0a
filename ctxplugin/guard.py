"""Bounded store calls with a circuit breaker, for stores on servers.

A server that stops answering (a frozen process, a dropped network, a full connection pool)
must not hold an agent step: every call made through a :class:`StoreGuard` returns or raises
:class:`~ctxplugin.errors.StoreUnavailableError` within ``timeout`` seconds, whatever the
driver does. The first failure opens the guard's circuit: later calls fail at once, naming the
cause, while a background check (``probe``) tries the server every ``retry_after`` seconds.
When it answers, one call is let through to try it (the others still fail at once) and closes
the circuit if it works; if it fails again (the server answers a ping while a table it needs is
locked), the circuit opens again and the pause before the next check doubles, up to 30 s. So a
step pays the timeout once per failing server, not once per operation, and the engine is back on
the server within a check (and one call) of its return.

:func:`ctxplugin.connect` puts one guard in front of each server (the Postgres stores and the
facts write lock share one, the Chroma facts and answer-cache stores another). Stores built by
hand can be wrapped the same way::

    guard = StoreGuard("Postgres", timeout=2.0, probe=lambda: ping(dsn, 2.0))
    engine = ContextEngine(cas=GuardedCASStore(PostgresCASStore.from_dsn(dsn), guard))

An async store takes the guard itself (``AsyncPostgresCASStore.from_dsn(dsn, guard=guard)``):
its calls go through :meth:`StoreGuard.acall`, on the same circuit as the sync stores of the
server.

A call that ran out of time keeps running in its daemon thread until the driver returns (its
result is dropped); drivers get their own timeouts as well (``connect`` sets them), so such a
thread ends by itself. A call its caller stopped waiting for before the guard's ``timeout`` (the
step's store time ran out first, an async caller was cancelled) still counts: the circuit opens
if it has not returned ``timeout`` seconds after it began.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from ctxplugin._deadline import await_with_deadline, run_with_deadline, step_budget
from ctxplugin._store_guard import StoreGuard
from ctxplugin._sync_stores import async_methods
from ctxplugin.cache.store import AnswerCacheStore, CacheEntry
from ctxplugin.cas._bounded import BoundedCASStore
from ctxplugin.cas.store import CASItem, CASRecord, CASStore
from ctxplugin.errors import InvalidInputError, StoreUnavailableError
from ctxplugin.facts.locks import HeldNames, WriteLock, holding
from ctxplugin.facts.model import Fact, FactQuery
from ctxplugin.facts.store import FactStore
from ctxplugin.scope import Scope, Visibility

logger = logging.getLogger("ctxplugin")


class _Guarded:
    """Calls of the wrapped store go through the guard; optional abilities (``exists``,
    ``stats``, ``open``...) are found on the wrapped store and guarded the same way, and plain
    attributes (``pool``, ``config``) are the wrapped store's."""

    def __init__(self, inner: Any, guard: StoreGuard) -> None:
        asynchronous = async_methods(inner, (name for name in vars(type(self)) if not name.startswith("_")))
        if asynchronous:
            # its calls would hand back coroutines at once, awaited outside the guard
            raise InvalidInputError(
                f"{type(self).__name__} wraps a store with sync methods; {type(inner).__name__}.{asynchronous[0]} is "
                f"async: give the guard to the store itself (AsyncPostgresCASStore(..., guard=...)), or await "
                "guard.acall(...) around its calls"
            )
        self.inner = inner
        self.guard = guard

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.inner, name)
        if name.startswith("_") or not callable(value) or isinstance(value, type):
            return value

        def guarded(*args: Any, **kwargs: Any) -> Any:
            return self.guard.call(name, lambda: value(*args, **kwargs))

        return guarded

    def close(self) -> None:
        """Close the wrapped store (bounded like any call; a closing that times out is left to
        finish in the background)."""
        closer = getattr(self.inner, "close", None)
        if callable(closer):
            try:
                run_with_deadline(closer, self.guard.timeout, f"{self.guard.name} close")
            except StoreUnavailableError as exc:
                logger.warning("%s", exc)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"


class GuardedCASStore(_Guarded):
    """A :class:`~ctxplugin.cas.CASStore` whose every call is bounded by ``guard``."""

    inner: CASStore

    def put(self, item: CASItem, scope: Scope, *, visibility: Visibility = "session", ttl_seconds: float | None = None) -> bool:
        return self.guard.call("CAS put", lambda: self.inner.put(item, scope, visibility=visibility, ttl_seconds=ttl_seconds))

    def get(self, ref_id: str, scope: Scope) -> CASRecord:
        return self.guard.call("CAS get", lambda: self.inner.get(ref_id, scope))

    def purge_expired(self) -> int:
        return self.guard.call("CAS purge", self.inner.purge_expired)


class GuardedFactStore(_Guarded):
    """A :class:`~ctxplugin.facts.FactStore` whose every call is bounded by ``guard``."""

    inner: FactStore

    def add(self, facts: Sequence[Fact]) -> None:
        self.guard.call("facts add", lambda: self.inner.add(facts))

    def update(self, facts: Sequence[Fact]) -> None:
        self.guard.call("facts update", lambda: self.inner.update(facts))

    def get(self, ids: Sequence[str], *, reader: Scope) -> list[Fact]:
        return self.guard.call("facts get", lambda: self.inner.get(ids, reader=reader))

    def find(self, query: FactQuery, *, limit: int | None = None) -> list[Fact]:
        return self.guard.call("facts find", lambda: self.inner.find(query, limit=limit))

    def search(self, text: str, query: FactQuery, *, n: int) -> list[tuple[Fact, float]]:
        return self.guard.call("facts search", lambda: self.inner.search(text, query, n=n))


class GuardedAnswerCacheStore(_Guarded):
    """An :class:`~ctxplugin.cache.AnswerCacheStore` whose every call is bounded by ``guard``."""

    inner: AnswerCacheStore

    def put(self, entry: CacheEntry) -> None:
        self.guard.call("answer cache put", lambda: self.inner.put(entry))

    def candidates(self, partition: str, signature: str, query: str, *, now: float, n: int) -> list[tuple[CacheEntry, float]]:
        return self.guard.call(
            "answer cache lookup", lambda: self.inner.candidates(partition, signature, query, now=now, n=n)
        )

    def record_hit(self, key: str, *, at: float) -> None:
        self.guard.call("answer cache hit", lambda: self.inner.record_hit(key, at=at))

    def delete(self, keys: Sequence[str]) -> None:
        self.guard.call("answer cache delete", lambda: self.inner.delete(keys))

    def purge_expired(self, now: float) -> int:
        return self.guard.call("answer cache purge", lambda: self.inner.purge_expired(now))


class GuardedWriteLock:
    """A :class:`~ctxplugin.facts.WriteLock` whose taking and release are bounded by ``guard``.

    The wrapped lock is entered and left in the guard's worker threads; re-entry from the thread
    that holds a name passes through, as with the wrapped lock.
    """

    def __init__(self, inner: WriteLock, guard: StoreGuard) -> None:
        self.inner = inner
        self.guard = guard
        self._held = HeldNames()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def hold(self, name: str) -> AbstractContextManager[None]:
        return self.hold_all((name,))

    @contextmanager
    def hold_all(self, names: Iterable[str]) -> Iterator[None]:
        """Hold ``names`` in sorted order, with the wrapped lock's ``hold_all`` when it has one
        (found here, not passed through unguarded by attribute lookup)."""
        wanted = sorted(set(names))
        taking = [name for name in wanted if not self._held.holds(name)]
        if not taking:
            with self._held.holding_all(wanted):
                yield
            return
        together = getattr(self.inner, "hold_all", None)
        manager: AbstractContextManager[None] = (
            self.inner.hold(taking[0]) if len(taking) == 1 else together(taking) if callable(together) else holding(self.inner, taking)
        )
        handoff = threading.Lock()  # a lock taken after the caller gave up is let go exactly once
        entered = threading.Event()
        abandoned = threading.Event()

        def enter() -> None:
            manager.__enter__()
            with handoff:
                entered.set()
                late = abandoned.is_set()
            if late:  # the caller gave up waiting: release at once
                manager.__exit__(None, None, None)

        try:
            self.guard.call("facts write lock", enter)
        except BaseException:  # out of time, or stopped waiting (Ctrl-C): the lock must not stay held
            with handoff:
                abandoned.set()
                taken = entered.is_set()
            if taken:
                manager.__exit__(None, None, None)
            raise
        failed: BaseException | None = None
        try:
            with self._held.holding_all(wanted):
                yield
        except BaseException as exc:
            failed = exc
            raise
        finally:
            info = (type(failed), failed, failed.__traceback__) if failed is not None else (None, None, None)
            # always attempted, even with the circuit open or the step's budget used up: a lock
            # left held would block every other writer of the slot
            try:
                run_with_deadline(lambda: manager.__exit__(*info), self.guard.timeout, f"{self.guard.name} facts write unlock")
            except StoreUnavailableError as exc:
                self.guard.trip(str(exc))  # the release finishes in the background when it can
                if failed is None:
                    raise


def unwrap(store: Any) -> Any:
    """The store inside a guarded wrapper (the store itself when it is not wrapped)."""
    while isinstance(store, (_Guarded, GuardedWriteLock, BoundedCASStore)):
        store = store.inner
    return store


__all__ = [
    "GuardedAnswerCacheStore",
    "GuardedCASStore",
    "GuardedFactStore",
    "GuardedWriteLock",
    "StoreGuard",
    "await_with_deadline",
    "run_with_deadline",
    "step_budget",
    "unwrap",
]
