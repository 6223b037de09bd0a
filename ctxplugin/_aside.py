"""A long text's tokens counted on a worker thread while the caller goes on.

tiktoken encodes without holding the GIL, so the exact count of a 20 KB tool output can run on
another core while ``capture`` summarizes the same output. The count lands in the memo
:func:`ctxplugin.tokens.count_cached` reads, as if the caller had counted it.

Only tiktoken counters are counted aside: a counter of another kind may hold the GIL (no gain)
or not be safe to call from two threads. The workers are few and shared by the process; when
they are all busy the caller counts itself. A forked child starts with none and makes its own.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from ctxplugin.tokens import (
    EXACT_COUNT_CHARS,
    TiktokenCounter,
    TokenCounter,
    cached_count,
    count_cached,
)

ASIDE_CHARS = 8_192
"""Texts at least this long are counted aside: below it the count costs about what handing it
to a worker does."""

_WORKERS = 2

_START_WAIT = 0.01
"""Seconds the caller waits for a worker to pick the count up. A worker needs the GIL to start;
while the caller runs Python it would get it only at the interpreter's switch interval
(5 ms), after most of the caller's work was done alone."""


class _Workers:
    """The process's counting threads, made on first use and counted while busy."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._busy = 0

    def submit(self, count: Callable[[], int]) -> Future[int] | None:
        """``count`` started on a worker, or None when every worker is busy."""
        with self._lock:
            if self._busy >= _WORKERS:
                return None
            if self._pool is None:
                self._pool = ThreadPoolExecutor(_WORKERS, thread_name_prefix="ctxplugin-count")
            self._busy += 1
            pool = self._pool
        started = threading.Event()

        def job() -> int:
            started.set()
            try:
                return count()
            finally:
                with self._lock:
                    self._busy -= 1

        try:
            future = pool.submit(job)
        except RuntimeError:  # the interpreter is shutting down
            with self._lock:
                self._busy -= 1
            return None
        started.wait(_START_WAIT)
        return future

    def reset(self) -> None:
        """Forget the parent's threads (they do not exist in a forked child)."""
        self._lock = threading.Lock()
        self._pool = None
        self._busy = 0


_workers = _Workers()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_workers.reset)


def count_aside(text: str, counter: TokenCounter) -> Future[int]:
    """``text``'s tokens as :func:`~ctxplugin.tokens.count_cached` counts them.

    A text of :data:`ASIDE_CHARS` to :data:`~ctxplugin.tokens.EXACT_COUNT_CHARS` characters not
    counted before is counted on a worker thread when ``counter`` is a tiktoken counter: the
    returned future is then still running. Otherwise it is counted here and the future is done.
    """
    base = getattr(counter, "counts_as", None) or counter
    if ASIDE_CHARS <= len(text) <= EXACT_COUNT_CHARS and isinstance(base, TiktokenCounter) and cached_count(text, counter) is None:
        # counted with the tiktoken counter itself: a wrapper that counts as it (and shares its
        # memo) need not be safe to call from another thread
        future = _workers.submit(lambda: count_cached(text, base))
        if future is not None:
            return future
    done: Future[int] = Future()
    done.set_result(count_cached(text, counter))
    return done


__all__ = ["ASIDE_CHARS", "count_aside"]
