"""The facts block of ``facts.placement="window"`` agreed between the processes that serve one
conversation from a fact store they share (a Chroma server).

Each process keeps the block it showed a reader in memory, for the archive step (the window)
it was chosen for. Behind a load balancer another process serving the next call of the
conversation would choose its own, from the facts stored by then: the prompt would change from
the block on. So a process starting a window first reads the blocks already chosen for (reader,
window) from the store. They form a short chain of keys: a process walks it from its start to
the first block whose facts are all still current for the reader and shows that one; at the
first empty link it chooses a block itself and offers it there, where the first offer stored
wins (every process shows the winner). A block holding a fact superseded since is passed over,
so processes that see the same facts superseded end on the same block, and a process whose
block went stale moves along the chain the same way.

A store only this process writes (one that counts its writes: ``generation``) or one without
``window_blocks`` and ``offer_window_block`` shares nothing: the block stays in memory alone.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxplugin.budget import FactLine
from ctxplugin.facts import Fact
from ctxplugin.facts.outdated import InForce, replaced_by
from ctxplugin.scope import Scope

LINKS = 8
"""Blocks on the chain of one window: a window whose block went stale this often is chosen by
each process alone (a conversation's window rarely sees more than one)."""

_FIELDS = frozenset(f.name for f in dataclasses.fields(FactLine))


@dataclass(slots=True)
class SharedWindow:
    """The chain of shared blocks of one reader's window, for one call.

    Attributes:
        store: the fact store, with ``window_blocks`` and ``offer_window_block``.
        reader: the reader's scope (it names the collection the blocks are kept beside).
        window: the window (see ``ChooseFacts._window_key``).
        keys: the keys of the chain's links, first to last.
        free: the first empty link, once :meth:`agreed` found one.
    """

    store: Any
    reader: Scope
    window: str
    keys: tuple[str, ...]
    free: int | None = None

    @classmethod
    def of(cls, store: Any, reader: Scope, reader_key: str, window: str, settings: str) -> SharedWindow | None:
        """The chain for ``window`` of the reader ``reader_key`` (its block depends on
        ``settings`` as well), or None when ``store`` shares no blocks."""
        if not callable(getattr(store, "window_blocks", None)) or not callable(getattr(store, "offer_window_block", None)):
            return None
        head = "\x00".join((settings, reader_key, window))
        keys = tuple(hashlib.sha256(f"{head}\x00{link}".encode("utf-8", "surrogatepass")).hexdigest() for link in range(LINKS))
        return cls(store, reader, window, keys)

    def agreed(self, rules: InForce | None) -> tuple[FactLine, ...] | None:
        """The first block of the chain whose facts are all current for the reader (none
        restating a value ``rules`` replaced), in two requests; None when there is none, with
        :attr:`free` set to the first empty link (None when every link holds a stale block)."""
        stored = self.store.window_blocks(self.reader, self.keys)
        blocks: list[tuple[FactLine, ...] | None] = []
        for key in self.keys:
            if key not in stored:
                break
            blocks.append(decoded(stored[key]))
        ids = list(dict.fromkeys(line.fact_id for block in blocks if block for line in block))
        valid = current_ids(self.store, ids, self.reader, rules)
        for block in blocks:
            if block is not None and all(line.fact_id in valid for line in block):
                return block
        self.free = len(blocks) if len(blocks) < len(self.keys) else None
        return None

    def offer(self, lines: Sequence[FactLine]) -> tuple[FactLine, ...]:
        """Offer ``lines`` at the free link; the block stored there (these lines, or those
        another process offered first)."""
        if self.free is None:
            return tuple(lines)
        # ASCII: a lone surrogate a message held travels as an escape (Chroma's client refuses it raw)
        document = json.dumps([dataclasses.asdict(line) for line in lines])
        stored = decoded(self.store.offer_window_block(self.reader, self.keys[self.free], document))
        return tuple(lines) if stored is None else stored


def decoded(document: str) -> tuple[FactLine, ...] | None:
    """The lines of a stored block; None when the document is not one (another version's)."""
    try:
        rows = json.loads(document)
        if not isinstance(rows, list) or not all(isinstance(row, dict) and set(row) <= _FIELDS for row in rows):
            return None
        return tuple(FactLine(**{**row, "also": tuple(tuple(pair) for pair in row.get("also", ()))}) for row in rows)
    except (ValueError, TypeError):
        return None


def current_ids(store: Any, ids: Sequence[str], reader: Scope, rules: InForce | None) -> set[str]:
    """Those of the facts ``ids`` that are valid and may be shown as current under ``rules``."""
    if not ids:
        return set()
    return {fact.id for fact in store.get(ids, reader=reader) if fact.is_valid and stands(fact, rules)}


def stands(fact: Fact, rules: InForce | None) -> bool:
    """Whether ``fact`` may be shown as current under ``rules`` (the changes in force, when
    outdated statements are marked): not when it repeats a value they replaced, as its message
    is marked (see :func:`~ctxplugin.facts.outdated.replaced_by`)."""
    return rules is None or replaced_by(fact, rules) is None


_MEMO_CHARS = 4096
"""Questions up to this long are memoised (256 of them); a longer one (a pasted log, a file) is
digested on each call rather than held after its session."""


def query_digest(query: str) -> str:
    """The digest of the question a window's facts block is chosen for."""
    return _digest(query) if len(query) > _MEMO_CHARS else _memo(query)


def _digest(query: str) -> str:
    return hashlib.sha256(query.encode("utf-8", "surrogatepass")).hexdigest()


_memo = functools.lru_cache(maxsize=256)(_digest)  # the same question from call to call while the user waits


__all__ = ["LINKS", "SharedWindow", "current_ids", "decoded", "query_digest", "stands"]
