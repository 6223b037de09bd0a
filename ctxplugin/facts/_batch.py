"""Writes of one ingest, sent to the fact store together.

Reading a message can store several facts and invalidate the ones they replace; each decision
reads the store as the earlier ones left it. :class:`WriteBatch` keeps those writes and shows
them to the reads that follow, then :meth:`WriteBatch.flush` sends them at once: one ``add``
(one upsert, one embedding call) and at most one ``update`` per ingest instead of one per fact,
or both in one ``write`` on a store that has it (Chroma: one upsert per ingest). A single
write goes through a batch too (:func:`batched`): the new fact and those it replaces are sent
together, so a search in another thread never finds the old and the new fact both current.
A search makes two reads (nearest facts, then shared words): :class:`Sent` has it read again
when the ledger sent a write in between (an ingest's, a replacement's, or the marks of a branch
left and the deletes of a withdrawal), so both reads see one state of the store. A vector index
may still answer from before a write that has ended (embedded Chroma, with threads writing):
:func:`as_stored` reads the few facts a search returns once more, in one request, and keeps
those current now, so a fact and the one that replaced it are never both returned.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

from ctxplugin._step import step_wait, waiting
from ctxplugin.facts._subjects import owned_key
from ctxplugin.facts.extract import FactDraft
from ctxplugin.facts.model import Fact, FactQuery, ScoredFact, matches, normalize_key, text_hash
from ctxplugin.facts.store import FactStore
from ctxplugin.scope import Scope


class WriteBatch:
    """``store`` as it will be once the pending writes are sent (a :class:`FactStore`).

    Reads merge the pending writes into what the store returns; a similarity search (which
    needs the pending facts' vectors) sends them first, counted by ``sent`` as the sending at
    the end is (a search in another thread reads again). Not shared between threads.
    """

    def __init__(self, store: FactStore, sent: Sent | None = None) -> None:
        self.store = store
        self._sent = sent
        self._added: dict[str, Fact] = {}
        self._updated: dict[str, Fact] = {}
        # the added facts by text hash (ids in the order added): a duplicate check, one per fact
        # read, looks its text up here instead of testing every pending fact
        self._added_by_hash: dict[str, dict[str, None]] = {}
        # and by key: the current fact of a key, looked up for every keyed fact read, is found
        # among the pending facts of that key (a long conversation read at once adds thousands)
        self._added_by_key: dict[str, dict[str, None]] = {}
        # and the current ones by key: a key stated hundreds of times in one read replaces each
        # statement by the next, and the decision on each looks up only the key's current facts
        self._current_by_key: dict[str, dict[str, None]] = {}
        # the pending changes to stored facts by text hash and by key, and the added facts by the
        # facts they depend on, with the order each was put in: a find reads those of its text
        # hash, key or dependency, in that order, instead of every pending fact (a long thread's
        # first read makes thousands of decisions, each finding among thousands pending)
        self._updated_by: dict[tuple[str, str], dict[str, None]] = {}
        self._added_by_dependency: dict[str, dict[str, None]] = {}
        self._order: dict[str, int] = {}
        # what prefetch read: the reader, the keys and text hashes asked for, the facts found by
        # text hash and by key (in the order read): a find looks up only those of its hash or key
        # (a thread read at once after a restart finds hundreds, asked for once per draft)
        self._known: _Known | None = None

    def prefetch(self, reader: Scope, drafts: Sequence[FactDraft]) -> None:
        """Read in one request, on a store that has ``lookup``, the facts ``reader`` may read
        whose key or text hash is a draft's: the decisions on ``drafts`` look them up by key or
        by text hash (a duplicate, the fact a key replaces), and :meth:`find` then answers from
        them. Called before any write."""
        lookup = getattr(self.store, "lookup", None)
        if not callable(lookup) or self._added or self._updated:
            return
        keys = [k for k in (normalize_key(d.key) for d in drafts) if k]
        # a keyed fact of the thing is checked against the user's own thing too (and the other way)
        wanted_keys = frozenset(keys + [owned_key(k) for k in keys])
        wanted_hashes = frozenset(text_hash(d.text.strip()) for d in drafts)
        if not (wanted_keys or wanted_hashes):
            return
        by_hash: dict[str, list[Fact]] = {}
        by_key: dict[str, list[Fact]] = {}
        for fact in lookup(reader, keys=sorted(wanted_keys), hashes=sorted(wanted_hashes)):
            by_hash.setdefault(fact.text_hash, []).append(fact)
            if fact.key is not None:
                by_key.setdefault(fact.key, []).append(fact)
        self._known = (reader, wanted_keys, wanted_hashes, by_hash, by_key)

    def _stored(self, query: FactQuery, limit: int | None) -> list[Fact]:
        """``store.find(query, limit=limit)``, from what :meth:`prefetch` read when it covers the
        query (its reader, and the text hash or else the key the store would look up by)."""
        known = self._known
        if known is not None and query.reader == known[0] and query.depends_on is None and (
            query.text_hash in known[2] if query.text_hash is not None else query.key in known[1]
        ):
            # a fact matches a query of a text hash (or else a key) only if it has that hash (key)
            candidates = known[3].get(query.text_hash, []) if query.text_hash is not None else known[4].get(query.key or "", [])
            found = [f for f in candidates if matches(f, query)]
            found.sort(key=lambda f: f.created_at, reverse=True)
            return found if limit is None else found[:limit]
        return self.store.find(query, limit=limit)

    def add(self, facts: Sequence[Fact]) -> None:
        for fact in facts:
            self._drop_updated(fact.id)
            self._updated.pop(fact.id, None)
            self._put_added(fact)

    def update(self, facts: Sequence[Fact]) -> None:
        for fact in facts:
            if fact.id in self._added:
                self._put_added(fact)  # still to be added: added as it is now
            else:
                self._drop_updated(fact.id)
                self._put_updated(fact)

    def _facets(self, fact: Fact) -> list[tuple[str, str]]:
        return [("hash", fact.text_hash), *((("key", fact.key),) if fact.key is not None else ())]

    def _drop_updated(self, fact_id: str) -> None:
        old = self._updated.get(fact_id)
        if old is not None:
            for facet in self._facets(old):
                self._updated_by[facet].pop(fact_id, None)

    def _put_updated(self, fact: Fact) -> None:
        if fact.id not in self._updated:
            self._order[fact.id] = len(self._order)  # a dict's order: a put again keeps its place
        self._updated[fact.id] = fact
        for facet in self._facets(fact):
            self._updated_by.setdefault(facet, {})[fact.id] = None

    def _put_added(self, fact: Fact) -> None:
        old = self._added.get(fact.id)
        if old is None:
            self._order[fact.id] = len(self._order)
        self._added[fact.id] = fact
        if old is None or old.depends_on != fact.depends_on:
            for dependency in old.depends_on if old is not None else ():
                self._added_by_dependency[dependency].pop(fact.id, None)
            for dependency in fact.depends_on:
                self._added_by_dependency.setdefault(dependency, {})[fact.id] = None
        if old is None or old.text_hash != fact.text_hash:
            if old is not None:
                self._added_by_hash[old.text_hash].pop(fact.id, None)
            self._added_by_hash.setdefault(fact.text_hash, {})[fact.id] = None
        if old is None or old.key != fact.key:
            if old is not None and old.key is not None:
                self._added_by_key[old.key].pop(fact.id, None)
            if fact.key is not None:
                self._added_by_key.setdefault(fact.key, {})[fact.id] = None
        if old is not None and old.key is not None and old.is_valid:
            self._current_by_key[old.key].pop(fact.id, None)
        if fact.key is not None and fact.is_valid:
            self._current_by_key.setdefault(fact.key, {})[fact.id] = None

    def _pending(self, fact_id: str) -> Fact | None:
        fact = self._added.get(fact_id)
        return self._updated.get(fact_id) if fact is None else fact

    def get(self, ids: Sequence[str], *, reader: Scope) -> list[Fact]:
        asked = [i for i in ids if self._pending(i) is None]
        stored = {f.id: f for f in self.store.get(asked, reader=reader)} if asked else {}
        out: list[Fact] = []
        for fact_id in ids:
            fact = self._pending(fact_id)
            if fact is None:
                fact = stored.get(fact_id)
            elif not reader.can_read(fact.owner, fact.visibility):
                fact = None
            if fact is not None:
                out.append(fact)
        return out

    def find(self, query: FactQuery, *, limit: int | None = None) -> list[Fact]:
        if not self._added and not self._updated:
            return self._stored(query, limit)
        # pending versions replace stored ones in place; each may drop one stored fact
        wider = None if limit is None else limit + len(self._updated)
        found: list[Fact] = []
        seen: set[str] = set()
        for fact in self._stored(query, wider):
            pending = self._updated.get(fact.id, fact)
            seen.add(fact.id)
            if fact.id not in self._added and matches(pending, query):
                found.append(pending)
        updated: Iterable[Fact] = self._updated.values()
        if query.text_hash is not None or query.key is not None:
            facet = ("hash", query.text_hash) if query.text_hash is not None else ("key", query.key or "")
            updated = (self._updated[i] for i in sorted(self._updated_by.get(facet, {}), key=self._order.__getitem__))
        found += [f for f in updated if f.id not in seen and matches(f, query)]
        added: Iterable[Fact] = self._added.values()
        if query.text_hash is not None:
            added = (self._added[i] for i in self._added_by_hash.get(query.text_hash, {}))
        elif query.key is not None and query.valid:
            added = (self._added[i] for i in sorted(self._current_by_key.get(query.key, {}), key=self._order.__getitem__))
        elif query.key is not None:
            added = (self._added[i] for i in self._added_by_key.get(query.key, {}))
        elif query.depends_on is not None:
            added = (self._added[i] for i in sorted(self._added_by_dependency.get(query.depends_on, {}), key=self._order.__getitem__))
        found += [f for f in added if matches(f, query)]
        found.sort(key=lambda f: f.created_at, reverse=True)
        return found if limit is None else found[:limit]

    def search(self, text: str, query: FactQuery, *, n: int) -> list[tuple[Fact, float]]:
        if self._sent is None:
            self.flush()
        else:
            self._sent.flush(self)
        return self.store.search(text, query, n=n)

    def flush(self) -> None:
        """Send the pending writes: in one request when the store has ``write``, else new facts
        first, then the changes to stored ones (a failure in between leaves both the new and the
        old fact visible rather than neither)."""
        added, updated = list(self._added.values()), list(self._updated.values())
        known = self._known
        self._added, self._updated, self._added_by_hash, self._added_by_key, self._current_by_key = {}, {}, {}, {}, {}
        self._updated_by, self._added_by_dependency, self._order = {}, {}, {}
        self._known = None  # until the writes are sent
        write = getattr(self.store, "write", None)
        if callable(write) and added and updated:
            write(added, updated)  # one request where the backend can (see FactStore)
        else:
            if added:
                self.store.add(added)
            if updated:
                self.store.update(updated)
        # what prefetch read stands with these writes in it: the decisions after a similarity
        # search (which sends the writes first) are still answered from it, not one request each
        self._known = _with_writes(known, added, updated)


_Known = tuple[Scope, frozenset[str], frozenset[str], dict[str, list[Fact]], dict[str, list[Fact]]]


def _with_writes(known: _Known | None, added: Sequence[Fact], updated: Sequence[Fact]) -> _Known | None:
    """What :meth:`WriteBatch.prefetch` read (``known``) as the store holds it once ``added`` and
    ``updated`` are written: each new fact the reader may read among the facts of its text hash
    and of its key, when those were asked for, after the ones stored before (in the order a
    store lists them, first stored first); each changed one in its place. None (read again)
    when a change cannot be placed so: a changed fact of a text hash or key asked for that was
    not read, or one whose text hash or key changed."""
    if known is None:
        return None
    reader, keys, hashes, by_hash, by_key = known
    placed = {fact.id: fact for facts in (*by_hash.values(), *by_key.values()) for fact in facts}
    for fact in updated:
        old = placed.get(fact.id)
        if old is None:
            if fact.text_hash in hashes or fact.key in keys:
                return None
            continue
        if old.text_hash != fact.text_hash or old.key != fact.key:
            return None
        for facts in (by_hash.get(fact.text_hash, []), by_key.get(fact.key or "", [])):
            facts[:] = [fact if f.id == fact.id else f for f in facts]
    for fact in added:
        if fact.id in placed:
            return None
        if not reader.can_read(fact.owner, fact.visibility):
            continue
        if fact.text_hash in hashes:
            by_hash.setdefault(fact.text_hash, []).append(fact)
        if fact.key is not None and fact.key in keys:
            by_key.setdefault(fact.key, []).append(fact)
    return known


_T = TypeVar("_T")

_READS = 3
"""Times a read is made at most while writes are sent meanwhile; the last answer stands."""

_WAIT_S = 1.0
"""How long a read waits at most for a write being sent to end before it reads anyway."""


class Sent:
    """Counts the writes one ledger sends to its store, twice each: odd while one is being sent.

    The ledger sends its writes one at a time (under its lock), so a read made of several
    requests that sees the same even count before and after saw no write of this process land
    in between. Writes of other processes are not counted.
    """

    def __init__(self) -> None:
        self.count = 0
        self._changed = threading.Condition()

    def flush(self, batch: WriteBatch) -> None:
        """Send ``batch``, counted."""
        with self.sending():
            batch.flush()

    @contextmanager
    def sending(self) -> Iterator[None]:
        """Count the writes the block sends as one (made under the ledger's lock, as every write is)."""
        with self._changed:
            self.count += 1
        try:
            yield
        finally:
            with self._changed:
                self.count += 1
                self._changed.notify_all()

    def read(self, read: Callable[[], _T]) -> _T:
        """``read()``, made again (up to :data:`_READS` times) when a write was sent while it ran;
        a write being sent when it starts is waited for (at most :data:`_WAIT_S`, and no longer
        than the step's store time left)."""
        for _ in range(_READS):
            with self._changed, waiting():  # the step's store time: another call's write is sent
                self._changed.wait_for(lambda: self.count % 2 == 0, timeout=step_wait(_WAIT_S))
                seen = self.count
            answer = read()
            if self.count == seen:
                break
        return answer


def as_stored(store: FactStore, hits: list[ScoredFact], query: FactQuery) -> list[ScoredFact]:
    """``hits`` as ``store`` holds their facts now, read in one request: a fact no longer
    matching ``query`` (replaced, marked not current, withdrawn) is left out, the others keep
    their place and score. One state of the store answers for all of them, so of a fact and the
    one replacing it (by key, by correction, or a branch left) at most one stays."""
    if not hits:
        return hits
    now = {f.id: f for f in store.get([hit.fact.id for hit in hits], reader=query.reader)}
    kept: list[ScoredFact] = []
    for hit in hits:
        fact = now.get(hit.fact.id)
        if fact is not None and matches(fact, query):
            kept.append(hit if fact is hit.fact or fact == hit.fact else dataclasses.replace(hit, fact=fact))
    return kept


@contextmanager
def batched(
    current: WriteBatch | None,
    store: FactStore,
    sent: Sent,
    new: Callable[[FactStore, Sent], WriteBatch] = WriteBatch,
) -> Iterator[WriteBatch]:
    """``current`` (an ingest's batch, sent at the ingest's end), else a new batch on ``store``
    (made by ``new``), sent (and counted by ``sent``) when the block ends without an error
    (nothing of a write that failed is sent)."""
    if current is not None:
        yield current
        return
    batch = new(store, sent)
    yield batch
    sent.flush(batch)


__all__ = ["Sent", "WriteBatch", "as_stored", "batched"]
