"""Refs: tool outputs in the history replaced by their summary and ref.

Each output is stored in the CAS once (:class:`~ctxplugin.stages.memos.CaptureMemo`); the view
carries the compact text with ``additional_kwargs["ctxplugin"]["ref"]``, and the model reads
the original back with ``expand_ref``. An output already captured by ``capture_tool_result``
carries its compact form and is not stored again. When the CAS fails the output passes through
whole; once the CAS is found unavailable, the rest of the call asks it nothing more: the outputs it could
not store pass through, the same text on every call while it is down, each summarized once and
logged once (the report counts them on every call), and are stored by the first call that
reaches it. The original of an output its host masked after capture (``withheld``, named by validate) is
revoked from the CAS, once per scope.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from langchain_core.messages import BaseMessage, ToolMessage

from ctxplugin._lru import LRU
from ctxplugin._messages import annotation
from ctxplugin._names import META_TOOL_NAMES
from ctxplugin._prefix import Prefix, Stamp
from ctxplugin._stored_refs import GrownRefs
from ctxplugin.cas import Captured, compact_message, shows_compact, without_lead
from ctxplugin.cas.capture import shows_ref
from ctxplugin.errors import StoreError, StoreUnavailableError
from ctxplugin.scope import Scope
from ctxplugin.stages.memos import STILL_STORED, UNREVOKED, CaptureMemo, capture_key
from ctxplugin.stages.view import SESSIONS_TRACKED, CallView
from ctxplugin.tokens import content_text


class _Stored:
    """What the calls of one session have shown of its tool outputs so far: the history read
    (the next call's history starts with the same objects, or the reading starts afresh), what
    it became, and the refs it shows."""

    __slots__ = ("out", "out_stamp", "passed", "seen", "stored", "used")

    def __init__(self) -> None:
        self.seen = Prefix()
        self.out: list[BaseMessage] = []
        self.out_stamp: Stamp | None = None  # of the history last passed on
        self.used: dict[str, None] = {}  # each ref once, in the order first shown: one output shown twice is one ref
        self.stored: dict[str, str] = {}
        self.passed: GrownRefs | None = None  # the stored refs last passed on, when they were these

    def continued_by(self, history: Sequence[BaseMessage], stamp: Stamp | None) -> bool:
        """Whether ``history`` (stamped ``stamp``) starts with the very messages read so far,
        holding the very content they had (see :class:`~ctxplugin._prefix.Prefix`)."""
        return self.seen.changed(history, stamp) == []


@dataclass(frozen=True, slots=True)
class StoreRefs:
    """Replace tool outputs by summary and ref; fill ``refs_created`` and ``refs_used`` (each ref
    once, in the order first shown).
    Nothing changes when the CAS is off or the conversation goes whole (``refs_used`` then names
    the refs of the outputs the host keeps in compact form).

    Attributes:
        enabled: ``cas.enabled``.
        captures: the compact forms, shared with ``capture_tool_result``.
    """

    name: ClassVar[str] = "refs"
    enabled: bool
    captures: CaptureMemo
    # per session: the history shown so far, extended as it grows
    _shown: LRU[str, _Stored] = field(default_factory=lambda: LRU(SESSIONS_TRACKED))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def apply(self, view: CallView) -> CallView:
        view = self._revoke(view)
        if not self.enabled:
            return view
        if view.room is not None and view.room.whole:
            return view.override(refs_used=(*view.refs_used, *_shown_refs(view.history)))
        key = view.scope.key()
        with self._lock:
            # claimed while this call runs: a concurrent call of the same session starts afresh
            done = self._shown.pop(key, None)
        if done is None or not done.continued_by(view.history, view.history_stamp):
            done = _Stored()
        down: list[StoreError] = []  # the CAS failed in this call: asked nothing more
        unstored: list[str] = []  # the tool calls of the outputs passed through unstored
        again = said = 0  # outputs not stored again; of both, logged before
        created: list[str] = []  # by this call: the outputs read before were stored before
        added: list[tuple[str, str]] | None = []  # the refs stored grew by these (None: one changed)
        read = len(done.seen)
        for message in view.history[read:]:
            note = annotation(message)
            if not isinstance(message, ToolMessage) or message.name in META_TOOL_NAMES or note.get("pinned") is True:
                done.out.append(message)  # a pinned output is shown as it came, like any pinned message
                continue
            if note.get("ref") and isinstance(note.get("compact"), str):
                compact_text = note["compact"]
                ref = str(note["ref"])
                new = False
                if not shows_compact(message.content, compact_text):
                    # the original, kept in the state: stored (once per process) where the CAS
                    # lost it, or never had it (stores moved to a server, a database restored)
                    kept, fresh = self._stored(without_lead(message), view.scope, down)
                    again, said = again + (kept is None), said + (kept is None and not fresh)
            else:
                captured, fresh = self._stored(message, view.scope, down)
                if captured is None:
                    done.out.append(message)  # stored on a later call
                    unstored.append(message.tool_call_id)
                    said += not fresh
                    continue
                if captured.passthrough or captured.ref_id is None:
                    done.out.append(message)
                    continue
                compact_text, ref, new = captured.text, captured.ref_id, captured.created
            if new:
                created.append(ref)
            done.used[ref] = None
            if added is not None and message.tool_call_id not in done.stored:
                added.append((message.tool_call_id, ref))
            else:
                added = None
            done.stored[message.tool_call_id] = ref
            done.out.append(compact_message(message, compact_text, ref))
        if down:
            view = _unstored(view, down[0], len(unstored), again, said)
            view = view.override(unstored=tuple(unstored))
        done.seen.extend(view.history[read:], view.history_stamp)
        # what is passed on is what was passed on last with the new messages' forms appended
        stamp = done.out_stamp = Stamp.after(done.out_stamp, len(done.out))
        if view.stored:
            stored: dict[str, str] = {**view.stored, **done.stored}
            done.passed = None
        else:  # what was passed on last and the refs stored since, as the account's index of refs takes them
            grown = done.passed if added is not None else None
            stored = done.passed = GrownRefs(done.stored, grown, added or ())
        changed = view.override(
            history=tuple(done.out),
            history_stamp=stamp,
            refs_created=(*view.refs_created, *created),
            refs_used=(*view.refs_used, *done.used),
            stored=stored,
        )
        if not down:
            with self._lock:
                self._shown.put(key, done)
        return changed

    def _stored(self, message: ToolMessage, scope: Scope, down: list[StoreError]) -> tuple[Captured | None, bool]:
        """``message``'s output stored and compacted, or None when the CAS failed for it (its
        error added to ``down``) or was found out earlier in this call (not asked again in this
        call: an output it refused does not keep the others from being stored); and whether it
        is the first time the output went unstored (logged then)."""
        if any(isinstance(error, StoreUnavailableError) for error in down):
            known = self.captures.known(message, scope)
            return known, known is None and self.captures.put_off(message, scope)
        key = capture_key(message, scope)  # a long output in blocks is written out once
        before = self.captures.unstored(message, scope, key)
        try:
            return self.captures.captured(message, scope, key), False
        except StoreError as exc:
            down.append(exc)
            return None, not before

    def _revoke(self, view: CallView) -> CallView:
        """Take back from the CAS the originals of the outputs masked after capture: the
        conversation no longer holds what was masked, and neither does the store at rest."""
        try:
            if not self.captures.revocations.revoke(view.withheld, view.scope):
                return view.warn(UNREVOKED)
        except StoreError as exc:
            return view.degraded(f"{STILL_STORED}: {exc}")
        return view


def _shown_refs(history: Sequence[BaseMessage]) -> dict[str, None]:
    """The refs a history sent whole shows, each once in the order first shown: those of the
    tool outputs its host keeps in the compact form ``capture_tool_result`` returned."""
    shown: dict[str, None] = {}
    for message in history:
        if isinstance(message, ToolMessage) and message.name not in META_TOOL_NAMES:
            ref = annotation(message).get("ref")
            if isinstance(ref, str) and shows_ref(content_text(message.content), ref):
                shown[ref] = None
    return shown


def _unstored(view: CallView, error: StoreError, unstored: int, again: int, said: int) -> CallView:
    """``view`` with one warning for the outputs the CAS failed to store in this call, counted;
    logged only when some were not logged before (a long outage logs each output once)."""
    parts = [f"{unstored} tool output{'s' * (unstored != 1)} passed through unstored"] if unstored else []
    parts += [f"{again} tool output{'s' * (again != 1)} not stored again"] if again else []
    text = f"CAS unavailable; {' and '.join(parts) or 'nothing stored'} (stored once it is back): {error}"
    return view.degraded(text) if said < unstored + again else view.warn(text)


__all__ = ["StoreRefs"]
