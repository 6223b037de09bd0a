"""What a statement that refers back to the conversation revises, for the ledger's write path.

A user does not always restate a value whole. These forms refer back to what was said, so
neither the key nor the implicit rule finds what they change (see
:class:`~ctxplugin.facts.extract.FactDraft`'s ``revises``):

- a new value alone ("actually make that the 24th", "make it $700"): the new value of the latest
  statement in force, in the writer's slot and fact scope, that holds a value of the same type
  (a date, an amount...). The fact takes that statement's key, kind and visibility, so the key
  rule replaces it (and authority applies as for any write);
- an earlier value brought back ("never mind, keep the original", "go back to Tuesday for the
  meeting", "keep the original seat 12A"): the statement a keyed fact in force replaced is
  written again, from this message, under that key. Words the user names besides the asking
  ("Tuesday", "meeting", "12A") choose which earlier statement; without any, the one the latest
  change replaced, or for "the original", the first of its key. A retraction alone ("Never
  mind.", "Scratch that.") takes back every change of the user message said just before it
  (:func:`taken_back`): for each key it changed, the statement it replaced is written again;
  after a question, another retraction or an agent's question it takes back nothing;
- a subject withdrawn ("forget what I said about the budget", "never mind the hotel"): the
  statements the writer made about it in conversation (:func:`forgotten`) are marked not current,
  replaced by no statement; the withdrawal is kept, not current either, so that the message read
  again withdraws nothing said since;
- a choice asked for instead, named by one word ("can we do business instead?" after "I'd like
  economy class"): when nothing in force has its key (``pref_business``), it takes the key of
  the conversation's one choice in force of its kind (:func:`chosen_instead`: ``pref_class``), so
  it replaces it; a word of another kind than the choices in force ("business" after "I'd like
  seat 14C", "Delta" after "I'd like the Hilton") replaces none, and a class is a choice of its
  own (``pref_class``); a word of no known kind ("chicago") replaces only the one choice in
  force, itself of no known kind (see :mod:`ctxplugin.facts._choice_kinds`);
- what was just supposed or drafted, taken up ("what if the venue was Hall C?" then "OK, let's
  do that"): when the writer's latest statement is a keyed hypothetical or draft, it is written
  as current, from this message, under its key, without the words that supposed it ("The venue
  was Hall C."), and the hypothetical is replaced by it (no longer one: its message is not marked
  so); said after anything else — another statement, "no, let's not", a question: any user
  message between them (see :mod:`ctxplugin.facts._turns`) —, "let's do that" takes up nothing
  and is no fact of its own. A hypothetical naming a thing shorter than the statement in force
  does ("what if the offsite was in Austin" after "the team offsite is in Denver") is keyed as
  that statement is (:func:`named_in_full`), so taking it up replaces it.

Statements a tool read are never revised so, nor brought back. A message read again (a new
process) finds its own fact already in the key's history and writes nothing.
"""

from __future__ import annotations

import re

from ctxplugin.facts._batch import WriteBatch
from ctxplugin.facts._choice_kinds import kind_named, kind_of_choice, kind_of_name
from ctxplugin.facts._counts import counts_for_no_one
from ctxplugin.facts._discourse import FORGOTTEN
from ctxplugin.facts._text import content_words, identifiers, stem
from ctxplugin.facts._values import count_unit, typed_values
from ctxplugin.facts.extract import FactDraft
from ctxplugin.facts.model import Fact, FactQuery, new_fact_id, visibility_key
from ctxplugin.facts.store import FactStore

