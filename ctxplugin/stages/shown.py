"""Shown: facts the compressed history already shows are left out of the facts block.

A fact read from a message the view carries unchanged (or whole with an outdated mark), or whose
statement a user message of the view holds word for word, adds nothing; nor does a mention of
values (an ``entity``, ``metric``
or ``link`` fact) whose every value the first context note lists (the archive, once there is
one: it changes when the facts block is chosen again, so the block stays in the cached prefix).
What the view states word for word but a caller keeps as state under its own key is named by
its key, all such keys in one line: the model then knows the statement is current state, and
what the caller calls it.
While the whole history fits, the facts block is then empty and the view is the conversation as
it was, so a provider's prompt cache serves every call but the newest turn.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple

from langchain_core.messages import BaseMessage, HumanMessage

from ctxplugin._layout import is_condensed
from ctxplugin._lru import LRU
from ctxplugin._messages import annotation, source_refs
from ctxplugin._prefix import Stamp
from ctxplugin.budget import FactLine
from ctxplugin.facts.render import normalized, restates
from ctxplugin.history.identifiers import identifiers, occurs
from ctxplugin.stages.view import SESSIONS_TRACKED, CallView
from ctxplugin.tokens import content_text


class _Checked(NamedTuple):
    """One session's previous check: its lines, what they were checked against (see
    :func:`_shown_parts`; the user messages' texts as the messages give them, not joined into
    one more string to keep) and the lines kept."""

    lines: tuple[FactLine, ...]
    hits: frozenset[str]  # the sources of ``lines`` among the messages shown unchanged
    listed: str
    said: tuple[str, ...]
    kept: tuple[FactLine, ...]


@dataclass(frozen=True, slots=True)
class SkipShown:
    """Drop from ``facts`` the lines the history already shows."""

    name: ClassVar[str] = "shown"
    # per session: the ids of the conversation's messages, with the stamp of the conversation
    # they are of, extended with the new messages' when it only grew
    _ids: LRU[str, tuple[Stamp, int, set[int]]] = field(
        default_factory=lambda: LRU(SESSIONS_TRACKED)
    )
    # per session: the previous call's lines, what they were checked against and the lines kept
    _kept: LRU[str, _Checked] = field(default_factory=lambda: LRU(SESSIONS_TRACKED))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def apply(self, view: CallView) -> CallView:
        if not view.facts:
            return view
        lines = view.facts
        refs, listed, said = _shown_parts(view.original, view.history, self._originals(view))
        hits = frozenset(
            line.source_ref
            for line in lines
            if line.source_ref is not None and line.source_ref in refs
        )
        key = view.scope.key()
        with self._lock:
            last = self._kept.hit(key)
        # the lines kept depend on the view only through these: the previous call's answer
        # holds while they are the same (a host's next call, as a rule, shows the same lines
        # beside the same notes and the same user messages)
        if (
            last is not None
            and last.hits == hits
            and last.listed == listed
            and last.said == said
            and last.lines == lines
        ):
            return view.override(facts=last.kept)
        kept = _kept_lines(lines, hits, listed, normalized(said))
        with self._lock:
            self._kept.put(key, _Checked(lines, hits, listed, said, kept))
        return view.override(facts=kept)

    def _originals(self, view: CallView) -> set[int]:
        key, stamp, raw = view.scope.key(), view.original_stamp, view.original
        # claimed while this call runs: a concurrent call of the session starts afresh
        with self._lock:
            known = self._ids.pop(key, None)
        if (
            known is not None
            and stamp is not None
            and stamp.grew_from(known[0])
            and known[1] <= len(raw)
        ):
            ids = known[2]
            ids.update(map(id, raw[known[1] :]))
        else:
            ids = set(map(id, raw))
        if stamp is not None:
            with self._lock:
                self._ids.put(key, (stamp, len(raw), ids))
        return ids


def not_shown(
    lines: Sequence[FactLine],
    raw: Sequence[BaseMessage],
    view: Sequence[BaseMessage],
    originals: set[int] | None = None,
) -> tuple[FactLine, ...]:
    """The lines of ``lines`` that ``view`` does not show: ``raw`` is the conversation as
    received, so a message of ``view`` found in it is shown unchanged (``originals``: the ids of
    ``raw``'s messages, when the caller has them)."""
    refs, listed, said = _shown_parts(raw, view, originals)
    return _kept_lines(lines, refs, listed, normalized(said))


def _shown_parts(
    raw: Sequence[BaseMessage], view: Sequence[BaseMessage], originals: set[int] | None = None
) -> tuple[set[str], str, tuple[str, ...]]:
    """What of ``view`` the lines are checked against (see :func:`not_shown`): the sources of
    the messages it shows unchanged, the text of its first context note, and the texts of its
    user messages."""
    if originals is None:
        originals = set(map(id, raw))
    refs: set[str] = set()
    said: list[str] = []
    listed = ""  # the first context note
    for message in view:
        if id(message) not in originals and not _marked(message):
            if not listed and is_condensed(message):
                listed = content_text(message.content)
            continue
        refs.update(source_refs(message))
        if isinstance(message, HumanMessage):
            said.append(content_text(message.content))
    return refs, listed, tuple(said)


def _kept_lines(
    lines: Sequence[FactLine], refs: Collection[str], listed: str, spoken: str
) -> tuple[FactLine, ...]:
    """The lines of ``lines`` a view does not show, whose messages shown unchanged are the
    sources ``refs``, whose first context note is ``listed`` and whose user messages say
    ``spoken`` (their texts :func:`~ctxplugin.facts.render.normalized`, memoised: the same user
    messages come back call after call; see :func:`_shown_parts`)."""
    kept: list[FactLine] = []
    named: list[FactLine] = []  # tracked state the view states word for word
    for line in lines:
        if (line.source_ref is not None and line.source_ref in refs) or _listed(line, listed):
            continue
        if line.stated or (line.statement and restates(line.statement, spoken)):
            if line.tracked and line.key:
                named.append(line)
            continue
        kept.append(line)
    if named:
        kept.append(naming(named))
    return tuple(kept)


def _marked(message: BaseMessage) -> bool:
    """Whether ``message`` is one of the conversation's marked outdated and shown whole (not a
    tier's shorter form of it): what else it states, it shows."""
    note = annotation(message)
    return bool(note.get("outdated")) and "tier" not in note


STATED_LEAD = "also current, as stated in the conversation:"


def naming(lines: Sequence[FactLine]) -> FactLine:
    """One line naming the keys of ``lines`` (facts the view states word for word), as
    relevant as the most relevant of them, standing for all of them in the report."""
    first = max(lines, key=lambda line: line.score)
    keys = ", ".join(dict.fromkeys(line.key for line in lines if line.key))
    return FactLine(
        text=f"{STATED_LEAD} {keys}",
        score=first.score,
        fact_id=first.fact_id,
        key=first.key,
        also=tuple((line.fact_id, line.key) for line in lines if line is not first),
    )


MENTIONS = frozenset({"entity", "metric", "link"})
"""Kinds of fact that mention values without stating what is current (a keyed fact, a decision,
a constraint does: it stays even when a note lists its values, which may be old ones too)."""


def _listed(line: FactLine, note: str) -> bool:
    """Whether ``line`` is a mention (:data:`MENTIONS`) whose every value ``note`` holds."""
    if line.kind not in MENTIONS or not note or not line.statement:
        return False
    values = identifiers(line.statement)
    return bool(values) and all(occurs(value, note) for value in values)


__all__ = ["STATED_LEAD", "SkipShown", "naming", "not_shown"]
