"""Validate: the conversation checked and split into its header and its history.

A conversation that cannot be sent raises :class:`~ctxplugin.errors.InvalidInputError`; one
that can be repaired (a call left without a result, an orphan result under
``orphan_tool_results="drop"`` or ``"pair"``) is, with a warning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ctxplugin._messages import OrphanRepair, expanded_refs, split_header, validate
from ctxplugin._names import EXPAND_REF_NAME
from ctxplugin.stages.view import CallView


@dataclass(frozen=True, slots=True)
class Validate:
    """Check the received messages; fill ``header``, ``original``, ``history`` and
    ``refs_expanded``.

    Attributes:
        orphans: what to do with a tool result whose call is not in the conversation.
    """

    name: ClassVar[str] = "validate"
    orphans: OrphanRepair = "raise"

    def apply(self, view: CallView) -> CallView:
        valid, notes = validate(view.received, orphans=self.orphans)
        header, body = split_header(valid)
        history = tuple(body)
        return view.override(
            header=tuple(header),
            original=history,
            history=history,
            refs_expanded=tuple(expanded_refs(body, EXPAND_REF_NAME)),
        ).warn(*notes)


__all__ = ["Validate"]
