"""The lexical index of each Chroma collection of facts, kept in the process.

Read once on the first lexical search, kept current by the store's own writes, and brought up to
date with facts other processes wrote when the collection's count differs from it.

A collection holds every session and user of its tenant, and BM25 weighs a term by how few
documents hold it: scored over the whole collection, what one session finds would change as
other users write. So the facts of each owner slot (a session's, a user's, a workspace's, the
tenant's: the metadata's ``vis``) are indexed apart (:class:`SlotIndex`), and a reader's search
scores within each slot it can read, as the in-memory store does.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Collection, Iterable
from typing import Any

from ctxplugin.facts.lexical import LexicalIndex

_SYNC_SECONDS = 2.0
"""How often a lexical index checks that the collection holds no facts it has not seen (written
by another process)."""
_PAGE = 5000


class SlotIndex:
    """A lexical index per owner slot of one collection, with the interface of one
    :class:`~ctxplugin.facts.lexical.LexicalIndex` (each document goes to the index of its tag's
    ``vis``); :meth:`search` scores within each of the slots asked for. Thread-safe."""

    def __init__(self) -> None:
        self._slots: dict[Any, LexicalIndex] = {}
        self._slot_of: dict[str, Any] = {}  # doc id -> its slot
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._slot_of)

    def ids(self) -> set[str]:
        with self._lock:
            return set(self._slot_of)

    def add(self, items: Iterable[tuple[str, str, Any]]) -> None:
        """Index ``(id, text, tag)`` documents, each in its tag's slot."""
        by_slot: dict[Any, list[tuple[str, str, Any]]] = {}
        for item in items:
            by_slot.setdefault(item[2].get("vis"), []).append(item)
        with self._lock:
            for slot, group in by_slot.items():
                moved = [i for i, _, _ in group if self._slot_of.get(i, slot) != slot]
                for doc_id in moved:  # (a fact never changes its owner; an id reused elsewhere moves)
                    self._slots[self._slot_of.pop(doc_id)].remove([doc_id])
                index = self._slots.get(slot)
                if index is None:
                    index = self._slots[slot] = LexicalIndex(order=_written)
                index.add(group)
                self._slot_of.update((i, slot) for i, _, _ in group)

    def retag(self, doc_id: str, tag: Any) -> None:
        """Replace the tag of an indexed document (nothing happens for an unknown id)."""
        with self._lock:
            slot = self._slot_of.get(doc_id, _NONE)
            index = self._slots.get(slot)
        if index is not None:
            index.retag(doc_id, tag)

    def remove(self, ids: Iterable[str]) -> None:
        """Forget documents."""
        with self._lock:
            for doc_id in ids:
                slot = self._slot_of.pop(doc_id, _NONE)
                if slot is not _NONE:
                    self._slots[slot].remove([doc_id])

    def search(
        self, text: str, *, n: int, slots: Collection[Any], allow: Callable[[str, Any], bool] | None = None
    ) -> list[tuple[str, float]]:
        """Up to ``n`` ``(id, BM25 score)`` best first, each scored within its slot, from the
        ``slots`` given, among the documents ``allow(id, tag)`` accepts; equal scores rank older
        first (then by id), whichever slot they are in."""
        with self._lock:
            indexes = [index for slot in dict.fromkeys(slots) if (index := self._slots.get(slot)) is not None]
        hits: list[tuple[str, float, Any]] = []
        for index in indexes:
            hits.extend((doc_id, score, index.order(doc_id)) for doc_id, score in index.search(text, n=n, allow=allow))
        if len(indexes) > 1:
            hits.sort(key=lambda hit: (-hit[1], hit[2]))
        return [(doc_id, score) for doc_id, score, _ in hits[:n]]


_NONE = object()


class _LexicalIndexes:
    """Collection name -> (lexical index, when it last checked for others' writes)."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[SlotIndex, float]] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> tuple[SlotIndex, float] | None:
        """The index of the collection ``name`` and when it was checked, if one was read."""
        return self._held.get(name)

    def clear(self) -> None:
        self._held.clear()

    def current(self, collection: Any) -> SlotIndex:
        """The index of ``collection``, brought up to date with what other processes wrote when
        it was last checked more than :data:`_SYNC_SECONDS` ago."""
        name = collection.name
        held = self._held.get(name)
        now = time.monotonic()
        if held is not None and now - held[1] < _SYNC_SECONDS:
            return held[0]
        with self._lock:
            held = self._held.get(name)
            if held is not None and now - held[1] < _SYNC_SECONDS:
                return held[0]
            index = held[0] if held is not None else SlotIndex()
            if held is None or collection.count() != len(index):
                _catch_up(collection, index)
            self._held[name] = (index, time.monotonic())
            return index


def _tag(meta: dict[str, Any] | None) -> dict[str, Any]:
    """What the lexical index keeps of a fact's metadata: enough for ``may_match``, and when
    the fact was written (see :func:`_written`)."""
    meta = meta or {}
    return {
        "vis": meta.get("vis"),
        "is_valid": meta.get("is_valid", True),
        "scope": meta.get("scope", "global"),
        "created_us": _created_us(meta),
    }


def _created_us(meta: dict[str, Any]) -> int:
    """When the fact was written, from the JSON body of its metadata (0 when unreadable)."""
    try:
        body = json.loads(meta.get("fact") or "{}")
        return int(body.get("created_us", 0)) if isinstance(body, dict) else 0
    except (TypeError, ValueError):
        return 0


def _written(doc_id: str, tag: dict[str, Any]) -> tuple[int, str]:
    """How equal lexical scores rank: the older fact first, as in a process that wrote them
    all (then by id). Every process sharing the collection ranks them so, whatever order its
    own writes and the others' entered its index in."""
    return int(tag.get("created_us", 0)), doc_id


def _catch_up(collection: Any, index: SlotIndex) -> None:
    """Index the collection's facts ``index`` has not seen, and forget those deleted."""
    if len(index) == 0:
        offset = 0
        while True:
            page = collection.get(include=["documents", "metadatas"], limit=_PAGE, offset=offset)
            ids = page["ids"]
            index.add(zip(ids, page["documents"] or [], [_tag(m) for m in page["metadatas"] or []], strict=True))
            if len(ids) < _PAGE:
                return
            offset += _PAGE
    stored = set(collection.get(include=[])["ids"])
    index.remove(index.ids() - stored)
    missing = sorted(stored - index.ids())
    for start in range(0, len(missing), _PAGE):
        page = collection.get(ids=missing[start : start + _PAGE], include=["documents", "metadatas"])
        index.add(zip(page["ids"], page["documents"] or [], [_tag(m) for m in page["metadatas"] or []], strict=True))
