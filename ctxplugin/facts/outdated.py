"""Supersession-aware history: mark old statements of a replaced value in the prepared view.

After "the data team moved to Project Beta" supersedes "the data team is on Project Alpha",
the older messages saying "Project Alpha" are still in the conversation. A model reading them
may bring the old value back. :func:`mark_outdated` returns copies of those messages with a
short note in front, ``[outdated: data_team is now: ...Project Beta]``; the caller's messages
and the agent's transcript are never changed.

A message states a superseded value when it is the fact's own source (same message id or CAS
ref), or when it contains every word that distinguishes the old statement from the new one
together with the subject (the key's words that the old statement uses, or else two words both
statements share), without also stating the new value (that would be the correction itself).
A user message after the one that made the change is never marked by it: it asks about the old
value or takes the change back, it is not stale. Nor is a user message marked by a change between
two tool results: a user outranks a tool, so the facts block keeps what the user said current.

Statements that are not current for another reason are marked too: one refused by a higher
authority (``[overruled: ...]``), and a hypothetical or draft one (``[hypothetical: not a
current fact]``, ``[draft: not decided]``) — the source message of a hypothetical or draft fact,
or a message a host marked with ``additional_kwargs["ctxplugin"]["fact_scope"]``. A user who
opens an exploratory span ("Let's brainstorm. This is just exploratory.") makes every message
up to the one that closes it ("OK, enough brainstorming for now, back to real commitments")
hypothetical too. An interruption the user announced and has since left ("Hold on - urgent call
from Initech" ... "Back to Globex prep") is marked as an aside (``[aside: an interruption, not the
current task]``): what it says stays true, but it is not the task the conversation returned to.

Text read from a tool output is never quoted in a note: notes go into user and assistant
messages, and tool text is data. A fact from a tool is named by its ref instead.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin._lru import PerMessage
from ctxplugin._messages import META_KEY, annotation, source_refs
from ctxplugin.facts._asides import Asides, aside_spans
from ctxplugin.facts._changes import Change, change_of
from ctxplugin.facts._exploring import Exploring, exploratory_spans
from ctxplugin.facts._reading import (
    _PROVISIONAL,
    InForce,
    Read,
    _Provisional,
    fingerprint,
    in_force_of,
    may_restate,
    read,
    replaced_by,
)
from ctxplugin.facts._text import content_words
from ctxplugin.facts.model import FactQuery, permitted
from ctxplugin.scope import Scope
from ctxplugin.tokens import content_text

if TYPE_CHECKING:
    from ctxplugin.facts.ledger import FactsLedger

def replaced_in_view(rules: InForce, view: Sequence[BaseMessage]) -> InForce:
    """``rules`` without the changes of a tool result to a later one that ``view`` holds.

    For a history sent whole: the later result follows the earlier one in view, and a mark on
    the earlier one would rewrite the prefix a provider has cached for nothing the model cannot
    see. A refusal, and every change a user, the system or a caller made, stay."""
    between_tools = [c for c in rules.changes if c.old.from_tool and c.new.from_tool and not c.old.refused]
    if not between_tools:
        return rules
    refs = {ref for message in view for ref in source_refs(message)}
    dropped = {id(c) for c in between_tools if c.new.source.ref in refs}
    if not dropped:
        return rules
    return in_force_of([c for c in rules.changes if id(c) not in dropped], rules.provisional)


def mark_outdated(
    body: Sequence[BaseMessage],
    *,
    ledger: FactsLedger,
    scope: Scope,
    limit: int = 200,
    keep: Collection[int] = (),
) -> tuple[list[BaseMessage], int]:
    """Copies of ``body`` where messages stating a superseded, refused, hypothetical or draft
    fact carry a note saying it is not current.

    Args:
        body: the conversation (without the leading system messages).
        ledger: where superseded facts are looked up.
        scope: whose facts count.
        limit: the most recent superseded (and provisional) facts considered.
        keep: indexes of ``body`` never marked (the engine keeps the latest user message
            exactly as sent).

    Returns:
        The new message list and how many messages were marked.
    """
    marking = Marking()
    marking.update(
        body, in_force(ledger, scope, limit), spans=exploratory_spans(body), asides=aside_spans(body), keep=keep
    )
    return list(marking.out), marking.count


def in_force(ledger: FactsLedger, scope: Scope, limit: int = 200) -> InForce:
    """The superseded (and refused) facts and the provisional facts ``scope`` reads, the
    ``limit`` most recent of each."""
    # a statement brought back ("never mind, keep the original") is current again, not outdated
    pairs = ledger.superseded(scope=scope, limit=limit)
    changes = [change_of(old, new) for old, new in pairs if old.text_hash != new.text_hash]
    provisional = _provisional(ledger, scope, limit)
    return in_force_of(changes, provisional)


_NONE: frozenset[str] = frozenset()


class Marking:
    """The marked copies of a conversation's first messages, extended as the conversation
    grows: a message's marks depend on it, on the facts in force, on its span, and on the
    replacements quoted before it, so a conversation that only grew is marked only where it
    grew while the facts in force stay the same. Not locked: one caller at a time."""

    __slots__ = ("count", "kept", "marks", "out", "prints", "quoted", "reads", "said", "version", "where")

    def __init__(self) -> None:
        self.version = 0
        self.out: list[BaseMessage] = []
        self.marks: list[bool] = []  # whether out[i] carries a note
        self.quoted: list[frozenset[str]] = []  # the replacements out[i] quotes in full
        # what out[i]'s mark was made from (None: not read, as it was kept as sent or states
        # nothing a rule can change)
        self.reads: list[Read | None] = []
        # out[i]'s words and refs as a few bits each (see _reading.fingerprint), to pass over the messages
        # a change cannot concern without reading them
        self.prints: list[int] = []
        self.said: set[str] = set()  # replacements already quoted in full
        # the first index of ``out`` holding each ref: a user message after the one that made
        # a change is never marked by it ("sorry, was it Tuesday before?" asks, it is not stale)
        self.where: dict[str, int] = {}
        self.count = 0
        self.kept = 0  # how many of ``out`` the last update kept as they were

    def update(
        self,
        body: Sequence[BaseMessage],
        rules: InForce,
        *,
        spans: Mapping[int, str],
        asides: Mapping[int, str],
        keep: Collection[int] = (),
        start: int = 0,
        again: Collection[int] = (),
    ) -> None:
        """Mark ``body`` from ``start`` on; the marks before ``start`` are kept when
        ``rules`` are those they were made under (``body`` starts with the messages they were
        made for, with the same spans and the same indexes kept, but for ``again``).

        Args:
            spans: the exploratory spans of ``body`` (which take precedence).
            asides: the asides of ``body``.
            again: indexes before ``start`` kept as sent until now, marked now (the user's
                previous message once they speak again). The marks after one stand unless it
                quotes a replacement in full (later marks point back to it): then they are
                made again from it on.
        """
        same = len(self.out)  # the first mark of ``out`` this update changes
        if rules.version != self.version:
            start, same = self._carry(body, rules, min(start, len(self.out)), spans, asides)
            self.version = rules.version
        upto = min(start, len(self.out))
        for index in sorted(again):
            if index >= upto:
                break
            was = self.out[index]
            if self.reads[index] is not None or not self._again(body[index], rules, spans.get(index) or asides.get(index), index):
                upto = index  # read before, or it quotes a replacement: marked again from it on
                break
            if self.out[index] is not was:
                same = min(same, index)
        self._truncate(upto)
        self.kept = min(upto, same)
        for index in range(len(self.out), len(body)):
            self._mark(body[index], rules, spans.get(index) or asides.get(index), index in keep)

    def _carry(
        self, body: Sequence[BaseMessage], rules: InForce, upto: int, spans: Mapping[int, str], asides: Mapping[int, str]
    ) -> tuple[int, int]:
        """Bring the marks of ``body``'s first ``upto`` messages up to date with ``rules``: how
        many of them now stand (``upto``, unless the marks from a message on must be made again)
        and the first whose marked copy changed (``upto`` if none did).

        Only the messages that may read differently (see :func:`may_restate`) are read again.
        From the first that does, the marks of the messages stating a replacement are made
        again too (whether a replacement is quoted in full depends on the messages before);
        a message stating none keeps its mark, which depends on nothing before it."""
        test = may_restate(self.version, rules)
        if test is None:
            restated = self._first_restated(body, rules, upto)
            return restated, restated
        reads, prints = self.reads, self.prints
        fresh: dict[int, Read] = {}
        for index in test.suspects(prints, upto):
            made = reads[index]
            if made is None or not test(body[index], made, prints[index]):
                continue
            now = test.read(body[index], made)
            if _same(made, now):
                reads[index] = now
            else:
                fresh[index] = now
        if not fresh:
            return upto, upto
        first = min(fresh)
        changed = upto
        said: set[str] = set().union(*self.quoted[:first])
        was = set(said)  # what the messages before quoted when their marks were made
        # a message that states nothing, quotes nothing and reads as before keeps its mark and
        # changes neither set: only the others are gone through (a long chat holds thousands)
        stating = [i for i in range(first, upto) if self.quoted[i] or ((made := reads[i]) is not None and made[1])]
        for index in sorted({*fresh, *stating}):
            made = fresh.get(index) or reads[index]
            quoted_before = self.quoted[index]
            if made is None or (
                index not in fresh and not any((c.new.id in said) != (c.new.id in was) for c in made[1])
            ):
                # states the same as before, after messages that quoted the same of it: same mark
                said.update(quoted_before)
                was.update(quoted_before)
                continue
            was.update(quoted_before)
            reads[index] = made
            message = body[index]
            marked, quoted = self._note(message, made, spans.get(index) or asides.get(index), said, index)
            self.count += (marked is not None) - self.marks[index]
            if (marked or message) is not self.out[index]:
                changed = min(changed, index)
            self.out[index] = marked or message
            self.marks[index] = marked is not None
            self.quoted[index] = quoted
            said.update(quoted)
        self.said = said
        return upto, changed

    def _first_restated(self, body: Sequence[BaseMessage], rules: InForce, upto: int) -> int:
        """The first of ``body``'s first ``upto`` messages that states something else under
        ``rules`` than it did when its mark was made (``upto`` if none does): the marks before
        it stand, since a mark depends on the reads of its message and of those before it.

        A message kept as sent was not read and has no mark: it is still kept (the indexes kept
        are the same, see :meth:`update`), so nothing of it depends on the rules."""
        reads = self.reads
        for index in range(upto):
            made = reads[index]
            if made is None:
                continue
            now = read(body[index], rules)
            if not _same(made, now):
                return index
            reads[index] = now
        return upto

    def _truncate(self, size: int) -> None:
        if size == len(self.out):
            return
        self.count -= sum(self.marks[size:])
        del self.out[size:], self.marks[size:], self.quoted[size:], self.reads[size:], self.prints[size:]
        self.said = set().union(*self.quoted)
        self.where = {ref: index for ref, index in self.where.items() if index < size}

    def _mark(self, message: BaseMessage, rules: InForce, span: str | None, kept: bool) -> None:
        index = len(self.out)
        for ref in source_refs(message):
            self.where.setdefault(ref, index)
        made = None if kept or not isinstance(message, (HumanMessage, AIMessage, ToolMessage)) else read(message, rules)
        marked, quoted = (None, _NONE) if made is None else self._note(message, made, span, self.said, index)
        self.reads.append(made)
        self.prints.append(0 if made is None or made[0] else fingerprint(message))
        self.out.append(marked or message)
        self.marks.append(marked is not None)
        self.quoted.append(quoted)
        self.said.update(quoted)
        self.count += marked is not None

    def _again(self, message: BaseMessage, rules: InForce, span: str | None, index: int) -> bool:
        """Mark ``out[index]``, kept as sent until now, in place as :meth:`_mark` would have;
        False (nothing changed) when its mark would quote a replacement in full."""
        made = read(message, rules) if isinstance(message, (HumanMessage, AIMessage, ToolMessage)) else None
        if made is None:
            return True
        marked, quoted = self._note(message, made, span, set().union(*self.quoted[:index]), index)
        if quoted:
            return False
        self.reads[index] = made
        self.prints[index] = 0 if made[0] else fingerprint(message)
        self.out[index] = marked or message
        self.count += (marked is not None) - self.marks[index]
        self.marks[index] = marked is not None
        return True

    def _note(
        self, message: BaseMessage, made: Read, span: str | None, said: Collection[str], index: int
    ) -> tuple[BaseMessage | None, frozenset[str]]:
        """``message`` (``out[index]``) with its notes (None when it needs none), and the
        replacements it quotes, from what it states (``made``) after the messages before it
        quoted ``said`` in full."""
        empty, stating, provisional_kind = made
        if empty:
            return None, _NONE
        if isinstance(message, HumanMessage):
            # a change a tool made (its newer result replacing its older one) leaves what the
            # user said current, as the facts block reads it: a user outranks a tool
            where = self.where
            stating = tuple(c for c in stating if not c.new.from_tool and where.get(c.new.source.ref or "", index) >= index)
        hits: list[str] = []
        here: set[str] = set()
        for change in stating:
            # one note per replacement; its value is quoted once, later messages point back
            if change.new.id in here:
                continue
            here.add(change.new.id)
            hit = change.short if change.new.id in said else change.note
            if hit not in hits:  # two replacements of tool facts both read "this changed": said once
                hits.append(hit)
        ids = [c.old.id for c in stating]
        kind = span or provisional_kind
        if kind is not None and _PROVISIONAL[kind] not in content_text(message.content):
            hits.insert(0, _PROVISIONAL[kind])
        return (_with_notes(message, hits, ids) if hits else None), (frozenset(here) if here else _NONE)


def _same(before: tuple[bool, tuple[Change, ...], str | None], now: tuple[bool, tuple[Change, ...], str | None]) -> bool:
    """Whether two reads of a message give it the same notes."""
    return (
        before[0] == now[0]
        and before[2] == now[2]
        and [(c.old.id, c.new.id, c.note, c.short) for c in before[1]] == [(c.old.id, c.new.id, c.note, c.short) for c in now[1]]
    )


def _provisional(ledger: FactsLedger, scope: Scope, limit: int) -> list[_Provisional]:
    """The current hypothetical and draft facts stated in the conversation (not by tools)."""
    query = FactQuery(reader=scope, valid=True, scopes=("hypothetical", "draft"))
    found = [f for f in ledger.store.find(query, limit=limit) if permitted(f, scope) and not f.from_tool]
    return [_Provisional(f.source.ref, frozenset(content_words(f.text)), f.scope) for f in found]


_MARKED: PerMessage[dict[tuple[tuple[str, ...], tuple[str, ...]], BaseMessage]] = PerMessage(4096)
"""The marked copy of each message, by message and notes: a message marked on one call is marked
the same way on the next, and showing the same copy again lets what is derived from it (its
token count, its compressed form) be found by identity."""


def _with_notes(message: BaseMessage, notes: list[str], ids: list[str]) -> BaseMessage:
    key = (tuple(notes), tuple(ids))
    marked = _MARKED.get(message)
    if marked is not None and key in marked:
        return marked[key]
    copy = _marked_copy(message, notes, ids)
    if marked is None:
        marked = {}
        _MARKED.put(message, marked)
    marked[key] = copy
    return copy


def _opening(block: object) -> bool:
    """Whether ``block`` is thinking a Claude turn opens with, which must stay first: Anthropic's
    ``thinking`` and ``redacted_thinking``, Bedrock's ``reasoning_content``, or a signed standard
    ``reasoning`` block (``output_version="v1"``)."""
    if not isinstance(block, dict):
        return False
    kind = block.get("type")
    extras = block.get("extras")
    return kind in ("thinking", "redacted_thinking", "reasoning_content") or (
        kind == "reasoning" and isinstance(extras, dict) and "signature" in extras)


def _marked_copy(message: BaseMessage, notes: list[str], ids: list[str]) -> BaseMessage:
    prefix = " ".join(notes)
    content: Any = message.content
    if isinstance(content, str):
        new_content: Any = f"{prefix} {content}"
    else:
        # after the thinking a Claude turn opens with (Anthropic and Bedrock refuse a request whose
        # last assistant turn, with thinking on, starts with anything else)
        at = next((i for i, b in enumerate(content) if not _opening(b)), len(content))
        new_content = [*content[:at], {"type": "text", "text": prefix}, *content[at:]]
    meta = dict(annotation(message))
    if ids:
        meta["outdated"] = [*meta.get("outdated", []), *ids]
    kwargs = {**message.additional_kwargs, META_KEY: meta}
    return message.model_copy(update={"content": new_content, "additional_kwargs": kwargs})


__all__ = ["Asides", "Exploring", "InForce", "Marking", "aside_spans", "exploratory_spans", "in_force", "mark_outdated", "replaced_by", "replaced_in_view"]
