"""The facts read from given user messages, in a Chroma collection (the optional
``from_messages`` and ``said_after`` of :class:`~ctxplugin.facts.store.FactStore`), and from
given tool outputs (``from_outputs``).

A fact read from a user message is written with the message's ref in a field of its own
(``mv``, joined to its owner slot); a fact stored before that field was written (before edited
messages were told apart) has none and is not found: what such an old message stated stays
current when the host edits it. So is the id of the message said just before that one (``av``):
a fact stored before it was written is not found by ``said_after``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ctxplugin.facts._chroma_codec import message_wheres, withdraw_wheres
from ctxplugin.facts.model import Fact
from ctxplugin.scope import Scope


class MessageFacts:
    """``from_messages``, ``said_after`` and ``from_outputs`` of :class:`~ctxplugin.facts.chroma.ChromaFactStore`."""

    if TYPE_CHECKING:

        def _fetch(self, reader: Scope, where: dict[str, Any] | None = None, ids: list[str] | None = None) -> list[Fact]: ...

    def from_messages(self, owner: Scope, refs: Sequence[str]) -> list[Fact]:
        """The facts ``owner`` read from the user messages ``refs``, in any state, in one
        request (more for thousands of refs)."""
        return self._said(owner, refs, "mv")

    def said_after(self, owner: Scope, ids: Sequence[str]) -> list[Fact]:
        """The facts ``owner`` read from the user messages said right after the messages ``ids``
        (their ``source.after``), in any state, in one request (more for thousands of ids)."""
        return self._said(owner, ids, "av")

    def from_outputs(self, owner: Scope, call_ids: Sequence[str]) -> list[Fact]:
        """The facts ``owner`` read from the outputs of the tool calls ``call_ids``, in any state,
        in one request (more for thousands of ids; what a withdrawal of them reads)."""
        return self._owned(owner, withdraw_wheres(owner, call_ids))

    def _said(self, owner: Scope, refs: Sequence[str], field: str) -> list[Fact]:
        return self._owned(owner, message_wheres(owner, refs, field))

    def _owned(self, owner: Scope, wheres: Sequence[dict[str, Any]]) -> list[Fact]:
        """The facts of ``owner`` that the clauses ``wheres`` (one request each) find, each once."""
        owner_key = owner.key()
        found = {f.id: f for where in wheres for f in self._fetch(owner, where)}
        return [f for f in found.values() if f.owner.key() == owner_key]


__all__ = ["MessageFacts"]