_RECENT = 50
"""Statements looked at, newest first: the ones a user refers back to were said recently."""
_KEY_PREFIXES = frozenset(stem(w) for w in ("pref", "decision"))
"""Words a key begins with that name no subject (``pref_seat``, ``decision_venue``)."""
_ORDINAL_DAY = re.compile(r"\b[0-3]?\d(?:st|nd|rd|th)\b", re.IGNORECASE)
_ASKING = frozenset(
    stem(w) for w in [
        "never", "mind", "keep", "original", "previous", "old", "first", "earlier", "go", "back", "switch", "change",
        "revert", "undo", "sorry", "actually", "please", "let", "use", "stick", "stay", "put", "set", "move", "instead",
        "one", "value", "way", "before", "it", "was", "had", "scratch", "forget", "ignore", "disregard",
    ]
)
"""Words of asking to go back rather than of what to go back to."""
_CHOOSING = frozenset(stem(w) for w in ["make", "do", "get", "have", "take", "try", "book", "pick", "choose", "go", "for", "with", "can", "could"])
"""Words of asking for a choice rather than of what is chosen ("can we do", "make it")."""
_FIRST = frozenset({"original", "first"})
_SUPPOSING = re.compile(r"^(?:(?:what if|suppose|supposing|hypothetically|imagine|in theory|draft|proposal)\b[\s,:;-]*)+", re.IGNORECASE)
"""The words that made a statement a hypothetical or a draft: not part of it once taken up."""
_INSTEAD = re.compile(r",?\s+instead(?=[?.!]*$)", re.IGNORECASE)


def revised(writes: FactStore | WriteBatch, fact: Fact, draft: FactDraft, *, after: str | None = None) -> tuple[Fact, bool, Fact | None]:
    """``fact`` (read from ``draft``) as it revises what it refers back to, whether it is
    done with: True when there is nothing to write (read before, an "earlier" that finds
    nothing and names nothing, or a "let's do that" that takes up nothing: agreement alone
    states nothing); else the fact to write (unchanged when nothing fits); and the hypothetical
    or draft it takes up, which is no longer one once the fact is written. ``after`` is the ref
    of the user message said before the one ``fact`` is read from, when known: "let's do that"
    takes up only what that message supposed (see :mod:`ctxplugin.facts._turns`)."""
    if draft.revises == "latest":
        target = _latest_of_type(writes, fact)
        if target is None:
            return fact, False, None
        return fact.model_copy(update={"key": target.key, "kind": target.kind, "visibility": target.visibility,
                                       "constraint_type": target.constraint_type}), False, None
    if draft.revises == "adopted":
        supposed = _latest_stated(writes, fact)
        if supposed is not None and fact.source.ref is not None and supposed.source.ref == fact.source.ref:
            return supposed, True, None  # read again: taken up already
        if supposed is None or supposed.scope not in ("hypothetical", "draft") or supposed.key is None or supposed.scope_id is not None:
            return fact, True, None
        if after is not None and supposed.source.ref != after:  # "no, let's not", a question...: said since
            return fact, True, None
        text = _INSTEAD.sub("", _SUPPOSING.sub("", supposed.text).strip())  # "... in Austin instead?": taken up, no longer instead
        text = text[:1].upper() + text[1:].rstrip("?.") + "." if text != supposed.text else supposed.text  # "The venue was Hall C."
        return fact.model_copy(update={
            "text": text, "key": supposed.key, "kind": supposed.kind, "visibility": supposed.visibility,
            "constraint_type": supposed.constraint_type, "tags": supposed.tags,
        }), False, supposed
    said = [w for w in content_words(fact.text) if stem(w) not in _ASKING]
    found = _earlier(writes, fact, {stem(w) for w in said}, first=bool(_FIRST & set(content_words(fact.text))))
    if found is None:
        return fact, not said, None
    earlier, head = found
    history = writes.find(FactQuery(reader=fact.owner, key=head.key))
    again = [f for f in history if fact.source.ref is not None and f.source.ref == fact.source.ref]
    if again:
        return again[0], True, None
    return fact.model_copy(update={
        "text": earlier.text, "key": head.key, "kind": earlier.kind, "visibility": head.visibility,
        "constraint_type": earlier.constraint_type, "tags": earlier.tags,
    }), False, None


