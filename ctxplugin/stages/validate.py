"""Validate: the conversation checked and split into its header and its history.

A conversation that cannot be sent raises :class:`~ctxplugin.errors.InvalidInputError`; one
that can be repaired (a call left without a result, an orphan result under
``orphan_tool_results="drop"`` or ``"pair"``) is, with a warning.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import islice
from operator import is_
from typing import ClassVar

from langchain_core.messages import BaseMessage

from ctxplugin._lru import LRU
from ctxplugin._messages import OrphanRepair, Validation, expanded_refs, header_length
from ctxplugin._names import EXPAND_REF_NAME
from ctxplugin._prefix import Prefix, Stamp
from ctxplugin.stages.view import SESSIONS_TRACKED, CallView


@dataclass(frozen=True, slots=True)
class Validate:
    """Check the received messages; fill ``header``, ``original``, ``history`` and
    ``refs_expanded``.

    Attributes:
        orphans: what to do with a tool result whose call is not in the conversation.
    """

    name: ClassVar[str] = "validate"
    orphans: OrphanRepair = "raise"
    # per session: the conversation checked so far, extended as it grows
    _checked: LRU[str, Validation] = field(default_factory=lambda: LRU(SESSIONS_TRACKED))
    # per session: the history passed on last, to stamp this call's (see CallView.original_stamp)
    _passed: LRU[str, _Passed] = field(default_factory=lambda: LRU(SESSIONS_TRACKED))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def apply(self, view: CallView) -> CallView:
        key = view.scope.key()
        with self._lock:
            # claimed while this call runs: a concurrent call of the same session starts afresh
            checked = self._checked.pop(key, None)
        if checked is None or not checked.continued_by(view.received):
            checked = Validation(self.orphans)
        valid, notes = checked.extend(view.received)
        with self._lock:
            self._checked.put(key, checked)
        start = header_length(valid)
        header, history = valid[:start], tuple(islice(valid, start, None))  # one copy of a long history
        received_stamp, stamp = self._stamps(key, view.received, history)
        return view.override(
            header=tuple(header),
            original=history,
            history=history,
            received_stamp=received_stamp,
            original_stamp=stamp,
            history_stamp=stamp,
            refs_expanded=tuple(expanded_refs(history, EXPAND_REF_NAME)),
        ).warn(*notes)

    def _stamps(self, key: str, received: Sequence[BaseMessage], history: tuple[BaseMessage, ...]) -> tuple[Stamp, Stamp]:
        """The stamps of ``received`` and of ``history`` (see :class:`~ctxplugin._prefix.Stamp`),
        each grown from the session's previous one when it is that one with messages appended.
        The one check of the whole conversation a call makes; the stages after take its word.
        ``history`` is made from ``received``: when ``received`` only grew and the previous
        history is still its beginning (the same objects), it only grew too."""
        with self._lock:
            passed = self._passed.pop(key, None)  # a concurrent call of the session starts afresh
        if passed is None:
            passed = _Passed()
        last = passed.received.stamp
        if last is not None and passed.received.changed(received) == []:
            received_stamp = Stamp.after(last, len(received))
        else:
            received_stamp = Stamp.after(None, len(received))
            passed.received.clear()
        passed.received.extend(received[len(passed.received) :], received_stamp)
        before = passed.history_stamp
        grew = (
            received_stamp.before is not None
            and before is not None
            and len(passed.history) <= len(history)
            and all(map(is_, passed.history, history))
        )
        history_stamp = Stamp.after(before if grew else None, len(history))
        passed.history, passed.history_stamp = history, history_stamp
        with self._lock:
            self._passed.put(key, passed)
        return received_stamp, history_stamp


class _Passed:
    """What a session's previous call passed on: the conversation received (checked message by
    message on the next call) and the history made from it, with their stamps."""

    __slots__ = ("history", "history_stamp", "received")

    def __init__(self) -> None:
        self.received = Prefix()
        self.history: tuple[BaseMessage, ...] = ()
        self.history_stamp: Stamp | None = None


__all__ = ["Validate"]
