"""The deadline of the current step (one ``prepare``, one capture): a leaf module, so that an
embedded store can bound its own waits by it (SQLite's busy timeout) as the guard bounds the
calls to servers (see :mod:`ctxplugin._deadline`)."""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from contextlib import contextmanager

_step_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("ctxplugin_step_deadline", default=None)


@contextmanager
def step_budget(seconds: float) -> Iterator[None]:
    """Bound the time all store calls of one step (a ``prepare``, a capture) may wait together
    to ``seconds``: however many calls a step makes and however many stores fail, the step
    waits for stores at most this long. An inner budget never extends an outer one."""
    now = time.monotonic()
    outer = _step_deadline.get()
    token = _step_deadline.set(now + seconds if outer is None else min(outer, now + seconds))
    try:
        yield
    finally:
        _step_deadline.reset(token)


def step_deadline() -> float | None:
    """The ``time.monotonic()`` deadline of the current step, or None outside any step."""
    return _step_deadline.get()


def step_wait(seconds: float) -> float:
    """``seconds``, or less when the current step's deadline comes sooner (never below 0)."""
    deadline = _step_deadline.get()
    return seconds if deadline is None else max(0.0, min(seconds, deadline - time.monotonic()))


__all__ = ["step_budget", "step_deadline", "step_wait"]