def taken_back(writes: FactStore | WriteBatch, fact: Fact, after: str | None) -> list[Fact]:
    """What a bare retraction (``fact``, "never mind" alone) writes: for each key the user message
    said just before it (``after``) changed, the statement that message replaced, again, from
    this message, under that key; the message's every change is taken back ("Scratch that." after
    "my budget is $700. My seat is 14C."), nothing older. None when ``after`` is unknown or changed
    nothing (a question, another "never mind": see :mod:`ctxplugin.facts._turns`)."""
    if after is None:
        return []
    olds = writes.find(FactQuery(reader=fact.owner, valid=False, scopes=(fact.scope,)), limit=_RECENT)
    back: dict[str, Fact] = {}
    seen: set[str] = set()
    for old in olds:  # newest first: the statement each key held before ``after``'s
        if old.refused or old.key is None or old.key in seen or old.source.ref == after or not _stated_in_reach(old, fact):
            continue
        seen.add(old.key)
        current = writes.find(FactQuery(reader=fact.owner, key=old.key, valid=True, scopes=(fact.scope,)), limit=1)
        # the statement ``after``'s change replaced, not one gone before it (withdrawn: "forget
        # what I said about the budget", then "my budget is $900" replaced nothing)
        if not current or current[0].source.ref != after or not _stated_in_reach(current[0], fact) or old.superseded_by != current[0].id:
            continue
        back[old.key] = fact.model_copy(update={
            "id": fact.id if not back else new_fact_id(), "text": old.text, "key": old.key, "kind": old.kind,
            "visibility": current[0].visibility, "constraint_type": old.constraint_type, "tags": old.tags,
        })
    return list(back.values())


def forgotten(writes: FactStore | WriteBatch, fact: Fact) -> list[Fact]:
    """The statements in force that ``fact`` ("forget what I said about the budget") withdraws:
    those the writer said in conversation, kept where it keeps them, about the subject it names
    (``fact``'s key, or the words after "about"): keyed by it (``my_budget``, ``budget``: every word
    of the subject in the key or the statement, one in the key), or unkeyed and naming it."""
    named = FORGOTTEN.match(fact.text)
    subject = {stem(w) for w in content_words(fact.key.replace("_", " ") if fact.key else named.group("subject") if named else "")}
    if not subject:
        return []
    query = FactQuery(reader=fact.owner, valid=True, scopes=("global", "session"))
    gone = []
    for candidate in writes.find(query, limit=_RECENT):
        if candidate.from_tool or candidate.source.type != "conversation" or candidate.scope_id != fact.scope_id:
            continue
        if visibility_key(candidate.owner, candidate.visibility) != visibility_key(fact.owner, candidate.visibility):
            continue
        keyed = _key_words(candidate.key)
        said = {stem(w) for w in content_words(candidate.text)}
        if subject <= keyed | said and (candidate.key is None or keyed & subject):
            gone.append(candidate)
    if any(_key_words(g.key) == subject for g in gone if g.key is not None):
        # the subject is a key said whole ("the budget"): that key, not every key holding its
        # word ("hotel_budget" stays)
        gone = [g for g in gone if g.key is None or _key_words(g.key) == subject]
    return gone


def _key_words(key: str | None) -> set[str]:
    """The stemmed words of ``key`` that name its subject (``pref_seat``: seat)."""
    return {stem(w) for w in content_words((key or "").replace("_", " "))} - _KEY_PREFIXES


