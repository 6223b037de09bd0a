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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin._messages import META_KEY, annotation
from ctxplugin.facts._text import content_words, word_set
from ctxplugin.facts.model import Fact
from ctxplugin.scope import Scope
from ctxplugin.tokens import content_text

if TYPE_CHECKING:
    from ctxplugin.facts.ledger import FactsLedger

_NOTE_CHARS = 220


@dataclass(frozen=True)
class _Change:
    old: Fact
    new: Fact
    distinctive: frozenset[str]
    replacement: frozenset[str]
    anchors: frozenset[str]
    need: int
    note: str


def mark_outdated(
    body: Sequence[BaseMessage], *, ledger: FactsLedger, scope: Scope, limit: int = 200
) -> tuple[list[BaseMessage], int]:
    """Copies of ``body`` where messages stating a superseded fact carry an outdated note.

    Args:
        body: the conversation (without the leading system messages).
        ledger: where superseded facts are looked up.
        scope: whose facts count.
        limit: the most recent superseded facts considered.

    Returns:
        The new message list and how many messages were marked.
    """
    changes = [_change(old, new) for old, new in ledger.superseded(scope=scope, limit=limit)]
    if not changes:
        return list(body), 0
    out: list[BaseMessage] = []
    marked = 0
    for message in body:
        if not isinstance(message, (HumanMessage, AIMessage, ToolMessage)):
            out.append(message)
            continue
        text = content_text(message.content)
        if not text:
            out.append(message)
            continue
        words = word_set(text)
        refs = _refs(message)
        hits = [c for c in changes if c.note not in text and _states(c, words, refs)]
        if not hits:
            out.append(message)
            continue
        out.append(_with_notes(message, hits))
        marked += 1
    return out, marked


def _change(old: Fact, new: Fact) -> _Change:
    old_words = set(content_words(old.text))
    new_words = set(content_words(new.text))
    distinctive = frozenset(old_words - new_words)
    replacement = frozenset(new_words - old_words)
    # the subject: key words the old statement uses (all required), else the shared words
    key_words = set(content_words((old.key or "").replace("_", " "))) & old_words
    anchors = frozenset(key_words or (old_words & new_words))
    need = len(anchors) if key_words else min(2, len(anchors))
    current = new.text if len(new.text) <= _NOTE_CHARS else new.text[: _NOTE_CHARS - 1] + "…"
    if old.refused:
        note = f"[overruled: a {new.authority} constraint applies: {current}]"
    else:
        label = old.key or "this"
        note = f"[outdated: {label} is now: {current}]"
    return _Change(old, new, distinctive, replacement, anchors, need, note)


def _states(change: _Change, words: frozenset[str], refs: set[str]) -> bool:
    if change.new.source.ref is not None and change.new.source.ref in refs:
        return False
    if change.old.source.ref is not None and change.old.source.ref in refs:
        return True
    if not change.distinctive or not change.distinctive <= words:
        return False
    if change.replacement and change.replacement <= words:
        return False
    return len(change.anchors & words) >= change.need


def _refs(message: BaseMessage) -> set[str]:
    refs = {str(message.id)} if message.id else set()
    ref = annotation(message).get("ref")
    if isinstance(ref, str):
        refs.add(ref)
    if isinstance(message, ToolMessage):
        refs.add(message.tool_call_id)
    return refs


def _with_notes(message: BaseMessage, hits: list[_Change]) -> BaseMessage:
    prefix = " ".join(c.note for c in hits)
    content: Any = message.content
    if isinstance(content, str):
        new_content: Any = f"{prefix} {content}"
    else:
        new_content = [{"type": "text", "text": prefix}, *content]
    meta = dict(annotation(message))
    meta["outdated"] = [*meta.get("outdated", []), *(c.old.id for c in hits)]
    kwargs = {**message.additional_kwargs, META_KEY: meta}
    return message.model_copy(update={"content": new_content, "additional_kwargs": kwargs})


__all__ = ["mark_outdated"]
