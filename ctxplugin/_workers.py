"""Deadlines for the calls of an embedded store, run on threads that are kept: a store on a
local file is called often and cheaply, and one that keeps a connection per thread (the SQLite
CAS) would open the file again on a new thread for every call. A call its caller stopped
waiting for (a hung disk, a stale network mount) keeps its thread; while it runs, later calls
are refused at once instead of each leaving another thread behind. A leaf below the stores,
beside :mod:`ctxplugin._deadline`."""

from __future__ import annotations

import contextvars
import os
import queue
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from ctxplugin._step import step_wait, waiting
from ctxplugin.errors import InvalidInputError, StoreUnavailableError

T = TypeVar("T")

IDLE_S = 60.0
"""Seconds a thread waits for its next call before it ends (and its connection with it)."""


class _Job:
    __slots__ = ("began", "context", "done", "error", "fn", "late", "value", "what")

    def __init__(self, fn: Callable[[], Any], what: str) -> None:
        self.fn = fn
        self.what = what
        self.context = contextvars.copy_context()  # the step's store time goes with the call
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None
        self.late = False  # its caller stopped waiting before it returned
        self.began = time.monotonic()


class _Worker:
    __slots__ = ("__weakref__", "jobs", "thread")

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None


class Workers:
    """Runs the calls of one embedded store, each within ``timeout`` seconds and what is left of
    the current step's store time (see :func:`~ctxplugin._step.step_budget`).

    Each call runs in the caller's context on a thread of this pool, one kept from an earlier
    call when one is idle, so a call costs a hand-over rather than a new thread. Safe to share
    between threads.

    Args:
        name: the store as errors name it ("SQLite CAS").
        timeout: seconds one call may take (``stores.timeout``).
    """

    def __init__(self, name: str, timeout: float) -> None:
        if timeout <= 0:
            raise InvalidInputError(f"timeout must be > 0, got {timeout}")
        self.name = name
        self.timeout = timeout
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []  # the last one idle is used first: the others end when idle long enough
        self._late: list[_Job] = []  # calls their callers stopped waiting for, still running
        self._stopped = False
        _POOLS.add(self)

    def call(self, what: str, fn: Callable[[], T]) -> T:
        """``fn()`` if it returns in time.

        Raises:
            StoreUnavailableError: ``fn`` did not return in time, the step's store time is used
                up, or an earlier call that did not return in time is still running.
            BaseException: whatever ``fn`` raised.
        """
        wait = step_wait(self.timeout)
        job = _Job(fn, what)
        with self._lock:
            if self._late:
                late = self._late[0]
                raise StoreUnavailableError(
                    f"{self.name} {what} skipped: its {late.what} has not returned for {job.began - late.began:.0f}s "
                    "(a hung disk or network mount?); the store is used again once it does"
                )
            if wait <= 0:
                raise StoreUnavailableError(f"{self.name} {what} skipped: this step's store time (stores.timeout) is used up")
            worker = self._idle.pop() if self._idle else None
        if worker is None:
            worker = self._start()
        with waiting():  # the step's store time
            worker.jobs.put(job)
            answered = job.done.wait(wait)
        if not answered:
            with self._lock:
                job.late = not job.done.is_set()  # the thread sets it under the lock too
                if job.late:
                    self._late.append(job)
            if job.late:
                bound = "stores.timeout" if wait >= self.timeout else "what was left of this step's store time, stores.timeout"
                raise StoreUnavailableError(f"{self.name} {what}: no answer within {wait:.1f}s ({bound})")
        if job.error is not None:
            raise job.error
        return job.value  # type: ignore[no-any-return]

    def _start(self) -> _Worker:
        worker = _Worker()
        worker.thread = threading.Thread(target=self._serve, args=(worker,), name=f"ctxplugin-store: {self.name}", daemon=True)
        worker.thread.start()
        return worker

    def _serve(self, worker: _Worker) -> None:
        while True:
            try:
                job = worker.jobs.get(timeout=IDLE_S)
            except queue.Empty:
                with self._lock:
                    if worker in self._idle:
                        self._idle.remove(worker)
                        return
                job = worker.jobs.get()  # a caller took it from the idle ones just now: its call is on the way
            if job is None:
                return
            try:
                job.value = job.context.run(job.fn)
            except BaseException as exc:  # handed to the caller
                job.error = exc
            with self._lock:
                job.done.set()
                if job.late:
                    self._late.remove(job)
                    job.value = job.error = None  # nobody reads them
                if self._stopped:
                    return
                self._idle.append(worker)
            del job

    def stop(self, wait: float) -> None:
        """End the idle threads, waiting for them ``wait`` seconds at most; one still running a
        call ends after it. Later calls still work (each on a thread of its own)."""
        with self._lock:
            self._stopped = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.jobs.put(None)
        deadline = time.monotonic() + wait
        for worker in idle:
            if worker.thread is not None:
                worker.thread.join(max(0.0, deadline - time.monotonic()))

    def _after_fork_in_child(self) -> None:
        # the parent's threads do not exist here, and one of them may have held the lock at the fork
        self._lock = threading.Lock()
        self._idle = []
        self._late = []


_POOLS: weakref.WeakSet[Workers] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for pool in list(_POOLS):
        pool._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


__all__ = ["IDLE_S", "Workers"]
