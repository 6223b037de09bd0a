"""The embedded CAS's calls with a deadline: SQLite's busy timeout ends a wait for another
writer, but nothing in the driver ends a call blocked on the file itself (a hard network mount
that stopped answering, a stalled disk). Each call here runs on a kept thread of
:class:`~ctxplugin._workers.Workers` and is waited for ``stores.timeout`` at most, and no longer
than the step's store time left, as a server's calls are by their guard."""

from __future__ import annotations

from typing import Any

from ctxplugin._workers import Workers
from ctxplugin.cas.store import CASItem, CASRecord, CASStore
from ctxplugin.scope import Scope, Visibility


class BoundedCASStore:
    """A :class:`~ctxplugin.cas.CASStore` on a local file whose every call returns or raises
    :class:`~ctxplugin.errors.StoreUnavailableError` within ``timeout`` seconds (and the step's
    store time left). Optional abilities (``exists``, ``revoke``, ``stats``) are found on the
    wrapped store and bounded the same way; plain attributes (``path``) are the wrapped store's.

    Args:
        inner: the store (a :class:`~ctxplugin.cas.SQLiteCASStore`).
        timeout: seconds one call may take (``stores.timeout``).
        name: the store as reports name it.
    """

    def __init__(self, inner: CASStore, *, timeout: float, name: str = "SQLite CAS") -> None:
        self.inner = inner
        self.workers = Workers(name, timeout)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.inner, name)
        if name.startswith("_") or not callable(value) or isinstance(value, type):
            return value

        def bounded(*args: Any, **kwargs: Any) -> Any:
            return self.workers.call(name, lambda: value(*args, **kwargs))

        return bounded

    def put(self, item: CASItem, scope: Scope, *, visibility: Visibility = "session", ttl_seconds: float | None = None) -> bool:
        return self.workers.call("put", lambda: self.inner.put(item, scope, visibility=visibility, ttl_seconds=ttl_seconds))

    def get(self, ref_id: str, scope: Scope) -> CASRecord:
        return self.workers.call("get", lambda: self.inner.get(ref_id, scope))

    def purge_expired(self) -> int:
        return self.workers.call("purge", self.inner.purge_expired)

    def close(self) -> None:
        """Close the wrapped store and end the kept threads (each closes its connection as it
        ends); a call still running keeps its thread until it returns."""
        self.inner.close()
        self.workers.stop(self.workers.timeout)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"


__all__ = ["BoundedCASStore"]
