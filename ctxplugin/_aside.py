"""A long text's tokens counted by the caller while a worker thread does the caller's other work.

tiktoken encodes without holding the GIL, so the exact count of a 20 KB tool output and the
summary of the same output (Python) can run on two cores at once. The caller counts and hands
the summary to a worker: the worker needs the GIL to start, and it is free while the caller
encodes, so the hand-over costs no wait. Had the worker counted instead, it could have started
only once the caller let go of the GIL, and the caller would have had to wait for it.

When no worker has taken the work up by the time the count is done (the machine is busy, or
other threads' work holds them), the caller takes it back and does it itself: a capture then
costs what it costs without a worker, never a wait on one. The count lands in the memo
:func:`ctxplugin.tokens.count_cached` reads, as if the caller had counted it alone.

Only tiktoken counters are counted beside work: a counter of another kind may hold the GIL (no
gain). The workers are few and shared by the process; a forked child starts with none.
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from ctxplugin.tokens import (
    EXACT_COUNT_CHARS,
    TiktokenCounter,
    TokenCounter,
    cached_count,
    count_cached,
)

T = TypeVar("T")

ASIDE_CHARS = 8_192
"""Texts at least this long are counted beside other work: below it the count costs about what
handing the work to a worker does."""

_WORKERS = 2


class _Workers:
    """The process's worker threads, made on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def submit(self, work: Callable[[], T]) -> Future[T] | None:
        """``work`` queued for a worker, in the caller's context (a worker sees the caller's
        context variables); None when the interpreter is shutting down."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(_WORKERS, thread_name_prefix="ctxplugin-aside")
            pool = self._pool
        try:
            return pool.submit(contextvars.copy_context().run, work)
        except RuntimeError:  # the interpreter is shutting down
            return None

    def reset(self) -> None:
        """Forget the parent's threads (they do not exist in a forked child)."""
        self._lock = threading.Lock()
        self._pool = None


_workers = _Workers()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_workers.reset)


def counts_beside(text: str, counter: TokenCounter) -> bool:
    """Whether :func:`count_beside` counts ``text`` while a worker does the other work: a text
    of :data:`ASIDE_CHARS` to :data:`~ctxplugin.tokens.EXACT_COUNT_CHARS` characters, not
    counted before, with a tiktoken counter."""
    base = getattr(counter, "counts_as", None) or counter
    return ASIDE_CHARS <= len(text) <= EXACT_COUNT_CHARS and isinstance(base, TiktokenCounter) and cached_count(text, counter) is None


def count_beside(text: str, counter: TokenCounter, work: Callable[[], T]) -> tuple[int, T]:
    """``text``'s tokens as :func:`~ctxplugin.tokens.count_cached` counts them, and what
    ``work`` returns (an exception it raises is raised here).

    When :func:`counts_beside` holds, ``work`` is handed to a worker thread while the caller
    counts, and taken back if no worker has started it by then; otherwise the caller counts,
    then does ``work``. ``work`` must be safe to run on another thread than the caller's.
    """
    if not counts_beside(text, counter):
        return count_cached(text, counter), work()
    base = getattr(counter, "counts_as", None) or counter
    future = _workers.submit(work)
    try:
        # counted with the tiktoken counter itself: the caller's counter may be a wrapper that
        # counts as it (and shares its memo), which the worker may be calling meanwhile
        tokens = count_cached(text, base)
    except BaseException:
        if future is not None:
            future.cancel()
        raise
    if future is None or future.cancel():  # no worker started it: done here, now
        return tokens, work()
    return tokens, future.result()


__all__ = ["ASIDE_CHARS", "count_beside", "counts_beside"]
