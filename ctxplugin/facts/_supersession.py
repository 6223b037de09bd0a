"""Supersession: what a new fact replaces when the ledger writes it.

The rules, applied on every write:

1. explicit: ``supersedes=<id>`` replaces that fact (or the current head of its chain), and
   ``supersedes=<key>`` the key's current fact; a replacement without a key of its own takes
   over the key of the fact it replaces; one that fewer may read than the fact it names (a
   session fact for a user-wide one) is refused, as the key's other readers would lose it;
2. by key: a new fact replaces the valid fact with the same key, owner and fact scope;
3. by correction: a draft that names an old value ("X instead of Y", "X, not Y") replaces the
   current fact someone stated saying Y when it has no key of its own, and takes over its key
   (a tool's record of Y stays);
4. implicit: a statement with no key of its own that names a keyed fact's
   subject (every word of its key) and gives it a conflicting value of the same type — another
   day, time, date, amount of money, percentage or count of a unit — replaces it and takes over its key ("Let's
   do the meeting Thursday at 3pm" replaces "The meeting is Tuesday at 2pm", keyed
   ``meeting``). A statement keyed otherwise is about another subject ("The standup meeting is
   Thursday" keeps ``meeting``), but for the user's own thing and the thing (``my_budget`` and
   ``budget``: one subject). Tool outputs never supersede implicitly, and
   ``FactsConfig.implicit_supersession=False`` turns the rule off. A draft that refers back
   (``revises``: "make that the 24th", "never mind, keep the original") is first given the key
   of what it revises (:mod:`ctxplugin.facts._revisions`);
5. authority: a constraint can only be replaced by an equal or higher authority; a lower one's
   fact is kept, but invalid and pointing at the constraint that refused it;
   a bound ("a flight after 8 am", "up to $600") is replaced by a fact under its key only when
   that states another bound or a value that breaks it; one that meets it is kept beside it;
6. provenance: a fact read from a tool output (source ``tool``, authority ``tool``, the lowest)
   never replaces a fact anyone stated — a user, the system prompt, a policy, an API write. It
   is kept, refused, pointing at the fact it would have replaced. Text a tool returned is data:
   a fetched page saying "Max discount is 90%" does not override the user's "Max discount is 15%",
   nor "the budget is $900" the user's "my budget is $500" (one subject, as in rule 4);
7. fact scope: task, draft and hypothetical facts never replace global or session ones.

A replaced fact stays stored (``is_valid=False``, ``superseded_by``) and is never retrieved;
facts that depend on it, directly or through others, are marked ``needs_review``.
"""

from __future__ import annotations

from dataclasses import replace

from ctxplugin._untrusted import valid_unicode
from ctxplugin.errors import InvalidInputError
from ctxplugin.facts._audience import audible, narrower_audience, reaches, unfiltered
from ctxplugin.facts._batch import WriteBatch
from ctxplugin.facts._chains import chain_head, changed_basis, superseded_pairs
from ctxplugin.facts._discourse import CONDITION, RETRACTED
from ctxplugin.facts._drafts import _candidate_ids, _stored_forms
from ctxplugin.facts._people import another_person, someone_else
from ctxplugin.facts._revisions import chosen_instead, forgotten, named_in_full, revised, taken_back
from ctxplugin.facts._subjects import owned_key
from ctxplugin.facts._text import content_words, denied, stem
from ctxplugin.facts._values import EVENTS, conflicting, keeps_bound, typed_values
from ctxplugin.facts.extract import FactDraft
from ctxplugin.facts.model import (
    AUTHORITY_RANK,
    PROTECTED_SCOPES,
    REFUSED,
    Fact,
    FactQuery,
    normalize_key,
    visibility_key,
)
from ctxplugin.facts.store import FactStore
from ctxplugin.scope import VISIBILITIES, Scope

_WITHDRAWAL = "withdraws what the user said about a subject"
_WITHDRAWN = "withdrawn: the user took back what they said about it"
_IMPLICIT_CANDIDATES = 8
_EVENT_NOUNS = frozenset(EVENTS.values())
_KEY_PREFIXES = frozenset({"pref", "decision"})
"""Words the extraction rules put before a key's subject (``pref_aisle``, ``decision_vendor``)."""


