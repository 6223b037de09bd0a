"""The deadline and circuit breaker of one server: :class:`StoreGuard`, re-exported by
:mod:`ctxplugin.guard` (which describes it and wraps the stores with it); the circuit's states
are in :mod:`ctxplugin._circuit`."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from ctxplugin._circuit import Circuit
from ctxplugin._deadline import await_with_deadline, hold, leave, run_with_deadline
from ctxplugin._step import step_wait
from ctxplugin.errors import InvalidInputError, StoreBusyError, StoreUnavailableError

logger = logging.getLogger("ctxplugin")

T = TypeVar("T")


class StoreGuard:
    """A deadline on each call to one server, and a circuit that opens on its first failure.

    Safe to share between threads and between the stores of one server.

    Args:
        name: the server as reports name it ("Postgres", "Chroma server").
        timeout: seconds one call may take.
        retry_after: seconds between background checks while the circuit is open (doubled,
            up to 30 s, each time a call let through after a passed check fails again).
        probe: a cheap call that raises when the server is not usable (it runs with the same
            deadline). Once it passes, the next call is let through to try the server. Without
            one, the first call after the pause is let through.
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
        self._circuit = Circuit(retry_after)
        self._checking = False
        self._stopped = threading.Event()
        self._threads: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
        _GUARDS.add(self)

    # ------------------------------------------------------------------ state
    @property
    def is_open(self) -> bool:
        """Whether calls are refused until a check passes (once one has, the next call tries the
        server, and the circuit closes when it works)."""
        circuit = self._circuit
        return circuit.cause is not None and not circuit.checked

    @property
    def cause(self) -> str | None:
        """Why the circuit is open, or None."""
        return self._circuit.cause

    @property
    def retry_interval(self) -> float:
        """Seconds between checks now: ``retry_after``, doubled (up to 30 s) each time a call let
        through after a passed check failed again, back to ``retry_after`` once a call of the kind
        that failed works."""
        return self._circuit.pause

    def trip(self, cause: str) -> None:
        """Open the circuit for ``cause`` (also used when a check at connect time failed)."""
        self._failed(cause, trial=False)

    def _failed(self, cause: str, *, trial: bool, what: str | None = None) -> None:
        with self._lock:
            first = self._circuit.fail(cause, time.monotonic(), trial=trial, what=what)
            pause = self._circuit.pause
            checker = self._checker()
        if first:
            logger.warning("%s unavailable, calls fail fast until it answers again: %s", self.name, cause)
        elif trial:
            logger.warning("%s still fails: %s; tried again in %gs", self.name, cause, pause)
        if checker is not None:
            checker.start()

    def _checker(self) -> threading.Thread | None:
        """The background check to start (None when one runs, none is needed, or none may);
        with ``_lock`` held."""
        if self._probe is None or self._checking or self._circuit.checked or self._stopped.is_set():
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
        self._circuit.trial = False  # a call let through to try the server ran in a parent thread
        self._threads = weakref.WeakSet()

    def stop(self) -> None:
        """End the background check and wait for the threads of this guard's calls, for at most
        ``timeout + retry_after`` seconds in all, however many calls a frozen server left
        hanging (a driver that still does not return is left to its own timeout, with a
        warning). Later calls still work; a later failure starts no check: after the pause one
        call tries the server, as with a guard without a probe. Idempotent."""
        self._stopped.set()
        deadline = time.monotonic() + self.timeout + self.retry_after
        for thread in list(self._threads):
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
                if thread.is_alive():
                    logger.warning("%s: %s still running after close()", self.name, thread.name)

    def _check_loop(self) -> None:
        probe = self._probe
        if probe is None:  # pragma: no cover - started only with a probe
            return
        circuit = self._circuit
        while True:
            with self._lock:
                pause = circuit.pause
            stopped = self._stopped.wait(pause)
            with self._lock:
                if circuit.cause is None or stopped:
                    self._checking = False
                    return
            try:
                run_with_deadline(probe, self.timeout, f"{self.name} check", started=self._threads.add)
            except Exception as exc:  # the server is still out: keep the circuit open
                with self._lock:
                    if circuit.cause is not None:
                        circuit.cause = _describe(exc)
                    circuit.pause = circuit.retry_after  # out, not locked: find its return at once
                continue
            with self._lock:
                circuit.checked = circuit.cause is not None  # half-open: the next call tries the server
                self._checking = False
            return

    def _admit(self, what: str) -> bool:
        """Whether this call is the one let through to try the server; raises when it is refused."""
        with self._lock:
            circuit = self._circuit
            now = time.monotonic()
            # a stopped guard's check no longer runs: after the pause a call tries the server itself
            trial = circuit.admit(now, probed=self._probe is not None and not self._stopped.is_set())
            if trial is not None:
                return trial
            cause, since, trying, pause = circuit.cause, now - circuit.opened_at, circuit.trial, circuit.pause
            checker = self._checker()  # none runs in a process forked while the circuit was open
        if checker is not None:
            checker.start()
        when = "another call is trying it now" if trying else f"checked again every {pause:g}s"
        raise StoreUnavailableError(f"{self.name} skipped for {what}: it failed {since:.0f}s ago ({cause}); {when}")

    def _tried(self, what: str, answered: bool) -> None:
        """The end of the call let through to try the server: it answered, or it said nothing."""
        with self._lock:
            if not answered:
                self._circuit.abandoned()
                return
            was = self._circuit.answered(what, time.monotonic())
        if was is not None:
            logger.warning("%s answers again", self.name)

    # ------------------------------------------------------------------ calls
    def call(self, what: str, fn: Callable[[], T]) -> T:
        """``fn()`` within the deadline, or a fast :class:`StoreUnavailableError` while the circuit
        is open. A timeout or an unavailability error opens the circuit. Other errors pass
        through unchanged (the server answered). The call let through after a passed check
        closes the circuit when the server answers it, and opens it again for longer when not.

        A call its caller stopped waiting for before ``timeout`` (the step's store time ran
        out first) goes on in its thread: if it has not returned ``timeout`` seconds after it
        began, the circuit opens then, as if its caller had waited."""
        with self._attempt(what) as attempt:

            def started(thread: threading.Thread) -> None:
                self._threads.add(thread)
                attempt.running = thread

            return run_with_deadline(fn, attempt.wait, f"{self.name} {what}", started=started, bound=attempt.bound(self.timeout))

    async def acall(self, what: str, fn: Callable[[], Awaitable[T]]) -> T:
        """Async :meth:`call`: ``await fn()`` within the deadline, on the same circuit (the sync
        and async stores of one server may share a guard). A call cut short by the deadline is
        cancelled and left to end in the background. A call its caller stopped waiting for
        first (its task cancelled, the step's store time used up) goes on until ``timeout``
        seconds after it began: it opens the circuit if it has not ended by then (and is
        cancelled), and says nothing of the server if it has."""

        def given_up(call: asyncio.Future[Any]) -> None:
            attempt.running = call  # cancelled or watched as the attempt ends

        with self._attempt(what) as attempt:
            return await await_with_deadline(fn, attempt.wait, f"{self.name} {what}", left=given_up, bound=attempt.bound(self.timeout))

    @contextmanager
    def _attempt(self, what: str) -> Iterator[_Attempt]:
        """One call through the circuit: admitted (or refused at once), given the seconds it may
        take, and its outcome (what escapes the ``with`` block) recorded."""
        trial = self._admit(what)
        answered = counted = False
        # the step's store time left, read at one instant: a step with its whole time left (the
        # same as the timeout in an engine) gives the call the timeout itself, named as such
        attempt = _Attempt(step_wait(self.timeout), time.monotonic())
        try:
            if attempt.wait <= 0:
                raise StoreUnavailableError(f"{self.name} {what} skipped: this step's store time (stores.timeout) is used up")
            try:
                yield attempt
            except StoreBusyError:
                answered = True
                raise
            except StoreUnavailableError as exc:
                # a call the step's budget cut very short says nothing of the server yet (it is
                # watched until the timeout below); one that was given at least half the timeout does
                if attempt.wait >= self.timeout / 2 or exc.__cause__ is not None or "no answer within" not in str(exc):
                    self._failed(str(exc), trial=trial, what=what)
                    trial, counted = False, True  # settled: the circuit is open again
                raise
            except Exception:
                answered = True
                raise
            answered = True
            if not trial and self._circuit.failing is not None:  # the kind that failed may work now
                with self._lock:
                    if self._circuit.cause is None:
                        self._circuit.worked(what)
        finally:
            if trial:
                self._tried(what, answered)
            if not answered:
                self._outlive(attempt, what, counted=counted)

    def _outlive(self, attempt: _Attempt, what: str, *, counted: bool) -> None:
        """A call its caller stopped waiting for: it opens the circuit if it is still running
        ``timeout`` seconds after it began (unless its failure was counted already)."""
        running = attempt.running
        if isinstance(running, threading.Thread):
            if not counted and running.is_alive():
                watcher = threading.Thread(target=self._watch, args=(running, attempt, what),
                                           name=f"ctxplugin-watch: {self.name} {what}", daemon=True)
                self._threads.add(watcher)
                watcher.start()
        elif running is not None:
            if counted or running.done():
                leave(running)
                return
            remaining = max(0.0, attempt.began + self.timeout - time.monotonic())
            expiry = running.get_loop().call_later(remaining, self._expired, running, what)
            hold(running)  # until it ends: its caller is gone, and an error then says nothing of the server
            running.add_done_callback(lambda _: expiry.cancel())

    def _watch(self, thread: threading.Thread, attempt: _Attempt, what: str) -> None:
        thread.join(max(0.0, attempt.began + self.timeout - time.monotonic()))
        if thread.is_alive():
            self._failed(self._outlived(what), trial=False, what=what)

    def _expired(self, call: asyncio.Future[Any], what: str) -> None:
        if not call.done():
            call.cancel()  # held since its caller gave up
            self._failed(self._outlived(what), trial=False, what=what)

    def _outlived(self, what: str) -> str:
        return f"{self.name} {what}: no answer within {self.timeout:.1f}s (stores.timeout)"


class _Attempt:
    """One call through a guard: the seconds its caller waits, when it began, and what runs it
    (a thread, or a task its caller gave up on), watched when its caller stops waiting first."""

    __slots__ = ("began", "running", "wait")

    def __init__(self, wait: float, began: float) -> None:
        self.wait = wait
        self.began = began
        self.running: threading.Thread | asyncio.Future[Any] | None = None

    def bound(self, timeout: float) -> str:
        """What set :attr:`wait`, as an error names it: the guard's ``timeout``, or what was left
        of the step's store time when that was shorter."""
        return "stores.timeout" if self.wait >= timeout else "what was left of this step's store time, stores.timeout"


_GUARDS: weakref.WeakSet[StoreGuard] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for guard in list(_GUARDS):
        guard._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


__all__ = ["StoreGuard"]
