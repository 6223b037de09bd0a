""":func:`ctxplugin.fidelity.value_fidelity`, call after call of one session, at the cost of what
each call brings that is new.

Checked from scratch, a call would read the whole history for the values it used and search the
whole view for each value not among the view's own: a cost that grows with the session. A host
resends the same history with a few messages more and a view that shares most messages with the
previous one, so per session this keeps

- what the history used so far, and where its tool outputs are, folded in message by message
  (the earlier messages must still be the same objects, or add the same values: else it starts
  over);
- which view messages the previous view had, how many of them show each value, which values
  none shows but one holds (found) and which none holds (absent), and the figures made of them.

Only the messages that joined or left the view are read: the counts say which values no message
shows any more, and only those, the values used since the previous call and the found values
whose message left the view (each found value is kept with the view message it was found in)
are looked for in the view, in the messages whose alphanumeric runs (read once per message)
hold all of the value's. The figures' lists are made again only when what they come
from changed. A value missing from the previous view is looked for only in the view messages
that are new, and not value by value: the new text's alphanumeric runs are looked up in an index
of the missing values (see :mod:`ctxplugin._run_index`), which drops a value once it is no
longer missing. The tool outputs behind the refs the view shows are looked up in an index of
the stored refs (see :mod:`ctxplugin._stored_refs`), not found by reading every stored ref.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from itertools import filterfalse
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin._lru import LRU, text_key
from ctxplugin._message_values import Searched, adds, read, refs_in
from ctxplugin._prefix import Prefix, Stamp
from ctxplugin._ranked import Ranked
from ctxplugin._run_index import RunIndex
from ctxplugin._stored_refs import StoredRefs
from ctxplugin.fidelity import Fidelity, behind_texts
from ctxplugin.history.identifiers import occurs, value_runs


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
            try:
                state.fold(history, stamp)
                return state.check(history, view, stored or {})
            except BaseException:
                state._start_over()  # a check cut short leaves counts that no view matches
                raise

    def behind(self, session: str, fidelity: Fidelity, texts: Sequence[str]) -> Fidelity:
        """:func:`~ctxplugin.fidelity.behind_texts` of ``fidelity``, the result of ``session``'s
        latest :meth:`check`: the previous call's answer when its lists are the very ones the
        previous call had (they are kept while nothing they come from changes) and ``texts``
        are the same; read through the values left only when one of them changed. Without
        texts (as a rule: no user message was cut), ``fidelity`` itself."""
        if not texts:
            return fidelity
        with self._lock:
            state = self._sessions.hit_or_put(session, _Session)
        with state.lock:
            known, lists = state.behind, (fidelity.left, fidelity.behind_refs, fidelity.left_from_user)
            if known is not None and all(map(operator.is_, known[:3], lists)) and known[3] == tuple(texts):
                moved = known[4]
            else:
                found = behind_texts(fidelity, texts)
                moved = None if found is fidelity else found  # (None: no value is held there)
                state.behind = (*lists, tuple(texts), moved)
        if moved is None:
            return fidelity
        return replace(
            fidelity, behind_refs=moved.behind_refs, left=moved.left, left_from_user=moved.left_from_user
        )


class _Session:
    """One session's account so far (see the module's docstring)."""

    __slots__ = (
        "absent", "added", "adds", "behind", "counts", "found", "fresh", "gone", "history", "index", "listed", "located", "lock",
        "loose", "missing", "missing_user", "outputs", "present", "rank", "refs", "result", "searched", "used", "users",
        "users_listed",
    )

    used: dict[str, bool]  # value -> whether the user wrote it, in first-seen order
    rank: dict[str, int]  # value -> its place in first-seen order
    outputs: dict[str, list[int]]  # tool-call id -> positions of its outputs
    searched: dict[int, Searched]  # by id: the messages of the previous view
    counts: dict[str, int]  # value -> how many of the searched messages show it
    fresh: list[str]  # values used since the previous check
    absent: set[str]  # used values none of the searched messages holds
    index: RunIndex  # the absent values (each is indexed: clearing one clears both)
    found: set[str]  # used values no searched message shows but one holds
    present: dict[str, tuple[int, Searched]]  # value -> a searched message it occurs in
    located: dict[int, set[str]]  # by id: the values found in a searched message (some shown since)
    loose: set[str]  # found values present in no one searched message (found in the joined text)
    refs: StoredRefs  # the stored refs, by ref
    missing: Ranked  # the absent values in first-seen order, once listed
    missing_user: Ranked  # those of them the user wrote
    listed: bool  # whether missing lists absent as the previous call left it
    result: tuple[Any, ...] | None  # the previous figures, with what they came from
    behind: tuple[Any, ...] | None  # the lists of the latest figures, the texts, and behind_texts of them

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.history = Prefix()
        self.adds: list[tuple[object, ...]] = []
        self.users = 0  # changes to which values the user wrote
        self.users_listed = 0  # users when missing_user was listed
        self.gone: set[str] = set()  # values that left absent in this call
        self.added: set[str] = set()  # values that joined absent in this call
        self._start_over()

    def fold(self, history: Sequence[BaseMessage], stamp: Stamp | None = None) -> None:
        """Bring ``used`` and ``outputs`` up to date with ``history`` (stamped ``stamp``, when
        known)."""
        changed = self.history.changed(history, stamp)
        for index in changed or ():
            if adds(history[index]) != self.adds[index]:
                changed = None
                break
            self.history.replace(index, history[index])
        if changed is None:
            self._start_over()
        seen = len(self.adds)
        used, fresh = self.used, self.fresh
        for index in range(seen, len(history)):
            message = history[index]
            self.adds.append(adds(message))
            if isinstance(message, ToolMessage):
                self.outputs.setdefault(message.tool_call_id, []).append(index)
            elif isinstance(message, (HumanMessage, AIMessage)):
                from_user = isinstance(message, HumanMessage)
                for value in read(message).used:
                    before = used.get(value)
                    if before is None:
                        used[value] = from_user
                        self.rank[value] = len(self.rank)
                        fresh.append(value)
                    elif from_user and not before:
                        used[value] = True
                        self.users += 1
        self.history.extend(history[seen:], stamp)

    def check(self, history: Sequence[BaseMessage], view: Sequence[BaseMessage], stored: Mapping[str, str]) -> Fidelity:
        """The fidelity of ``view``, once :meth:`fold` has taken in ``history``.

        Brought up to date from the previous view: how many messages show each value is
        counted, so only the messages that joined or left the view are read; a value no message
        shows is looked for in the whole view only when it was not missing before."""
        used = self.used
        if not used:
            return Fidelity(used=0, shown=0)
        previous = self.searched
        searched: dict[int, Searched] = {}
        texts: list[tuple[int, str]] = []  # (id, text) of each view message
        new: list[tuple[int, str]] = []  # those not searched in the previous call
        joined: list[Searched] = []
        for message in view:
            r = read(message)
            at = id(message)
            texts.append((at, r.text))
            if at in searched:
                continue
            entry = previous.get(at)
            if entry is None or entry.message() is not message or (entry.read is not r and entry.key != text_key(r.text)):
                entry = Searched(message, text_key(r.text), r)
                new.append((at, r.text))
                joined.append(entry)
            searched[at] = entry
        left_view = [(at, entry) for at, entry in previous.items() if searched.get(at) is not entry]
        counts = self.counts
        zeroed: list[str] = []  # values no view message shows any more
        appeared: list[str] = []  # values a view message shows now and none did before
        for _, entry in left_view:
            for value in entry.shown:
                count = counts[value] - 1
                if count:
                    counts[value] = count
                else:
                    del counts[value]
                    zeroed.append(value)
        for entry in joined:
            for value in entry.shown:
                count = counts.get(value, 0)
                counts[value] = count + 1
                if not count:
                    appeared.append(value)
        absent, found_before, present, index = self.absent, self.found, self.present, self.index
        gone = absent.intersection(appeared)
        index.discard(gone)  # before the new texts are looked up in it: they show these
        absent.difference_update(appeared)
        found_before.difference_update(appeared)
        # values no message shows: those newly so are looked for in the whole view, and so are
        # those found before in a message that left it or in no one message
        again = [v for v in (*zeroed, *self.fresh) if v not in counts and v in used]
        for at, entry in left_view:
            for value in self.located.pop(at, ()):
                if present.get(value, (0, None))[1] is entry:
                    del present[value]
                if value in found_before:
                    again.append(value)
        again.extend(filter(found_before.__contains__, self.loose))
        again.extend(v for v in index.lined if v in absent)
        self.fresh = []
        self.loose = set()
        found: set[str] = set()  # of the values looked for in this call
        view_text: str | None = None
        view_runs: frozenset[str] | None = None
        held: list[tuple[int, str, Searched, frozenset[str]]] | None = None  # each view text with its runs
        for value in dict.fromkeys(again):  # (a value may be there twice: zeroed, and found in a message that left)
            where = present.get(value)
            if where is not None and searched.get(where[0]) is where[1]:
                found.add(value)
                continue
            wanted = value_runs(value) if "\n" not in value else ()
            if not wanted:  # nothing to look up by (no letter or digit, or a line break): the whole view
                view_text = "\n".join(text for _, text in texts) if view_text is None else view_text
                if occurs(value, view_text):
                    found.add(value)
                    self._locate(value, texts, searched)
                continue
            if held is None:  # each view text with its runs, read once; joined, a filter worth making for many values only
                held = [(at, text, searched[at], searched[at].runs_of(text)) for at, text in texts]
                many = len(again) > 2 * len(texts)
                view_runs = frozenset().union(*(text_runs for *_, text_runs in held)) if many else frozenset()
            if view_runs and not view_runs.issuperset(wanted):
                continue  # a value found in a text has every one of its runs among the text's
            for at, text, entry, text_runs in held:
                if text_runs.issuperset(wanted) and occurs(value, text):
                    found.add(value)
                    self._place(value, at, entry)
                    break
        if new and absent:  # each text's runs are read once while its message stays in view
            runs = [(at, text, searched[at].runs_of(text)) for at, text in new]
            for value, at in index.found_in(runs, lambda v: v in absent and v not in found):
                found.add(value)
                self._place(value, at, searched[at])
        lost = {v for v in again if v not in found}
        newly_absent = lost - absent
        shown_now = absent.intersection(found)
        gone |= shown_now
        dirty = bool(gone or newly_absent)  # absent changes
        absent.difference_update(found)
        absent |= newly_absent
        found_before.difference_update(lost)
        found_before |= found
        self.gone, self.added = gone, newly_absent
        self.searched = searched
        index.discard(shown_now)  # (the values the view's messages show left it above)
        index.add(newly_absent)
        return self._figures(history, view, texts, searched, stored, dirty)

    def _figures(
        self,
        history: Sequence[BaseMessage],
        view: Sequence[BaseMessage],
        texts: list[tuple[int, str]],
        searched: dict[int, Searched],
        stored: Mapping[str, str],
        dirty: bool,
    ) -> Fidelity:
        """The figures once :attr:`absent` holds the values the view lacks; the previous call's
        lists are reused when nothing they came from changed."""
        used, absent = self.used, self.absent
        with_ref: list[str] = []
        if absent:
            shown_refs: set[str] = set()
            for message in view:
                entry = searched[id(message)]
                if entry.refs is None:
                    entry.refs = refs_in(read(message).text)
                shown_refs |= entry.refs
            # a ref of REF_SHAPE is in the view's text exactly when refs_in finds it there
            with_ref = self.refs.calls_shown(stored, shown_refs, lambda: "\n".join(text for _, text in texts))
        missing, mine = self.missing, self.missing_user
        if dirty or not self.listed or self.users != self.users_listed:
            self._list()
        outputs = self.outputs
        # besides the missing values: the outputs behind the refs shown, and who wrote each value
        source = ({call_id: len(outputs.get(call_id, ())) for call_id in with_ref}, self.users)
        result = self.result
        if result is None or result[0] != (missing.version, mine.version) or result[1] != source:
            found_behind: set[str] = set()
            for call_id in with_ref:
                for index in outputs.get(call_id, ()):
                    found_behind.update(absent.intersection(read(history[index]).shown))
            if found_behind:
                behind = tuple(filter(found_behind.__contains__, missing.values))
                left = tuple(filterfalse(found_behind.__contains__, missing.values))
                from_user = tuple(filterfalse(found_behind.__contains__, mine.values))
            else:
                behind, left, from_user = (), tuple(missing.values), tuple(mine.values)
            result = self.result = ((missing.version, mine.version), source, behind, left, from_user)
        _, _, behind, left, from_user = result
        return Fidelity(
            used=len(used),
            shown=len(used) - len(absent),
            behind_refs=behind,
            left=left,
            left_from_user=from_user,
        )

    def _list(self) -> None:
        """Bring the lists of missing values up to date with :attr:`absent`: by the values that
        joined and left it in this call, or afresh (after a start over, a large change, or a
        value the user wrote that the assistant wrote first)."""
        used, rank, missing, mine = self.used, self.rank, self.missing, self.missing_user
        if not self.listed or not missing.update(self.gone, self.added, rank):
            missing.reset(filter(self.absent.__contains__, used), rank)  # in first-seen order
            self.listed = False
        if not self.listed or self.users != self.users_listed or not mine.update(
            {v for v in self.gone if used[v]}, {v for v in self.added if used[v]}, rank
        ):
            mine.reset(filter(used.__getitem__, missing.values), rank)
            self.users_listed = self.users
        self.listed = True

    def _locate(self, value: str, texts: list[tuple[int, str]], searched: dict[int, Searched]) -> None:
        """Remember a message of ``texts`` that ``value`` (found in their joined text) occurs in,
        while the view holds it; or that it occurs in no one message."""
        if "\n" not in value:
            for key, text in texts:
                if occurs(value, text):
                    self._place(value, key, searched[key])
                    return
        self.loose.add(value)

    def _place(self, value: str, at: int, entry: Searched) -> None:
        """Remember that ``value`` occurs in ``entry``, the view message ``at``."""
        self.present[value] = (at, entry)
        located = self.located.get(at)
        if located is None:
            located = self.located[at] = set()
        located.add(value)

    def _start_over(self) -> None:
        """Forget everything: the history changed other than by new messages at its end."""
        self.history.clear()
        self.adds.clear()
        self.used = {}
        self.rank = {}
        self.outputs = {}
        self.searched = {}
        self.counts = {}
        self.fresh = []
        self.absent = set()
        self.index = RunIndex()
        self.found = set()
        self.present = {}
        self.located = {}
        self.loose = set()
        self.refs = StoredRefs()
        self.missing = Ranked()
        self.missing_user = Ranked()
        self.listed = False
        self.result = None
        self.behind = None


__all__ = ["SessionFidelity"]
