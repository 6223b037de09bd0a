"""A tool called again with the same arguments: the records its later output holds replace
the records without a key its earlier output held.

A record with an id field is keyed by it (``reservation:hathat``), so a later read of it
supersedes the earlier one by key. A record without one (``{"status": "processing", ...}``
from ``get_order_status(order="7731")``, a draft with ``record=True``) has no key; the call
names it instead: the same tool with the same arguments (:func:`call_identity`) asks for the
same thing, so the later output replaces the records of the earlier output that it does not
state again, each by the later output's first fact. An output returned unchanged states them
all again (its facts are the earlier ones, see
:func:`~ctxplugin.facts._supersession._duplicate`) and replaces nothing. Statements read from
plain text are not records: a command run again after an edit replaces nothing this way.

The ledger remembers, as it reads tool outputs, which facts each output stated (by tool call
id); the facts stage names what each call asked for from the history, where the call's
arguments are (:meth:`Polls.asked`, :meth:`Polls.answered`). Both memories are bounded, in
this process only: an output read by another process, or before a restart, is not replaced
this way.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from ctxplugin._lru import LRU
from ctxplugin.facts._batch import WriteBatch
from ctxplugin.facts._drafts import owner_of
from ctxplugin.facts._supersession import _flag_dependents
from ctxplugin.facts.locks import WriteLock, holding, slot_lock_name
from ctxplugin.facts.model import Fact, visibility_key
from ctxplugin.facts.store import FactStore
from ctxplugin.scope import Scope

OUTPUTS_KEPT = 4096
"""Tool outputs (per owner and call id) whose facts are remembered."""
OPEN_KEPT = 64
"""Outputs per owner read before what their call asked for is known (a host capturing them)."""


def call_identity(name: str, args: Any) -> str:
    """What a tool call asks for: its tool name and arguments (canonical JSON), as a digest."""
    try:
        text = json.dumps([name, args], sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    except (TypeError, ValueError):  # keys of mixed types: no canonical form
        text = json.dumps([name, repr(args)])
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]


class _Output:
    __slots__ = ("digest", "first", "keyless", "settled", "stated")

    def __init__(self, first: str, digest: str | None) -> None:
        self.first = first  # the first fact the output stated (what replaces)
        self.digest = digest  # of the output's text
        self.stated: set[str] = set()  # every fact it stated, new or already stored
        self.keyless: list[str] = []  # the facts without a key it stated (what it replaces)
        # paired with the call before it: never again (kept with the output, so a call whose
        # output is forgotten is not paired again either, with a later call taken for the earlier)
        self.settled = False


class Polls:
    """The facts each tool output stated, what each call asked for, and the latest call of
    each identity, for the ledger writing to ``store`` under ``lock`` (``ledger.polls``).
    Thread-safe.

    A call is settled once: when its output was read and what it asked for is known, at the
    latest by :meth:`answered`; within an ingest, as soon as the reading moves on to the next
    output (:meth:`reading`), so an output that states again what an earlier call stated (a
    status that went back) is read after the call in between replaced it.
    """

    def __init__(
        self,
        store: FactStore,
        lock: AbstractContextManager[Any],
        size: int = OUTPUTS_KEPT,
        shared: Callable[[], WriteLock | None] = lambda: None,
    ) -> None:
        self._store = store
        self._writing = lock  # the ledger's: replacements are decided as its writes are
        self._shared = shared  # the ledger's write lock shared by processes, if any
        self._lock = threading.Lock()
        self._outputs: LRU[tuple[str, str], _Output] = LRU(size)  # (owner, call id) -> what it stated
        self._asks: LRU[tuple[str, str], str] = LRU(size)  # (owner, call id) -> identity
        # (owner, identity) -> the output of the latest call: itself, not its call id, which a
        # host may give a later call again (the output under that id is then another one)
        self._latest: LRU[tuple[str, str], _Output] = LRU(size)
        self._open: LRU[str, dict[str, None]] = LRU(size)  # owner -> call ids stated, not settled, in the order read

    def stated(self, owner: Scope, call_id: str | None, fact: Fact, *, record: bool, digest: str | None = None) -> None:
        """Note that the output answering ``call_id`` stated ``fact`` (newly stored or not;
        ``record``: read as one record of it without a key, see
        :attr:`~ctxplugin.facts.extract.FactDraft.record`; ``digest``: of the output's text).

        Another output under a call id paired already (a host giving a later call the id of an
        earlier one, or an output edited since) is never paired: which call it answered is not
        known for sure, and the earlier output stays what the call's next poll replaces."""
        if call_id is None or fact.source.type != "tool" or not fact.is_valid:
            return
        slot = (owner.key(), call_id)
        with self._lock:
            output = self._outputs.hit_or_put(slot, lambda: _Output(fact.id, digest))
            if output.settled and None not in (digest, output.digest) and digest != output.digest:
                output = _Output(fact.id, digest)
                output.settled = True
                self._outputs.put(slot, output)
            if fact.id not in output.stated:
                output.stated.add(fact.id)
                if record and fact.key is None:
                    output.keyless.append(fact.id)
            if not output.settled:
                waiting = self._open.hit_or_put(slot[0], dict)
                waiting[call_id] = None
                while len(waiting) > OPEN_KEPT:
                    del waiting[next(iter(waiting))]

    def reading(self, writes: FactStore | WriteBatch, owner: Scope, call_id: str | None) -> None:
        """Before the ingest holding the ledger's lock writes what the output of ``call_id``
        states (None: not a tool output): settle, in ``writes``, the calls read before it."""
        with self._lock:
            waiting = self._open.get(owner.key())
            ready = [c for c in waiting or () if c != call_id and (owner.key(), c) in self._asks]
        if ready:
            self._settle(writes, owner, ready)

    def answered(self, calls: Sequence[tuple[str, str]], *, scope: Scope) -> list[Fact]:
        """Take the tool calls whose outputs came, in order, as ``(tool call id, identity)``
        (:func:`call_identity`): a call made again with the same tool and arguments replaces
        what the previous one's output stated without a key and its own output does not state
        again. Returns the facts replaced (a call whose output was not read yet is settled
        when it is)."""
        if not calls:
            return []
        self.asked(calls, scope=scope)
        owner, ids = owner_of(scope), [c for c, _ in calls]
        shared = self._shared()
        # taken before the ledger's lock, in the order an ingest takes them
        with holding(shared, self._slots(owner, ids) if shared is not None else ()), self._writing:
            return self._settle(self._store, owner, ids)

    def asked(self, calls: Sequence[tuple[str, str]], *, scope: Scope) -> None:
        """Note what the tool calls ``(tool call id, identity)`` asked for, before their
        outputs are read (an ingest then settles each as it reads past it)."""
        owner = owner_of(scope).key()
        with self._lock:
            for call_id, identity in calls:
                self._asks.put((owner, call_id), identity)

    def reached(self, owner: Scope) -> list[str]:
        """The write lock names of the owner slots holding what settling the calls ``owner``
        has open would replace: an ingest settles them as it reads on (:meth:`reading`), so it
        holds those too, whichever slot the message it reads is stored in."""
        with self._lock:
            waiting = list(self._open.get(owner.key()) or ())
        return self._slots(owner, waiting) if waiting else []

    def _slots(self, owner: Scope, calls: Sequence[str]) -> list[str]:
        """The write lock names of the owner slots holding what ``calls`` would replace: another
        process writing to them waits, as it waits for an ingest."""
        gone: list[str] = []
        latest: dict[str, _Output] = {}  # the outputs settled before, in this pass
        with self._lock:
            for call_id in calls:
                identity = self._asks.get((owner.key(), call_id))
                now = self._outputs.get((owner.key(), call_id))
                if identity is None or now is None or now.settled:
                    continue
                before = latest.get(identity) or self._latest.get((owner.key(), identity))
                gone += before.keyless if before is not None and before is not now else []
                latest[identity] = now
        found = self._store.get(gone, reader=owner) if gone else []
        return sorted({slot_lock_name(visibility_key(f.owner, f.visibility)) for f in found})

    def _settle(self, writes: FactStore | WriteBatch, owner: Scope, calls: Sequence[str]) -> list[Fact]:
        replaced: list[Fact] = []
        for call_id in calls:
            slot = (owner.key(), call_id)
            with self._lock:
                identity = self._asks.get(slot)
                now = self._outputs.get(slot)
                if now is None or now.settled:
                    self._waits(slot).pop(call_id, None)  # forgotten (bounded), or done
                if identity is None or now is None or now.settled:
                    continue
                latest = (owner.key(), identity)
                before = self._latest.get(latest)
                gone = [i for i in before.keyless if i not in now.stated] if before is not None and before is not now else []
            stale = [
                f.model_copy(update={"is_valid": False, "superseded_by": now.first})
                for f in (writes.get(gone, reader=owner) if gone else [])
                if f.is_valid and f.key is None
            ]
            if stale:
                writes.update(stale)
                _flag_dependents(writes, [f.id for f in stale], owner)
                replaced += stale
            with self._lock:  # once written: a failure leaves the call to settle again
                self._latest.put(latest, now)
                now.settled = True
                self._waits(slot).pop(call_id, None)
        return replaced

    def _waits(self, slot: tuple[str, str]) -> dict[str, None]:
        return self._open.get(slot[0]) or {}


__all__ = ["Polls", "call_identity"]
