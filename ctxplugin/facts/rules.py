"""Zero-LLM fact extraction from user messages and tool results.

What the rules find, sentence by sentence (the first rule that fits wins, links are extra):

- assignments and changes: "the meeting is Tuesday", "the data team moved to Project Beta",
  "budget: $50k", "changed the deadline from Friday to Monday" — keyed by their subject, so a
  later statement about the same subject supersedes the earlier one;
- corrections: "actually", "instead", "moved to", "no longer"... raise importance, and
  "X instead of Y", "X, not Y" name the old value Y for the ledger to supersede;
- decisions ("we decided", "let's go with"), preferences ("I'd prefer an aisle seat", "we'd
  rather...", "make it a window seat": see :mod:`~ctxplugin.facts._user_voice`), constraints
  ("max discount is 15%", "deadline", "at most", "after 8 am", "up to $600"), metrics;
- additions accumulate: "add X", "also invite Y", "Z as well" and list items are kept unkeyed, so
  24 agenda items stay 24 facts and "also invite design" does not replace "invite the platform
  team"; only a statement about the same subject with another value replaces an earlier one;
- what the user decided, said as an instruction ("invite the platform team only", "include the
  finance lead") is a decision fact;
- hypothetical and draft statements ("what if", "suppose", "draft") get their own fact scope;
- links and exact identifiers (order ids, paths, emails) as entity facts;
- in French, German, Spanish, Portuguese and Italian, only "my X is ...", corrections and
  hypotheticals (:mod:`~ctxplugin.facts._languages`); all the rest is read in English only.

A tool speaks in its own voice: log lines (``ERROR: ...``, ``L031: ...``, ``Test 2: ...``,
``bash: line 1: ...``) are events, so they are not keyed, while a labelled value
(``Deadline: Friday``) still is; "use X instead of Y" is a tool's advice: it supersedes nothing.

Source code is not prose: fenced code blocks are skipped, and so is any sentence that reads as
code (calls, brackets, semicolons, ``==``, ``import``/``def``/``return``...), so ``x = f(y)`` never
becomes a keyed fact; a user's prose clauses a semicolon joins are read one by one (see _clauses).

Tool results in JSON become one record fact per object ("reservation OI5L9G: origin=MCO, ..."),
keyed by its id field, so a later read of the record supersedes the earlier one.
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import partial
from itertools import chain, islice
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

from ctxplugin._lru import Memo, text_key
from ctxplugin._messages import annotation
from ctxplugin._text_shapes import detect_text_shape
from ctxplugin._untrusted import load_json
from ctxplugin.facts import _languages as languages
from ctxplugin.facts import _user_voice as user_voice
from ctxplugin.facts._clauses import user_sentences
from ctxplugin.facts._counts import count_key, count_of
from ctxplugin.facts._discourse import AGAIN as _AGAIN
from ctxplugin.facts._discourse import CONDITION as _CONDITION
from ctxplugin.facts._discourse import LEAD as _LEAD
from ctxplugin.facts._discourse import REPORTED as _REPORTED
from ctxplugin.facts._discourse import TENTATIVE as _TENTATIVE
from ctxplugin.facts._discourse import raw_lead, tidy
from ctxplugin.facts._json_facts import MAX_RECORDS, clip, flat_items, record_fact, tool_label
from ctxplugin.facts._limits import constraint_type_of
from ctxplugin.facts._not_prose import (
    BARE_VALUE,
    CODE,
    FENCED,
    MACHINE_SHAPES,
    PROGRESS,
    TOOL_TROUBLE,
    TRACE_FRAME,
    labelled_ask,
    log_line,
)
from ctxplugin.facts._scopes import HYPOTHETICAL, carried, scope_of
from ctxplugin.facts._subjects import NUMBERED_SUBJECT as _NUMBERED_SUBJECT
from ctxplugin.facts._subjects import code_unkeyed, labelled_key, records_unkeyed, updated_detail
from ctxplugin.facts._subjects import subject_key as _subject_key
from ctxplugin.facts._text import identifiers, sentences, slug
from ctxplugin.facts._values import EVENTS as _EVENTS
from ctxplugin.facts._values import WHEN_TYPES as _WHEN_TYPES
from ctxplugin.facts._values import read_values, typed_values
from ctxplugin.facts.extract import FactDraft
from ctxplugin.facts.model import FactKind
from ctxplugin.tokens import content_text

_SCOPE_LEAD = re.compile(
    r"^(?:(?:suppose|supposing|hypothetically|imagine|what if|in theory|draft|proposal|tentatively)\b[\s,:;-]*)+",
    re.IGNORECASE,
)
_CORRECTION = re.compile(
    r"\b(actually|correction|instead|moved to|changed to|switched to|updated to|no longer|"
    r"now is|is now|are now|reallocated|reassigned|rescheduled|not anymore|rather than)\b",
    re.IGNORECASE,
)
_CONSTRAINT = re.compile(
    r"\b(max(?:imum)?|at most|no more than|must not|must be|cannot exceed|can't exceed|never exceed|"
    r"limit(?:ed)? to|minimum|at least|deadline|due by|due on|budget|cap(?:ped)? at|policy)\b",
    re.IGNORECASE,
)
_DECISION = re.compile(
    r"\b(?:we|i)\s*(?:'ve|have)?\s+decided\b|\blet'?s\s+(?:go with|use|pick|choose|stick with|switch to|do|make it|move|meet|schedule|book|hold)\b|"
    r"^decision\s*:|\bwe(?:'ll| will)\s+(?:go with|use|pick)\b|\b(?:approved|rejected|signed off)\b",
    re.IGNORECASE,
)
_FROM_TO = re.compile(
    r"\b(?:changed|moved|switched|updated|pushed|shifted|rescheduled)\s+(?:the\s+|our\s+|my\s+)?(?P<subj>[\w' -]{2,40}?)\s+"
    r"from\s+(?P<old>.+?)\s+to\s+(?P<val>.+)$",
    re.IGNORECASE,
)
_VERBS = (
    r"is now|are now|is no longer|are no longer|has moved to|have moved to|has been moved to|"
    r"(?:got|has been|have been|was|were) (?:moved|changed|switched|rescheduled|pushed|postponed|bumped) to|moved to|"
    r"changed to|switched to|updated to|reallocated to|reassigned to|rescheduled to|rescheduled for|"
    r"set to|will be|becomes|is allocated to|are allocated to|allocated to|assigned to|is|are|was|were|=|"
    r"departs|departed|leaves|left|arrives|arrived|lands|landed|starts|started|begins|began|ends|ended|finishes|"
    r"finished|closes|closed|opens|opened|expires|expired"
)
_CLAUSE_BREAK = re.compile(r"[:,;]\s+")
_AND_CLAUSE = re.compile(r",?\s+and\s+|;\s+", re.IGNORECASE)
_ASSIGN = re.compile(rf"^(?P<subj>[\w#][\w#'&/. -]{{0,60}}?)\s*\b(?P<verb>{_VERBS})(?:\s+|\b)(?P<val>.+)$", re.IGNORECASE)
_ASSIGN_EQ = re.compile(r"^(?P<subj>[\w#][\w#'&/. -]{0,60}?)\s*(?P<verb>=)\s*(?P<val>.+)$")
_COLON = re.compile(r"^(?P<subj>[A-Za-z][\w ./#-]{0,40}?)\s*:\s+(?P<val>.+)$")
_INSTEAD_OF = re.compile(r"\binstead of\s+(?P<old>[^,.;]+)|\brather than\s+(?P<old2>[^,.;]+)", re.IGNORECASE)
_ADDITION = re.compile(
    r"^(?:please\s+)?(?:add|append|insert|include|plus)\b|\b(?:also|additionally|in addition)\b|\b(?:too|as well)\s*[.!]?$"
    r"|^\s*(?:[-*\u2022]|\d{1,3}[.)])\s+",
    re.IGNORECASE,
)
"""An addition to what was said before (or a list item): it accumulates and replaces nothing."""
_REQUEST = re.compile(
    r"^(?:please\s+)?(?:look\s+up|look\s+at|check|find|show|tell|get|search|open|read|list|fetch|pull\s+up|give|"
    r"send|explain|summari[sz]e|compare|review|help)\b",
    re.IGNORECASE,
)
"""A request to do something ("Look up the discount policy page"): it asks, it does not state what holds,
so a limit word in it ("policy", "budget") alone does not make it a constraint (an amount does: "show me flights under $500 max")."""
_USER_MOVED = re.compile(r"^i(?:'ve| have)?\s+(?:just\s+)?moved\s+to\s+(?P<val>.+)$", re.IGNORECASE)
_METRIC = re.compile(
    r"[$€£]\s?\d|\b\d+(?:[.,]\d+)*\s?(?:%|ms|s|sec|secs|seconds|min|minutes|h|hrs|hours|days|weeks|k|m|bn|gb|mb|kb|tb|"
    r"usd|eur|gbp|x|pts|points|users|requests|rps|qps)\b",
    re.IGNORECASE,
)
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})  # rules read "don’t" as "don't"
_URL = re.compile(r"https?://[^\s<>\"'`)\]]+", re.IGNORECASE)
_MAX_SENTENCES = 40
_SENTENCE_CHARS = 4000
"""Characters of one sentence the rules read: a longer one (a pasted blob) is read from its start."""
_TOOL_TEXT = 4000  # characters of a plain-text tool output the prose rules read
_READ: Memo[tuple[object, ...], tuple[FactDraft, ...]] = Memo(8192)
"""The drafts of each sentence read lately, by its text and voice, and the extractor's class if a subclass (which may read its own way): a key of strings and numbers alone is no object the garbage collector keeps going through."""


