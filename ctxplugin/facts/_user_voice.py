"""How the rules read the user's own voice: preferences and the key each is filed under, tasks,
choices ("make it the 5pm one") and "X, not Y" corrections.

A preference is keyed by what it is about, so a later preference about the same thing replaces
it: "I'd prefer an aisle seat" and "actually, make it a window seat" are both ``pref_seat``;
"I'd prefer to pay with a gift card" and "I'd rather pay with a credit card" both ``pref_card``.
What it is about is the last word of its object before a qualifier ("a flight *that departs
after 8 am*", "flights *departing* ..."), after a leading verb ("pay with", "sit in"); when the
object is only a value ("fly on Friday"), the verb is what it is about (``pref_fly``).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Literal

from ctxplugin.facts._discourse import FORGOTTEN, RETRACTED
from ctxplugin.facts._text import content_words, identifiers
from ctxplugin.facts._values import COUNT, read_values, typed_values
from ctxplugin.facts.extract import FactDraft

PREFERENCE = re.compile(
    r"^(?:i|we)(?:'d|\s+would)?\s+(?:really\s+|much\s+|still\s+)?"
    r"(?:(?:prefer|rather)\s+(?:to\s+)?(?P<obj>.+)|"
    r"(?:like|love|hate|dislike|want|don't like|do not like|don't want|do not want|always want|never want)\s+(?!to\b)(?P<obj2>.+))$"
    r"|^(?:please\s+)?(?P<rule>(?:always|never)\s+.+)$",
    re.IGNORECASE,
)
"""A preference: "I prefer ...", "I'd prefer (to) ...", "we'd rather ...", "I'd like the 3pm one",
"never book red-eyes". "I want to ..." and "I'd like to ..." are tasks."""
_DESCRIBED = (
    r"(?:economy|business|first|premium|basic|coach|class|cabin|seats?|rooms?|suites?|flights?|fares?|plans?"
    r"|(?:mon|tues|wednes|thurs|fri|satur|sun)day|january|february|march|april|may|june|july|august"
    r"|september|october|november|december)\b"
)
"""Words that describe a thing to book rather than name it ("the Economy seat", "the Monday one")."""
CHOICE = re.compile(
    r"^(?:please\s+)?(?:make\s+(?:it|mine)|(?:change|switch|set)\s+(?:it|that|this)\s+to|switch\s+to"
    rf"|(?:book|reserve)(?=\s+the\s+(?!(?:\S+\s+){{0,2}}{_DESCRIBED})"
    r"(?-i:[A-Z])[^\d\s]*(?:\s+(?-i:[A-Z])[^\d\s]*){0,2}(?:\s+(?:hotel|inn|resort|motel))?[.!]*$))\s+(?P<obj>.+)$",
    re.IGNORECASE,
)
"""A choice that revises what was asked: "make it a window seat", "change it to the 5pm one"
("make that change" asks for something to be done), or a name to book, written as one: "Book the
Hilton", "Reserve the Grand Plaza hotel" (not "Book the Monday flight", "Book the Economy seat",
"Reserve the Basic Economy": a thing described)."""
DIRECTIVE = re.compile(
    r"^(?:please\s+)?(?:also\s+)?(?:invite|add|append|insert|include|cc|loop in|bring|notify|exclude|uninvite)\s+\S",
    re.IGNORECASE,
)
"""The user's instruction about who or what is in: a decision, kept unkeyed."""
MOVE = re.compile(
    r"^(?:please\s+)?(?:move|push|postpone|reschedule|shift|bump|change|switch)\s+(?:the|our|my)\s+[\w' -]{2,40}?\s+(?:to|until)\s+\S",
    re.IGNORECASE,
)
"""A request to move a thing to a new value ("move the meeting to Thursday", "push the launch to
May 10"): the user's decision, kept unkeyed, so it replaces the thing's value only by the
implicit rule — where it names the thing and gives a value of the same type in its place."""
TASK = re.compile(
    r"^(?:i|we)(?:\s+|(?='d\b))(?:need|have|want|'d like|would like|'d love|would love)\s+to\s+\w+|^(?:todo|to do|task)\s*:",
    re.IGNORECASE,
)
_NOT_CORRECTION = re.compile(
    r"(?:^|[,;]\s*)not\s+(?!(?:only|just|yet|sure|really|quite|necessarily|too|even|at all|anymore|that|so|very|much|"
    r"always|exactly|certain|entirely|possible|available|needed|necessary|interested|happy|ideal|great|ready)\b)"
    r"(?P<old>[^,.;!?\u2013\u2014]{1,60}?)\s*(?:[,.;!?\u2013\u2014]|\s-+\s|$)",
    re.IGNORECASE,
)
"""A correction that names the value it rejects: "not economy, business", "to LAS, not LAX",
"not 12A — 14C" (a dash sets it off as a comma does)."""
_MEANT = re.compile(
    r"\b(?:i|we)\s+meant\s+(?:to\s+say\s+)?[^,.;!?]{1,60}?,?\s+not\s+(?P<old>[^,.;!?]{1,60}?)\s*(?:[,.;!?]|$)", re.IGNORECASE
)
"""A correction of what the user said: "I meant Boston not Austin" (with or without the comma)."""
SWAP = re.compile(
    r"^(?:please\s+)?(?:don't|do not|never)\s+(?P<verb>[a-z]+)\s+(?P<old>[^,;]{1,60}?)\s*(?:[,;]|\s-)\s*"
    r"(?:but\s+|instead\s+|rather\s+|please\s+)*(?P=verb)\s+(?P<obj>.+)$",
    re.IGNORECASE,
)
"""One thing swapped for another with the same verb: "don't use my Visa card, use the Mastercard",
"never book the 6am flight, book the 9am one": a choice that names the value it rejects."""
_QUALIFIER = re.compile(
    r"\b(?:instead|rather|because|since|when|if|for|on|in|at|with|that|which|who|after|before|between|within|"
    r"under|below|over|above|departing|arriving|leaving|so|but|please)\b|[,;]",
    re.IGNORECASE,
)
_VERB = re.compile(
    r"^(?P<verb>fly|pay|use|go|take|get|book|have|sit|travel|leave|depart|return|keep|stick|choose|pick|stay|"
    r"receive|bring|get)\b\s*(?:(?:with|in|on|at|by|for|to|into)\b\s*)?",
    re.IGNORECASE,
)
_NOT_SUBJECTS = frozenset(
    ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "today", "tomorrow", "tonight",
     "january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november",
     "december", "am", "pm", "noon", "midnight", "morning", "evening", "afternoon"]
)
"""Words that are a value, not what a preference is about."""


