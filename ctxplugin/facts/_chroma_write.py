"""How the Chroma fact store writes: new facts and changed ones together, one upsert per
collection (and batch), the changed facts keeping the vectors stored with them."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ctxplugin.facts._chroma_codec import from_metadata, to_metadata, withdraw_wheres
from ctxplugin.facts._chroma_lexical import SlotIndex, _tag
from ctxplugin.facts.model import Fact, withdrawn
from ctxplugin.scope import Scope

Groups = dict[str, tuple[list[Fact], dict[str, Fact]]]
"""Per tenant (its collection): the facts to add, and the changed ones by id."""


def grouped(added: Sequence[Fact], updated: Sequence[Fact]) -> Groups:
    """``added`` and ``updated`` by tenant; a change of a fact also added is not kept apart (the
    fact is written as added), and the last change of an id wins."""
    new_ids = {f.id for f in added}
    groups: Groups = {}
    for fact in added:
        groups.setdefault(fact.owner.tenant_id or "", ([], {}))[0].append(fact)
    for fact in updated:
        if fact.id not in new_ids:
            groups.setdefault(fact.owner.tenant_id or "", ([], {}))[1][fact.id] = fact
    return groups


def upsert(
    collection: Any,
    new: Sequence[Fact],
    changed: dict[str, Fact],
    vectors: dict[str, list[float]],
    step: int,
    index: SlotIndex | None,
) -> None:
    """Write ``new`` (their ``vectors`` given) and ``changed`` (theirs read back; one no longer
    stored stays so) to ``collection``, ``step`` records a request, and keep the lexical
    ``index`` of the collection in step."""
    if changed:
        stored = collection.get(ids=list(changed), include=["embeddings"])
        vectors.update((i, [float(x) for x in v]) for i, v in zip(stored["ids"], stored["embeddings"], strict=True))
    old = [f for f in changed.values() if f.id in vectors]
    facts = [*new, *old]
    metadatas = [to_metadata(f) for f in facts]
    for start in range(0, len(facts), step):
        chunk = facts[start : start + step]
        collection.upsert(
            ids=[f.id for f in chunk],
            documents=[f.text for f in chunk],
            embeddings=[vectors[f.id] for f in chunk],
            metadatas=metadatas[start : start + step],
        )
    if index is not None:
        tags = [_tag(m) for m in metadatas]
        index.add((f.id, f.text, t) for f, t in zip(new, tags[: len(new)], strict=True))
        for fact, tag in zip(old, tags[len(new) :], strict=True):
            index.retag(fact.id, tag)


def batch_size(client: Any) -> int:
    """Records one request to ``client`` may carry."""
    try:
        return min(4096, int(client.get_max_batch_size()))
    except (AttributeError, TypeError, ValueError):
        return 1000


def delete_withdrawn(
    collection: Any, owner: Scope, outputs: Mapping[str, Collection[str]], index: SlotIndex | None
) -> list[Fact]:
    """Delete from ``collection`` the facts a withdrawal of ``outputs`` by ``owner`` removes
    (:func:`~ctxplugin.facts.model.withdrawn`), keeping its lexical ``index`` in step; return
    them."""
    facts: dict[str, Fact] = {}
    for where in withdraw_wheres(owner, list(outputs)):  # (several requests for thousands of calls)
        result = collection.get(where=where, include=["documents", "metadatas"])
        facts.update((i, from_metadata(i, doc, meta)) for i, doc, meta in zip(result["ids"], result["documents"] or [], result["metadatas"] or [], strict=True))
    gone = [f for f in facts.values() if withdrawn(f, owner, outputs)]
    for start in range(0, len(gone), 4096):  # (a request binds one variable per id)
        collection.delete(ids=[f.id for f in gone[start : start + 4096]])
    if gone and index is not None:
        index.remove(f.id for f in gone)
    return gone


__all__ = ["Groups", "batch_size", "delete_withdrawn", "grouped", "upsert"]
