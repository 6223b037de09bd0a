"""The key a statement's subject names: "my email" in "my email is ...", so that a later
statement about the same subject replaces it.

A word saying which value holds ("new", "current", "updated", "revised") is not part of the
subject: "my new email is X" is about the email that "my email is Y" was about, and replaces it.
A word placing the value in the past ("old", "previous", "former") keeps its own key, so "my old
email was Y" never becomes the current email. A subject whose head is the pronoun "one" ("the
old one is closed") names nothing by itself.

Besides statements, a user may give a new value of their own contact details as a request
("update my email to X", "please use my new email X"): :func:`updated_detail` reads those, for the
details a user owns (email, phone, address, name), never for a booking or an order, where the
same words ask for an action ("change my reservation to the 10:45 flight").
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace

from ctxplugin.facts._discourse import LEAD
from ctxplugin.facts._not_prose import QUOTED_ASSIGN, TOOL_CODE
from ctxplugin.facts._text import slug
from ctxplugin.facts.extract import FactDraft

NUMBERED_SUBJECT = re.compile(r"\b(?:item|point|step|option|question|task|line|no\.?|number|#)\s*(\d{1,4})\b", re.IGNORECASE)
_NUMBERED_NAME = re.compile(r"\b[a-z][a-z-]*\s+#?(\d{1,4})\b(?![.,:/-]?\d)", re.IGNORECASE)
"""A noun followed by a number names one of a numbered set: "Requirement 2", "Phase 3", "Deal 1"."""
_LETTERED_NAME = re.compile(r"\b[A-Za-z][a-z-]*\s+([A-HJ-Z])$")
"""A noun followed by a capital letter names one of a lettered set: "Option A", "Plan B", "Gate C"
(the letter alone is no word of the key's, so without it "Option A" and "Option B" were one subject)."""
_NON_SUBJECT = frozenset(
    ["it", "this", "that", "there", "these", "those", "what", "which", "who", "whom", "how", "why", "when", "where", "i",
     "you", "he", "she", "we", "they", "here", "one", "something", "everything", "nothing", "anything"]
)
_CURRENT = re.compile(
    r"^(?P<owner>(?:my|our|the|your)\s+)?(?:(?:new|current|updated|latest|revised|corrected|correct|actual|real|present)\s+)+",
    re.IGNORECASE,
)
"""Words that say which value of a subject holds, after its possessive or article."""
_ONE = re.compile(r"\bones?$", re.IGNORECASE)
_SAME_DETAIL = (
    (re.compile(r"\be-?mail(?:\s+address)?$", re.IGNORECASE), "email"),
    (
        re.compile(r"\b(?:(?:tele)?phone|mobile|(?:cell|contact)(?=\s+(?:phone|number)))(?:\s+phone)?(?:\s+number)?$", re.IGNORECASE),
        "phone",
    ),
)
"""Names of one contact detail: "my email address" and "my e-mail" are "my email"."""
_NUMBER = re.compile(r"^(?:my|our)\s+number$", re.IGNORECASE)
_PHONE = re.compile(r"^\+?\(?\d[\d\s().-]{5,22}\d\b")
"""A phone number at the start of a value: seven to fifteen digits with their separators."""
_DATE = re.compile(r"^(?:\d{4}[-.]\d{1,2}[-.]\d{1,2}|\d{1,2}[-.]\d{1,2}[-.]\d{2,4})\b")
_DETAIL = r"e-?mail(?:\s+address)?|(?:phone|mobile|cell|contact)(?:\s+number)?|(?:home\s+|mailing\s+|postal\s+)?address|(?:first\s+|last\s+|full\s+)?name|surname"
_UPDATED = re.compile(
    rf"^(?:please\s+)?(?:(?:update|change|set|switch)\s+(?P<owner>my|our)\s+(?P<detail>{_DETAIL})\s+to"
    rf"|(?:use|take|note|here(?:'s|\s+is))\s+(?P<owner2>my|our)\s+(?:new\s+|updated\s+|current\s+)?(?P<detail2>{_DETAIL})(?:\s*[:,]|\s+is|\s+as)?"
    rf"|i(?:'ve|\s+have)?\s+(?:got|have)\s+a\s+new\s+(?P<detail3>{_DETAIL})(?:\s*[:,]|\s+is)?)"
    r"\s+(?P<val>\S.*)$",
    re.IGNORECASE,
)


def subject_key(subject: str, value: str | None = None) -> str | None:
    """The key ``subject`` names (``my_``/``our`` subjects get ``my_``), or None when it names
    nothing by itself (a pronoun, "the old one", a subject of more than six words). "My number"
    whose ``value`` is a phone number is "my phone"."""
    subject = LEAD.sub("", subject.strip()).strip()
    subject = _CURRENT.sub(lambda m: m.group("owner") or "", subject).strip()
    phone = _PHONE.match(value.strip()) if value is not None and _NUMBER.match(subject) and not _DATE.match(value.strip()) else None
    if phone and 7 <= sum(c.isdigit() for c in phone.group()) <= 15:
        subject = f"{subject.split()[0]} phone"
    for name, same in _SAME_DETAIL:
        subject = name.sub(same, subject)
    lowered = subject.lower()
    first = lowered.split()[0] if lowered.split() else ""
    if not subject or first in _NON_SUBJECT or len(subject.split()) > 6 or _ONE.search(lowered):
        return None
    key = slug(subject, 3)
    if not key:
        return None
    numbered = NUMBERED_SUBJECT.search(subject) or _NUMBERED_NAME.search(subject) or _LETTERED_NAME.search(subject)
    if numbered:
        # "agenda item 3" and "agenda item 4", "Requirement 1" and "Requirement 2" are different subjects
        key = f"{key}_{numbered.group(1).lower()}"
    return f"my_{key}" if first in ("my", "our") else key


def owned_key(key: str) -> str:
    """The key of the same subject as the user's own thing or as the thing: ``my_budget`` for
    ``budget`` and ``budget`` for ``my_budget`` (in one conversation both name one thing)."""
    return key.removeprefix("my_") if key.startswith("my_") else f"my_{key}"


def labelled_key(key: str, label: str, statement: re.Match[str] | None) -> str:
    """The key of a user's ``statement`` under a ``label`` keyed ``key`` ("Final: the venue is
    Hall B", "Anna: my seat is 12A"): the label says which statement it is, the statement's own
    subject what it is about, so both name it (``final_venue``, ``anna_my_seat``): another
    statement under the label, or the same subject under another label, is another fact, not a
    new value of the label. A numbered label ("Question 5: ...") names one of a set by itself."""
    if statement is None or NUMBERED_SUBJECT.search(label) or _NUMBERED_NAME.search(label):
        return key
    own = subject_key(statement.group("subj"), statement.group("val"))
    return f"{key}_{own}" if own else key


def updated_detail(body: str) -> str | None:
    """The key of a contact detail ``body`` gives a new value of as a request ("update my email
    to X", "use my new phone number X"), else None."""
    match = _UPDATED.match(body)
    if match is None:
        return None
    owner = match.group("owner") or match.group("owner2") or "my"
    return subject_key(f"{owner} {match.group('detail') or match.group('detail2') or match.group('detail3')}")


def records_unkeyed(drafts: list[FactDraft], *, quoting: str = "") -> list[FactDraft]:
    """``drafts`` read from one tool output (``quoting``: its text, for the lines of code it
    quotes, see :func:`_quoted_unkeyed`), a key left out where it labels records: said again
    after other lines were read ("Snippet:" of each search result, between their titles and
    urls; "Status:" of each row), it names parallel records, not one value that changed, so none
    may replace another. Said again on the next line read ("build: started", "build: finished"),
    it is one value moving on, and the later replaces the earlier, unless both values name files
    (git's "modified: src/a.py", "modified: tests/b.py": a list, each entry still true)."""
    drafts = _quoted_unkeyed(quoting, drafts) if quoting else drafts
    said = Counter(d.key for d in drafts if d.key)
    records: set[str] = set()
    last: dict[str, int] = {}
    for at, draft in enumerate(drafts):
        if draft.key and said[draft.key] > 1:
            if draft.key in last and (at - last[draft.key] > 1 or _files(drafts[last[draft.key]], draft)):
                records.add(draft.key)
            last[draft.key] = at
    return [replace(d, key=None) if d.key in records else d for d in drafts]


_FILE = re.compile(r"\.{0,2}/?(?:[\w.-]+/)*[\w.-]*\w\.[A-Za-z]\w{0,7}/?|(?:[\w.-]+/)+")
"""A value that is a file or directory name alone (``src/app.py``, ``README.md``, ``build/``)."""


def _files(*drafts: FactDraft) -> bool:
    return all(_FILE.fullmatch(d.text.partition(":")[2].strip()) for d in drafts)


def code_unkeyed(sentence: str, voice: str, drafts: tuple[FactDraft, ...]) -> tuple[FactDraft, ...]:
    """``drafts`` of a tool's ``sentence``, keys left out when it is a line of code
    (:data:`~ctxplugin.facts._not_prose.TOOL_CODE`): "ret = self" and "ret = ret.parent" quote
    a file, they state no value that a later line could replace."""
    if voice != "tool" or not TOOL_CODE.search(sentence):
        return drafts
    return tuple(replace(d, key=None) if d.key else d for d in drafts)


def _quoted_unkeyed(text: str, drafts: list[FactDraft]) -> list[FactDraft]:
    """``drafts`` of a tool's output ``text``, keys left out of those read from an indented line
    giving a name a name or a constant (:data:`~ctxplugin.facts._not_prose.QUOTED_ASSIGN`:
    "    ret = self" quotes a function's body); at the start of a line ("debug = True" of a
    config file) it is a setting, keyed as a statement is."""
    quoted = {
        _bare(line) for line in text.splitlines() if line[:1] in (" ", "\t") and QUOTED_ASSIGN.fullmatch(line.strip())
    } if "=" in text else set()
    if not quoted:
        return drafts
    return [replace(d, key=None) if d.key and _bare(d.text) in quoted else d for d in drafts]


def _bare(line: str) -> str:
    return line.strip().strip("*_`>").strip().lower()


__all__ = ["NUMBERED_SUBJECT", "code_unkeyed", "labelled_key", "owned_key", "records_unkeyed", "subject_key", "updated_detail"]