def _supersede(
    writes: FactStore | WriteBatch,
    fact: Fact,
    draft: FactDraft,
    *,
    scope: Scope,
    supersedes: str | None,
    fact_id: str | None,
    implicit: bool,
    after: str | None = None,
) -> tuple[Fact, bool]:
    """Store ``fact`` (built from ``draft``) in ``writes``, applying the rules; returns the fact
    and whether it was newly stored (``after``: the ref of the user message said before the one
    ``fact`` is read from, when known). The ledger holds its locks around the call."""
    if not fact.from_tool:  # what its writer may not read, it may not replace (and a tool's
        writes = audible(writes, scope)  # text is refused by any statement, one kept from the writer too)
    if fact_id is not None:  # (an id held by a fact outside the writer's audience is taken too)
        taken = unfiltered(writes).get(_stored_forms(fact, fact_id), reader=fact.owner)
        if taken:
            if taken[0].text_hash == fact.text_hash and taken[0].key == fact.key:
                return taken[0], False
            raise InvalidInputError(
                f"fact id {fact_id!r} is already used for another statement; give the new "
                f"statement its own id and supersedes={fact_id!r}"
            )
    adopted: Fact | None = None
    if draft.revises == "withdrawn" and supersedes is None:
        # "forget what I said about the budget": what it names is no longer current, and no
        # statement replaces it; the withdrawal is kept (not current) so the message is read once
        withdrawal = fact.model_copy(update={"key": None, "is_valid": False, "note": _WITHDRAWAL})
        gone = forgotten(writes, fact)
        writes.add([withdrawal])
        if gone:
            writes.update([g.model_copy(update={"is_valid": False, "superseded_by": withdrawal.id, "note": _WITHDRAWN}) for g in gone])
            _flag_dependents(unfiltered(writes), [g.id for g in gone], scope)
        return withdrawal, True
    if draft.revises == "earlier" and supersedes is None and RETRACTED.match(fact.text):
        # "never mind" alone: every change the message before made, each written as any statement
        written = [
            _supersede(writes, back, replace(draft, revises=None), scope=scope, supersedes=None, fact_id=None, implicit=implicit)
            for back in taken_back(writes, fact, after)
        ]
        return written[0] if written else (fact, False)
    if draft.revises is not None and supersedes is None:
        # "make that the 24th", "never mind, keep the original": what it refers back to
        fact, done, adopted = revised(writes, fact, draft, after=after)
        if done:
            return fact, False
    if fact.depends_on:
        fact = fact.model_copy(update={"depends_on": tuple(_resolve(writes, d, fact.owner) for d in fact.depends_on)})
    if draft.revises is None and supersedes is None:
        fact = chosen_instead(writes, fact)  # "can we do business instead?": the class chosen
        fact = another_person(writes, fact, draft)  # "Noah Kim, born ..." after "Mia Li, born ..."
    if (fact.scope in ("hypothetical", "draft") or (fact.key or "").endswith("_count")) and supersedes is None:
        fact = named_in_full(writes, fact)  # "what if the offsite ...": the team offsite; "7 people will come": at it
    existing = _duplicate(writes, fact)
    if existing is not None:
        return existing, False
    targets = _targets(writes, fact, draft, supersedes)
    denial = (
        denied(fact.text) if supersedes is None and fact.source.type == "conversation" else None
    )
    if denial is not None and fact.key is not None and targets:
        # "the meeting is not on Friday" replaces what says Friday, not "the meeting is on
        # Tuesday": kept beside it, without the key
        targets = [t for t in targets if denial & set(content_words(t.text))]
        if not targets:
            fact = fact.model_copy(update={"key": None})
    if supersedes is None and fact.key is not None and targets:
        # "the 9:15 flight works" meets "a flight after 8 am": the bound still holds; kept
        # beside it, without the key
        targets = [t for t in targets if not keeps_bound(t.text, fact.text)]
        if not targets:
            fact = fact.model_copy(update={"key": None})
    if supersedes is None and fact.key is None and draft.replaces and targets and targets[0].visibility != fact.visibility:
        # "not economy, business" corrects the user's preference: it holds where that held
        fact = fact.model_copy(update={"visibility": targets[0].visibility})
    # a correction ("not Austin", "don't use my Visa card, use ...") answers for the key of what
    # it corrects, so the next statement under that key replaces it in turn
    takes_key = supersedes is not None or (fact.key is None and draft.replaces is not None and bool(targets))
    if not targets and supersedes is None:
        implicit_targets = _implicit(writes, fact, enabled=implicit)
        targets = [t for t in implicit_targets if not someone_else(fact, draft, t)]  # another person
        if targets and fact.key is not None:  # "the meeting starts at 3pm": a new time of the meeting
            fact = fact.model_copy(update={"key": None})
        takes_key = True
    if takes_key and targets and fact.key is None and targets[0].key is not None:
        # a replacement named by the caller (or rule 4's) answers for the key it replaces:
        # current(key) finds it, and the next write under that key replaces it
        fact = fact.model_copy(update={"key": targets[0].key})
        existing = _duplicate(writes, fact)
        if existing is not None:
            return existing, False
    protected = [
        t for t in targets
        if t.is_constraint and AUTHORITY_RANK[t.authority] > AUTHORITY_RANK[fact.authority]
    ]
    stated = [t for t in targets if not t.from_tool] if fact.from_tool else []
    if fact.from_tool and not stated and supersedes is None:
        # the page's "the budget is $900" beside the user's "my budget is $500": one subject
        stated = _owned(writes, fact)
    if stated:
        blocker = stated[0]
        why = f"a tool output cannot replace the {blocker.authority} statement {blocker.id}"
        return _refused(writes, fact, blocker, why), True
    if protected:
        blocker = protected[0]
        why = f"a {fact.authority} statement cannot replace the {blocker.authority} constraint {blocker.id}"
        return _refused(writes, fact, blocker, why), True
    if fact.scope not in PROTECTED_SCOPES and any(t.scope in PROTECTED_SCOPES for t in targets):
        kept = [t.id for t in targets if t.scope in PROTECTED_SCOPES]
        targets = [t for t in targets if t.scope not in PROTECTED_SCOPES]
        note = f"kept beside {', '.join(kept)}: a {fact.scope} fact does not replace a global or session one"
        fact = fact.model_copy(update={"note": note})
    if targets:
        fact = fact.model_copy(update={"supersedes": targets[0].id})
    # the new fact is stored before the old one is invalidated: a failure in between
    # leaves both visible rather than neither
    writes.add([fact])
    # the hypothetical taken up is one no more: the fact written replaces it with the targets, in one write
    replaced = {t.id: t for t in ([adopted] if adopted is not None else []) + targets}
    if replaced:
        writes.update([t.model_copy(update={"is_valid": False, "superseded_by": fact.id}) for t in replaced.values()])
    if targets:
        # a restatement (a user confirming what a tool read) changes no value: what was worked
        # out from the replaced fact holds, and depends on the new one too, so a later change of
        # it is still flagged
        _restated(unfiltered(writes), [t.id for t in targets if t.text_hash == fact.text_hash], fact.id, scope)
        _flag_dependents(unfiltered(writes), [t.id for t in targets if t.text_hash != fact.text_hash], scope)
    return fact, True


