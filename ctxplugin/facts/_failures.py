"""What a model or a service the facts depend on raises when it fails, as ctxplugin's errors.

An embedding or a fact extractor may call a hosted model: an API that is down, refuses the key
or rate-limits fails the facts as their store failing does (:class:`StoreError`: the step
degrades, the agent goes on, and what was said is read again later), not the agent's step.
Errors that say the code is wrong propagate, as do ctxplugin's own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ctxplugin.errors import CtxpluginError, StoreError

CODE_ERRORS = (TypeError, AttributeError, NameError, LookupError, AssertionError, NotImplementedError, RecursionError)
"""What a call raises when code is wrong rather than when what it calls failed: these propagate."""


@contextmanager
def failing_as_store(what: str) -> Iterator[None]:
    """Any other failure of the call inside as :class:`StoreError` naming ``what`` failed (not a
    :class:`~ctxplugin.errors.StoreUnavailableError`: that would open the circuit of a store
    that did not fail)."""
    try:
        yield
    except (CtxpluginError, *CODE_ERRORS):
        raise
    except Exception as exc:
        raise StoreError(f"{what} failed: {type(exc).__name__}: {exc}") from exc


__all__ = ["CODE_ERRORS", "failing_as_store"]
