"""What a write may see of the facts it could replace: only those its writer is in the audience of.

A fact restricted to an audience (``audience=["role:vp"]``) is shown to no one else, so no one
else may replace it either, by id, by key or by any other rule: the replacement would make it
not current for its audience and name it (its id, its key) to a writer who may not know it
exists. Stores do not apply audiences; the ledger's reads do, and a write reads through
:func:`audible`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxplugin.facts._batch import WriteBatch
from ctxplugin.facts.model import Fact, FactQuery, permitted
from ctxplugin.facts.store import FactStore
from ctxplugin.scope import Scope


class _Audible:
    """``writes`` as ``writer`` may read them: facts outside its audience are not found."""

    __slots__ = ("writer", "writes")

    def __init__(self, writes: FactStore | WriteBatch, writer: Scope) -> None:
        self.writes = writes
        self.writer = writer

    def add(self, facts: Sequence[Fact]) -> None:
        self.writes.add(facts)

    def update(self, facts: Sequence[Fact]) -> None:
        self.writes.update(facts)

    def get(self, ids: Sequence[str], *, reader: Scope) -> list[Fact]:
        return [f for f in self.writes.get(ids, reader=reader) if permitted(f, self.writer)]

    def find(self, query: FactQuery, *, limit: int | None = None) -> list[Fact]:
        return [f for f in self.writes.find(query, limit=limit) if permitted(f, self.writer)]

    def search(self, text: str, query: FactQuery, *, n: int) -> list[tuple[Fact, float]]:
        return [(f, score) for f, score in self.writes.search(text, query, n=n) if permitted(f, self.writer)]


def audible(writes: FactStore | WriteBatch, writer: Scope) -> FactStore:
    """``writes`` as ``writer`` (its roles and user) may read them; the same object once so."""
    if isinstance(writes, _Audible) and writes.writer == writer:
        return writes
    return _Audible(writes.writes if isinstance(writes, _Audible) else writes, writer)


def unfiltered(writes: FactStore | WriteBatch) -> FactStore | WriteBatch:
    """What :func:`audible` wraps (the bookkeeping a write does on facts worked out from what it
    replaced reaches every one of them, their audiences' too)."""
    return writes.writes if isinstance(writes, _Audible) else writes


def reaches(old: Fact, new: Fact) -> bool:
    """Whether ``new`` is shown to everyone ``old`` is shown to, so that it may replace ``old``:
    a fact restricted to an audience never replaces one shown more widely (its other readers
    would be left with no value); it stands beside it, current for its own audience."""
    return not new.audience or (bool(old.audience) and set(old.audience) <= set(new.audience))


def narrower_audience(supersedes: str) -> str:
    """Why ``supersedes=`` naming a fact shown more widely than the write's audience is refused
    (the message names no reader of the fact)."""
    return (
        f"supersedes={supersedes!r} names a fact shown to readers this write's audience leaves out: "
        "they would be left with no value; write the replacement with that fact's audience (or none), "
        "or without supersedes= to keep it beside, current for its own audience"
    )


__all__ = ["audible", "narrower_audience", "reaches", "unfiltered"]
