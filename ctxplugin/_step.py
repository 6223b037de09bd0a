"""The store time of the current step (one ``prepare``, one capture): a leaf module, so that an
embedded store can bound its own waits by it (SQLite's busy timeout) as the guard bounds the
calls to servers (see :mod:`ctxplugin._deadline`)."""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class _Budget:
    """The store time of one step: only the time spent waiting for stores (inside
    :func:`waiting`) uses it, so the step's own work before, between and after its store calls
    (summarizing a large output, reading facts from a long conversation) does not. Waits that
    overlap (two threads of a step) count once."""

    __slots__ = ("lock", "outer", "seconds", "since", "spent", "waits")

    def __init__(self, seconds: float, outer: _Budget | None) -> None:
        self.seconds = seconds
        self.outer = outer
        self.spent = 0.0
        self.waits = 0
        self.since = 0.0
        self.lock = threading.Lock()

    def left(self, now: float) -> float:
        """Seconds of store time left at ``now`` (never more than an outer budget has left)."""
        with self.lock:
            left = self.seconds - self.spent - (now - self.since if self.waits else 0.0)
        return left if self.outer is None else min(left, self.outer.left(now))

    def enter(self, now: float) -> None:
        with self.lock:
            if not self.waits:
                self.since = now
            self.waits += 1
        if self.outer is not None:
            self.outer.enter(now)

    def leave(self, now: float) -> None:
        with self.lock:
            self.waits -= 1
            if not self.waits:
                self.spent += now - self.since
        if self.outer is not None:
            self.outer.leave(now)


_step_budget: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("ctxplugin_step_budget", default=None)


@contextmanager
def step_budget(seconds: float) -> Iterator[None]:
    """Bound the time all store calls of one step (a ``prepare``, a capture) may wait together
    to ``seconds``: however many calls a step makes and however many stores fail, the step
    waits for stores at most this long. Only waiting counts (see :func:`waiting`): the step's
    own work between its store calls does not use the time up. An inner budget never extends
    an outer one."""
    token = _step_budget.set(_Budget(seconds, _step_budget.get()))
    try:
        yield
    finally:
        _step_budget.reset(token)


@contextmanager
def waiting() -> Iterator[None]:
    """Count the time spent in the block as the current step's store time (nothing outside a
    step): what a store call does while its caller waits for it."""
    budget = _step_budget.get()
    if budget is None:
        yield
        return
    budget.enter(time.monotonic())
    try:
        yield
    finally:
        budget.leave(time.monotonic())


def step_deadline() -> float | None:
    """The ``time.monotonic()`` by which a wait for a store that starts now must end (what is
    left of the current step's store time), or None outside any step."""
    budget = _step_budget.get()
    if budget is None:
        return None
    now = time.monotonic()
    return now + budget.left(now)


def step_wait(seconds: float) -> float:
    """``seconds``, or less when the current step's store time left is shorter (never below 0)."""
    budget = _step_budget.get()
    return seconds if budget is None else max(0.0, min(seconds, budget.left(time.monotonic())))


__all__ = ["step_budget", "step_deadline", "step_wait", "waiting"]