def _refused(writes: FactStore | WriteBatch, fact: Fact, blocker: Fact, why: str) -> Fact:
    """Store ``fact`` as refused in favour of ``blocker`` (kept for its history, never current)."""
    refused = fact.model_copy(update={"is_valid": False, "superseded_by": blocker.id, "note": f"{REFUSED}: {why}"})
    writes.add([refused])
    return refused


def _duplicate(writes: FactStore | WriteBatch, fact: Fact) -> Fact | None:
    query = FactQuery(reader=fact.owner, key=fact.key, valid=True, scopes=(fact.scope,), text_hash=fact.text_hash)
    for found in writes.find(query, limit=5):
        if found.from_tool and not fact.from_tool:
            # someone states what a tool returned: their statement, with their authority, is
            # stored (and replaces the tool's by key), or a later tool output could replace it
            continue
        if found.key == fact.key and found.scope_id == fact.scope_id and _same_slot(found, fact):
            return found
    return None


def _targets(writes: FactStore | WriteBatch, fact: Fact, draft: FactDraft, supersedes: str | None) -> list[Fact]:
    reader = fact.owner
    if supersedes is not None:
        found = writes.get(_candidate_ids(supersedes, reader), reader=reader)
        if not found:
            by_key = normalize_key(supersedes)
            current = writes.find(FactQuery(reader=reader, key=by_key, valid=True)) if by_key else []
            same = [f for f in current if f.scope == fact.scope and f.scope_id == fact.scope_id and _same_slot(f, fact, reach=False)]
            if not all(reaches(f, fact) for f in same):
                raise InvalidInputError(narrower_audience(supersedes))
            if not same:
                raise InvalidInputError(_no_target(supersedes, current, fact))
            return same
        head = chain_head(writes, found[0], reader)
        if head is not None and head.is_valid and VISIBILITIES.index(head.visibility) > VISIBILITIES.index(fact.visibility):
            raise InvalidInputError(_narrower(supersedes, head, fact))
        if head is not None and head.is_valid and not reaches(head, fact):
            raise InvalidInputError(narrower_audience(supersedes))
        return [head] if head is not None and head.is_valid else []
    if fact.key is not None:
        same = writes.find(FactQuery(reader=reader, key=fact.key, valid=True, scopes=(fact.scope,)))
        return [f for f in same if f.scope_id == fact.scope_id and _same_slot(f, fact)]
    if draft.replaces:
        return _stating(writes, draft.replaces, fact)
    return []


