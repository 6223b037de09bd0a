"""The deadline of the current step (one ``prepare``, one capture): a leaf module, so that an
embedded store can bound its own waits by it (SQLite's busy timeout) as the guard bounds the
calls to servers (see :mod:`ctxplugin._deadline`)."""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from contextlib import contextmanager


class _Budget:
    """The store time of one step: its clock starts at the step's first store call, so the
    step's own work before it (hashing and summarizing a large output) does not use it up."""

    __slots__ = ("deadline", "outer", "seconds")

    def __init__(self, seconds: float, outer: _Budget | None) -> None:
        self.seconds = seconds
        self.outer = outer
        self.deadline: float | None = None

    def start(self) -> float:
        if self.deadline is None:  # two threads of a step may race here: both take about now
            deadline = time.monotonic() + self.seconds
            self.deadline = deadline if self.outer is None else min(deadline, self.outer.start())
        return self.deadline


_step_budget: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("ctxplugin_step_budget", default=None)


@contextmanager
def step_budget(seconds: float) -> Iterator[None]:
    """Bound the time all store calls of one step (a ``prepare``, a capture) may wait together
    to ``seconds``, counted from the first of them: however many calls a step makes and however
    many stores fail, the step waits for stores at most this long. An inner budget never extends
    an outer one."""
    token = _step_budget.set(_Budget(seconds, _step_budget.get()))
    try:
        yield
    finally:
        _step_budget.reset(token)


def step_deadline() -> float | None:
    """The ``time.monotonic()`` deadline of the current step, or None outside any step; asked
    by a store call about to wait, so the first asking starts the step's clock."""
    budget = _step_budget.get()
    return None if budget is None else budget.start()


def step_wait(seconds: float) -> float:
    """``seconds``, or less when the current step's deadline comes sooner (never below 0)."""
    deadline = step_deadline()
    return seconds if deadline is None else max(0.0, min(seconds, deadline - time.monotonic()))


__all__ = ["step_budget", "step_deadline", "step_wait"]
