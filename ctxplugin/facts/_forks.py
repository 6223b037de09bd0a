"""What the user messages of an abandoned branch stated is no longer current.

A host with checkpoints lets its user go back to an earlier point of a thread and go on from
there (LangGraph's time travel: ``invoke`` or ``update_state`` with an earlier checkpoint's
config). The messages said after that point on the first branch are not in the conversation
any more, but what they stated was read into the ledger and would stay current: a budget said
on the first branch would be shown on the second, where the user never said it. The facts
stage tells which messages were left behind (see :meth:`~ctxplugin.stages._seen.Seen.left_behind`);
here their facts are marked not current, as those of an edited message's old text are, and a
fact they replaced by key is current again unless a message left behind stated it too. When
messages left behind are in a conversation again (a sub-agent of the thread was handed part of
it, or the user went back to the first branch), what they stated is current again. A process
that did not read the conversation before (a restart) tells the branch left from the facts
stored (:func:`resumed`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from ctxplugin.errors import InvalidInputError
from ctxplugin.facts._drafts import _provenance
from ctxplugin.facts._said import said_by
from ctxplugin.facts.model import Fact, FactQuery, output_digest, withdrawn
from ctxplugin.facts.store import FactStore
from ctxplugin.scope import Scope
from ctxplugin.tokens import content_text

LEFT_BEHIND = "its message is no longer in the conversation (the thread went back to an earlier point)"
"""The note of a fact read from a message of an abandoned branch."""


def left_behind(store: FactStore, owner: Scope, messages: Sequence[BaseMessage], *, back: Sequence[BaseMessage] = ()) -> list[Fact]:
    """Mark not current the facts ``owner`` read from the user messages among ``messages``
    (those of an abandoned branch), make current again what they replaced by key, and return
    the facts marked; then what was so marked of the user messages ``back`` (in the conversation
    again) is current again (:func:`rejoined`). Needs the store's ``from_messages``: without it,
    they stay current."""
    left = _left(store, owner, messages)
    rejoined(store, owner, back)
    return left


def _left(store: FactStore, owner: Scope, messages: Sequence[BaseMessage], refs: Sequence[str] = ()) -> list[Fact]:
    refs = [*refs, *(ref for m in messages if isinstance(m, HumanMessage) and (ref := _provenance(m)) is not None)]
    finder = getattr(store, "from_messages", None)
    if not refs or not callable(finder):
        return []
    owner_key = owner.key()
    stated: list[Fact] = [f for f in finder(owner, refs) if f.owner.key() == owner_key]
    gone = {f.id for f in stated}
    left = [f.model_copy(update={"is_valid": False, "note": LEFT_BEHIND}) for f in stated if f.is_valid]
    if not left:
        return []
    # the value a fact of the abandoned branch replaced (through others of it, maybe) stands again
    back = [
        old.model_copy(update={"is_valid": True, "superseded_by": None, "note": None})
        for key in dict.fromkeys(f.key for f in stated if f.key is not None)
        for old in store.find(FactQuery(reader=owner, key=key))
        if old.id not in gone and old.superseded_by in gone and old.owner.key() == owner_key and not old.refused
    ]
    store.update([*left, *back])
    return left


def rejoined(store: FactStore, owner: Scope, messages: Sequence[BaseMessage]) -> list[Fact]:
    """Make current again the facts ``owner`` read from the user messages among ``messages`` that
    :func:`left_behind` marked (they are in the conversation again), each of a key replacing
    again what is current of it from before it, and return them."""
    refs = [ref for m in messages if isinstance(m, HumanMessage) and (ref := _provenance(m)) is not None]
    finder = getattr(store, "from_messages", None)
    if not refs or not callable(finder):
        return []
    return _rejoin(store, owner, finder(owner, refs))


def _rejoin(store: FactStore, owner: Scope, stated: Sequence[Fact]) -> list[Fact]:
    """Make current again what of ``stated`` (read from user messages in the conversation again)
    :func:`left_behind` marked, as :func:`rejoined` does, and return it."""
    owner_key = owner.key()
    back = [
        f.model_copy(update={"is_valid": True, "note": None})
        for f in stated
        if f.owner.key() == owner_key and not f.is_valid and f.note == LEFT_BEHIND
    ]
    newest: dict[str, Fact] = {}
    for fact in back:
        if fact.key is not None and (fact.key not in newest or fact.created_at > newest[fact.key].created_at):
            newest[fact.key] = fact
    ids = {f.id for f in back}
    again = [
        old.model_copy(update={"is_valid": False, "superseded_by": fact.id})
        for key, fact in newest.items()
        for old in store.find(FactQuery(reader=owner, key=key, valid=True))
        if old.id not in ids and old.owner.key() == owner_key and old.created_at < fact.created_at
    ]
    if back:
        store.update([*back, *again])
    return back


def reinstated(store: FactStore, owner: Scope, withdrawn: Sequence[Fact]) -> list[Fact]:
    """Make current again what the facts ``withdrawn`` (read from tool outputs of an abandoned
    branch, removed from the store) replaced by key, unless it was withdrawn too or left behind,
    and return it: the value the last output still in the conversation stated stands again.
    What a withdrawn fact was itself replaced by, and that stays (a value the application
    wrote since), replaces the older value instead."""
    owner_key = owner.key()
    replaced_by = {f.id: f.superseded_by for f in withdrawn if f.owner.key() == owner_key}

    def successor(fact_id: str | None) -> str | None:  # past the withdrawn ones: what stays, or none
        seen: set[str] = set()
        while fact_id in replaced_by and fact_id not in seen:
            seen.add(fact_id)
            fact_id = replaced_by[fact_id]
        return None if fact_id in replaced_by else fact_id

    olds = [
        old
        for key in dict.fromkeys(f.key for f in withdrawn if f.key is not None and f.id in replaced_by)
        for old in store.find(FactQuery(reader=owner, key=key))
        if old.id not in replaced_by and old.superseded_by in replaced_by and old.owner.key() == owner_key
        and not old.refused and old.note != LEFT_BEHIND
    ]
    back = [old.model_copy(update={"is_valid": True, "superseded_by": None, "note": None}) for old in olds if successor(old.superseded_by) is None]
    moved = [old.model_copy(update={"superseded_by": after}) for old in olds if (after := successor(old.superseded_by)) is not None]
    if back or moved:
        store.update([*back, *moved])
    return back


def resumed(store: FactStore, owner: Scope, conversation: Sequence[BaseMessage]) -> list[Fact]:
    """What :func:`left_behind` does, for a process that did not read the conversation before
    (a restart, another worker): the user messages it read are told by the facts stored, each
    with the id of the message said just before it (:attr:`~ctxplugin.facts.model.Source.after`).

    A user message the conversation no longer holds, said right after one it still holds, is of
    a branch the host went back from when no user message after that one states anything stored
    (the new branch is unread) and that one is no system message (a host that trims the front of
    its history keeps that). Its facts, and those read after them from user messages the
    conversation does not hold, are marked not current, and what they replaced by key is current
    again; what was so marked of the conversation's user messages is current again. Returns the
    facts marked. Needs the store's ``from_messages`` and ``said_after``: without them, or for
    messages without an id, the old branch's facts stay current."""
    finder, after = getattr(store, "from_messages", None), getattr(store, "said_after", None)
    said = [str(m.id) for m in conversation if isinstance(m, HumanMessage) and m.id]
    if not said or not callable(finder) or not callable(after):
        return []
    owner_key = owner.key()
    stated: list[Fact] = [f for f in finder(owner, said) if f.owner.key() == owner_key]
    read = {said_by(f) for f in stated}
    start = max((at for at, m in enumerate(conversation) if m.id in read), default=0)
    anchors = [str(m.id) for m in conversation[start:] if m.id and not isinstance(m, SystemMessage)]
    candidates: list[Fact] = after(owner, anchors) if anchors else []
    held = {str(m.id) for m in conversation if m.id} if candidates else set()
    digests = {output_digest(content_text(m.content)) for m in conversation if isinstance(m, HumanMessage)} if candidates else set()

    def gone(fact: Fact) -> bool:  # (a message cut to a ref is told by its text)
        ref = said_by(fact)
        return ref is not None and fact.owner.key() == owner_key and ref not in held and fact.source.digest not in digests

    first = [f for f in candidates if gone(f)]
    left: list[Fact] = []
    if first:
        since = min(f.created_at for f in first)
        later = [f for f in store.find(FactQuery(reader=owner, valid=True)) if f.created_at >= since and gone(f)]
        left = _left(store, owner, (), [ref for f in [*first, *later] if (ref := said_by(f)) is not None])
    _rejoin(store, owner, stated)
    return left


