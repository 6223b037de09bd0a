"""What a model or a service the facts depend on raises when it fails, as ctxplugin's errors.

An embedding or a fact extractor may call a hosted model: an API that is down, refuses the key
or rate-limits fails the facts as their store failing does (:class:`StoreError`: the step
degrades, the agent goes on, and what was said is read again later), not the agent's step.
Errors that say the code is wrong propagate, as do ctxplugin's own; a ``KeyError`` or an
``IndexError`` from a hosted model's client says its answer lacked what the client looked for
(a response without its ``data``), and fails the call as the model failing does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from ctxplugin._deadline import run_with_deadline
from ctxplugin._lru import LRU
from ctxplugin._step import step_deadline
from ctxplugin.errors import CtxpluginError, StoreError, StoreUnavailableError

T = TypeVar("T")

RETRY_AFTER = 30.0
"""Seconds a hosted model that ran out of a step's time is not called again: the steps meanwhile
degrade at once instead of each waiting out its store time."""

CODE_ERRORS = (TypeError, AttributeError, NameError, LookupError, AssertionError, NotImplementedError, RecursionError)
"""What a call raises when code is wrong rather than when what it calls failed: these propagate."""

_HOSTED_CODE_ERRORS = tuple(e for e in CODE_ERRORS if e is not LookupError)
""":data:`CODE_ERRORS` of a call to a hosted model: a client that reads a field or an item its
model's answer lacks raises a ``LookupError``, and that is the model's answer failing."""


@contextmanager
def failing_as_store(what: str, code_errors: tuple[type[Exception], ...] = CODE_ERRORS) -> Iterator[None]:
    """Any failure of the call inside but ``code_errors`` as :class:`StoreError` naming ``what``
    failed (not a :class:`~ctxplugin.errors.StoreUnavailableError`: that would open the circuit
    of a store that did not fail)."""
    try:
        yield
    except CtxpluginError:
        raise
    except code_errors:
        raise
    except Exception as exc:
        raise StoreError(f"{what} failed: {type(exc).__name__}: {exc}") from exc


_silent: LRU[int, tuple[float, object]] = LRU(64)  # id of the caller's model -> (when it went silent, the model)
_silent_lock = threading.Lock()


def bounded_call(fn: Callable[[], T], what: str, owner: object) -> T:
    """``fn()``, a call to a hosted model (``owner``, named ``what``), within what is left of the
    step's store time (see :func:`~ctxplugin._step.step_budget`; outside a step, unbounded), its
    failures as :func:`failing_as_store` says. A model that ran out of a step's time fails at
    once for :data:`RETRY_AFTER` seconds: a model that hangs costs one step its store time, not
    every step. A ``LookupError`` the call raises is the model's answer failing, not the code.

    Raises:
        StoreError: the model failed, did not answer in time, or went silent lately.
    """
    deadline = step_deadline()
    if deadline is None:
        with failing_as_store(what, _HOSTED_CODE_ERRORS):
            return fn()
    with _silent_lock:
        silent = _silent.get(id(owner))
    if silent is not None and silent[1] is owner and time.monotonic() - silent[0] < RETRY_AFTER:
        raise StoreError(f"{what} did not answer {time.monotonic() - silent[0]:.0f}s ago; not asked again before {RETRY_AFTER:.0f}s")
    left = deadline - time.monotonic()
    if left <= 0:
        raise StoreError(f"{what}: no store time left in this step")
    try:
        with failing_as_store(what, _HOSTED_CODE_ERRORS):
            return run_with_deadline(fn, left, what)
    except StoreUnavailableError as exc:  # no answer in time (what the caller's model raises is a StoreError)
        with _silent_lock:
            _silent.put(id(owner), (time.monotonic(), owner))
        # not a StoreUnavailableError: that would open the circuit of a store that did not fail
        raise StoreError(f"{what}: no answer within the step's store time (stores.timeout)") from exc


__all__ = ["CODE_ERRORS", "RETRY_AFTER", "bounded_call", "failing_as_store"]
