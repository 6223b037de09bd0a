"""What an engine opened itself, released by ``close()`` or at the end of a ``with`` block."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Self


class Closing:
    """``close()`` and the context manager of :class:`~ctxplugin.ContextEngine`.

    Only what the engine opened is released (:meth:`opened` registers it): stores, clients
    and summarizers passed in belong to the caller, who closes them.
    """

    _releases: list[Callable[[], None]]

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
        open for their owner."""
        with _CLOSING:
            releases, self._releases = getattr(self, "_releases", []), []
        for release in reversed(releases):
            release()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_CLOSING = threading.Lock()

__all__ = ["Closing"]
