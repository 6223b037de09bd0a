"""What one message states under the facts in force, read once per message and set of facts.

Marking (:mod:`ctxplugin.facts.outdated`) asks of every message which superseded facts it
states and whether it states a provisional one. The answer depends only on the message and on
the facts in force; when those change (a new supersession), a message's answer is brought up to
date from the one before by testing it against the changes added, not against all of them.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

from langchain_core.messages import BaseMessage, ToolMessage

from ctxplugin._lru import LRU, RECENT_MESSAGES, PerMessage
from ctxplugin._messages import annotation, source_refs
from ctxplugin.facts._changes import Change
from ctxplugin.facts._text import word_set
from ctxplugin.facts.model import AUTHORITY_RANK, Fact
from ctxplugin.tokens import content_text

Ident = tuple[object, ...]
"""What marking reads of one change: the same ident, the same notes for the same messages (and
the same facts found restating it, :func:`replaced_by`, which also reads the new fact's
authority)."""


def _ident(change: Change) -> Ident:
    return change.ident


@dataclass(frozen=True)
class InForce:
    """What marking reads from the ledger: the changes and provisional facts in force, and a
    number standing for them (the same number for the same changes). Made by :func:`in_force_of`."""

    candidates: _Candidates
    provisional: list[_Provisional]
    version: int
    changes: tuple[Change, ...] = ()
    idents: tuple[Ident, ...] = ()


_VERSIONS: LRU[tuple[object, ...], int] = LRU(1024)
_BY_VERSION: LRU[int, InForce] = LRU(64)
_LOCK = threading.Lock()
_NUMBERS = itertools.count(1)


def in_force_of(changes: Sequence[Change], provisional: list[_Provisional]) -> InForce:
    """The :class:`InForce` of ``changes`` and ``provisional``, numbered: the same number for
    the same changes."""
    idents = tuple(_ident(c) for c in changes)
    key = (idents, tuple(provisional))
    with _LOCK:
        number = _VERSIONS.hit(key)
        if number is None:
            number = next(_NUMBERS)
            _VERSIONS.put(key, number)
        made = _BY_VERSION.hit(number)
        if made is None:
            made = InForce(_Candidates(list(changes)), provisional, number, tuple(changes), idents)
            _BY_VERSION.put(number, made)
    return made


Read = tuple[bool, tuple[Change, ...], str | None]
"""Whether a message has no text, the changes it states, and the provisional fact it states
(``hypothetical``/``draft``), if any."""

_READ: PerMessage[tuple[int, bool, tuple[Change, ...], str | None]] = PerMessage(RECENT_MESSAGES)


def read(message: BaseMessage, rules: InForce) -> Read:
    """What ``message`` states under ``rules``: read once per message and version, and brought
    up to date from a read under earlier rules by the changes added since."""
    hit = _READ.get(message)
    if hit is not None and hit[0] == rules.version:
        return hit[1:]
    step = _step(hit[0], rules) if hit is not None else None
    if hit is None or step is None:
        found = _read(message, rules.candidates, rules.provisional)
    else:
        found = _brought_up(message, hit[1:], step, rules)
    _READ.put(message, (rules.version, *found))
    return found


@dataclass(frozen=True)
class _Step:
    """From one set of changes in force to another: the positions in the newer of those in
    both, the changes added, and whether the provisional facts are the same."""

    kept: dict[Ident, int]
    added: tuple[tuple[int, Change], ...]
    same_provisional: bool
    # the changes added, to find those a message may state without testing each
    candidates: _Candidates = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "candidates", _Candidates([change for _, change in self.added]))


_STEPS: LRU[tuple[int, int], _Step] = LRU(64)


def _step(version: int, rules: InForce) -> _Step | None:
    key = (version, rules.version)
    with _LOCK:
        step = _STEPS.hit(key)
        if step is not None:
            return step
        before = _BY_VERSION.get(version)
    if before is None:
        return None
    older = set(before.idents)
    kept = {ident: position for position, ident in enumerate(rules.idents) if ident in older}
    added = tuple((position, rules.changes[position]) for position, ident in enumerate(rules.idents) if ident not in kept)
    step = _Step(kept, added, before.provisional == rules.provisional)
    with _LOCK:
        _STEPS.put(key, step)
    return step


def may_restate(version: int, rules: InForce) -> Restating | None:
    """A test of whether a message may read differently under ``rules`` than it did under the
    rules numbered ``version``, told without reading it: ``test(message, made)`` is False when
    its read under ``rules`` surely gives it the same notes as ``made`` (its read under
    ``version``, or an earlier one that gave the same notes). None when that cannot be told
    that way: the rules of ``version`` are no longer known, the provisional facts changed, or
    the changes both hold are in another order.

    A read changes only by the changes it stated that are no longer in force and the changes
    added that it states; those a message may state are found as :class:`_Candidates` finds
    them (a superset), from its words and refs."""
    step = _step(version, rules)
    with _LOCK:
        before = _BY_VERSION.get(version)
    if step is None or before is None or not step.same_provisional:
        return None
    was = {ident: position for position, ident in enumerate(before.idents)}
    if len(was) < len(before.idents) or len(set(rules.idents)) < len(rules.idents):
        return None  # a change listed twice: positions do not tell its order
    order = [was[ident] for ident, _ in sorted(step.kept.items(), key=lambda item: item[1])]
    if any(a > b for a, b in itertools.pairwise(order)):
        return None
    gone = frozenset(before.idents).difference(step.kept)
    return Restating(gone, step, rules, [c for c in before.changes if _ident(c) in gone])


PRINT_BITS = 4096
"""Bits of a :func:`fingerprint` (512 bytes each): a message of a few hundred words sets about one in twenty
of them, so a change's one or two bits pass over most messages that do not hold its words."""