def _narrower(supersedes: str, head: Fact, fact: Fact) -> str:
    """Why a replacement ``fact`` fewer may read than ``head`` (a session fact for a user-wide
    one) is refused: everyone else who read ``head`` would be left with no value at all."""
    return (
        f"supersedes={supersedes!r} names a fact kept with visibility={head.visibility!r}, read beyond "
        f"this write's visibility={fact.visibility!r}: its other readers would lose it; write the "
        f"replacement with visibility={head.visibility!r}"
    )


def _no_target(supersedes: str, current: list[Fact], fact: Fact) -> str:
    """Why ``supersedes`` names nothing this write can replace, and what to pass instead when
    the key's current fact is readable but kept apart (another visibility or fact scope)."""
    head = f"supersedes={supersedes!r}: "
    missing = head + "no fact with that id, nor a current fact with that key, readable from this scope"
    if not current:
        return missing
    found = current[0]
    if fact.scope not in PROTECTED_SCOPES and found.scope in PROTECTED_SCOPES:
        return head + (
            f"the current fact with that key is a {found.scope} fact, which a {fact.scope} fact never "
            "replaces; write it without supersedes= to keep it beside"
        )
    wanted = {"visibility": found.visibility, "fact_scope": found.scope, "scope_id": found.scope_id}
    given = {"visibility": fact.visibility, "fact_scope": fact.scope, "scope_id": fact.scope_id}
    differ = ", ".join(f"{name}={value!r}" for name, value in wanted.items() if value != given[name])
    if not differ:  # the same settings, but another owner's slot (another session or user)
        return missing
    return head + (
        "the current fact with that key is kept apart from this write's (a key is replaced within "
        f"its visibility and fact scope): write the replacement with {differ}"
    )


def _resolve(writes: FactStore | WriteBatch, fact_id: str, reader: Scope) -> str:
    """The stored id of ``fact_id`` (a caller's own id qualified by its slot), or itself (lone
    surrogates replaced, as in a fact's text: no store keeps them)."""
    found = writes.get(_candidate_ids(fact_id, reader), reader=reader)
    return found[0].id if found else valid_unicode(fact_id)


def _implicit(writes: FactStore | WriteBatch, fact: Fact, *, enabled: bool) -> list[Fact]:
    """Rule 4: current keyed facts, in ``fact``'s owner slot and fact scope, whose subject
    (the words of their key) ``fact`` names and whose typed values it contradicts; only for
    a ``fact`` without a key (a keyed one is about its own subject), or keyed by when its
    subject happens (``meeting_start`` may replace ``meeting``'s "Tuesday at 2pm")."""
    event_of = _event_subject(fact.key)
    if (
        not enabled
        or fact.source.type == "tool"
        or denied(fact.text) is not None
        or CONDITION.search(fact.text) is not None  # "if I get the bonus, my budget is $700"
        or not typed_values(fact.text)
    ):
        return []
    if fact.key is not None and event_of is None:
        return _owned(writes, fact)
    said = {stem(w) for w in content_words(fact.text)}
    query = FactQuery(reader=fact.owner, valid=True, scopes=(fact.scope,))
    found: list[Fact] = []
    for candidate, _ in writes.search(fact.text, query, n=_IMPLICIT_CANDIDATES):
        if candidate.key is None or candidate.scope_id != fact.scope_id or (event_of is not None and candidate.key != event_of):
            continue
        subject = {stem(w) for w in content_words(candidate.key.replace("_", " "))} - _KEY_PREFIXES
        if (
            subject
            and subject <= said
            and _same_slot(candidate, fact)
            and conflicting(candidate.text, fact.text)
        ):
            found.append(candidate)
    return found