class _Planned:
    """``store`` read as it stands, the updates asked of it kept instead of made."""

    def __init__(self, store: FactStore) -> None:
        self.store = store
        self.updates: list[Fact] = []
        self.from_messages = getattr(store, "from_messages", None)
        self.said_after = getattr(store, "said_after", None)

    def add(self, facts: Sequence[Fact]) -> None:
        self.updates.extend(facts)

    def update(self, facts: Sequence[Fact]) -> None:
        self.updates.extend(facts)

    def get(self, ids: Sequence[str], *, reader: Scope) -> list[Fact]:
        return self.store.get(ids, reader=reader)

    def find(self, query: FactQuery, *, limit: int | None = None) -> list[Fact]:
        return self.store.find(query, limit=limit)

    def search(self, text: str, query: FactQuery, *, n: int) -> list[tuple[Fact, float]]:
        return self.store.search(text, query, n=n)


def standing(outputs: Mapping[str, Collection[str]]) -> dict[str, tuple[str, ...]]:
    """``outputs`` of a withdrawal as its store reads them: tool call id -> digests (one given alone too).

    Raises:
        InvalidInputError: ``outputs`` is no mapping of call ids to digests."""
    if not isinstance(outputs, Mapping) or not all(isinstance(k, str) and isinstance(v, (str, Collection)) for k, v in outputs.items()):
        raise InvalidInputError(
            f"withdraw() takes a mapping of tool call id -> output_digest(s) of what stands under it now, got {type(outputs).__name__}"
        )
    return {k: (v,) if isinstance(v, str) else tuple(v) for k, v in outputs.items()}


