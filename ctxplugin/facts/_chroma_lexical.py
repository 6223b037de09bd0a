"""The lexical index of each Chroma collection of facts, kept in the process.

Read once on the first lexical search, kept current by the store's own writes, and brought up to
date with facts other processes wrote when the collection's count differs from it.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from ctxplugin.facts.lexical import LexicalIndex

_SYNC_SECONDS = 2.0
"""How often a lexical index checks that the collection holds no facts it has not seen (written
by another process)."""
_PAGE = 5000


class _LexicalIndexes:
    """Collection name -> (lexical index, when it last checked for others' writes)."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[LexicalIndex, float]] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> tuple[LexicalIndex, float] | None:
        """The index of the collection ``name`` and when it was checked, if one was read."""
        return self._held.get(name)

    def clear(self) -> None:
        self._held.clear()

    def current(self, collection: Any) -> LexicalIndex:
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
            index = held[0] if held is not None else LexicalIndex(order=_written)
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


def _catch_up(collection: Any, index: LexicalIndex) -> None:
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
