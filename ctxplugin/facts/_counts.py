"""A count the user states of what a thing has or expects: "We expect 5 people.", "Actually 7
people will come.", "There will be 12 guests.", "The dinner has 8 guests.", "I have 2 bags".

Such a statement is keyed by what is counted and, when it names one, what it is counted for
(``people_count``; ``dinner_guest_count`` for "the dinner has 8 guests" or "8 guests at the
dinner"), so a later count of the same unit for the same subject replaces it, and a count of
another unit ("3 rooms") or for another subject stands beside it. A count that names no subject
("7 people will come") after one that did ("we expect 5 people at the offsite") is given that
key by the ledger when it is the only one of its unit (see
:func:`~ctxplugin.facts._revisions.named_in_full`).
"""

from __future__ import annotations

import re

from ctxplugin.facts._subjects import subject_key
from ctxplugin.facts._text import slug
from ctxplugin.facts._values import COUNT, count_unit, typed_values

_ABOUT = r"(?:(?:about|around|roughly|approximately|only|just|exactly|now|at\s+least|at\s+most|up\s+to|no\s+more\s+than|a\s+total\s+of)\s+)*"
_HAVING = re.compile(
    r"^(?P<subj>[\w' -]{1,40}?)(?:'(?:ll|re|ve|d))?"
    r"(?:\s+(?:will|would|should|shall|might|may|now|still|only|currently|also|probably|definitely|then|all|"
    r"(?:are|is|am)\s+going\s+to|expect\s+to|plan\s+to))*\s+(?:(?:be|been|are|is|am|were|was)\s+)?"
    r"(?:expect(?:s|ed|ing)?|anticipate[sd]?|have|has|had|having|need(?:s|ed)?|invit(?:e|es|ed|ing)|"
    r"book(?:s|ed|ing)?|seat(?:s|ed)?|reserv(?:e|es|ed|ing)|are|is|were|was|be)\s+"
    rf"{_ABOUT}(?P<count>{COUNT.pattern})(?P<rest>.*)$",
    re.IGNORECASE,
)
""""We expect 5 people", "the dinner has 8 guests", "we'll have seven guests", "I need 3 rooms"; not
"we hired 2 engineers" or "I'm bringing 2 guests", which add to a count."""
_SHORT = re.compile(
    r"^\s*(?:(?:short|fewer|less|too\s+(?:few|many)|behind|missing)\b|(?:over|under|left|down|up|away)\b(?=\s*(?:[.!?,;:)]|$|"
    r"(?:of|than|on|from|to\s+(?:go|spare|confirm|book|invite|find))\b|(?:(?:the|our|my|its|their|your)\s+)?"
    r"(?:limit|budget|capacity|quota|max(?:imum)?|min(?:imum)?|target|cap|allowance)\b)))",
    re.IGNORECASE,
)
"""What follows a count that says it is a difference, not the count: "we are 3 people short",
"2 people over the limit", "2 people left to confirm"; not "45 people over the weekend"."""
_COMING = re.compile(
    rf"^{_ABOUT}(?P<count>{COUNT.pattern})\s+(?:(?:will|would|are|were|is|can|could|should|might|may|have|has|now|all|"
    r"also|probably|definitely)\s+)*(?:be\s+)?(?:come|coming|came|attend(?:s|ing|ed)?|join(?:s|ing|ed)?|there|"
    r"show(?:ing)?\s+up|showed\s+up|sign(?:ed)?\s+up|registered|confirmed|going|expected|invited|rsvp'?d)\b(?P<rest>.*)$",
    re.IGNORECASE,
)
""""7 people will come", "twelve guests are coming", "30 attendees registered"."""
_THERE = re.compile(rf"^there(?:'ll|\s+will)?\s+(?:be|are|were|is)\s+{_ABOUT}(?P<count>{COUNT.pattern})(?P<rest>.*)$", re.IGNORECASE)
""""There will be 12 guests"."""
_FOR = re.compile(
    r"\b(?:at|for|to|in|on)\s+(?:the|our|my|this|that|their)\s+(?P<topic>[a-z][\w -]{0,30}?)"
    r"(?=\s+(?:on|at|in|by|next|this|tomorrow|today|tonight|and|but)\b|[.,;:!?]|$)",
    re.IGNORECASE,
)
"""What a count is for: "... at the offsite", "... for the dinner"."""
_FOR_COUNT = re.compile(rf"^(?:for\s+)?{_ABOUT}(?P<count>{COUNT.pattern})(?:\s+(?:in\s+)?total)?$", re.IGNORECASE)
""""For 12 people", "about 30 guests in total": a count as the whole value of a statement."""


def count_key(body: str) -> str | None:
    """The key of a count ``body`` states (see the module docstring), or None when it states none."""
    found = _HAVING.match(body) or _COMING.match(body) or _THERE.match(body)
    if found is None or _SHORT.match(found.group("rest")):
        return None
    counts = typed_values(found.group("count")).get("count")
    if not counts:
        return None
    unit = count_unit(min(counts))
    subject = found.groupdict().get("subj")
    topic = subject_key(subject) if subject else None  # a pronoun ("we", "I") names no subject
    named = _FOR.search(found.group("rest")) if topic is None else None
    if named is not None:
        topic = slug(named.group("topic"), 2) or None
    return f"{topic}_{unit}_count" if topic else f"{unit}_count"


def count_of(key: str, value: str) -> str | None:
    """The key of a count a statement keyed ``key`` gives as its whole value ("the offsite is
    for 12 people": ``offsite_people_count``), or None: how many a thing is for is not what or
    where it is, so neither replaces the other."""
    found = _FOR_COUNT.match(value.strip().rstrip(".!?"))
    counts = typed_values(found.group("count")).get("count") if found else None
    return f"{key}_{count_unit(min(counts))}_count" if counts else None


def counts_for_no_one(text: str) -> bool:
    """Whether a count ``text`` states names no one who has what it counts ("7 people will
    come", "there will be 12 guests", "we expect 20 people"): only such a count may be of what
    the one count of its unit named ("we expect 5 people at the offsite"). "I have 2 bags" counts
    the writer's own, not "my wife has 3 bags"."""
    body = text.strip().rstrip(".!?")
    found = _HAVING.match(body)
    if found is None:
        return bool(_COMING.match(body) or _THERE.match(body))
    return found.group("subj").strip().lower() in ("we", "there")


__all__ = ["count_key", "count_of", "counts_for_no_one"]
