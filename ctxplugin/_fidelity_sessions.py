""":func:`ctxplugin.fidelity.value_fidelity`, call after call of one session, at the cost of what
each call brings that is new.

Checked from scratch, a call would read the whole history for the values it used and search the
whole view for each value not among the view's own: a cost that grows with the session. A host
resends the same history with a few messages more and a view that shares most messages with the
previous one, so per session this keeps

- what the history used so far, and where its tool outputs are, folded in message by message
  (the earlier messages must still be the same objects, or add the same values: else it starts
  over);
- which values the previous view was searched for in vain, and which view messages it had.

A value missing from the previous view is then looked for only in the view messages that are new,
and not value by value: the new text's alphanumeric runs are looked up in an index of the missing
values by their longest run (see :func:`~ctxplugin.history.identifiers.longest_run`); a value
found in a text has each of its runs among the text's (see :data:`~ctxplugin.history.identifiers.RUN`).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping, Sequence
from itertools import filterfalse
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin._lru import LRU, TextKey, text_key
from ctxplugin._message_values import REF_SHAPE, read, refs_in
from ctxplugin._prefix import Prefix, Stamp
from ctxplugin.fidelity import Fidelity
from ctxplugin.history.identifiers import RUN, longest_run, occurs


class SessionFidelity:
    """:func:`~ctxplugin.fidelity.value_fidelity` for each session's calls in turn, with the same
    results, reading only what is new since the session's previous call.

    Bounded: the ``sessions`` most recently checked are kept (an evicted one starts over).
    Thread-safe: one lock for the map of sessions, one per session for its state.
    """

    def __init__(self, sessions: int = 1024) -> None:
        self._sessions: LRU[str, _Session] = LRU(sessions)
        self._lock = threading.Lock()

    def check(
        self,
        session: str,
        history: Sequence[BaseMessage],
        view: Sequence[BaseMessage],
        stored: Mapping[str, str] | None = None,
        stamp: Stamp | None = None,
    ) -> Fidelity:
        """The fidelity of ``view`` to ``history`` (see :func:`~ctxplugin.fidelity.value_fidelity`),
        carried over from ``session``'s previous call."""
        with self._lock:
            state = self._sessions.hit_or_put(session, _Session)
        with state.lock:
            state.fold(history, stamp)
            return state.check(history, view, stored or {})


def _adds(message: BaseMessage) -> tuple[object, ...]:
    """What ``message`` adds to the account: whether the user wrote it and the values it used,
    or a tool output's call id and the key of its text. Two messages that add the same are
    interchangeable in a history."""
    if isinstance(message, (HumanMessage, AIMessage)):
        return (isinstance(message, HumanMessage), read(message).used)
    if isinstance(message, ToolMessage):
        return (message.tool_call_id, text_key(read(message).text))
    return ()


def _dead() -> None:
    return None


def held_weakly(message: Any) -> Any:
    """A weak reference to ``message``: calling it gives the message while it lives, else
    ``None`` (always ``None`` for an object that cannot be held weakly)."""
    try:
        return weakref.ref(message)
    except TypeError:  # cannot be held weakly: never taken as seen, so it is read again each call
        return _dead


class _Searched:
    """A view message searched in the previous call: held weakly, with the key of its text and,
    once looked for, the refs it shows."""

    __slots__ = ("key", "message", "refs")

    def __init__(self, message: BaseMessage, key: TextKey) -> None:
        self.message = held_weakly(message)
        self.key = key
        self.refs: frozenset[str] | None = None


