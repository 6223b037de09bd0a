"""Named child runs in LangSmith for engine steps; nothing is sent when tracing is off.

Tracing only observes: a run that cannot be sent (a LangSmith client that posts synchronously
to an endpoint that is down) is logged at WARNING and the step goes on untraced."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from typing import Any

logger = logging.getLogger("ctxplugin")


class _Run:
    def __init__(self, tree: Any | None) -> None:
        self._tree = tree
        self.outputs: dict[str, Any] = {}
        self.metadata: dict[str, Any] = {}

    def finish(self, *, outputs: dict[str, Any], metadata: Callable[[], dict[str, Any]]) -> None:
        """End the run with ``outputs`` and the metadata ``metadata()`` makes (made only when
        the run is traced)."""
        if self._tree is not None:
            self.outputs = outputs
            self.metadata = made = metadata()
            self._tree.metadata.update(made)
            self._tree.add_metadata(made) if hasattr(self._tree, "add_metadata") else None
            self._tree.end(outputs=outputs)


def _enabled() -> bool:
    try:
        from langsmith.utils import tracing_is_enabled
    except ImportError:  # pragma: no cover - langsmith ships with langchain-core
        return False
    return bool(tracing_is_enabled())


def warm() -> None:
    """Import what telling whether tracing is on imports (LangSmith's run helpers, tens of
    milliseconds when first loaded): an engine calls it when it is built, so that its first
    ``prepare`` does not pay for it."""
    with suppress(ImportError):  # langsmith ships with langchain-core
        from langsmith import run_helpers  # noqa: F401


class _Untraced:
    """What :func:`child_run` is when tracing is off: a run that sends nothing, entered and left
    without a generator made for every step."""

    __slots__ = ()

    def __enter__(self) -> _Run:
        return _Run(None)

    def __exit__(self, *exc: object) -> None:
        return None


_UNTRACED = _Untraced()


def child_run(name: str, *, inputs: dict[str, Any]) -> AbstractContextManager[_Run]:
    """A LangSmith run named ``name`` nested under the current run, when tracing is on."""
    return _traced(name, inputs) if _enabled() else _UNTRACED


@contextmanager
def _traced(name: str, inputs: dict[str, Any]) -> Iterator[_Run]:
    from langsmith import run_helpers

    traced = run_helpers.trace(name, run_type="chain", inputs=inputs, tags=["ctxplugin"])
    try:
        tree = traced.__enter__()
    except Exception as exc:  # the run was not posted; the tracing context is still the caller's
        logger.warning("the %s trace was not sent: %s", name, exc)
        yield _Run(None)
        return
    try:
        yield _Run(tree)
    except BaseException as exc:
        _exit(traced, name, exc)
        raise
    _exit(traced, name, None)


def _exit(traced: Any, name: str, error: BaseException | None) -> None:
    from langsmith import run_helpers

    try:
        traced.__exit__(type(error) if error else None, error, error.__traceback__ if error else None)
    except Exception as exc:  # the update was not sent: put the caller's tracing context back
        logger.warning("the %s trace was not completed: %s", name, exc)
        restore = getattr(run_helpers, "_set_tracing_context", None)
        if callable(restore) and getattr(traced, "old_ctx", None) is not None:
            restore(traced.old_ctx)

