"""Which tool call's output a ref mark may speak for.

ctxplugin marks the tool messages it rewrote in ``additional_kwargs["ctxplugin"]``: the ref
their output is stored under with its compact form, or the ref a masked output withholds.
Those marks are acted on (a withheld ref is revoked from the CAS), yet a tool can return its
own ``ToolMessage`` carrying any of them, and an adapter may pass a remote tool's fields
through. A mark is ctxplugin's only for the output it was made for: a ref this process stored
for a tool call speaks for that call's messages alone. A message whose mark names a ref stored
for other calls only goes on without its ref marks, as plain content stored under its own ref,
and the mark is logged. A ref this process never stored (one captured before a restart) is
taken from the message, as it always was: the message alone then tells of its masking. So is
a ref this process found stored already when it first stored it in a scope (by another
process, or before its record of the ref was dropped): the calls it was stored for before are
not known here, and the output's own message may be one of them.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from langchain_core.messages import BaseMessage, ToolMessage

from ctxplugin._lru import LRU
from ctxplugin._messages import META_KEY, annotation
from ctxplugin._note_marks import Unmarked
from ctxplugin.cas.annotation import WITHHELD
from ctxplugin.scope import Scope
from ctxplugin.stages.view import log_degraded

REF_MARKS = (WITHHELD, "ref", "compact", "chars", "digest", "lead")
"""The keys of an annotation that name a stored output or stand for it."""

FOREIGN_MARK = "a tool message marked with the ref of another tool call's output ({ref}) went on as plain content"


_UNKNOWN: frozenset[str] = frozenset()
"""The calls of a ref stored before this process knew of it: any message's mark counts."""


class MarkOwners:
    """The tool calls whose outputs this process stored under each ref, by scope (bounded)."""

    def __init__(self, size: int) -> None:
        self._lock = threading.Lock()
        self._calls: LRU[tuple[str, str], frozenset[str]] = LRU(size)

    def record(self, ref: str, tool_call_id: str, scope: Scope, *, created: bool) -> None:
        """``scope`` stored the output of ``tool_call_id`` under ``ref``; ``created``: the
        store did not hold it for ``scope`` before (else, unless this record already knows
        the ref, the calls it was stored for before are unknown)."""
        key = (scope.key(), ref)
        with self._lock:
            calls = self._calls.get(key)
            if calls is None:
                calls = frozenset({tool_call_id}) if created else _UNKNOWN
            elif calls is not _UNKNOWN and tool_call_id not in calls:
                calls = calls | {tool_call_id}
            self._calls.put(key, calls)

    def foreign(self, message: BaseMessage, scope: Scope, *, in_thread: bool = False) -> str | None:
        """The ref ``message``'s marks name that this process stored for other tool calls
        only, or None when its marks name none. ``in_thread``: ``message`` is in the scope's
        conversation; a ref it names that this process has not stored in the scope yet stays
        one whose calls are unknown when it is stored there later (the thread was carried
        over from another scope, or its grant lapsed)."""
        if not isinstance(message, ToolMessage):
            return None
        note = annotation(message)
        for key in (WITHHELD, "ref"):
            ref = note.get(key)
            if isinstance(ref, str):
                with self._lock:
                    calls = self._calls.get((scope.key(), ref))
                    if calls is None and in_thread:
                        self._calls.put((scope.key(), ref), _UNKNOWN)
                if calls is not None and calls is not _UNKNOWN and message.tool_call_id not in calls:
                    return ref
        return None

    def without_foreign(
        self, messages: Sequence[BaseMessage], scope: Scope, start: int = 0, *, log: bool = True
    ) -> tuple[Sequence[BaseMessage], list[str]]:
        """``messages``, with the tool messages from ``start`` on whose marks name another
        call's output replaced by a copy without their ref marks (``messages`` itself when
        there are none), and the warnings for them (logged when ``log``: a conversation read
        again on every call logs each message once, as it first comes)."""
        out: list[BaseMessage] | None = None
        warnings: list[str] = []
        for index in range(start, len(messages)):
            message = messages[index]
            # (anything else that is no message is validation's to name)
            marked = isinstance(message, ToolMessage) and META_KEY in message.additional_kwargs
            ref = self.foreign(message, scope, in_thread=True) if marked else None
            if ref is None:
                continue
            if out is None:
                out = list(messages)
            out[index] = unmarked(message)
            text = FOREIGN_MARK.format(ref=ref)
            warnings.append(log_degraded(scope, text) if log else text)
        return (messages if out is None else out), warnings


unmarked = Unmarked(REF_MARKS)
"""``message`` without the ref marks of its annotation (the same copy for the same message)."""


__all__ = ["FOREIGN_MARK", "REF_MARKS", "MarkOwners", "unmarked"]