def _bit(item: str) -> int:
    return 1 << (hash(item) % PRINT_BITS)


_PRINTS: PerMessage[int] = PerMessage(RECENT_MESSAGES)


def fingerprint(message: BaseMessage) -> int:
    """A bit for each of ``message``'s words and refs (by hash, so several share one): a
    message without the bit of a change's key word or ref cannot state it (see
    :class:`_Candidates`), and :class:`Restating` passes over it without reading it. Made once
    per message (marks made again from an earlier message find it)."""
    bits = _PRINTS.get(message)
    if bits is None:
        bits = 0
        words, refs = _terms(message)
        for item in (*words, *refs):
            bits |= _bit(item)
        _PRINTS.put(message, bits)
    return bits


def _mask(changes: Iterable[Change]) -> int:
    """The bits of the refs and first distinctive words by which a message may state ``changes``."""
    mask = 0
    for change in changes:
        if change.old.source.ref is not None:
            mask |= _bit(change.old.source.ref)
        if change.distinctive:
            mask |= _bit(min(change.distinctive))
    return mask


class Restating:
    """The test :func:`may_restate` gives, with what it is made of: the idents of the changes no
    longer in force (``gone``), and ``mask``, the bits of the key words and refs by which a
    message may state a change added (see :func:`fingerprint`): a message whose fingerprint has
    none of them, and that states none of the changes gone, reads as before."""

    __slots__ = ("_added", "_either", "_rules", "_step", "gone", "mask")

    def __init__(self, gone: frozenset[Ident], step: _Step, rules: InForce, gone_changes: Sequence[Change] = ()) -> None:
        self.gone = gone
        self._step = step
        self._rules = rules
        self._added = step.candidates if step.added else None
        self.mask = _mask(change for _, change in step.added)
        # a message states a change only by its ref or its first distinctive word (see
        # _Candidates): one stating a change gone has its bit too
        self._either = (self.mask if self._added is not None else 0) | _mask(gone_changes)

    def suspects(self, prints: Sequence[int], upto: int) -> list[int]:
        """The positions before ``upto`` of the messages the test may hold for, in order, told
        by their fingerprints ``prints`` (see :func:`fingerprint`; 0 for one not read or
        without text): those with a bit of a change added or gone. The others read as before,
        found in C without a call per message (a long chat holds thousands, a change concerns
        a few)."""
        return list(itertools.compress(range(upto), map(self._either.__and__, prints[:upto])))

    def __call__(self, message: BaseMessage, made: Read, printed: int | None = None) -> bool:
        """Whether ``message`` (read as ``made``; with the :func:`fingerprint` ``printed``, when
        known) may read differently now."""
        empty, stating, _ = made
        if empty:
            return False
        if self.gone and stating and any(_ident(change) in self.gone for change in stating):
            return True
        if self._added is None or (printed is not None and not printed & self.mask):
            return False
        return self._added.any_of(*_terms(message))

    def read(self, message: BaseMessage, made: Read) -> Read:
        """:func:`read` of ``message`` under the newer rules, brought up from ``made`` (as the
        test takes it) by this test's step, not by one from the version the message was last
        read at: on a long chat those are many, and each such step was made anew."""
        rules = self._rules
        hit = _READ.get(message)
        if hit is not None and hit[0] == rules.version:
            return hit[1:]
        found = _brought_up(message, made, self._step, rules)
        _READ.put(message, (rules.version, *found))
        return found


def _brought_up(message: BaseMessage, before: Read, step: _Step, rules: InForce) -> Read:
    """``before`` (a read of ``message`` under earlier rules) under ``rules``: the changes it
    stated that are still in force, those added that it states, in the order of ``rules``."""
    empty, stating, kind = before
    if empty:
        return before
    text = content_text(message.content)
    words, refs = _terms(message)
    positions = [p for p in (step.kept.get(_ident(c)) for c in stating) if p is not None]
    added = step.added
    positions.extend(
        p
        for p, c in (added[i] for i in step.candidates.positions(words, refs))
        if _states(c, words, refs) and c.note not in text and c.short not in text
    )
    now = tuple(rules.changes[p] for p in sorted(positions))
    if not step.same_provisional:
        kind = _provisional_kind(message, refs, words, rules.provisional)
    return False, now, kind