def to_change(
    store: FactStore, owner: Scope, messages: Sequence[BaseMessage], *, back: Sequence[BaseMessage] = (),
    unread: Sequence[BaseMessage] = (), outputs: Mapping[str, Collection[str]] | None = None,
) -> bool:
    """Whether the store's ``withdraw`` of ``outputs`` (told by its ``from_outputs``; without it,
    whether any are named), :func:`left_behind` (of ``messages`` and ``back``) or :func:`resumed`
    (of ``unread``) would change a fact of ``owner``: found by the same reads, changing nothing,
    so without the write locks a change holds. Exact when nothing is to change (no update read
    differs then); when something is, the change reads it again under the locks."""
    wanted, finder = standing(outputs or {}), getattr(store, "from_outputs", None)
    removes = bool(wanted) and callable(getattr(store, "withdraw", None))  # else the store's facts stay
    if removes and (not callable(finder) or any(withdrawn(f, owner, wanted) for f in finder(owner, list(wanted)))):
        return True
    planned = _Planned(store)
    left_behind(planned, owner, messages, back=back)
    if not planned.updates:
        resumed(planned, owner, unread)
    return bool(planned.updates)


__all__ = ["LEFT_BEHIND", "left_behind", "reinstated", "rejoined", "resumed", "standing", "to_change"]
