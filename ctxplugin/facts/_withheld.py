"""Withdrawals a fact store could not carry out (one written to the protocol before
``withdraw``): the facts they name stay stored, so the ledger leaves them out of what it
returns instead."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from ctxplugin._lru import LRU
from ctxplugin.facts.model import Fact, withdrawn
from ctxplugin.scope import Scope

WITHHELD_OWNERS = 16384
"""How many owners' withdrawals are kept; past it the least recently withdrawn go. A restarted
process withdraws again when it first reads the replaced output (``prepare`` marks it: see
:mod:`ctxplugin.cas.annotation`)."""


class Withheld:
    """Per owner, the tool outputs withdrawn (call id -> the digests that stand now), and the
    test :func:`~ctxplugin.facts.model.withdrawn` every store's ``withdraw`` agrees with."""

    __slots__ = ("_lock", "_owners")

    def __init__(self, size: int = WITHHELD_OWNERS) -> None:
        self._owners: LRU[str, tuple[Scope, dict[str, tuple[str, ...]]]] = LRU(size)
        self._lock = threading.Lock()

    def add(self, owner: Scope, outputs: Mapping[str, tuple[str, ...]]) -> None:
        """Withhold what a withdrawal of ``outputs`` by ``owner`` removes."""
        with self._lock:
            known = self._owners.hit(owner.key())
            calls = dict(known[1]) if known is not None else {}
            calls.update(outputs)
            self._owners.put(owner.key(), (owner, calls))

    def hides(self, fact: Fact) -> bool:
        """Whether ``fact`` was read from a tool output its owner withdrew."""
        if not self._owners or fact.source.call_id is None:
            return False
        with self._lock:
            known = self._owners.get(fact.owner.key())
        return known is not None and withdrawn(fact, known[0], known[1])


__all__ = ["WITHHELD_OWNERS", "Withheld"]