class _Session:
    """One session's account so far (see the module's docstring)."""

    __slots__ = (
        "absent", "adds", "by_run", "history", "indexed", "lined", "lock", "outputs", "present", "runs_of", "searched", "unindexed",
        "used",
    )

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.history = Prefix()
        self.adds: list[tuple[object, ...]] = []
        self.used: dict[str, bool] = {}  # value -> whether the user wrote it, in first-seen order
        self.outputs: dict[str, list[int]] = {}  # tool-call id -> positions of its outputs
        self.searched: dict[int, _Searched] = {}  # by id: the messages of the previous view
        self.absent: set[str] = set()  # values none of the searched messages holds
        self.by_run: dict[str, list[str]] = {}  # longest run -> values indexed under it
        self.runs_of: dict[str, frozenset[str]] = {}  # indexed value -> its runs
        self.unindexed: list[str] = []  # values with no letter or digit
        self.indexed: set[str] = set()  # every value in by_run, unindexed or lined
        self.lined: set[str] = set()  # values with a line break
        self.present: dict[str, tuple[int, _Searched]] = {}  # value -> a view message it occurs in

    def fold(self, history: Sequence[BaseMessage], stamp: Stamp | None = None) -> None:
        """Bring ``used`` and ``outputs`` up to date with ``history`` (stamped ``stamp``, when
        known)."""
        changed = self.history.changed(history, stamp)
        for index in changed or ():
            if _adds(history[index]) != self.adds[index]:
                changed = None
                break
            self.history.replace(index, history[index])
        if changed is None:
            self._start_over()
        seen = len(self.adds)
        for index in range(seen, len(history)):
            message = history[index]
            self.adds.append(_adds(message))
            if isinstance(message, ToolMessage):
                self.outputs.setdefault(message.tool_call_id, []).append(index)
            elif isinstance(message, (HumanMessage, AIMessage)):
                from_user = isinstance(message, HumanMessage)
                for value in read(message).used:
                    if value not in self.used:
                        self.used[value] = from_user
                    elif from_user:
                        self.used[value] = True
        self.history.extend(history[seen:], stamp)

    def check(self, history: Sequence[BaseMessage], view: Sequence[BaseMessage], stored: Mapping[str, str]) -> Fidelity:
        """The fidelity of ``view``, once :meth:`fold` has taken in ``history``."""
        used = self.used
        if not used:
            return Fidelity(used=0, shown=0)
        reads = [read(m) for m in view]
        searched: dict[int, _Searched] = {}
        texts: list[tuple[int, str]] = []  # (id, text) of each view message
        new: list[tuple[int, str]] = []  # those not searched in the previous call
        for message, r in zip(view, reads, strict=True):
            key = text_key(r.text)
            entry = self.searched.get(id(message))
            if entry is None or entry.message() is not message or entry.key != key:
                entry = _Searched(message, key)
                new.append((id(message), r.text))
            searched[id(message)] = entry
            texts.append((id(message), r.text))
        candidates = used.keys() - set().union(*(r.shown for r in reads))
        absent = self.absent
        found: set[str] = set()
        # a value with no line break occurs in the joined view exactly when it occurs in one of
        # its messages: one the previous view lacked can only be in a new message, and one found
        # in a message the view still holds is still there
        again = (candidates - absent) | (candidates & self.lined)
        view_text = "\n".join(text for _, text in texts) if again else None
        for value in again:
            where = self.present.get(value)
            if where is not None and searched.get(where[0]) is where[1]:
                found.add(value)
            elif occurs(value, view_text or ""):
                found.add(value)
                self._locate(value, texts, searched)
        if new and absent:
            new_text = "\n".join(text for _, text in new)
            runs = set(RUN.findall(new_text))
            runs_of = self.runs_of
            # a value found there has every one of its runs among the text's: searched only then
            maybe = [v for run in self.by_run.keys() & runs for v in self.by_run[run] if runs_of[v] <= runs]
            for value in (*maybe, *self.unindexed):
                if value in absent and value not in found and occurs(value, new_text):
                    found.add(value)
                    self._locate(value, new, searched)
        missing_set = candidates - found
        missing = list(filter(missing_set.__contains__, used))  # in first-seen order
        self.searched, self.absent = searched, missing_set
        self._index(missing_set - self.indexed)
        behind: list[str] = []
        left = missing
        if missing:
            shown_refs: set[str] = set()
            for message, r in zip(view, reads, strict=True):
                entry = searched[id(message)]
                if entry.refs is None:
                    entry.refs = refs_in(r.text)
                shown_refs |= entry.refs
            with_ref: list[str] = []
            for call_id, ref in stored.items():
                if REF_SHAPE.fullmatch(ref) is not None:
                    shows = ref in shown_refs
                else:  # a ref of another shape: searched for as the view's text
                    view_text = "\n".join(text for _, text in texts) if view_text is None else view_text
                    shows = ref in view_text
                if shows:
                    with_ref.append(call_id)
            found_behind: set[str] = set()
            for call_id in with_ref:
                for index in self.outputs.get(call_id, ()):
                    found_behind.update(missing_set.intersection(read(history[index]).shown))
            if found_behind:
                behind = list(filter(found_behind.__contains__, missing))
                left = list(filterfalse(found_behind.__contains__, missing))
        return Fidelity(
            used=len(used),
            shown=len(used) - len(missing),
            behind_refs=tuple(behind),
            left=tuple(left),
            left_from_user=tuple(filter(used.__getitem__, left)),
        )

    def _locate(self, value: str, texts: list[tuple[int, str]], searched: dict[int, _Searched]) -> None:
        """Remember a message of ``texts`` that ``value`` occurs in, while the view holds it."""
        if "\n" in value:
            return
        for key, text in texts:
            if occurs(value, text):
                self.present[value] = (key, searched[key])
                return

    def _start_over(self) -> None:
        """Forget everything: the history changed other than by new messages at its end."""
        self.history.clear()
        self.adds.clear()
        self.used = {}
        self.outputs = {}
        self.searched = {}
        self.absent = set()  # every value in it must be indexed: the index goes too
        self.by_run = {}
        self.runs_of = {}
        self.unindexed = []
        self.indexed = set()
        self.lined = set()
        self.present = {}

    def _index(self, values: set[str]) -> None:
        """Index ``values`` by their longest run (a value with a line break is searched for in the
        whole view every call instead)."""
        self.indexed |= values
        for value in values:
            if "\n" in value:
                self.lined.add(value)
                continue
            run = longest_run(value)
            if not run:
                self.unindexed.append(value)
            else:
                self.by_run.setdefault(run, []).append(value)
                self.runs_of[value] = frozenset(RUN.findall(value))


__all__ = ["SessionFidelity"]