def preference_key(topic: str) -> str | None:
    """The key a preference about ``topic`` (its object: "a flight that departs after 8 am") is
    filed under: ``pref_`` and the word it is about (see the module docstring)."""
    verb = _VERB.match(topic.strip())
    rest = topic.strip()[verb.end() :] if verb else topic
    head = _QUALIFIER.split(rest, maxsplit=1)[0]
    kept = [w for w in content_words(head) if w.isalpha() and w not in _NOT_SUBJECTS]
    if kept:
        return f"pref_{kept[-1]}"
    return f"pref_{verb.group('verb').lower()}" if verb else None


_CONDITIONAL = re.compile(r"^(?:i|we)(?:'d|\s+would)\b", re.IGNORECASE)
_ONE_THING = re.compile(r"^(?:i|we)\s+(?:really\s+|still\s+)?(?:want|like)\s+(?:a|an|the|this|that)\s", re.IGNORECASE)
"""One thing wanted ("I want a window seat", "we like the king room"), not a kind of thing ("I
want aisle seats"): a choice for the decision at hand."""


def visibility_of(body: str) -> Literal["session"] | None:
    """Where a preference stated as ``body`` holds: one in the conditional ("I'd prefer an aisle
    seat", "we'd rather fly on Friday", "I'd like the 3pm one"), a choice, one thing wanted ("I
    want a window seat"), or one about a particular thing — a day, date, time or amount (not a bound), or an identifier ("I want the HAT123
    flight", "I don't want the May 25 flight") — is about the decision at hand, so it stays in
    the conversation's session; a standing one ("I prefer aisle seats", "never book red-eyes")
    is left to the ledger (the user's, across sessions)."""
    named = [i for i in identifiers(body) if not typed_values(i)]  # "HAT123"; "8am" is a time
    if _CONDITIONAL.match(body) or _ONE_THING.match(body) or read_values(body).points or named:
        return "session"
    return None


