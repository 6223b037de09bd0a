"""Named child runs in LangSmith for engine steps; nothing is sent when tracing is off."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


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


@contextmanager
def child_run(name: str, *, inputs: dict[str, Any]) -> Iterator[_Run]:
    """A LangSmith run named ``name`` nested under the current run, when tracing is on."""
    if not _enabled():
        yield _Run(None)
        return
    from langsmith.run_helpers import trace

    with trace(name, run_type="chain", inputs=inputs, tags=["ctxplugin"]) as tree:
        yield _Run(tree)
