"""A user's attachments that leave the view: stored in the CAS and named by the note left in their place.

A context note lists the values of what it stands for; an image, a PDF or a recording the user
sent holds none, and the note would keep the user's words alone ("user said: Here is my
passport"), the attachment gone without trace. So once a user message with media blocks
(:func:`~ctxplugin._block_text.is_media_block`) is condensed into a note by the history stage or
dropped by the budget, the note standing for it gains a line naming what was attached and the
ref its blocks are stored under, as a tool output with images is
(``user attached: 1 image, ref:user:…;``): ``expand_ref`` gives the blocks back. A message still
shown is never stored; one that left is stored once per scope and content. When the CAS fails
the line names no ref (the message is still whole in the agent's state) and a warning says so.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from ctxplugin._block_text import is_media_block
from ctxplugin._layout import is_condensed, is_note, is_user_turn
from ctxplugin._lru import LRU, RECENT_MESSAGES, PerMessage
from ctxplugin._messages import META_KEY, annotation, exchange_spans
from ctxplugin._prefix import Stamp
from ctxplugin.cas.capture import Compacted, compacted, stored
from ctxplugin.errors import StoreError
from ctxplugin.history import note_values
from ctxplugin.scope import Scope
from ctxplugin.stages.memos import MEMO_SIZE, CaptureMemo
from ctxplugin.stages.view import SESSIONS_TRACKED
from ctxplugin.tokens import content_text

ATTACHED = "user attached"
"""The label of the line naming a user's attachments in a note."""
UNSTORED = "CAS unavailable; a user's attachment that left the view is not stored, its note names no ref"
_NOT_STORED = "not stored, not readable"


def media_blocks(message: BaseMessage) -> list[Any]:
    """The media blocks (images, audio, video, files, a PDF ``document``) of a user's message."""
    content = message.content
    if not isinstance(content, list) or not is_user_turn(message):
        return []
    return [block for block in content if is_media_block(block)]


def _noun(block: dict[str, Any]) -> str:
    kind = str(block.get("type", ""))
    if kind.startswith("image") or kind in ("input_image", "media"):
        return "image"
    if kind == "document":
        source = block.get("source")
        pdf = isinstance(source, dict) and source.get("media_type") == "application/pdf"
        return "PDF document" if pdf else "document"
    if kind in ("audio", "input_audio"):
        return "audio clip"
    return "video" if kind == "video" else "file"


def described(blocks: Sequence[Any]) -> str:
    """What ``blocks`` are, counted: ``1 image``, ``2 images and 1 PDF document``."""
    counts: dict[str, int] = {}
    for block in blocks:
        noun = _noun(block)
        counts[noun] = counts.get(noun, 0) + 1
    return " and ".join(f"{n} {noun}{'s' * (n > 1)}" for noun, n in counts.items())


@dataclass(slots=True)
class Noted:
    """What naming the attachments that left one view did: refs newly granted, refs named, the
    text stored behind each (its values are one ``expand_ref`` away), and whether the CAS failed
    (``fresh``: for a message it had not failed for before, which is then logged)."""

    created: list[str] = field(default_factory=list)
    used: list[str] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)
    failed: str | None = None
    fresh: bool = False


class Attachments:
    """The user messages with media stored in the CAS, by scope and content (see the module).

    Args:
        captures: the CAS, its settings and counter, shared with the tool outputs.
        enabled: ``cas.enabled``; when off, the notes name what was attached, and no ref.
    """

    def __init__(self, captures: CaptureMemo, enabled: bool = True, size: int = MEMO_SIZE) -> None:
        self._captures = captures
        self.enabled = enabled
        self._lock = threading.Lock()
        self._refs: LRU[tuple[str, int, int], str | None] = LRU(size)  # None: not storable (not JSON)
        self._made: LRU[tuple[int, int], Compacted] = LRU(size)
        self._failed: LRU[tuple[str, int, int], bool] = LRU(size)
        # per session: the history last read for media, how many of its messages, whether any holds some
        self._scans: LRU[str, tuple[Stamp, int, bool]] = LRU(SESSIONS_TRACKED)

    def holds_media(self, history: Sequence[BaseMessage], stamp: Stamp | None, scope: Scope) -> bool:
        """Whether a user message of ``history`` (stamped ``stamp``) holds media: read once per
        message, the messages a session's history grew by only."""
        key = scope.key()
        with self._lock:
            state = self._scans.get(key)
        if state is not None and stamp is not None and state[0] is stamp:  # asked again on one call
            return state[2]
        grown = state is not None and stamp is not None and stamp.grew_from(state[0])
        start, found = (state[1], state[2]) if grown and state is not None else (0, False)
        found = found or any(map(media_blocks, islice(history, start, None)))
        if stamp is not None:
            with self._lock:
                self._scans.put(key, (stamp, len(history), found))
        return found

    def value(self, message: BaseMessage, scope: Scope, noted: Noted) -> str:
        """The value naming ``message``'s attachments in a note, its blocks stored (once) to name
        their ref; after the CAS failed in this call (``noted.failed``) it is not asked again."""
        what = described(media_blocks(message))
        if not self.enabled:
            return f"{what} ({_NOT_STORED})"
        text = repr(message.content)
        key = (scope.key(), len(text), hash(text))
        with self._lock:
            ref = self._refs.get(key, "")
        if ref == "" and noted.failed is None:
            made = self._made.get(key[1:])
            if made is None:
                captures = self._captures
                made = compacted(message.content, config=captures.config, counter=captures.counter, tool_name="user")
            try:
                captured = stored(made, store=self._captures.store, scope=scope, config=self._captures.config)
            except StoreError as exc:
                with self._lock:
                    self._made.put(key[1:], made)
                    noted.fresh = noted.fresh or key not in self._failed
                    self._failed.put(key, True)
                noted.failed = str(exc)
            else:
                ref = captured.ref_id
                with self._lock:
                    self._refs.put(key, ref)
                    self._made.pop(key[1:], None)
                    self._failed.pop(key, None)
                if captured.created and ref is not None:
                    noted.created.append(ref)
        if not ref:
            return f"{what} ({_NOT_STORED})"
        noted.used.append(ref)
        noted.texts[ref] = content_text(message.content)
        return f"{what}, {ref}"


