"""The order of a conversation's ``clear()`` and the ``prepare`` calls of its scope.

A ``prepare`` reads what the user messages it is given state and writes it to the facts
ledger; ``clear()`` forgets what the cleared conversation stated. Run side by side, a prepare
that had read the conversation before the clear could write its statements back after the
clear forgot them. So the prepares of a scope in flight pass together, and forgetting a
scope's cleared conversation waits for them to end (and holds back the prepares of that scope
that start meanwhile): whatever a prepare started before the clear wrote is forgotten after it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

logger = logging.getLogger("ctxplugin")

WAIT_SECONDS = 60.0
"""How long one side waits for the other (each prepare's store calls are bounded by
``stores.timeout``; the rest is computation). Past it, it goes on unordered, with a warning,
rather than hang on a call that never ends."""


class ScopeGates:
    """Prepares of a scope pass together; forgetting the scope's cleared conversation passes alone.

    Keyed by :meth:`Scope.key <ctxplugin.scope.Scope.key>`; a key is held only while a call of
    it runs. A thread's own calls never wait for each other: a clear made inside a prepare of
    its scope (a callback of that prepare) does not wait for that prepare, which cannot end
    before the clear does.
    """

    def __init__(self, wait: float = WAIT_SECONDS) -> None:
        self._wait = wait
        self._pid = 0
        self._changed = threading.Condition()
        self._preparing: dict[str, dict[int, int]] = {}  # key -> calls running by thread id
        self._clearing: dict[str, int] = {}  # key -> the thread forgetting its conversation
        self._here()

    def _here(self) -> threading.Condition:
        """The condition of this process: a forked child runs none of its parent's calls (and
        its parent's threads may have held the lock as it forked)."""
        if self._pid != os.getpid():
            self._pid, self._changed, self._preparing, self._clearing = os.getpid(), threading.Condition(), {}, {}
        return self._changed

    @contextmanager
    def preparing(self, key: str) -> Iterator[None]:
        """Held by a prepare of ``key`` (and by what it read its messages from) while it runs."""
        me, changed = threading.get_ident(), self._here()
        with changed:
            # a thread already in a prepare of ``key`` goes on (a clear waiting for it would wait
            # for good); others wait for the clear of ``key`` asked for or running to end
            if not changed.wait_for(lambda: self._clearing.get(key, me) == me or me in self._preparing.get(key, {}), self._wait):
                logger.warning("a prepare went on before the clear of its conversation ended")
            calls = self._preparing.setdefault(key, {})
            calls[me] = calls.get(me, 0) + 1
        try:
            yield
        finally:
            with changed:
                calls = self._preparing.get(key, {})
                calls[me] = calls.get(me, 1) - 1
                if not calls[me]:
                    del calls[me]
                if not calls:
                    self._preparing.pop(key, None)
                changed.notify_all()

    @contextmanager
    def clearing(self, key: str) -> Iterator[None]:
        """Held while what ``key``'s cleared conversation stated is forgotten, once the
        prepares of ``key`` other threads run have ended."""
        me, changed = threading.get_ident(), self._here()
        with changed:
            ends = time.monotonic() + self._wait
            # first the clear of ``key`` another thread runs (unless this thread is in a prepare of
            # ``key``, which that clear waits for); then ``key`` is this clear's, so the prepares
            # asked for meanwhile wait, and it waits for those running to end
            inside = me in self._preparing.get(key, {})
            ours = changed.wait_for(lambda: inside or self._clearing.get(key, me) == me, self._wait)
            held = ours and key not in self._clearing  # not by an outer clear of this thread
            if held:
                self._clearing[key] = me
            if not (ours and changed.wait_for(lambda: self._alone(key, me), max(0.0, ends - time.monotonic()))):
                logger.warning("a clear went on before the prepares of its conversation ended")
        try:
            yield
        finally:
            with changed:
                if held:
                    self._clearing.pop(key, None)
                changed.notify_all()

    def _alone(self, key: str, me: int) -> bool:
        return all(thread == me for thread in self._preparing.get(key, {}))


__all__ = ["ScopeGates"]
