"""Deadlines for store calls: one call bounded by a timeout, and one step's calls bounded
together. A leaf module: :mod:`ctxplugin.guard` builds its circuit breaker on it, and the engine
opens a step budget around every ``prepare`` and capture."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ctxplugin._step import step_budget, step_deadline, waiting
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
    fn: Callable[[], T], timeout: float, what: str, *, started: Callable[[threading.Thread], object] | None = None,
    bound: str = "stores.timeout",
) -> T:
    """``fn()`` if it returns within ``timeout`` seconds.

    It runs in a daemon thread with the caller's context variables, so a driver blocked on a
    socket that never answers cannot block the caller (nor the interpreter's exit). ``started``
    is handed that thread before it starts, for an owner that waits for its threads on close.
    ``bound``: what set ``timeout``, as the error names it.

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
    with waiting():  # the step's store time
        thread.start()
        answered = call.done.wait(timeout)
    if not answered:
        raise StoreUnavailableError(f"{what}: no answer within {timeout:.1f}s ({bound})")
    if call.error is not None:
        raise call.error
    return call.value  # type: ignore[no-any-return]


async def await_with_deadline(
    fn: Callable[[], Awaitable[T]], timeout: float, what: str, *, bound: str = "stores.timeout",
    left: Callable[[asyncio.Future[Any]], None] | None = None,
) -> T:
    """``await fn()`` if it ends within ``timeout`` seconds: the async :func:`run_with_deadline`.

    It runs as its own task, so a driver waiting on a socket that never answers cannot hold
    the caller. A call past the timeout, or whose caller is cancelled, is handed to ``left``
    (by default cancelled and left to end in the background, held here until it does). ``bound``:
    the setting that set ``timeout``, as the error names it.

    Raises:
        StoreUnavailableError: ``fn`` did not end in time.
        BaseException: whatever ``fn`` raised.
    """
    call = asyncio.ensure_future(fn())
    give_up = left or leave
    try:
        with waiting():  # the step's store time
            done, _ = await asyncio.wait({call}, timeout=timeout)
    except asyncio.CancelledError:
        give_up(call)
        raise
    if not done:
        give_up(call)
        raise StoreUnavailableError(f"{what}: no answer within {timeout:.1f}s ({bound})")
    return call.result()


_LEFT: set[asyncio.Future[Any]] = set()
"""Calls given up on, held until they end (a task nobody holds may be collected mid-way)."""


def leave(call: asyncio.Future[Any]) -> None:
    """Cancel ``call``, given up on, and hold it until it ends."""
    call.cancel()
    hold(call)


def hold(call: asyncio.Future[Any]) -> None:
    """Hold ``call``, which nobody waits for any more, until it ends; what it raises then is
    retrieved (never logged as 'Task exception was never retrieved')."""
    if call not in _LEFT:
        _LEFT.add(call)
        call.add_done_callback(_ended)


def _ended(call: asyncio.Future[Any]) -> None:
    _LEFT.discard(call)
    if not call.cancelled():
        call.exception()  # retrieved: nobody waits for it any more


__all__ = ["await_with_deadline", "hold", "leave", "run_with_deadline", "step_budget", "step_deadline", "waiting"]
