"""Facts blocks shared by the processes on one Chroma server (the optional ``window_blocks`` and
``offer_window_block`` of :class:`~ctxplugin.facts.store.FactStore`).

With ``facts.placement="window"`` the facts stage chooses a reader's block once per archive
step. Workers behind a load balancer serving one conversation keep it alike by storing the
block the first of them chose, in a side collection beside the reader's facts collection
(``<facts collection>_windows``), one record per key the stage names. A record is written once
and never replaced: Chroma's ``add`` keeps the record an id already has, so whichever worker
adds first wins and the others read the winner back.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from time import time as clock
from typing import TYPE_CHECKING, Any

from ctxplugin.facts._chroma_embedding import _translated
from ctxplugin.scope import Scope

SUFFIX = "_windows"
KEPT_SECONDS = 24 * 3600
"""How long a shared block is kept: a block serves the calls of one archive step, so a day-old
one serves none."""
PURGE_EVERY = 3600
"""Seconds between two purges of the blocks older than :data:`KEPT_SECONDS` (one per
store and collection, made by the offer that follows)."""


class SharedWindows:
    """The shared facts blocks of :class:`~ctxplugin.facts.chroma.ChromaFactStore`."""

    if TYPE_CHECKING:
        _collections: dict[str, Any]
        _lock: threading.Lock

        def collection_name(self, tenant_id: str | None) -> str: ...
        def _client_now(self) -> Any: ...
        def _forget(self) -> None: ...

    def window_blocks(self, reader: Scope, keys: Sequence[str]) -> dict[str, str]:
        """The blocks stored under these ``keys`` for ``reader``'s collection, in one request
        (keys with none are left out)."""
        if not keys:
            return {}
        with _translated("read the shared facts blocks", self._forget):
            result = self._windows(reader).get(ids=list(keys), include=["documents"])
        return {i: doc for i, doc in zip(result["ids"], result["documents"] or [], strict=True) if isinstance(doc, str)}

    def offer_window_block(self, reader: Scope, key: str, block: str) -> str:
        """Store ``block`` under ``key`` unless a block is stored there already; return the
        block stored (``block``, or the one another process stored first)."""
        with _translated("share the facts block", self._forget):
            collection = self._windows(reader)
            # the vector is never searched; the time is for a purge of old blocks
            now = clock()
            collection.add(ids=[key], documents=[block], embeddings=[[1.0]], metadatas=[{"created_at": now}])
            result = collection.get(ids=[key], include=["documents"])
            self._purge_windows(collection, now)
        stored = result["documents"] or []
        return stored[0] if stored and isinstance(stored[0], str) else block

    def _purge_windows(self, collection: Any, now: float) -> None:
        """Delete ``collection``'s blocks older than :data:`KEPT_SECONDS`, at most once every
        :data:`PURGE_EVERY` seconds per store: they are one per reader and archive step, and
        would otherwise pile up for as long as the server runs."""
        purges: dict[str, float] = self.__dict__.setdefault("_window_purges", {})  # by collection name
        purged = purges.get(collection.name)
        if purged is not None and now - purged < PURGE_EVERY:
            return
        purges[collection.name] = now
        collection.delete(where={"created_at": {"$lt": now - KEPT_SECONDS}})

    def _windows(self, reader: Scope) -> Any:
        client = self._client_now()
        name = self.collection_name(reader.tenant_id) + SUFFIX
        found = self._collections.get(name)
        if found is None:
            with self._lock:
                found = self._collections.get(name)
                if found is None:
                    found = client.get_or_create_collection(name, embedding_function=None)
                    self._collections[name] = found
        return found


__all__ = ["KEPT_SECONDS", "PURGE_EVERY", "SUFFIX", "SharedWindows"]
