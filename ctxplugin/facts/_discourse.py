"""Discourse around what a user states: the words before a statement, a restatement, a value
under consideration. The extraction rules strip the first two and give the third its own fact
scope, so none of them makes a statement look like a new current value."""

from __future__ import annotations

import re

LEAD = re.compile(
    r"^(?:(?:actually|correction|update|note|fyi|ok(?:ay)?|so|also|well|oh|wait|sorry|no(?=\s*[,.;:!-]|\s+(?:i|we|thanks?|wait)\b)|yes|yeah|yep|right|hmm|and|"
    r"but|btw|again|remember|to be clear|to clarify|just to confirm|as i said|like i said|as i mentioned|i repeat|"
    r"change of plans?|new plan|plan change|(?:quick|small|one|another|latest|new)\s+update|heads[- ]up|scratch that|"
    r"never\s?mind|forget (?:that|it)|(?:ignore|disregard) that(?=\s*[,;:!-])|(?:hold|hang) on(?=\s*[,;:!-])|if (?:possible|you can|you could)|(?:on|after) second thoughts?|on reflection|"
    r"come to think of it|oops|my bad|let me correct (?:that|myself)|thinking about it (?:more|again|further))\b[\s,:;!.-]*)+",
    re.IGNORECASE,
)
"""Words before what a sentence states: discourse ("actually", "OK so"), a restatement ("as I
said"), or a label announcing a change ("Change of plans:", "Quick update -", "Scratch that,"), or
politeness ("If possible, ...").
A second thought ("On second thought,", "Oops,", "Let me correct that:") announces a change too.
The statement after them is keyed by its own subject, so it replaces the old value."""
AGAIN = re.compile(
    r"(?:[\s,;-]+(?:again|as i (?:said|mentioned)|like i said|as mentioned|just to be (?:clear|sure)|to be clear)"
    r"(?: (?:before|earlier|already))?)+(?=[.!]*$)",
    re.IGNORECASE,
)
"""A restatement at the end of a sentence ("..., as I said", "... again"): the value said again
is the same statement, not a new one that would replace it."""
TENTATIVE = re.compile(
    r"\b(?:maybe|perhaps|might|possibly|thinking (?:about|of)(?! it (?:more|again|further)\b)|considering|not sure (?:yet|if|whether))\b", re.IGNORECASE
)
"""A user weighing a value ("I'm thinking about making my budget $800", "maybe Friday"): under
consideration, a draft until said plainly, so it replaces nothing and is not shown as current."""

CONDITION = re.compile(
    r"(?:^|[,;]\s*|\s)(?:if|unless|in case|provided that|as long as)\s+(?!(?:possible|needed|necessary|so|not|any|"
    r"applicable|available|required|you\s+(?:can|could|don't mind|do not mind|want|like|prefer|need)|"
    r"(?:that|it|this)\s+(?:helps|works|matters)|you\s+need\s+(?:it|that|this|them)|"
    r"(?:that|it)(?:'s|\s+is)\s+(?:ok|okay|fine|possible|alright|all right|available|helpful|easier))\b)(?P<condition>[^,;]+)",
    re.IGNORECASE,
)
"""A condition on what a sentence states ("if I get the bonus, my budget is $700", "my budget
is $700 unless the hotel is included"): the statement holds only if it does, so it replaces no
value stated plainly and nothing said in the condition is read as holding. Politeness ("if
possible", "if you can", "if that's OK", "if that helps") is no condition."""

REPORTED = re.compile(
    r"^(?!(?i:i|we)\b)(?P<who>(?i:my|our|the|his|her|their|a|an)(?:\s+(?!(?i:is|are|was|were|be|been|not|has|have|had)\b)[\w'-]+){1,3}"
    r"|[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)?)\s+"
    r"(?i:said|says|told (?:me|us)|mentioned|thinks|claims|reckons|wrote|believes|heard)\s+(?i:that\s+)?(?P<said>.+)$"
)
"""Someone else's words the user passes on ("My manager said the hotel stay is 3 nights", "Anna
thinks the meeting is on Friday"): what they said, not what the user states, so it is a draft
until the user says it plainly; keyed by its own subject ("hotel stay"), not by the speaker."""

RETRACTED = re.compile(
    r"^(?:(?:actually|oh|wait|no|sorry|hmm|ok(?:ay)?|so|well)\b[\s,;.!-]*)*"
    r"(?:scratch that|never\s?mind(?: that| what i (?:just )?said)?|forget (?:that|it|what i (?:just )?said)|"
    r"(?:ignore|disregard) (?:that|what i (?:just )?said|my last message))[\s.!]*$",
    re.IGNORECASE,
)
"""A retraction said alone ("Never mind.", "Scratch that.", "Actually, forget it.", "Ignore what I
said."): it takes back the changes the user's message before it made, and nothing older."""

FORGOTTEN = re.compile(
    r"^(?:(?:actually|oh|wait|no|sorry|hmm|ok(?:ay)?|so|well|and|also|please)\b[\s,;.!-]*)*"
    r"(?:(?:please\s+)?(?:forget|ignore|disregard)\s+(?:(?:about\s+)?(?:what|everything|anything|all)\s+(?:that\s+)?(?:i|we)(?:'ve|\s+have)?\s+"
    r"(?:just\s+)?(?:said|told\s+you|mentioned|wrote|asked\s+for)\s+(?:earlier\s+|before\s+)?(?:about|regarding|on|for)\s+|about\s+)?"
    r"|never\s?mind\s+(?:about\s+)?)"
    # a subject, not a clause: "nevermind I booked the hotel" says what the user did
    r"(?!(?:it|that|this|them|everything|all|what|previous|earlier|above|i|we|you|he|she|they|let)\b)(?P<subject>(?:(?:the|my|our)\s+)?[\w'-]+(?:\s+[\w'-]+){0,3}?)"
    r"(?:\s+(?:thing|part|bit|stuff))?[\s.!]*$",
    re.IGNORECASE,
)
"""A subject withdrawn ("Forget what I said about the budget.", "Ignore what I told you about my
seat.", "Never mind the hotel."): the statements the user made about it are taken back, and
nothing new is stated."""

_RAW_LEAD = re.compile(r"^(?:(?:actually|ok(?:ay)?|so|and|oh|right|yes|yeah|btw|wait)\b[\s,:;!.-]*)+", re.IGNORECASE)


def raw_lead(sentence: str) -> str:
    """``sentence`` without its leading discourse words, except an additive "also"/"plus"."""
    match = _RAW_LEAD.match(sentence)
    return sentence[match.end() :] if match else sentence


def tidy(sentence: str, *, keep_also: bool = False, as_written: bool = False) -> str:
    """The sentence without leading discourse words ("Actually, ", "OK so "); with
    ``keep_also`` an additive "also" stays ("Also invite design"); with ``as_written`` (a tool's
    line) its first word keeps its case."""
    body = AGAIN.sub("", (raw_lead(sentence) if keep_also else LEAD.sub("", sentence)).strip())
    if len(body) < 4:
        return sentence
    first = body.split(maxsplit=1)[0]
    # a tool's line quotes a command, a field or a log as printed ("line 2 id=...", "kubectl ...")
    if as_written or not first.isalpha() or not first.islower():
        # a value or a name in code (field_obj.load_only, ord-123, grep:), or one written in mixed
        # case (iPhone, getUser: GetUser names another function), stays as written
        return body
    return body[0].upper() + body[1:]


__all__ = ["AGAIN", "CONDITION", "FORGOTTEN", "LEAD", "REPORTED", "RETRACTED", "TENTATIVE", "raw_lead", "tidy"]
