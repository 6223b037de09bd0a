"""Supersession chains read back: the current end of a chain, what replaced a fact's basis, and
the recently replaced facts with what replaced each (see :mod:`ctxplugin.facts._supersession`
for how the chains are written)."""

from __future__ import annotations

from ctxplugin.facts._batch import WriteBatch
from ctxplugin.facts.model import RETRIEVED_SCOPES, Fact, FactQuery, permitted
from ctxplugin.facts.store import FactStore
from ctxplugin.scope import Scope

MAX_CHAIN = 1000


def chain_head(writes: FactStore | WriteBatch, fact: Fact, reader: Scope) -> Fact | None:
    """The current end of ``fact``'s supersession chain."""
    current: Fact | None = fact
    for _ in range(MAX_CHAIN):
        if current is None or current.is_valid or current.superseded_by is None:
            return current
        nxt = writes.get([current.superseded_by], reader=reader)
        if not nxt or nxt[0].id == current.id:
            return current
        current = nxt[0]
    return current


def changed_basis(
    store: FactStore, writes: FactStore | WriteBatch, fact: Fact, *, scope: Scope, limit: int
) -> list[Fact]:
    """For a fact flagged ``needs_review``: the current facts that replaced what it was derived
    from, directly or through other flagged facts (at most ``limit``); ``store`` is read for
    what it depends on, ``writes`` for the chains (see ``FactsLedger.changed_basis``)."""
    found: list[Fact] = []
    seen: set[str] = {fact.id}
    frontier = list(fact.depends_on)
    while frontier and len(found) < limit and len(seen) < MAX_CHAIN:
        dep_id = frontier.pop(0)
        if dep_id in seen:
            continue
        seen.add(dep_id)
        got = store.get([dep_id], reader=scope)
        if not got:
            continue
        dep = got[0]
        if not dep.is_valid:
            head = chain_head(writes, dep, scope)
            if head is not None and head.is_valid and head.id not in seen and permitted(head, scope):
                seen.add(head.id)
                found.append(head)
        elif dep.needs_review:
            frontier.extend(dep.depends_on)
    return found


def superseded_pairs(store: FactStore, scope: Scope, limit: int) -> list[tuple[Fact, Fact]]:
    """Recently superseded (or refused) facts readable from ``scope``, each with the current
    fact that replaced it (see :meth:`ctxplugin.facts.FactsLedger.superseded`)."""
    old = store.find(FactQuery(reader=scope, valid=False, scopes=tuple(RETRIEVED_SCOPES)), limit=limit)
    known = {f.id: f for f in old}
    wanted = {f.superseded_by for f in old if f.superseded_by and f.superseded_by not in known}
    known.update((f.id, f) for f in store.get(sorted(wanted), reader=scope))
    pairs: list[tuple[Fact, Fact]] = []
    for fact in old:
        head = fact
        for _ in range(MAX_CHAIN):
            nxt = known.get(head.superseded_by or "")
            if nxt is None or nxt.id == head.id:
                break
            head = nxt
        if head.is_valid and head.id != fact.id and permitted(fact, scope) and permitted(head, scope):
            pairs.append((fact, head))
    return pairs


__all__ = ["MAX_CHAIN", "chain_head", "changed_basis", "superseded_pairs"]
