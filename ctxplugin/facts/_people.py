"""People told apart by name and date of birth, for the ledger's key rule.

An airline agent is given the passengers one by one, each under the same key ("Passenger: Mia
Li, born 1990-05-12." then "Passenger: Noah Kim, born 1988-11-02.", both ``passenger``). A
person is their name and their date of birth: a statement under the key of one in force that
names someone else *and* gives another date of birth is about another person, so it is written
beside it, under the key with that person's name (``passenger_noah_kim``), and replaces nothing
(:func:`another_person`). A statement that changes one of the two ("Noah Kim, born 1988-11-02"
after "Noah King, born 1988-11-02"; "was born 1988-11-20"), gives no date of birth, or says it
corrects ("Actually, ...", "..., not Noah King") replaces as any other does. A leading "Sorry,"
is not read as saying so: a name and a date both mistyped and given again after it are kept
beside the first, which stays in force too (nothing is lost; the agent sees both).

Names are read as written in any script: "McDonald", "O'Brien", "José García", "Anne-Marie".
"""

from __future__ import annotations

import re

from ctxplugin.facts._batch import WriteBatch
from ctxplugin.facts._values import MONTH_NAMES
from ctxplugin.facts.extract import FactDraft
from ctxplugin.facts.model import Fact, FactQuery, normalize_key
from ctxplugin.facts.store import FactStore

_MONTH = rf"(?:{MONTH_NAMES})[a-z]*\.?"
_BIRTH = re.compile(
    r"\b(?:born(?:\s+on)?|date\s+of\s+birth|birth\s*date|birthday|d\.?o\.?b\.?)(?:\s+(?:is|was))?[\s:,-]*"
    rf"(?P<date>\d{{4}}-\d{{1,2}}-\d{{1,2}}|\d{{1,2}}[/.]\d{{1,2}}[/.]\d{{2,4}}|{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}"
    rf"|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+\d{{4}})",
    re.IGNORECASE,
)
"""A date of birth as said: "born 1990-05-12", "date of birth: May 12, 1990", "DOB 12/05/1990"."""
_NAME_WORD = re.compile(r"[^\W\d_](?:[^\W\d_]|['’-](?=[^\W\d_]))*")
"""A word of a name: letters of any script, joined by an apostrophe or a hyphen ("O'Brien")."""
_NOT_NAMES = frozenset(
    [
        "i", "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
        "november", "december", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "dob",
    ]
)  # fmt: skip
"""Words capitalized that name no one."""


def _birth(text: str) -> str | None:
    found = _BIRTH.search(text)
    return " ".join(found.group("date").lower().replace(",", " ").split()) if found else None


def _name_words(text: str) -> set[str]:
    """The capitalized words of ``text`` (any word of a script without capitals: "李明"), but for
    months, days and "I" ("Mia", "Li", "Passenger")."""
    return {
        w for w in _NAME_WORD.findall(text) if not w[0].islower() and w.lower() not in _NOT_NAMES
    }


def someone_else(fact: Fact, draft: FactDraft, held: Fact) -> bool:
    """Whether ``fact`` names another person than ``held`` with another date of birth, without
    saying it corrects anything: a person added, not a change of ``held``."""
    # "..., not Noah King", "Actually, ..." (a correcting word weighs the statement more): a change
    corrects = draft.replaces is not None or draft.revises is not None or fact.importance > 0.5
    if corrects or fact.source.type != "conversation" or held.from_tool:
        return False
    born, held_born = _birth(fact.text), _birth(held.text)
    if born is None or held_born is None or born == held_born:
        return False  # no date of birth, or the same one: the same person, renamed
    named, held_named = _name_words(fact.text), _name_words(held.text)
    # a name said again ("Noah Kim, born 1988-11-20" after "Noah Kim, born ..."): the date changed
    return bool(named - held_named) and bool(held_named - named)


def another_person(writes: FactStore | WriteBatch, fact: Fact, draft: FactDraft) -> Fact:
    """``fact`` under the key of the person it names ("passenger_noah_kim") when every statement
    in force under its key names someone else with another date of birth, so it replaces none
    of them; else unchanged."""
    if fact.key is None:
        return fact
    same = [
        f
        for f in writes.find(
            FactQuery(reader=fact.owner, key=fact.key, valid=True, scopes=(fact.scope,))
        )
        if f.scope_id == fact.scope_id
    ]
    if not same or not all(someone_else(fact, draft, held) for held in same):
        return fact
    own = _name_words(fact.text).difference(
        *(_name_words(held.text) for held in same)
    ) or _name_words(fact.text)
    # the name is said before the date of birth: "Noah Kim, born ..., Gold member" is Noah Kim
    birth = _BIRTH.search(fact.text)
    before = [
        w for w in _NAME_WORD.findall(fact.text[: birth.start() if birth else None]) if w in own
    ]
    words = before or [w for w in _NAME_WORD.findall(fact.text) if w in own]
    return fact.model_copy(
        update={"key": normalize_key(f"{fact.key} {' '.join(dict.fromkeys(words))}")}
    )


__all__ = ["another_person", "someone_else"]
