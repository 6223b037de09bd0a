"""Refs: tool outputs in the history replaced by their summary and ref.

Each output is stored in the CAS once (:class:`~ctxplugin.stages.memos.CaptureMemo`); the view
carries the compact text with ``additional_kwargs["ctxplugin"]["ref"]``, and the model reads
the original back with ``expand_ref``. An output already captured by ``capture_tool_result``
carries its compact form and is not stored again. When the CAS fails the output passes through
whole, with a warning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from langchain_core.messages import BaseMessage, ToolMessage

from ctxplugin._messages import annotation
from ctxplugin._names import META_TOOL_NAMES
from ctxplugin.cas import compact_message
from ctxplugin.errors import StoreError
from ctxplugin.stages.memos import CaptureMemo
from ctxplugin.stages.view import CallView


@dataclass(frozen=True, slots=True)
class StoreRefs:
    """Replace tool outputs by summary and ref; fill ``refs_created`` and ``refs_used``.
    Nothing changes when the CAS is off or the conversation goes whole.

    Attributes:
        enabled: ``cas.enabled``.
        captures: the compact forms, shared with ``capture_tool_result``.
    """

    name: ClassVar[str] = "refs"
    enabled: bool
    captures: CaptureMemo

    def apply(self, view: CallView) -> CallView:
        if not self.enabled or (view.room is not None and view.room.whole):
            return view
        out: list[BaseMessage] = []
        created: list[str] = []
        used: list[str] = []
        stored: dict[str, str] = {}
        for message in view.history:
            if not isinstance(message, ToolMessage) or message.name in META_TOOL_NAMES:
                out.append(message)
                continue
            note = annotation(message)
            if note.get("ref") and isinstance(note.get("compact"), str):
                compact_text = note["compact"]
                ref = str(note["ref"])
                new = False
            else:
                try:
                    captured = self.captures.captured(message, view.scope)
                except StoreError as exc:
                    view = view.degraded(f"CAS unavailable; tool output {message.tool_call_id!r} passed through: {exc}")
                    out.append(message)
                    continue
                if captured.passthrough or captured.ref_id is None:
                    out.append(message)
                    continue
                compact_text, ref, new = captured.text, captured.ref_id, captured.created
            if new:
                created.append(ref)
            used.append(ref)
            stored[message.tool_call_id] = ref
            out.append(compact_message(message, compact_text, ref))
        return view.override(
            history=tuple(out),
            refs_created=(*view.refs_created, *created),
            refs_used=(*view.refs_used, *used),
            stored={**view.stored, **stored},
        )


__all__ = ["StoreRefs"]