_RESTORE = re.compile(
    r"\b(?:keep|use|go with|stick with|stay with|want)\s+(?:the\s+|my\s+)?(?:original|previous|earlier|first)\b|"
    r"\b(?:go|switch|change|revert|put|set|move|turn)\s+(?:it\s+|that\s+|this\s+)?back\b|\brevert\s+to\b|"
    r"\bundo\s+(?:that|it|the (?:last )?change)\b",
    re.IGNORECASE,
)
"""An earlier value brought back: "keep the original", "go back to Tuesday", "switch it back"."""
_NEW_VALUE = re.compile(r"^(?:please\s+)?(?:make|change|switch|set)\s+(?:it|that|this|mine)\s+(?:to\s+)?(?P<value>.+)$", re.IGNORECASE)
"""A choice that names a value and nothing else: "make that the 24th", "make it $700"."""
_RESTATED = re.compile(
    r"^(?:(?P<owned>oops|i\s+(?:mistyped|misspoke|made\s+a\s+(?:typo|mistake))|my\s+(?:bad|mistake)|typo|"
    r"i\s+got\s+(?:the|my)(?:\s+\w+){1,3}?\s+wrong|i\s+(?:gave(?:\s+you)?|provided|entered|typed|said|used)\s+the\s+wrong(?:\s+\w+){1,3}?|"
    r"that(?:'s|\s+is|\s+was)\s+(?:wrong|not\s+right|a\s+typo))[\s,;:.!-]+)?"
    r"(?:(?:it|that)(?:'s|\s+is|\s+was|\s+should\s+(?:be|have\s+been))\s+(?:actually\s+)?|(?P<meant>i\s+meant\s+(?:to\s+say\s+)?))"
    r"(?P<value>.+)$",
    re.IGNORECASE,
)
"""A value alone, said again to correct it: "sorry, it's QQ47LM", "I meant the 5th", "typo, it
should be May 4"."""
_ADOPT = re.compile(
    r"^(?:(?:sounds|looks|that(?:'s|\s+is))\s+(?:good|great|fine|perfect)[,.!]?\s+)?(?:let'?s\s+|please\s+)?"
    r"(?:do|go\s+with|go\s+ahead\s+with|take|use|book)\s+(?:that|it|this)(?:\s+one)?$",
    re.IGNORECASE,
)
"""What was just supposed or drafted, taken up: "let's do that", "sounds good, do it", "go with that"."""
_PICKED_BY_PLACE = re.compile(
    r"^(?:(?:ok(?:ay)?|sure|yes|yeah|great|perfect)[,.!]?\s+)?(?:let'?s\s+|please\s+|i'?ll\s+)?"
    r"(?:do|go\s+with|go\s+for|take|use|book|pick|choose)\s+(?:the\s+)?"
    r"(?:first|second|third|fourth|last|former|latter|other|same|next|previous)(?:\s+(?:one|option|choice))?$",
    re.IGNORECASE,
)
"""An option picked by its place ("let's do the first one", "go with the second option"): which
option that is lives in the conversation, not in the words, so alone they state nothing."""
_SUPPOSED_ACT = re.compile(
    r"^(?:we|i|they)\s+(?:(?:were\s+to|could|should|would|did|just)\s+)?(?P<verb>held|hold|had|have|moved?|did|do|made|make|put|kept|"
    r"keep|scheduled?|booked?|ran|run|hosted?|switched|switch|changed?|pushed?|shifted?|relocated?|took|take)\s+"
    r"(?P<obj>(?:the|our|my)\s+[\w' -]{1,40}?)\s+(?P<prep>in|at|on|to|into|for|until|till|by)\s+(?P<val>.+)$",
    re.IGNORECASE,
)
"""What a user supposes doing to a thing ("what if we held the offsite in Austin", "suppose we
move the launch to Friday"): a new value of the thing, read as "the offsite is in Austin"."""
_ASKED_INSTEAD = re.compile(
    r"^(?:so\s+|and\s+|but\s+|then\s+)?(?:(?:can|could|may)\s+(?:we|i|you)\s+(?:please\s+|just\s+)?"
    r"(?:do|get|have|take|try|go\s+(?:with|for)|switch\s+to|change\s+(?:it|that|this)\s+to|make\s+(?:it|that|this)|book|use|pick|choose)"
    r"|(?:what|how)\s+about)\s+"
    r"(?P<obj>.+?),?\s+instead(?:,?\s+please)?[\s?.!]*$",
    re.IGNORECASE,
)
"""Another choice asked for ("can we do business instead?", "could I get an aisle seat instead?",
"how about business instead?"):
a request that replaces the choice, not a question about it ("can we change the date?" asks)."""
_CORRECTING = re.compile(
    r"^(?:sorry|oops|actually|correction|no|wait|my (?:bad|mistake)|i mean|scratch that|never\s?mind|"
    r"(?:forget|ignore|disregard) (?:that|it)|(?:hold|hang) on(?=\s*[,.;:!-]))\b",
    re.IGNORECASE,
)
"""The first words of a sentence that corrects what the user said before ("sorry", "scratch
that", "hold on,")."""


