"""Validate: the conversation checked and split into its header and its history.

A conversation that cannot be sent raises :class:`~ctxplugin.errors.InvalidInputError`; one
that can be repaired (a call left without a result, an orphan result under
``orphan_tool_results="drop"`` or ``"pair"``) is, with a warning.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import ClassVar

from ctxplugin._lru import LRU
from ctxplugin._messages import OrphanRepair, Validation, expanded_refs, split_header
from ctxplugin._names import EXPAND_REF_NAME
from ctxplugin.stages.view import CallView

SESSIONS_TRACKED = 1024


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
        header, body = split_header(valid)
        history = tuple(body)
        return view.override(
            header=tuple(header),
            original=history,
            history=history,
            refs_expanded=tuple(expanded_refs(body, EXPAND_REF_NAME)),
        ).warn(*notes)


__all__ = ["Validate"]