class RuleExtractor:
    """The zero-LLM extractor (see the module docstring for what it finds).

    Args:
        max_per_message: facts kept from one message at most.
    """

    def __init__(self, max_per_message: int = 8) -> None:
        self.max_per_message = max_per_message

    def __call__(self, message: BaseMessage) -> list[FactDraft]:
        limit = self.max_per_message
        if isinstance(message, ToolMessage):
            shape = annotation(message).get("shape")
            drafts = self.from_tool(content_text(message.content), message.name, shape=shape if isinstance(shape, str) else None, limit=limit)
        elif isinstance(message, HumanMessage):
            drafts = self.from_text(content_text(message.content), limit=limit)
        else:
            drafts = []
        return drafts[:limit]

    # ------------------------------------------------------------------ prose
    def from_text(self, text: str, *, voice: str = "user", limit: int | None = None) -> list[FactDraft]:
        """Facts stated in prose (``voice="tool"`` skips decisions and preferences); with
        ``limit``, reading stops once that many are found (the first ones are the same)."""
        out: list[FactDraft] = []
        seen: set[str] = set()
        read = islice((user_sentences if voice == "user" else sentences)(FENCED.sub("\n", text)), _MAX_SENTENCES)
        for whole, opened in carried(read) if voice == "user" else ((w, None) for w in read):
            sentence = whole[:_SENTENCE_CHARS]
            if limit is not None and len(out) >= limit:
                break  # a 60-line listing is not read to its end for facts that would be dropped
            # a sentence is read once per voice: a task template or a tool's banner comes back
            # word for word in every task and output that holds it
            key = (*text_key(sentence), voice, *(() if type(self) is RuleExtractor else (type(self),)))
            for read_draft in _READ.get_or_make(key, partial(self._read, sentence, voice)):
                # "Draft:", "Suppose ...": what the message goes on to say is said in their scope
                draft = replace(read_draft, scope=opened) if opened and read_draft.scope == "global" else read_draft
                if draft.text not in seen:
                    seen.add(draft.text)
                    out.append(draft)
        return out

    def _read(self, sentence: str, voice: str) -> tuple[FactDraft, ...]:
        """The drafts of one sentence (none from code, a traceback, a tool's progress or
        trouble line, or a value a tool gave alone)."""
        if CODE.search(sentence) or TRACE_FRAME.match(sentence) or (
            voice == "tool" and (PROGRESS.match(sentence) or TOOL_TROUBLE.search(sentence) or BARE_VALUE.fullmatch(sentence))
        ):
            return ()
        return code_unkeyed(sentence, voice, tuple(d for part in _parts(sentence, voice) for d in self._sentence(part, voice)))

    def _sentence(self, raw: str, voice: str) -> list[FactDraft]:
        sentence = clip(raw.strip().strip("*_`>").strip())
        if len(sentence) < 4:
            return []
        out: list[FactDraft] = []
        ids = identifiers(sentence)
        links = _URL.findall(sentence)
        asking = sentence.endswith("?") or _labelled_question(sentence)  # "Question 5: how do refunds work"
        instead = user_voice.asked_instead(_LEAD.sub("", sentence.translate(_APOSTROPHES)).strip()) if asking and voice == "user" else None  # "can we do X instead?"
        question = asking and not instead and not HYPOTHETICAL.search(sentence) and not languages.hypothetical(sentence.translate(_APOSTROPHES))
        main = None if question else self._statement(instead or sentence.translate(_APOSTROPHES), voice, ids, shown=sentence)
        if voice == "user" and not question:  # "make that the 24th", "never mind, keep the original"
            said = instead or sentence.translate(_APOSTROPHES)
            main = user_voice.referring_back(_LEAD.sub("", said).strip(), main, shown=tidy(sentence), said=said)
        if main is not None:
            out.append(main)
        for url in links:
            out.append(FactDraft(text=clip(sentence if len(sentence) <= 200 else f"link: {url}"), kind="link", tags=(url.lower().rstrip(".,;"),), importance=0.4))
        if main is None and ids and not links and not question:
            out.append(FactDraft(text=sentence, kind="entity", tags=tuple(ids[:8]), importance=0.4))
        return out

    def _statement(self, sentence: str, voice: str, ids: list[str], *, shown: str) -> FactDraft | None:
        foreign = languages.read(sentence) if voice == "user" else None  # French, German... (see _languages)
        # "Korrektur: mein Abflug ist ...": the statement after the other language's lead words
        body = _AGAIN.sub("", _SCOPE_LEAD.sub("", _LEAD.sub("", sentence[foreign.start if foreign else 0 :]).strip()).strip().rstrip(".!?"))
        # "not economy, business": the user names the value they reject
        not_this = user_voice.rejected(body) if voice == "user" else None
        scope = ("hypothetical" if foreign is not None and foreign.hypothetical else scope_of(sentence)) if voice == "user" else None
        body = user_voice.supposed_act(body) if scope in ("hypothetical", "draft") else body  # "we held the offsite in Austin"
        weighed = scope == "global" and bool(_TENTATIVE.search(sentence))  # "maybe $800"
        reported = _REPORTED.match(body) if voice == "user" else None
        if reported:  # "my manager said the stay is 3 nights": their word, a draft keyed by what it is about
            body, scope = reported.group("said"), "draft" if scope == "global" else scope
        labelled = _COLON.match(body)
        asked = labelled is not None and labelled_ask(labelled.group("subj"), labelled.group("val")) is not None
        if labelled is not None and asked and not (voice == "user" and user_voice.TASK.match(body)):
            body = labelled.group("val")  # "Task 3: summarize the report": the request, read as if unlabelled
        request = asked or bool(_REQUEST.match(body))
        # "use X instead of Y" from a tool is advice (a linter's message), not a correction
        replaces = (_replaced(sentence) or not_this) if voice == "user" else None
        tags = tuple(ids[:8])
        addition = voice == "user" and bool(_ADDITION.search(raw_lead(sentence)))

        def make(kind: FactKind, key: str | None, **extra: Any) -> FactDraft:
            constraint_type = ((foreign and foreign.limit) or constraint_type_of(sentence)) if kind == "constraint" else None
            # a correction and a tool line's scope are told only when a fact is made: most lines give none
            importance = 0.7 if not_this is not None or _CORRECTION.search(sentence) or (foreign and foreign.correction) else 0.5
            weight = max(importance, 0.8) if kind == "constraint" else importance
            stated = "draft" if weighed and (key or typed_values(sentence)) else scope or scope_of(sentence)
            conditional = voice == "user" and scope == "global" and _CONDITION.search(sentence) is not None
            return FactDraft(  # "if I get the bonus, my budget is $700" replaces nothing
                text=tidy(shown[foreign.start :] if foreign else shown, keep_also=addition, as_written=voice == "tool"), key=None if conditional else key or None, kind=kind, tags=tags, importance=weight, scope=stated,
                replaces=extra.get("replaces", replaces), constraint_type=constraint_type,
                visibility=extra.get("visibility"),
            )

        if voice == "user":
            if _USER_MOVED.match(body):
                return make("fact", "my_address")
            detail = updated_detail(raw_lead(sentence).rstrip(".!? "))  # "update" leads statements too: kept here
            if detail:  # "update my email to X", "please use my new email X"
                return make("fact", detail)
            if user_voice.SWAP.match(body):  # "don't use my Visa card, use the Mastercard"
                return make("preference", None, visibility="session")
            pref = user_voice.PREFERENCE.match(body)
            if pref:
                topic = pref.group("obj") or pref.group("obj2") or pref.group("rule") or ""
                return make("preference", user_voice.preference_key(topic), visibility=user_voice.visibility_of(body))
            choice = user_voice.CHOICE.match(body)
            if choice:  # revises a preference of the decision at hand
                return make("preference", user_voice.preference_key(choice.group("obj")), visibility="session")
            bounded = bool(read_values(sentence).bounds)  # "I need to fly after 11am": a limit, not a task
            if user_voice.TASK.match(body) and not ((_CONSTRAINT.search(sentence) and _METRIC.search(sentence)) or bounded):
                return make("task", None)
            if user_voice.DIRECTIVE.match(body) or user_voice.DIRECTIVE.match(sentence):
                return make("decision", None)
        changed = _FROM_TO.search(body)
        if changed:
            return make(_kind_of(sentence, changed.group("val"), voice), _subject_key(changed.group("subj"), changed.group("val")), replaces=changed.group("old"))
        assign, key = _assignment(body)
        if assign and key and voice == "tool" and assign.re is _COLON and log_line(assign.group("subj"), assign.group("val")):
            key = None  # "ERROR: ...", "L031: ...", "Test 2: ...": a log line reports an event, not a value
        if assign and key and voice == "user" and assign.re is _COLON:  # "Final: the venue is Hall B" (see labelled_key)
            key = labelled_key(key, assign.group("subj"), _ASSIGN.match(assign.group("val")))
        if assign and key:
            if voice == "user" and (counted := count_of(key, assign.group("val"))) is not None:
                key = counted  # "the offsite is for 12 people": offsite_people_count, beside where it is
            kind = _kind_of(sentence, assign.group("val"), voice)
            if voice == "user" and _DECISION.search(sentence):
                kind = "decision"
            if addition and not _NUMBERED_SUBJECT.search(assign.group("subj")):
                key = None  # "Z as well", "- budget: 5k" in a list: added to what was said, not replacing it
            return make(kind, key)
        if foreign is not None and foreign.key:  # "mon budget est de 900 EUR": keyed as "my budget is ..."
            return make("constraint" if foreign.limit else _kind_of(sentence, foreign.value or "", voice), foreign.key)
        if voice == "user" and (counted := count_key(body)) is not None:  # "we expect 5 people": people_count
            return make(_kind_of(sentence, body, voice), counted)
        if voice == "user" and (_DECISION.search(sentence) or user_voice.MOVE.match(body)):
            topic = re.search(r"\bfor\s+(?:the\s+|our\s+)?(?P<topic>[\w -]{2,40})$", body, re.IGNORECASE)
            return make("decision", "decision_" + slug(topic.group("topic"), 3) if topic else None)
        if _CONSTRAINT.search(sentence) and (_METRIC.search(sentence) or (voice == "user" and not request)):
            return make("constraint", None)
        if voice == "user" and read_values(sentence).bounds and not request:
            return make("constraint", None)  # "I don't want to fly before 11am", "I can pay up to $600"
        if replaces and (not_this is not None or _CORRECTION.search(sentence)):
            return make("decision" if voice == "user" else "fact", None)
        if ids and _METRIC.search(sentence):
            return make("metric", None)
        return None

    # ------------------------------------------------------------------ tool results
    def from_tool(
        self, text: str, tool_name: str | None = None, *, shape: str | None = None, limit: int | None = None
    ) -> list[FactDraft]:
        """Facts in a tool result: records of JSON objects, or the prose rules on the first
        characters of plain text, unless it is code, a diff, a test report or a listing
        (:data:`MACHINE_SHAPES`; ``shape`` is what a summary of the whole output found, else
        the shape of those characters is told here). ``limit`` as for :meth:`from_text`."""
        stripped = text.strip()
        if stripped[:1] in "[{":
            try:
                data = load_json(stripped)
            except ValueError:  # not JSON, or past the safe limits (deep nesting, huge integers)
                data = None
            if isinstance(data, (dict, list)):
                return self.from_json(data, tool_name)
        head = stripped[:_TOOL_TEXT]
        if (shape or detect_text_shape(head)) in MACHINE_SHAPES:
            return []
        return records_unkeyed(self.from_text(head, voice="tool", limit=limit), quoting=head)

    def from_json(self, data: dict[str, Any] | list[Any], tool_name: str | None = None) -> list[FactDraft]:
        """One record fact per JSON object (a list gives its first few objects)."""
        label = tool_label(tool_name)
        if isinstance(data, dict):
            draft = record_fact(data, label, keyed=True)
            return [draft] if draft else []
        items = flat_items(data)
        out = [d for d in (record_fact(item, label, keyed=False) for item in items[:MAX_RECORDS]) if d]
        if len(items) > MAX_RECORDS and out:
            out.append(FactDraft(text=f"{label}: {len(items)} results", kind="metric", importance=0.3))
        return out