_NAMED_ALONE = re.compile(
    r"^(?!.*\b(?:is|are|was|were|be|been|will|would|has|have|had|do|does|did|can|could|should|must|not)\b)"
    r"(?P<obj>(?:a|an|the)\s+[\w' -]{1,40}?)(?:,?\s+(?:please|instead))*$",
    re.IGNORECASE,
)
"""A thing named alone, no verb ("an aisle seat please", "the vegan meal"): said after a
correcting word when the rules read nothing else in it, a choice."""


def referring_back(body: str, draft: FactDraft | None, shown: str, *, said: str = "") -> FactDraft | None:
    """``draft`` (the reading of ``body``, the sentence ``said`` without its lead words, shown as
    ``shown``) marked as revising what was said before when ``body`` refers back to it — a new
    value alone, or a value said again to correct it ("sorry, it's QQ47LM", "actually, Monday"), an earlier value
    brought back, or what was just supposed taken up ("OK, let's do that") — or a draft of its own for it when the
    rules read nothing; a draft that withdraws a subject ("forget what I said about the budget") in its place; None
    for an option picked by its place alone ("let's do the first one")."""
    if _PICKED_BY_PLACE.match(body.rstrip(".!")):
        return None
    if FORGOTTEN.match(said.strip()) and not RETRACTED.match(said.strip()):  # "forget what I said about the budget": taken back, nothing stated
        return FactDraft(text=said.strip(), importance=0.7, revises="withdrawn")
    new_value = _NEW_VALUE.match(body.rstrip(".!"))
    restated = _RESTATED.match(body.rstrip(".!")) if new_value is None else None
    if restated and (restated.group("owned") or restated.group("meant") or _CORRECTING.match(said.strip())):
        new_value, shown = restated, shown[:1].upper() + shown[1:]  # "It's QQ47LM."
    if new_value is not None:
        value = new_value.group("value")
    else:  # "actually, Monday", "sorry, $700": a value alone after a correcting word corrects one too
        value = body.rstrip(".!") if _CORRECTING.match(said.strip()) else ""
    words = content_words(value)
    if words and (all(any(c.isdigit() for c in w) or w in _NOT_SUBJECTS for w in words) or COUNT.fullmatch(value.strip())):
        revises: Literal["latest", "earlier", "adopted"] = "latest"
    elif _RESTORE.search(body):
        revises = "earlier"
    elif draft is None and RETRACTED.match(said.strip()):  # "never mind" alone: the change just made
        return FactDraft(text=said.strip(), importance=0.7, revises="earlier")
    elif _ADOPT.match(body.rstrip(".!")):
        revises = "adopted"
    else:
        alone = _NAMED_ALONE.match(body.rstrip(".!")) if draft is None and _CORRECTING.match(said.strip()) else None
        if alone:  # "actually, an aisle seat please": a choice, as "make it an aisle seat" is
            return FactDraft(text=shown, kind="preference", key=preference_key(alone.group("obj")), importance=0.7, visibility="session")
        return draft
    if draft is None:
        return FactDraft(text=shown, importance=0.7, revises=revises)
    return replace(draft, revises=revises, key=draft.key if revises == "earlier" else None)


def asked_instead(body: str) -> str | None:
    """``body`` (a question without its lead words) as the choice it asks for instead ("can we
    do business instead?": "make it business instead"), or None when it asks no such thing."""
    asked = _ASKED_INSTEAD.match(body)
    return f"make it {asked.group('obj')} instead" if asked else None


def supposed_act(body: str) -> str:
    """``body`` of a hypothetical or a draft as the value it supposes for a thing ("we held the
    offsite in Austin": "the offsite is in Austin", "we moved the launch to Friday": "the launch
    moved to Friday"), or ``body`` when it supposes no such act."""
    act = _SUPPOSED_ACT.match(body)
    if act is None:
        return body
    moved = act.group("prep").lower() in ("to", "into")
    return f"{act.group('obj')} {'moved to' if moved else 'is ' + act.group('prep')} {act.group('val')}"


def rejected(body: str) -> str | None:
    """The value a "X, not Y", "I meant X not Y" or "don't use Y, use X" correction rejects
    (``Y``), or None."""
    match = _MEANT.search(body) or SWAP.match(body) or _NOT_CORRECTION.search(body)
    return match.group("old").strip() if match else None


__all__ = ["CHOICE", "DIRECTIVE", "MOVE", "PREFERENCE", "SWAP", "TASK", "asked_instead", "preference_key", "referring_back", "rejected", "supposed_act", "visibility_of"]
