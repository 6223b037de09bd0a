"""What one message holds for the fidelity account: its text and the exact values in it.

Read once per message, memoised by the message object and by its text in bounded maps (see
:mod:`ctxplugin._lru`), so a call reads only the messages it has not seen before.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin._lru import LRU, THREAD_TEXTS, PerMessage, TextKey, text_key
from ctxplugin._untrusted import REF_TEXT
from ctxplugin.history.identifiers import identifiers, text_runs
from ctxplugin.tokens import content_text

MEMO = 8192
"""Messages whose reading is kept (the oldest first out)."""
SCAN_CHARS = 262_144
"""Characters of one message searched for values: a 10 MB tool output is read in bounded time
(values past this point are neither counted nor found behind a ref)."""

REF_SHAPE = re.compile(REF_TEXT)
"""A ref as :func:`ctxplugin.cas.make_ref` writes it: ``ref:<kind>:<16 hex digits>``. The kind
holds no colon and the digest is exactly 16 digits, so at most one ref starts at any place in a
text, and a ref of this shape occurs in a text exactly when :func:`refs_in` finds it there."""

_by_message: PerMessage[Read] = PerMessage(THREAD_TEXTS)  # held weakly: an entry goes with its message
_lock = threading.Lock()
_by_text: LRU[tuple[str, TextKey, TextKey | None], Read] = LRU(MEMO)


@dataclass(frozen=True, slots=True)
class Read:
    """What one message holds: its text (tool-call arguments included), every value in it, and
    the values it used (all of a user message's; an assistant message's tool-call arguments)."""

    text: str
    shown: tuple[str, ...]
    used: tuple[str, ...]


def argument_values(value: Any) -> Iterator[Any]:
    """The scalar values in tool-call arguments (nested dicts and lists walked), None left out."""
    if isinstance(value, dict):
        for item in value.values():
            yield from argument_values(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from argument_values(item)
    elif value is not None:
        yield value


def read(message: BaseMessage) -> Read:
    """Text and values of one message, memoised by the message object (a host resends the same
    objects) and by its text."""
    found = _by_message.get(message)
    if found is not None:
        return found
    text = content_text(message.content)
    args = ""
    if isinstance(message, AIMessage) and message.tool_calls:
        args = "\n".join(str(leaf) for call in message.tool_calls for leaf in argument_values(call.get("args") or {}))
    key = (message.type, text_key(text), text_key(args) if args else None)  # no text joined to be hashed
    with _lock:
        found = _by_text.hit(key)
    if found is None:
        whole = f"{text}\n{args}" if args else text
        if args:  # an assistant message: its arguments are read once for what it used and showed
            used = tuple(identifiers(args[:SCAN_CHARS]))
            room = SCAN_CHARS - len(text) - 1  # no value spans the line break between the two
            shown_args = used if len(args) <= room else tuple(identifiers(args[:room])) if room > 0 else ()
            shown = tuple(dict.fromkeys((*identifiers(text[:SCAN_CHARS]), *shown_args)))
        else:
            shown = tuple(identifiers(whole[:SCAN_CHARS]))
            used = shown if isinstance(message, HumanMessage) else ()
        found = Read(whole, shown, used)
        with _lock:
            _by_text.put(key, found)
    _by_message.put(message, found)
    return found


def adds(message: BaseMessage) -> tuple[object, ...]:
    """What ``message`` adds to the account of values: whether the user wrote it and the values
    it used, or a tool output's call id and the key of its text. Two messages that add the same
    are interchangeable in a history."""
    if isinstance(message, (HumanMessage, AIMessage)):
        return (isinstance(message, HumanMessage), read(message).used)
    if isinstance(message, ToolMessage):
        return (message.tool_call_id, text_key(read(message).text))
    return ()


def refs_in(text: str) -> frozenset[str]:
    """Every ref of :data:`REF_SHAPE` that occurs in ``text``, wherever it starts (inside a
    word or another ref too, as a plain substring search would find it)."""
    found: set[str] = set()
    start = text.find("ref:")
    while start != -1:
        match = REF_SHAPE.match(text, start)
        if match is not None:
            found.add(match.group(0))
        start = text.find("ref:", start + 1)
    return frozenset(found)


def _dead() -> None:
    return None


def held_weakly(message: Any) -> Any:
    """A weak reference to ``message``: calling it gives the message while it lives, else
    ``None`` (always ``None`` for an object that cannot be held weakly)."""
    try:
        return weakref.ref(message)
    except TypeError:  # cannot be held weakly: never taken as seen, so it is read again each call
        return _dead


class Searched:
    """A view message searched in a previous call: held weakly, with the key of its text, the
    values it shows and, once looked for, the refs it shows and the
    :data:`~ctxplugin.history.identifiers.RUN` s of its text."""

    __slots__ = ("key", "message", "read", "refs", "runs", "shown")

    def __init__(self, message: BaseMessage, key: TextKey, made: Read) -> None:
        self.message = held_weakly(message)
        self.key = key
        self.read = made  # what :func:`read` gave: the same object again means the same text
        self.shown = made.shown
        self.refs: frozenset[str] | None = None
        self.runs: frozenset[str] | None = None

    def runs_of(self, text: str) -> frozenset[str]:
        """The runs of ``text``, this message's text (read once)."""
        if self.runs is None:
            self.runs = text_runs(text)
        return self.runs


__all__ = ["MEMO", "REF_SHAPE", "SCAN_CHARS", "Read", "Searched", "adds", "argument_values", "held_weakly", "read", "refs_in"]