def _assignment(body: str) -> tuple[re.Match[str] | None, str | None]:
    """The first "subject verb value" reading of ``body`` or of a clause after ``:``/``,``."""
    first: re.Match[str] | None = None
    for clause in chain((body,), (body[m.end() :].strip() for m in _CLAUSE_BREAK.finditer(body))):
        match = _ASSIGN.match(clause) or _ASSIGN_EQ.match(clause) or _COLON.match(clause)
        event = _EVENTS.get(match.group("verb").lower()) if match is not None and match.re is _ASSIGN else None
        if match is None or (event and not _WHEN_TYPES.intersection(typed_values(match.group("val")))):
            continue  # "the team left the project" says when nothing happens
        first = first or match
        # "mon budget : 900 EUR" is about what "mon budget est de 900 EUR" is (an English verb: English)
        key = (match.re is not _ASSIGN and languages.own(match.group("subj"))) or _subject_key(match.group("subj"), match.group("val"))
        key = f"{key}_{event}" if key and event else key
        if key:
            return match, key
    return first, None


def _labelled_question(sentence: str) -> bool:
    """Whether ``sentence`` is a label and a question without its question mark ("Question 5:
    how do refunds work", "Order 5: can you check the status"): it asks, so it states nothing."""
    labelled = _COLON.match(_LEAD.sub("", sentence.translate(_APOSTROPHES)).strip())
    return labelled is not None and labelled_ask(labelled.group("subj"), labelled.group("val")) == "question"