_LINED: PerMessage[tuple[str, BaseMessage]] = PerMessage(RECENT_MESSAGES)


def with_values(note: BaseMessage, values: Sequence[str]) -> BaseMessage:
    """``note`` with a ``user attached:`` line of those of ``values`` its text does not hold yet
    (the same copy for the same note and line, so what later stages derive from it is found by
    identity)."""
    text = note.content
    if not isinstance(text, str):
        return note
    new = [value for value in dict.fromkeys(values) if value not in text]
    if not new:
        return note
    line = f"{ATTACHED}: {'; '.join(new)};"
    hit = _LINED.get(note)
    if hit is not None and hit[0] == line:
        return hit[1]
    body = text[:-1] if text.endswith("]") else text
    copy = note.model_copy(update={"content": f"{body}\n{line}]"})
    _LINED.put(note, (line, copy))
    return copy


def _left(message: BaseMessage, kept: set[int], after: Sequence[BaseMessage]) -> bool:
    """Whether ``message``, a user's message with media, left ``after`` (``kept``: its messages'
    ids): a copy still showing its blocks (its text cut to fit) stands for it."""
    if id(message) in kept:
        return False
    shown = [block for m in after for block in media_blocks(m)]
    return not all(block in shown for block in media_blocks(message))


def _inserted(before: Sequence[BaseMessage], after: list[BaseMessage], at: int, note: BaseMessage) -> None:
    """Put ``note`` into ``after`` (a view of ``before``) where message ``at`` of ``before`` was."""
    where = {id(m): index for index, m in enumerate(before)}
    place = next((i for i, m in enumerate(after) if where.get(id(m), -1) > at), len(after))
    after.insert(place, note)


def condensed_attachments(
    before: Sequence[BaseMessage], after: Sequence[BaseMessage], attachments: Attachments, scope: Scope
) -> tuple[list[BaseMessage], Noted]:
    """``after`` (the history stage's view of ``before``, a history that holds media: see
    :meth:`Attachments.holds_media`) with each condensed note naming the attachments of the user
    messages it stands for; a note of their own for those whose exchange left no note."""
    noted = Noted()
    out = list(after)
    kept = {id(m) for m in after}
    gone = [(number, index) for number, (start, end) in enumerate(exchange_spans(before))
            for index in range(start, end) if media_blocks(before[index]) and _left(before[index], kept, after)]
    for number, index in gone:
        value = attachments.value(before[index], scope, noted)
        at = next((i for i, m in enumerate(out) if _covers(m, number)), None)
        if at is not None:
            out[at] = with_values(out[at], [value])
        else:
            note = HumanMessage(content=f"[context note: values used in exchanges {number}-{number}:\n{ATTACHED}: {value};]",
                                additional_kwargs={META_KEY: {"condensed": [number, number]}})
            _inserted(before, out, index, note)
    return out, noted


def _covers(message: BaseMessage, number: int) -> bool:
    span = annotation(message).get("condensed") if is_condensed(message) else None
    return isinstance(span, list) and len(span) == 2 and all(isinstance(n, int) for n in span) and span[0] <= number <= span[1]


def dropped_attachments(
    before: Sequence[BaseMessage], after: list[BaseMessage], attachments: Attachments, scope: Scope,
    texts: dict[str, str],
) -> tuple[list[BaseMessage], Noted]:
    """``after`` (what the budget left of ``before``) with the note of the exchanges it dropped
    naming the attachments that left with them: those of the user messages dropped, and those
    the condensed notes dropped named (their stored text in ``texts``, by ref)."""
    noted = Noted()
    kept = {id(m) for m in after}
    values: list[str] = []
    first: int | None = None
    for index, message in enumerate(before):
        if id(message) in kept:
            continue
        if media_blocks(message) and _left(message, kept, after):
            values.append(attachments.value(message, scope, noted))
        elif is_condensed(message) and isinstance(message.content, str) and ATTACHED in message.content:
            for value in note_values(message.content).get(ATTACHED, []):
                values.append(value)
                ref = value.rpartition(", ")[2]
                if ref in texts:
                    noted.used.append(ref)
                    noted.texts[ref] = texts[ref]
        else:
            continue
        first = index if first is None else first
    if first is None:
        return after, noted
    out = list(after)
    at = next((i for i, m in enumerate(out) if is_note(m) and not is_condensed(m)), None)
    if at is not None:
        out[at] = with_values(out[at], values)
    else:
        lines = "; ".join(dict.fromkeys(values))
        note = HumanMessage(content=f"[earlier exchanges are not shown:\n{ATTACHED}: {lines};]",
                            additional_kwargs={META_KEY: {"omitted": True}})
        _inserted(before, out, first, note)
    return out, noted


__all__ = ["ATTACHED", "UNSTORED", "Attachments", "Noted", "condensed_attachments", "described", "dropped_attachments", "media_blocks", "with_values"]