def _read(message: BaseMessage, candidates: _Candidates, provisional: list[_Provisional]) -> Read:
    """What ``message`` states, read against every change in force (found through ``candidates``)."""
    text = content_text(message.content)
    if not text:
        return True, (), None
    words, refs = _terms(message)
    stating = tuple(
        c for c in candidates.of(words, refs) if _states(c, words, refs) and c.note not in text and c.short not in text
    )
    return False, stating, _provisional_kind(message, refs, words, provisional)


_PROVISIONAL = {
    "hypothetical": "[hypothetical: not a current fact]",
    "draft": "[draft: not decided]",
    "closing": "[the hypothetical ends here; what it said is not current]",
    "aside": "[aside: an interruption, not the current task]",
}
@dataclass(frozen=True)
class _Provisional:
    ref: str | None
    words: frozenset[str]
    scope: str



def _provisional_kind(
    message: BaseMessage, refs: Collection[str], words: frozenset[str], provisional: list[_Provisional]
) -> str | None:
    """``hypothetical`` or ``draft`` when ``message`` is marked so, is the source of such a
    fact, or (without ids to go by) states every content word of one; else None."""
    said = annotation(message).get("fact_scope")
    if isinstance(said, str) and said in _PROVISIONAL:
        return str(said)
    if isinstance(message, ToolMessage):
        return None
    for fact in provisional:
        if (fact.ref is not None and fact.ref in refs) or (fact.ref is None and fact.words and fact.words <= words):
            return fact.scope
    return None


class _Candidates:
    """The changes a message may state, found without testing each: one that states its old
    value by ref is found by the ref, one that states it in words by one of its distinctive
    words (a message must hold them all). A long conversation and many superseded facts cost
    the changes each message could state, not every pair."""

    def __init__(self, changes: list[Change]) -> None:
        self._changes = changes
        self._by_ref: dict[str, list[int]] = {}
        self._by_word: dict[str, list[int]] = {}
        for position, change in enumerate(changes):
            if change.old.source.ref is not None:
                self._by_ref.setdefault(change.old.source.ref, []).append(position)
            if change.distinctive:
                self._by_word.setdefault(min(change.distinctive), []).append(position)

    def of(self, words: frozenset[str], refs: Collection[str]) -> list[Change]:
        """A superset of the changes :func:`_states` holds for, in their order."""
        return [self._changes[position] for position in self.positions(words, refs)]

    def any_of(self, words: frozenset[str], refs: Collection[str]) -> bool:
        """Whether :meth:`of` finds any change."""
        return not (self._by_ref.keys().isdisjoint(refs) and self._by_word.keys().isdisjoint(words))

    def positions(self, words: frozenset[str], refs: Collection[str]) -> list[int]:
        """The positions of the changes :meth:`of` gives, in order."""
        found: set[int] = set()
        for ref in refs:
            found.update(self._by_ref.get(ref, ()))
        if len(self._by_word) <= len(words):
            for word, positions in self._by_word.items():
                if word in words:
                    found.update(positions)
        else:
            for word in words:
                found.update(self._by_word.get(word, ()))
        return sorted(found)


def replaced_by(fact: Fact, rules: InForce) -> Change | None:
    """The change in force whose old value ``fact`` repeats, for a fact read from the
    conversation or a tool output and no stronger than what replaced it: a fact read from a
    message that restates a replaced value ("Just confirming: PO #4521 approved for $50,000"
    after the order was cancelled) is not current either, as the message is marked. Read in
    words only, as :func:`_states` reads a message: the message a fact came from may state other
    things that stand. A fact written through the API or by the system prompt or a policy is the
    caller's own state and is never second-guessed. None when it repeats no replaced value."""
    if fact.source.type not in ("conversation", "tool"):
        return None
    words = word_set(fact.text)
    if not words:
        return None
    rank = AUTHORITY_RANK[fact.authority]
    source = fact.source.ref
    for change in rules.candidates.of(words, set()):
        if change.new.id == fact.id or change.old.id == fact.id:
            continue
        if source is not None and change.new.source.ref == source:
            continue  # read from the message that made the change
        if rank > AUTHORITY_RANK[change.new.authority]:
            continue
        if _states(change, words, set()):
            return change
    return None


def _states(change: Change, words: frozenset[str], refs: Collection[str]) -> bool:
    if change.new.source.ref is not None and change.new.source.ref in refs:
        return False
    if change.old.source.ref is not None and change.old.source.ref in refs:
        return True
    if not change.distinctive or not change.distinctive <= words:
        return False
    if change.replacement and change.replacement <= words:
        return False
    return len(change.anchors & words) >= change.need


_TERMS: PerMessage[tuple[frozenset[str], tuple[str, ...]]] = PerMessage(RECENT_MESSAGES)


def _terms(message: BaseMessage) -> tuple[frozenset[str], tuple[str, ...]]:
    """``message``'s words and refs, found once per message: a change in force asks them of
    every message that may state it, again on each change (a long chat holds thousands). The
    refs (one to three) are a tuple: a tuple of strings is no object the garbage collector
    goes through, a set is, for as long as the message is memoised."""
    found = _TERMS.get(message)
    if found is None:
        found = word_set(content_text(message.content)), tuple(dict.fromkeys(source_refs(message)))
        _TERMS.put(message, found)
    return found

