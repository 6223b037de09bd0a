"""Deadlines for store calls: one call bounded by a timeout, and one step's calls bounded
together. A leaf module: :mod:`ctxplugin.guard` builds its circuit breaker on it, and the engine
opens a step budget around every ``prepare`` and capture."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from ctxplugin._step import step_budget, step_deadline
from ctxplugin.errors import StoreUnavailableError

T = TypeVar("T")


class _Call:
    """One call running in its own daemon thread; :meth:`wait` bounds how long it is waited for."""

    __slots__ = ("done", "error", "value")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None


def run_with_deadline(
    fn: Callable[[], T], timeout: float, what: str, *, started: Callable[[threading.Thread], object] | None = None
) -> T:
    """``fn()`` if it returns within ``timeout`` seconds.

    It runs in a daemon thread with the caller's context variables, so a driver blocked on a
    socket that never answers cannot block the caller (nor the interpreter's exit). ``started``
    is handed that thread before it starts, for an owner that waits for its threads on close.

    Raises:
        StoreUnavailableError: ``fn`` did not return in time.
        BaseException: whatever ``fn`` raised.
    """
    call = _Call()
    context = contextvars.copy_context()

    def target() -> None:
        try:
            call.value = context.run(fn)
        except BaseException as exc:  # handed to the caller below
            call.error = exc
        finally:
            call.done.set()

    thread = threading.Thread(target=target, name=f"ctxplugin-store: {what}", daemon=True)
    if started is not None:
        started(thread)
    thread.start()
    if not call.done.wait(timeout):
        raise StoreUnavailableError(f"{what}: no answer within {timeout:.1f}s (stores.timeout)")
    if call.error is not None:
        raise call.error
    return call.value  # type: ignore[no-any-return]


__all__ = ["run_with_deadline", "step_budget", "step_deadline"]
