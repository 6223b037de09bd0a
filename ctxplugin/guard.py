"""Bounded store calls with a circuit breaker, for stores on servers.

A server that stops answering (a frozen process, a dropped network, a full connection pool)
must not hold an agent step: every call made through a :class:`StoreGuard` returns or raises
:class:`~ctxplugin.errors.StoreUnavailableError` within ``timeout`` seconds, whatever the
driver does. The first failure opens the guard's circuit: later calls fail at once, naming the
cause, while a background check (``probe``) tries the server every ``retry_after`` seconds and
closes the circuit when it answers. So a step pays the timeout once per failing server, not once
per operation, and the engine is back on the server within a check of its return.

:func:`ctxplugin.connect` puts one guard in front of each server (the Postgres stores and the
facts write lock share one, the Chroma facts and answer-cache stores another). Stores built by
hand can be wrapped the same way::

    guard = StoreGuard("Postgres", timeout=2.0, probe=lambda: ping(dsn))
    engine = ContextEngine(cas=GuardedCASStore(PostgresCASStore.from_dsn(dsn), guard))

A call that ran out of time keeps running in its daemon thread until the driver returns (its
result is dropped); drivers get their own timeouts as well (``connect`` sets them), so such a
thread ends by itself.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

from ctxplugin._deadline import run_with_deadline, step_budget, step_deadline
from ctxplugin.cache.store import AnswerCacheStore, CacheEntry
from ctxplugin.cas.store import CASItem, CASRecord, CASStore
from ctxplugin.errors import InvalidInputError, StoreBusyError, StoreUnavailableError
from ctxplugin.facts.locks import HeldNames, WriteLock
from ctxplugin.facts.model import Fact, FactQuery
from ctxplugin.facts.store import FactStore
from ctxplugin.scope import Scope, Visibility

logger = logging.getLogger("ctxplugin")

T = TypeVar("T")


class StoreGuard:
    """A deadline on each call to one server, and a circuit that opens on its first failure.

    Safe to share between threads and between the stores of one server.

    Args:
        name: the server as reports name it ("Postgres", "Chroma server").
        timeout: seconds one call may take.
        retry_after: seconds between background checks while the circuit is open.
        probe: a cheap call that raises when the server is not usable (it runs with the same
            deadline). Without one, the first call after ``retry_after`` is let through as the
            check.
    """

    def __init__(
        self,
        name: str,
        *,
        timeout: float,
        retry_after: float = 1.0,
        probe: Callable[[], object] | None = None,
    ) -> None:
        if timeout <= 0 or retry_after <= 0:
            raise InvalidInputError(f"timeout and retry_after must be > 0, got {timeout} and {retry_after}")
        self.name = name
        self.timeout = timeout
        self.retry_after = retry_after
        self._probe = probe
        self._lock = threading.Lock()
        self._cause: str | None = None
        self._opened_at = 0.0
        self._checking = False
        self._stopped = threading.Event()
        self._threads: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
        _GUARDS.add(self)

    # ------------------------------------------------------------------ state
    @property
    def is_open(self) -> bool:
        """Whether calls are currently refused (the server failed and has not answered since)."""
        return self._cause is not None

    @property
    def cause(self) -> str | None:
        """Why the circuit is open, or None."""
        return self._cause

    def trip(self, cause: str) -> None:
        """Open the circuit for ``cause`` (also used when a check at connect time failed)."""
        with self._lock:
            first = self._cause is None
            self._cause = cause
            if first:
                self._opened_at = time.monotonic()
            checker = self._checker()
        if first:
            logger.warning("ctxplugin: %s unavailable, calls fail fast until it answers again: %s", self.name, cause)
        if checker is not None:
            checker.start()

    def _checker(self) -> threading.Thread | None:
        """The background check to start (None when one runs, or none may); with ``_lock`` held."""
        if self._probe is None or self._checking or self._stopped.is_set():
            return None
        self._checking = True
        checker = threading.Thread(target=self._check_loop, name=f"ctxplugin-check: {self.name}", daemon=True)
        self._threads.add(checker)
        return checker

    def _after_fork_in_child(self) -> None:
        # the parent's threads do not exist here: an open circuit gets its own check (on the
        # next refused call), and the lock may have been held by one of them at the fork
        self._lock = threading.Lock()
        self._checking = False
        self._threads = weakref.WeakSet()

    def stop(self) -> None:
        """End the background check and wait for the threads of this guard's calls, for at most
        ``timeout + retry_after`` seconds in all, however many calls a frozen server left
        hanging (a driver that still does not return is left to its own timeout, with a
        warning). Later calls still work; a later failure starts no check. Idempotent."""
        self._stopped.set()
        deadline = time.monotonic() + self.timeout + self.retry_after
        for thread in list(self._threads):
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
                if thread.is_alive():
                    logger.warning("ctxplugin: %s: %s still running after close()", self.name, thread.name)

    def _check_loop(self) -> None:
        probe = self._probe
        if probe is None:  # pragma: no cover - started only with a probe
            return
        while True:
            stopped = self._stopped.wait(self.retry_after)
            with self._lock:
                if self._cause is None or stopped:
                    self._checking = False
                    return
            try:
                run_with_deadline(probe, self.timeout, f"{self.name} check", started=self._threads.add)
            except Exception as exc:  # the server is still out: keep the circuit open
                with self._lock:
                    self._cause = _describe(exc)
                continue
            with self._lock:
                self._cause = None
                self._checking = False
            logger.warning("ctxplugin: %s answers again", self.name)
            return

    def _refusal(self, what: str) -> StoreUnavailableError | None:
        with self._lock:
            cause = self._cause
            if cause is None:
                return None
            if self._probe is None and time.monotonic() - self._opened_at >= self.retry_after:
                self._opened_at = time.monotonic()  # this call is the check; others keep failing fast
                return None
            since = time.monotonic() - self._opened_at
            checker = self._checker()  # none runs in a process forked while the circuit was open
        if checker is not None:
            checker.start()
        return StoreUnavailableError(
            f"{self.name} skipped for {what}: it failed {since:.0f}s ago ({cause}); "
            f"checked again every {self.retry_after:g}s"
        )

    def _close(self) -> None:
        with self._lock:
            was, self._cause = self._cause, None
        if was is not None:
            logger.warning("ctxplugin: %s answers again", self.name)

    # ------------------------------------------------------------------ calls
    def call(self, what: str, fn: Callable[[], T]) -> T:
        """``fn()`` within the deadline, or a fast :class:`StoreUnavailableError` while the circuit
        is open. A timeout or an unavailability error opens the circuit; a success closes it.
        Other errors pass through unchanged (the server answered)."""
        refused = self._refusal(what)
        if refused is not None:
            raise refused
        wait = self.timeout
        deadline = step_deadline()
        if deadline is not None:
            wait = min(wait, deadline - time.monotonic())
            if wait <= 0:
                raise StoreUnavailableError(f"{self.name} {what} skipped: this step's store time (stores.timeout) is used up")
        try:
            value = run_with_deadline(fn, wait, f"{self.name} {what}", started=self._threads.add)
        except StoreBusyError:
            raise
        except StoreUnavailableError as exc:
            # a call the step's budget cut very short says nothing of the server; one that was
            # given at least half the timeout does
            if wait >= self.timeout / 2 or exc.__cause__ is not None or "no answer within" not in str(exc):
                self.trip(str(exc))
            raise
        if self._cause is not None and self._probe is None:
            self._close()  # the call let through as the check succeeded
        return value


_GUARDS: weakref.WeakSet[StoreGuard] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for guard in list(_GUARDS):
        guard._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


class _Guarded:
    """Calls of the wrapped store go through the guard; optional abilities (``exists``,
    ``stats``, ``open``...) are found on the wrapped store and guarded the same way, and plain
    attributes (``pool``, ``config``) are the wrapped store's."""

    def __init__(self, inner: Any, guard: StoreGuard) -> None:
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
                logger.warning("ctxplugin: %s", exc)

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

    @contextmanager
    def hold(self, name: str) -> Iterator[None]:
        if self._held.holds(name):
            with self._held.holding(name):
                yield
            return
        manager: AbstractContextManager[None] = self.inner.hold(name)
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
            with self._held.holding(name):
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
    while isinstance(store, (_Guarded, GuardedWriteLock)):
        store = store.inner
    return store


__all__ = [
    "GuardedAnswerCacheStore",
    "GuardedCASStore",
    "GuardedFactStore",
    "GuardedWriteLock",
    "StoreGuard",
    "run_with_deadline",
    "step_budget",
    "unwrap",
]