def _owned(writes: FactStore | WriteBatch, fact: Fact) -> list[Fact]:
    """Rule 4 for a keyed ``fact`` of the user's own thing or of the thing: "the budget is $700" (``budget``) gives
    "my budget is $500" (``my_budget``) a new value, and "my budget is now $700" gives "the budget is $500" one: in
    one conversation both are one thing. Only a conflicting value of the same type replaces (not "the budget is flexible")."""
    if fact.key is None:
        return []
    found = writes.find(FactQuery(reader=fact.owner, key=owned_key(fact.key), valid=True, scopes=(fact.scope,)))
    return [f for f in found if f.scope_id == fact.scope_id and not f.from_tool and _same_slot(f, fact) and conflicting(f.text, fact.text)]


def _event_subject(key: str | None) -> str | None:
    """The subject of a key the rules gave a statement of when something happens
    (``meeting_start``: ``meeting``), or None: such a statement gives its subject a new value."""
    subject, _, event = (key or "").rpartition("_")
    return subject if subject and event in _EVENT_NOUNS else None


def _stating(writes: FactStore | WriteBatch, old_value: str, fact: Fact) -> list[Fact]:
    """The current fact, in ``fact``'s owner and fact scope, that states ``old_value``."""
    words = set(content_words(old_value))
    if not words:
        return []
    query = FactQuery(reader=fact.owner, valid=True, scopes=(fact.scope,))
    for candidate, _ in writes.search(old_value, query, n=5):
        if candidate.from_tool and not fact.from_tool:
            continue  # what a tool read stays what it read: a user's "not LAX" corrects what was said
        if (_same_slot(candidate, fact) or _users_own(candidate, fact)) and words <= set(content_words(candidate.text)):
            return [candidate]
    return []


def _restated(writes: FactStore | WriteBatch, replaced: list[str], fact_id: str, reader: Scope) -> None:
    for source_id in replaced:
        dependents = writes.find(FactQuery(reader=reader, valid=True, depends_on=source_id))
        moved = [d.model_copy(update={"depends_on": (*d.depends_on, fact_id)}) for d in dependents if fact_id not in d.depends_on]
        if moved:
            writes.update(moved)


def _flag_dependents(writes: FactStore | WriteBatch, changed: list[str], reader: Scope) -> None:
    seen = set(changed)
    frontier = list(changed)
    while frontier:
        source_id = frontier.pop()
        dependents = writes.find(FactQuery(reader=reader, valid=True, depends_on=source_id))
        flagged = [
            d.model_copy(update={"needs_review": True, "note": f"depends on {source_id}, which was superseded"})
            for d in dependents if d.id not in seen
        ]
        if flagged:
            writes.update(flagged)
        for d in flagged:
            seen.add(d.id)
            frontier.append(d.id)


def _users_own(old: Fact, new: Fact) -> bool:
    """Whether ``old`` is kept for the user who states ``new`` in one of their sessions (a
    preference the user corrects)."""
    return (
        old.visibility == "user" and new.visibility == "session" and new.owner.user_id is not None
        and visibility_key(old.owner, "user") == visibility_key(new.owner, "user")
    )


def _same_slot(a: Fact, b: Fact, *, reach: bool = True) -> bool:
    """Whether ``b`` may supersede ``a`` in their owner slot: the same session for session facts,
    the same user for user facts, and so on (the unit within which a key supersedes), ``b``
    shown to everyone ``a`` is (``reach``, see :func:`reaches`)."""
    slot = a.visibility == b.visibility and visibility_key(a.owner, a.visibility) == visibility_key(b.owner, b.visibility)
    return slot and (not reach or reaches(a, b))


__all__ = ["_supersede", "changed_basis", "superseded_pairs"]  # the chains read back live in _chains
