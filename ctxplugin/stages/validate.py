"""Validate: the conversation checked and split into its header and its history.

A tool output whose ref annotation was made from other content than it holds now (its host
masked it after capture) goes on marked as replaced (see :mod:`ctxplugin.cas.annotation`), and
its ref is named in ``withheld`` for the refs stage to revoke.

A conversation that cannot be sent raises :class:`~ctxplugin.errors.InvalidInputError`; one
that can be repaired (a call left without a result, an orphan result under
``orphan_tool_results="drop"`` or ``"pair"``) is, with a warning.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import ClassVar

from langchain_core.messages import BaseMessage

from ctxplugin._lru import LRU
from ctxplugin._messages import (
    OrphanRepair,
    Validation,
    check_conversation,
    expanded_refs,
    header_length,
)
from ctxplugin._names import EXPAND_REF_NAME
from ctxplugin._note_marks import without_note_marks
from ctxplugin._prefix import Prefix, Stamp
from ctxplugin._roles import with_role_classes
from ctxplugin.cas import masked_refs, without_stale
from ctxplugin.stages._mark_owners import MarkOwners
from ctxplugin.stages.view import SESSIONS_TRACKED, CallView


@dataclass(frozen=True, slots=True)
class Validate:
    """Check the received messages; fill ``header``, ``original``, ``history``,
    ``refs_expanded`` and ``withheld``.

    Attributes:
        orphans: what to do with a tool result whose call is not in the conversation.
        owners: the tool calls each ref was stored for: a tool message marked with another
            call's ref goes on without that mark (see :class:`MarkOwners`).
    """

    name: ClassVar[str] = "validate"
    orphans: OrphanRepair = "raise"
    owners: MarkOwners | None = None
    # per session: the conversation received and checked so far, and the history passed on
    _sessions: LRU[str, _Received] = field(default_factory=lambda: LRU(SESSIONS_TRACKED))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def apply(self, view: CallView) -> CallView:
        key = view.scope.key()
        with self._lock:
            # claimed while this call runs: a concurrent call of the same session starts afresh
            state = self._sessions.pop(key, None)
        if state is None:
            state = _Received(self.orphans)
        received = view.received
        check_conversation(received)
        received_stamp = state.receive(received, self.orphans)
        # the new messages only: an output checked before is the very object with the very
        # content it had, and validation keeps what it became
        seen = len(state.received)
        own, foreign = (received, []) if self.owners is None else self.owners.without_foreign(received, view.scope, seen)
        # a ChatMessage in the user's, the system's or the model's role is read as that class once,
        # as it enters (ctxplugin._roles)
        valid, notes = state.validation.extend(without_stale(without_note_marks(with_role_classes(own, seen), seen), seen))
        withheld = masked_refs(own, seen)
        state.received.extend(received[len(state.received) :], received_stamp)
        start = header_length(valid)
        header, history = valid[:start], tuple(islice(valid, start, None))  # one copy of a long history
        # history only grew when the conversation did and its validation only appended to what
        # it returned before, after as many system messages
        grown = received_stamp.before is not None and state.validation.extended and start == state.start
        state.start = start
        stamp = state.pass_on(len(history), grown=grown)
        with self._lock:
            self._sessions.put(key, state)
        return view.override(
            header=tuple(header),
            original=history,
            history=history,
            received_stamp=received_stamp,
            original_stamp=stamp,
            history_stamp=stamp,
            refs_expanded=tuple(expanded_refs(history, EXPAND_REF_NAME)),
            withheld=withheld,
        ).warn(*notes, *foreign)


class _Received:
    """One session's previous call: the conversation received (checked message by message on
    the next call: the one check of the whole conversation a call makes, whose word the stages
    after take), its validation, and the stamp of the history passed on (see
    :class:`~ctxplugin._prefix.Stamp`)."""

    __slots__ = ("history_stamp", "received", "start", "validation")

    def __init__(self, orphans: OrphanRepair) -> None:
        self.received = Prefix()
        self.validation = Validation(orphans)
        self.start = -1  # how many system messages the history passed on came after
        self.history_stamp: Stamp | None = None

    def receive(self, received: Sequence[BaseMessage], orphans: OrphanRepair) -> Stamp:
        """The stamp of ``received``: grown from the previous one when it is the previous
        conversation with messages appended (the very objects, holding the very content).
        Else what was received and validated is forgotten: the caller validates ``received``
        from its start, then takes in the messages past :attr:`received`."""
        last = self.received.stamp
        try:
            grew = last is not None and self.received.changed(received) == []
        except AttributeError:  # an earlier message replaced by something else: validation says what
            grew = False
        if grew:
            return Stamp.after(last, len(received))
        self.received.clear()
        self.validation = Validation(orphans)
        return Stamp.after(None, len(received))

    def pass_on(self, length: int, *, grown: bool) -> Stamp:
        """The stamp of the history passed on, of ``length`` messages: grown from the previous
        one when ``grown`` says it is the previous history with messages appended."""
        before = self.history_stamp
        stamp = Stamp.after(before if grown and before is not None and before.length <= length else None, length)
        self.history_stamp = stamp
        return stamp


__all__ = ["Validate"]