def chosen_instead(writes: FactStore | WriteBatch, fact: Fact) -> Fact:
    """``fact``, a choice of the conversation said instead of another and named by one word
    ("make it business instead", "can we do business instead?": ``pref_business``), under the key
    of the one choice of the conversation in force of its kind (``pref_class``: "I'd like economy
    class", "Marriott": "I'd like the Hilton"), so it replaces it; beside choices of other kinds
    or of no known kind only ("I'd like seat 14C", "I'd like the Grandview"), under its kind's own
    key (``pref_class``). A word of no known kind ("chicago") takes the key of the one choice in
    force only when that choice is of no known kind either. Unchanged when something in force has
    its own key, or when which choice it replaces is not said."""
    if fact.kind != "preference" or fact.visibility != "session" or not (fact.key or "").startswith("pref_") or not _INSTEAD.search(fact.text):
        return fact
    # "the Fairmont hotel", "business class": the value, of the kind said with it
    words = [w for w in content_words(fact.text) if stem(w) not in _ASKING and stem(w) not in _CHOOSING]
    said_kind, named = kind_named(words)
    kind = kind_of_name(named[0], said_kind) if len(named) == 1 else None
    # a class or seat capitalized ("Can we do Business instead?", "MAKE IT AISLE INSTEAD") is no name
    if len(named) != 1 or typed_values(named[0]) or (kind is None and _a_name(named[0], fact.text)) or writes.find(FactQuery(reader=fact.owner, key=fact.key, valid=True), limit=1):
        return fact
    query = FactQuery(reader=fact.owner, valid=True, scopes=(fact.scope,))
    kinds = {
        candidate.key: kind_of_choice(candidate.key, candidate.text)
        for candidate in writes.find(query, limit=_RECENT)
        if candidate.kind == "preference" and candidate.visibility == "session" and candidate.key and candidate.key.startswith("pref_") and _stated_in_reach(candidate, fact)
    }
    same = [key for key, held in kinds.items() if held is not None and held == kind]
    if len(same) == 1:  # "business" and "economy class" beside "a window seat": the class
        return fact.model_copy(update={"key": same[0]})
    if kind is not None and kinds and not same:
        # "business" beside "seat 14C" or "the Hilton" alone: a class chosen, which replaces
        # neither (a choice of no known kind is no class either)
        return fact.model_copy(update={"key": f"pref_{kind}"})
    # with two choices in force ("the Hilton", "the 3pm flight") one word does not say which it
    # replaces: a wrong guess would lose what the user chose, so it replaces neither; nor one of
    # a kind that could not hold it ("chicago" after "economy class")
    return fact.model_copy(update={"key": next(iter(kinds))}) if len(kinds) == 1 and None in kinds.values() else fact


def _a_name(word: str, text: str) -> bool:
    """Whether ``word`` is written in ``text`` capitalized past its first word ("Chicago", "Delta"):
    a place, a person or a company, which says no class or seat a choice replaced would hold."""
    return any(m.start() > 0 and m.group()[0].isupper() for m in re.finditer(rf"\b{re.escape(word)}\b", text, re.IGNORECASE))


def named_in_full(writes: FactStore | WriteBatch, fact: Fact) -> Fact:
    """``fact``, a keyed hypothetical or draft, under the key of the statement in force it names
    shorter: "what if the offsite was in Austin" (``offsite``) supposes a new value of "the team
    offsite is in Denver" (``team_offsite``), so taken up it replaces it. Only when nothing in
    force has the key itself and one key alone ends with it (``offsite`` names neither of
    ``team_offsite`` and ``board_offsite``). A count (``people_count``) takes so the key of the one
    count of its unit that named what it is for (``offsite_people_count``) only when it names no
    one who has it (:func:`~ctxplugin.facts._counts.counts_for_no_one`), nor someone's own
    (``my_wife_bag_count``)."""
    if fact.key is None or writes.find(FactQuery(reader=fact.owner, key=fact.key, valid=True), limit=1):
        return fact
    counted = fact.key.endswith("_count")  # "7 people will come", "what if 10 people came" after "... at the offsite"
    if counted and not counts_for_no_one(_SUPPOSING.sub("", fact.text)):
        return fact
    tail = "_" + fact.key
    query = FactQuery(reader=fact.owner, valid=True, scopes=("global", "session"))
    keys = {
        c.key for c in writes.find(query, limit=_RECENT)
        # "my wife has 3 bags", "our team has 8 people": someone's own, which a count of no one is not
        if c.key and c.key.endswith(tail) and _stated_in_reach(c, fact) and not (counted and c.key.startswith("my_"))
    }
    return fact.model_copy(update={"key": keys.pop()}) if len(keys) == 1 else fact


