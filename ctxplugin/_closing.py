"""What an engine opened itself, released by ``close()`` or at the end of a ``with`` block."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, Self, TypeVar, overload

from ctxplugin.errors import EngineClosedError

T = TypeVar("T")

logger = logging.getLogger("ctxplugin")


class Closing:
    """``close()`` and the context manager of :class:`~ctxplugin.ContextEngine`.

    Only what the engine opened is released (:meth:`opened` registers it): stores, clients
    and summarizers passed in belong to the caller, who closes them. Once closed, the engine's
    calls raise :class:`~ctxplugin.errors.EngineClosedError` (:meth:`check_open`); the calls
    already running (:meth:`in_use`) finish first, on open stores.
    """

    _releases: list[Callable[[], None]]
    _closed: bool = False
    _running: tuple[int, dict[int, int]] = (0, {})
    """(process id, calls of this engine running in that process by thread id): a forked child
    runs none of its parent's calls. Replaced, never changed in place."""
    _deferred: list[Callable[[], None]]
    """What a :meth:`close` called inside a call left for the last call running to release."""
    _waiting: tuple[int, dict[int, int]] = (0, {})
    """(process id, calls of each thread waiting in :meth:`close` inside its own calls): they
    cannot end before that ``close()`` returns, so no other ``close()`` inside a call waits for
    them. Replaced, never changed in place."""
    _releasing: tuple[int, int] = (0, 0)
    """(process id, threads releasing what :attr:`_deferred` held): :meth:`close` returns after."""

    def opened(self, release: Callable[[], None]) -> None:
        """Call ``release`` on :meth:`close`, after what was opened later."""
        if not hasattr(self, "_releases"):
            self._releases = []
        self._releases.append(release)

    def close(self) -> None:
        """Release what this engine opened: the stores of :meth:`embedded`, :meth:`from_config`
        and :func:`ctxplugin.connect` (connections, Chroma clients, and the embedded Chroma
        directory, which another process may then open) and the thread of a summarizer given as
        a function or a model. Idempotent; stores and a ``BackgroundSummarizer`` passed in stay
        open for their owner. Calls already running finish first (waited for at most
        :data:`DRAIN_SECONDS`): a store closed under a call could fail it with an error from
        inside the driver, or crash the process.

        Called from inside a call of this engine (a callback, a summarizer or a tool the call
        runs, on the call's own thread), ``close()`` does not wait for that call, which cannot
        end before it returns: it waits for the calls of other threads only (not for those of a
        thread waiting in its own ``close()`` likewise), returns, and what the engine opened is
        released when the last call running ends (by that call's thread); a ``close()`` on
        another thread returns once that is done.
        The engine refuses new calls from the moment ``close()`` is called either way. Every
        release runs even when one fails: the first failure is raised by ``close()`` (logged
        instead when it ends a call, which keeps its result)."""
        with _CLOSING:
            self._closed = True
            releases, self._releases = getattr(self, "_releases", []), []
            thread = threading.get_ident()
            here = self._calls(thread)
            if here:
                self._wait_inside(thread, here)
                self._deferred = [*getattr(self, "_deferred", []), *releases]
                return
            _CLOSING.wait_for(lambda: self._calls() == 0 and not self._releases_running(), timeout=DRAIN_SECONDS)
        failed = _release(releases)
        if failed is not None:
            raise failed

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def check_open(self) -> None:
        """Raise if :meth:`close` was called.

        Raises:
            EngineClosedError: the engine is closed.
        """
        if self._closed:
            raise EngineClosedError(
                f"this {type(self).__name__} was closed (close() or the end of its with block) and its "
                "stores released; build a new engine to go on"
            )

    @contextmanager
    def in_use(self) -> Iterator[None]:
        """Run one call of the engine: raises once closed; :meth:`close` waits for it."""
        thread = threading.get_ident()
        with _CLOSING:
            self.check_open()
            self._count(thread, +1)
        try:
            yield
        finally:
            with _CLOSING:
                self._count(thread, -1)
                _CLOSING.notify_all()
                deferred: list[Callable[[], None]] = []
                if not self._calls() and getattr(self, "_deferred", None):
                    deferred, self._deferred = self._deferred, []
                    self._releasing = (os.getpid(), self._releases_running() + 1)
            if deferred:
                try:
                    failed = _release(deferred)
                    if failed is not None:  # this call's result is not the release's to replace
                        logger.warning("releasing what the engine opened, after close() inside a call, failed: %r", failed)
                finally:
                    with _CLOSING:
                        self._releasing = (os.getpid(), self._releases_running() - 1)
                        _CLOSING.notify_all()

    def _count(self, thread: int, step: int) -> None:
        """Count one call of ``thread`` more (``step`` 1) or fewer (-1); caller holds ``_CLOSING``."""
        pid, running = self._running
        threads = dict(running) if pid == os.getpid() else {}
        threads[thread] = threads.get(thread, 0) + step
        if not threads[thread]:
            del threads[thread]
        self._running = (os.getpid(), threads)

    def _wait_inside(self, thread: int, here: int) -> None:
        """Wait, in :meth:`close` inside ``here`` calls of ``thread``, for the calls of other
        threads but those waiting likewise; caller holds ``_CLOSING``."""
        pid, waiting = self._waiting
        others = {t: n for t, n in waiting.items() if t != thread} if pid == os.getpid() else {}
        self._waiting = (os.getpid(), {**others, thread: here})
        _CLOSING.notify_all()  # another close() inside a call need not wait for this one's calls

        def stuck() -> int:
            pid, waiting = self._waiting
            return sum(n for t, n in waiting.items() if t != thread) if pid == os.getpid() else 0

        try:
            _CLOSING.wait_for(lambda: self._calls() - stuck() == here, timeout=DRAIN_SECONDS)
        finally:
            pid, waiting = self._waiting
            self._waiting = (pid, {t: n for t, n in waiting.items() if t != thread})

    def _releases_running(self) -> int:
        """Threads of this process releasing what a :meth:`close` inside a call left."""
        pid, running = self._releasing
        return running if pid == os.getpid() else 0

    def _calls(self, thread: int | None = None) -> int:
        """Calls of this engine running in this process (of ``thread`` only if given)."""
        pid, running = self._running
        if pid != os.getpid():
            return 0
        return sum(running.values()) if thread is None else running.get(thread, 0)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class WhileOpen(Generic[T]):
    """An attribute of a :class:`Closing` object readable only while it is open (reading it
    afterwards raises :class:`~ctxplugin.errors.EngineClosedError`)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._slot = f"_{name}"

    @overload
    def __get__(self, obj: None, owner: type) -> Self: ...
    @overload
    def __get__(self, obj: Closing, owner: type) -> T: ...
    def __get__(self, obj: Closing | None, owner: type) -> Any:
        if obj is None:
            return self
        obj.check_open()
        return getattr(obj, self._slot)

    def __set__(self, obj: Closing, value: T) -> None:
        setattr(obj, self._slot, value)


def _release(releases: list[Callable[[], None]]) -> Exception | None:
    """Call ``releases`` in reverse order (what was opened last is released first), every one
    of them even when one fails; the first failure is returned."""
    failed: Exception | None = None
    for release in reversed(releases):
        try:
            release()
        except Exception as exc:
            failed = failed or exc
    return failed


_CLOSING = threading.Condition()


def _after_fork_in_child() -> None:
    global _CLOSING
    _CLOSING = threading.Condition()  # a thread of the parent may have held it at the fork


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

DRAIN_SECONDS = 60.0
"""How long :meth:`Closing.close` waits for the calls still running (each is bounded by
``stores.timeout`` for its stores; the rest is computation)."""

__all__ = ["Closing", "WhileOpen"]
