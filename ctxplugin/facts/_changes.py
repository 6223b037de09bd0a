"""What marking needs of one superseded (or refused) fact and the fact now in force: the words
that tell a message states the old value, and the notes that say what replaced it.

Memoised by what it reads: the same pairs are in force on every call of a session.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ctxplugin._graphemes import head
from ctxplugin._lru import Memo
from ctxplugin._untrusted import id_form
from ctxplugin.facts._text import content_words
from ctxplugin.facts.model import Fact

_NOTE_CHARS = 160


@dataclass(frozen=True)
class Change:
    """A superseded (or refused) fact ``old`` and the fact ``new`` in force: the words only the
    old statement has (``distinctive``), those only the new one has (``replacement``), the
    subject words a message must hold (``anchors``, ``need`` of them), and the ``note`` that
    says what replaced it (``short`` once that was said above)."""

    old: Fact
    new: Fact
    distinctive: frozenset[str]
    replacement: frozenset[str]
    anchors: frozenset[str]
    need: int
    note: str
    short: str

    @cached_property
    def ident(self) -> tuple[object, ...]:
        """What marking reads of this change (see :data:`ctxplugin.facts._reading.Ident`): two
        changes with the same ident give the same notes to the same messages. Read once."""
        c = self
        return (
            c.old.id, c.new.id, c.old.source.ref, c.new.source.ref, c.new.authority, c.note, c.short, c.distinctive,
            c.replacement, c.anchors, c.need,
        )


_CHANGES: Memo[tuple[object, ...], tuple[Any, ...]] = Memo(4096)


def change_of(old: Fact, new: Fact) -> Change:
    """The :class:`Change` of ``old`` to ``new``."""
    key = (old.text, old.key, old.from_tool, old.refused, new.text, new.from_tool, new.source.ref, new.authority)
    return Change(old, new, *_CHANGES.get_or_make(key, lambda: _derived(old, new)))


def _derived(old: Fact, new: Fact) -> tuple[Any, ...]:
    old_words = set(content_words(old.text))
    new_words = set(content_words(new.text))
    distinctive = frozenset(old_words - new_words)
    replacement = frozenset(new_words - old_words)
    # the subject: key words the old statement uses (all required), else the shared words
    key_words = set(content_words((old.key or "").replace("_", " "))) & old_words
    anchors = frozenset(key_words or (old_words & new_words))
    need = len(anchors) if key_words else min(2, len(anchors))
    current = new.text if len(new.text) <= _NOTE_CHARS else head(new.text, _NOTE_CHARS - 1) + "…"
    if new.from_tool:
        # tool text stays in the tool role: the note points at the tool result instead
        # its ref, or the id of its message when that is a plain one (a tool returning its own
        # ToolMessage chooses the id, which is shown in user and assistant messages)
        named = id_form(new.source.ref)
        current = f"see the tool result {named}" if named else "see a later tool result"
    label = "this" if old.from_tool or not old.key else old.key
    if old.refused and old.from_tool:
        note = f"[overruled: a tool output does not replace the {new.authority} statement: {current}]"
        short = "[overruled, as noted above]"
    elif old.refused:
        note = f"[overruled: a {new.authority} constraint applies: {current}]"
        short = "[overruled, as noted above]"
    else:
        note = f"[outdated: {label} is now: {current}]"
        short = f"[outdated: {label} changed, as noted above]"
    return distinctive, replacement, anchors, need, note, short


__all__ = ["Change", "change_of"]