def _types(text: str) -> set[str]:
    values = typed_values(text)
    # a count by its unit: "make it 3 rooms" revises the rooms, not the latest count of people
    found: set[str] = {kind for kind in values if kind != "count"} | {"count:" + count_unit(v) for v in values.get("count", ())}
    if _ORDINAL_DAY.search(text):
        found.add("date")  # "the 24th": a day of the month
    # a code ("QQ47LX", "555-0199") by its shape: "QQ47LM" corrects a code of its shape alone
    found.update("code:" + _shape(i) for i in identifiers(text) if not typed_values(i) and not _ORDINAL_DAY.fullmatch(i))
    return found


def _shape(code: str) -> str:
    return re.sub(r"[a-z]", "a", re.sub(r"\d", "9", code.lower()))


def _stated_in_reach(candidate: Fact, fact: Fact) -> bool:
    """Whether ``candidate`` is a statement (not a tool's) that the writer of ``fact`` keeps: in
    its session, or kept for its user."""
    return (
        candidate.key is not None and not candidate.from_tool and candidate.scope_id == fact.scope_id
        and visibility_key(candidate.owner, candidate.visibility) == visibility_key(fact.owner, candidate.visibility)
    )


_NAMED_WRONG = re.compile(r"\bgot\s+(?:the|my)\s+(?P<got>[\w ]+?)\s+wrong\b|\bthe\s+wrong\s+(?P<gave>[\w ]+?)\s*(?:[,;:.!-]|$)", re.IGNORECASE)
"""What the user names as wrong ("I got my departure date wrong", "I gave you the wrong reservation ID")."""


def _latest_of_type(writes: FactStore | WriteBatch, fact: Fact) -> Fact | None:
    """The latest statement holding a value of the type ``fact`` corrects; of those, the latest
    whose key has the words the user named as wrong ("the wrong reservation ID": not the flight
    said since), when one has them."""
    wanted = _types(fact.text)
    if not wanted:
        return None
    wrong = _NAMED_WRONG.search(fact.text)
    named = {stem(w) for w in content_words(wrong.group("got") or wrong.group("gave"))} if wrong else set()
    query = FactQuery(reader=fact.owner, valid=True, scopes=(fact.scope,))
    latest = None
    for candidate in writes.find(query, limit=_RECENT):
        if _stated_in_reach(candidate, fact) and wanted & _types(candidate.text):
            if named <= {stem(part) for part in (candidate.key or "").split("_")}:
                return candidate
            latest = latest or candidate
    return latest


def _latest_stated(writes: FactStore | WriteBatch, fact: Fact) -> Fact | None:
    """The statement in force the writer of ``fact`` made last, in any fact scope: "let's do
    that" takes up a hypothetical only when nothing was stated since."""
    query = FactQuery(reader=fact.owner, valid=True, scopes=("global", "session", "hypothetical", "draft"))
    for candidate in writes.find(query, limit=_RECENT):
        if not candidate.from_tool and visibility_key(candidate.owner, candidate.visibility) == visibility_key(fact.owner, candidate.visibility):
            return candidate
    return None


def _earlier(writes: FactStore | WriteBatch, fact: Fact, named: set[str], *, first: bool) -> tuple[Fact, Fact] | None:
    """The earlier statement to bring back and the current fact of its key it replaces."""
    olds = writes.find(FactQuery(reader=fact.owner, valid=False, scopes=(fact.scope,)), limit=_RECENT)
    heads: dict[str, Fact | None] = {}
    for old in olds:
        if old.refused or not _stated_in_reach(old, fact) or old.key is None:
            continue
        if old.key not in heads:
            current = writes.find(FactQuery(reader=fact.owner, key=old.key, valid=True, scopes=(fact.scope,)), limit=1)
            heads[old.key] = current[0] if current and _stated_in_reach(current[0], fact) else None
        head = heads[old.key]
        if head is None or head.text_hash == old.text_hash:
            continue
        if named:
            words = {stem(w) for w in content_words(old.text + " " + old.key.replace("_", " "))}
            if named <= words:
                return old, head
            continue
        if first:
            chain = [o for o in olds if o.key == old.key and not o.refused and o.text_hash != head.text_hash]
            return chain[-1], head
        if old.superseded_by == head.id:
            return old, head
    return None


__all__ = ["chosen_instead", "forgotten", "named_in_full", "revised", "taken_back"]