def _parts(sentence: str, voice: str) -> list[str]:
    """``sentence``, or its clauses when it joins statements about different subjects ("Anna's seat
    is 12A and Tom's seat is 12B"): each is keyed by its own subject, so a later "Tom's seat is
    14C" replaces Tom's alone; after words that lead a change too ("Actually, my budget is $700
    and my seat is 14C"); "mon budget est de 900 EUR et ma ville est Lyon" as well."""
    parts = _AND_CLAUSE.split(sentence)
    bodies = [_LEAD.sub("", p).strip() for p in parts]  # "Actually, my budget is $700 and ...": after the lead words
    keys = [_assignment(b.rstrip(".!"))[1] for b in bodies] if len(parts) > 1 else []
    if keys and all(keys) and len(set(keys)) == len(keys) and all(_ASSIGN.match(b) or _ASSIGN_EQ.match(b) for b in bodies):
        return parts
    return languages.parts(sentence) if voice == "user" else [sentence]


def _kind_of(sentence: str, value: str, voice: str) -> FactKind:
    if _CONSTRAINT.search(sentence) and (_METRIC.search(value) or re.search(r"\d", value)):
        return "constraint"
    if _METRIC.search(value):
        return "metric"
    if voice == "user" and _DECISION.search(sentence):
        return "decision"
    return "fact"


def _replaced(sentence: str) -> str | None:
    match = _INSTEAD_OF.search(sentence)
    return ((match.group("old") or match.group("old2") or "").strip() or None) if match else None


__all__ = ["RuleExtractor"]
