"""The facts ledger: writes with supersession, reads, retrieval and extraction (``engine.facts``).

Every write applies the supersession rules — explicit, by key, by correction, implicit,
authority, provenance, fact scope — set out in :mod:`ctxplugin.facts._supersession`. A replaced
fact stays stored (``is_valid=False``, ``superseded_by``) and is never retrieved; facts that
depend on it, directly or through others, are marked ``needs_review``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, get_args

from langchain_core.messages import BaseMessage

from ctxplugin.config import FactsConfig, FactsStrategy, facts_settings
from ctxplugin.errors import InvalidInputError
from ctxplugin.facts._answers import Answers
from ctxplugin.facts._batch import Sent, WriteBatch, as_stored, batched
from ctxplugin.facts._drafts import (
    Read,
    _build_fact,
    _candidate_ids,
    _valid_draft,
    ingested,
    owner_of,
    read_drafts,
)
from ctxplugin.facts._forks import left_behind, reinstated, resumed, standing, to_change
from ctxplugin.facts._polls import Polls
from ctxplugin.facts._reread import by_message, unread, unsaid
from ctxplugin.facts._slots import SlotBatch, reached, slot_of, under_slot_locks
from ctxplugin.facts._supersession import _supersede, changed_basis, superseded_pairs
from ctxplugin.facts._text import identifiers, one_of, query_text, result_count, strings
from ctxplugin.facts._turns import UserTurns
from ctxplugin.facts._withheld import Withheld
from ctxplugin.facts.extract import Extractor, ExtractorLike, FactDraft, as_extractor
from ctxplugin.facts.locks import WriteLock, connected, holding, owner_locks
from ctxplugin.facts.model import (
    AUTHORITY_RANK,
    RETRIEVED_SCOPES,
    TOOL_AUTHORITY,
    Authority,
    Fact,
    FactKind,
    FactQuery,
    FactScope,
    MemoryType,
    ScoredFact,
    SourceType,
    normalize_key,
    permitted,
)
from ctxplugin.facts.ranking import fuse, query_tags, rank
from ctxplugin.facts.rules import RuleExtractor
from ctxplugin.facts.store import FactStore
from ctxplugin.scope import Scope, Visibility


class FactsLedger:
    """Facts with supersession over a :class:`~ctxplugin.facts.store.FactStore`.

    Safe to share between threads: supersession is serialised per ledger. Processes sharing a
    store serialise it through ``lock`` (a :class:`~ctxplugin.facts.locks.WriteLock`, held per
    owner slot); without one, two processes writing the same key at the same instant may both
    stay valid until the next write for that key.

    Args:
        store: where facts live (``MemoryFactStore``, ``ChromaFactStore``...).
        config: retrieval and extraction settings.
        extractor: how facts are found in messages; the zero-LLM rules when omitted. A sync or
            async callable or a ``Runnable`` (see :func:`ctxplugin.facts.extract.as_extractor`);
            use :func:`ctxplugin.facts.extract.combine` to run the rules and a model together.
        clock: current time (for tests and replays).
        lock: a lock shared with the other processes writing to ``store``, such as
            ``ctxplugin_postgres.PostgresWriteLock``; ``ctxplugin.connect`` passes one when
            Postgres is configured.

    Example:
        >>> ledger = FactsLedger(MemoryFactStore(), FactsConfig())
        >>> scope = Scope(session_id="s1")
        >>> _ = ledger.write("Data Team on Project Alpha", key="data_team_allocation", scope=scope)
        >>> new = ledger.write("Data Team reallocated to Project Beta", key="data_team_allocation", scope=scope)
        >>> ledger.current("data_team_allocation", scope=scope).text
        'Data Team reallocated to Project Beta'
    """

    def __init__(
        self,
        store: FactStore,
        config: FactsConfig | None = None,
        *,
        extractor: ExtractorLike | None = None,
        clock: Callable[[], datetime] | None = None,
        lock: WriteLock | None = None,
    ) -> None:
        self.store = store
        self.lock = lock
        self.config = facts_settings(config)  # a ContextConfig's facts settings too
        self.extractor: Extractor = as_extractor(extractor) if extractor is not None else RuleExtractor(self.config.max_per_message)
        self.clock = clock or (lambda: datetime.now(UTC))
        self._lock = threading.RLock()
        self._batch = threading.local()  # the WriteBatch of the ingest running in this thread
        self._sent = Sent()  # the writes sent to the store: a search reads again when one lands meanwhile
        self._answers = Answers()  # the store's answers to the last searches, at its count of writes
        self._withheld = Withheld()  # withdrawals the store could not carry out
        self._turns = UserTurns()  # which user message came before which: what "let's do that" takes up
        self.polls = Polls(store, self._lock, shared=lambda: self.lock)  # what each output stated: a call made again replaces it

    def _writes(self) -> FactStore | WriteBatch:
        """Where the write path writes: this thread's ingest batch (sent at its end), else the store."""
        batch: WriteBatch | None = getattr(self._batch, "current", None)
        return self.store if batch is None else batch

    # ------------------------------------------------------------------ writes
    def write(
        self,
        text: str,
        *,
        scope: Scope,
        key: str | None = None,
        supersedes: str | None = None,
        kind: FactKind = "fact",
        fact_scope: FactScope = "global",
        scope_id: str | None = None,
        visibility: Visibility = "session",
        authority: Authority | None = None,
        memory_type: MemoryType | None = None,
        source: SourceType = "state_write",
        ref: str | None = None,
        tags: Sequence[str] = (),
        importance: float = 0.5,
        depends_on: Sequence[str] = (),
        constraint_type: str | None = None,
        fact_id: str | None = None,
        audience: Sequence[str] = (),
    ) -> Fact:
        """Record a fact and apply the supersession rules.

        Returns the stored fact; a statement already current (same key and text) returns the
        existing fact instead of a copy. When a higher authority's constraint refuses the
        change, or the fact comes from a tool and would replace someone's statement, the
        returned fact has ``is_valid=False`` and ``superseded_by`` naming the fact that stands.

        Args:
            text: the statement (at most 500 characters).
            scope: whose fact it is (the isolation scope that writes it).
            key: semantic key; a newer fact with the same key replaces the older one.
            supersedes: the id of the fact this one replaces (a caller's own id works, see
                ``fact_id``), or else a key whose current fact it replaces.
            kind: decision, entity, task, metric, link, preference, constraint or fact.
            fact_scope: global, session, task, draft or hypothetical. Draft and hypothetical
                facts are never shown as current and never replace global or session ones.
            scope_id: the task or draft the fact belongs to.
            visibility: session (default), user, workspace or tenant.
            authority: who stated it; by default ``tool`` for ``source="tool"``, ``policy`` for
                ``source="policy"``, ``system`` for ``source="system"``, else ``user``.
            memory_type: user, capability or organizational (chosen from the source if omitted).
            source: conversation, tool, state_write (default), system or policy.
            ref: the message id, tool call id or CAS ref it came from.
            tags: topic tags.
            importance: 0–1.
            depends_on: ids (or the caller's own ids) of facts this one was derived from; it
                is flagged for review when one of them is replaced.
            constraint_type: budget, deadline, capacity, policy... marks a constraint.
            fact_id: the caller's own id for the fact (``"F-001"``), usable later in ``get``,
                ``supersedes`` and ``depends_on`` from any scope that can read the fact. It is
                stored qualified by a digest of the owner's slot (``F-001~1a2b...``), so the same id used
                by another session or user never collides with this one.
            audience: restrict who is shown the fact: ``"role:<name>"`` / ``"user:<id>"``
                entries, checked against the reader's ``Scope.roles`` and ``Scope.user_id`` (exactly).

        Raises:
            InvalidInputError: empty or over-long text, an unknown kind, a ``supersedes`` id or
                key not readable from ``scope``, a visibility the scope cannot give (``"user"``
                without ``scope.user_id``), authority ``tool`` on a fact not from a tool, a
                ``fact_id`` already used for another statement, or a malformed audience."""
        if authority == TOOL_AUTHORITY and source != "tool":
            raise InvalidInputError("authority 'tool' is only for facts from tool outputs (source='tool')")
        draft = FactDraft(
            text=text, key=key, kind=kind, tags=strings(tags, 'tags'), importance=importance, scope=fact_scope,
            scope_id=scope_id, constraint_type=constraint_type, depends_on=strings(depends_on, 'depends_on ids'),
            authority=authority, memory_type=memory_type, visibility=visibility, source_ref=ref,
        )
        fact, _ = self._commit(draft, scope=scope, source=source, supersedes=supersedes, fact_id=fact_id, audience=strings(audience, 'audience entries'))
        return fact

    def add(self, text: str, **fields: Any) -> Fact:
        """The same as :meth:`write` (the name a state API usually gives it)."""
        return self.write(text, **fields)

    def _commit(
        self,
        draft: FactDraft,
        *,
        scope: Scope,
        source: SourceType,
        supersedes: str | None = None,
        fact_id: str | None = None,
        audience: tuple[str, ...] = (),
        output: tuple[str | None, str, str | None] | None = None,
        after: str | None = None,
    ) -> tuple[Fact, bool]:
        """Write one draft (``output``: the tool call id, digest and message before of what it was read from; ``after``: the user message said before)."""
        fact = _build_fact(_valid_draft(draft), scope=scope, source=source, clock=self.clock, fact_id=fact_id, audience=audience, output=output)
        implicit, current = self.config.implicit_supersession, getattr(self._batch, "current", None)

        def decide(held: frozenset[str] | None) -> tuple[Fact, bool]:
            with self._lock, batched(current, self.store, self._sent, lambda store, sent: SlotBatch(store, sent, held)) as writes:
                return _supersede(writes, fact, draft, scope=scope, supersedes=supersedes, fact_id=fact_id, implicit=implicit, after=after)
        # an ingest holds its slots' locks already; a write its own slot's, and those of what it replaces elsewhere
        return decide(None) if self.lock is None or current is not None else under_slot_locks(self.lock, self.store, fact.owner, [slot_of(fact)], decide)

    def withdraw(self, outputs: Mapping[str, Collection[str]], *, scope: Scope) -> list[Fact]:
        """Remove the facts ``scope`` (and no other scope) read from tool outputs its host has
        replaced since, as when a PII filter masks a card number; returns them.

        ``outputs`` maps a tool call id to the :func:`~ctxplugin.facts.model.output_digest` of each
        output that stands under it now, whose facts stay (none: all read from it go); the write locks
        are held only when the store's ``from_outputs`` finds one (or it has none). A store without
        ``withdraw`` (:attr:`can_withdraw`) removes nothing: they stay stored, left out of :meth:`search` here."""
        if self.lock is not None and not to_change(self.store, owner_of(scope), (), outputs=outputs):
            return [] if self.can_withdraw else self._withdraw(outputs, scope)  # (withheld here)
        with owner_locks(self.lock, self.store, owner_of(scope)):
            return self._withdraw(outputs, scope)

    def _withdraw(self, outputs: Mapping[str, Collection[str]], scope: Scope) -> list[Fact]:
        remover, named = getattr(self.store, "withdraw", None), standing(outputs)
        if named and not callable(remover):
            self._withheld.add(owner_of(scope), named)
        if not named or not callable(remover):
            return []
        with self._lock, self._sent.sending():  # a search reading meanwhile reads again
            return list(remover(owner_of(scope), named))

    def leave(self, messages: Sequence[BaseMessage], *, scope: Scope, back: Sequence[BaseMessage] = (), unread: Sequence[BaseMessage] = (), outputs: Mapping[str, Collection[str]] | None = None) -> list[Fact]:
        """Mark not current what ``scope`` read from ``messages``, user messages of a branch its host went back from (or, by the facts stored,
        what ``unread``, a conversation this process did not read before, left behind), and return those facts; what it marked
        of ``back``, in the conversation again, is current again (see :mod:`ctxplugin.facts._forks`). What it read from the tool
        ``outputs`` of that branch is withdrawn (as :meth:`withdraw`), and what those facts replaced by key is current again."""
        owner = owner_of(scope)
        # told first without the shared locks, the tenant's every session's: a first call (unread) rarely changes anything
        if self.lock is not None and not to_change(self.store, owner, messages, back=back, unread=unread, outputs=outputs):
            return [] if self.can_withdraw else self._withdraw(outputs or {}, scope)
        # withdrawn, then what they replaced current again, before any other write of this process or another
        with owner_locks(self.lock, self.store, owner), self._lock:
            withdrawn = self._withdraw(outputs or {}, scope)
            with self._sent.sending():  # a search reading meanwhile reads again
                reinstated(self.store, owner, withdrawn)
                return [*left_behind(self.store, owner, messages, back=back), *resumed(self.store, owner, unread)]

    @property
    def can_withdraw(self) -> bool:
        """Whether the store deletes what :meth:`withdraw` names (it has ``withdraw``)."""
        return callable(getattr(self.store, "withdraw", None))

    def withholds(self, fact: Fact) -> bool:
        """Whether ``fact`` was withdrawn but stays stored (a store without ``withdraw``)."""
        return self._withheld.hides(fact)

    # ------------------------------------------------------------------ reads
    def get(self, fact_id: str, *, scope: Scope) -> Fact | None:
        """The fact with this id (or the caller's own id given at write), or ``None`` if it is
        unknown or not readable from ``scope`` (including a fact restricted to an audience
        ``scope`` is not in)."""
        found = [f for f in self.store.get(_candidate_ids(fact_id, scope), reader=scope) if permitted(f, scope)]
        return found[0] if found else None

    def current(self, key: str, *, scope: Scope, fact_scopes: FactScope | Sequence[FactScope] = ("global", "session")) -> Fact | None:
        """The current (valid) fact for ``key`` readable from ``scope``: highest authority first, then the newest. ``None`` if there is none."""
        norm = normalize_key(key)
        if norm is None:
            raise InvalidInputError("current() needs a non-empty key")
        valid = [f for f in self.store.find(FactQuery(reader=scope, key=norm, valid=True, scopes=one_of(fact_scopes, "fact_scopes", get_args(FactScope)))) if permitted(f, scope)]
        return max(valid, key=lambda f: (AUTHORITY_RANK[f.authority], f.created_at)) if valid else None

    def changed_basis(self, fact: Fact, *, scope: Scope, limit: int = 2) -> list[Fact]:
        """For a fact flagged ``needs_review``: the current facts that replaced what it was
        derived from, directly or through other flagged facts (at most ``limit``)."""
        return changed_basis(self.store, self._writes(), fact, scope=scope, limit=limit)

    def history(self, key: str, *, scope: Scope) -> list[Fact]:
        """Every fact ever written for ``key`` readable from ``scope``, oldest first."""
        norm = normalize_key(key)
        if norm is None:
            raise InvalidInputError("history() needs a non-empty key")
        found = [f for f in self.store.find(FactQuery(reader=scope, key=norm)) if permitted(f, scope)]
        return sorted(found, key=lambda f: f.created_at)

    def superseded(self, *, scope: Scope, limit: int = 200) -> list[tuple[Fact, Fact]]:
        """Recently superseded (or refused) facts readable from ``scope``, each with the current
        fact that replaced it. Two store reads whatever the chain lengths."""
        return superseded_pairs(self.store, scope, limit)

    def search(
        self,
        query: str,
        *,
        scope: Scope,
        k: int | None = None,
        tags: Sequence[str] | None = None,
        strategy: FactsStrategy | None = None,
        fact_scopes: FactScope | Sequence[FactScope] = RETRIEVED_SCOPES,
    ) -> list[ScoredFact]:
        """The ``k`` valid facts most relevant to ``query`` (default ``config.k``), best first.

        Relevance fuses the embedding's ranking with the store's lexical (BM25) ranking when the
        store has one (``search_lexical``) and ``config.hybrid`` is on; it is combined with the
        strategy's recency/importance prior and the overlap of ``tags`` (plus identifiers in the
        query) with the fact's tags. Facts naming the query's identifiers come first.
        Superseded facts are never returned; a blank query returns nothing."""
        k = self.config.k if k is None else result_count(k)
        if k <= 0 or not (query := query_text(query)).strip():
            return []
        wanted = FactQuery(reader=scope, valid=True, scopes=one_of(fact_scopes, "fact_scopes", get_args(FactScope)))
        n = max(math.ceil(k * self.config.candidates), k + 4)
        # min_relevance is an embedding similarity: it applies before fusion, and a fact the
        # lexical side found shares a rare word or identifier with the query, so it stays. 0
        # means no floor: a word-vector embedding gives unrelated texts cosines below 0
        floor = self.config.min_relevance
        lexical = getattr(self.store, "search_lexical", None) if self.config.hybrid else None
        dense, found = self._answers.read(self.store, self._sent, query, wanted, n, lexical if callable(lexical) else None)  # one state of the store
        dense = [(f, s) for f, s in dense if permitted(f, scope) and not self._withheld.hides(f) and (floor == 0.0 or s >= floor)]
        found = [(f, s) for f, s in found if permitted(f, scope) and not self._withheld.hides(f)]
        # and what it returns is read once more: a vector index may lag a write that has ended
        return as_stored(self.store, rank(
            fuse(dense, found),
            now=self.clock(),
            strategy=strategy or self.config.strategy,
            half_life_hours=self.config.half_life_hours,
            tags=query_tags(query, strings(tags, "tags") if tags is not None else None),
            exact=identifiers(query),
            k=k,
        ), wanted)

    # ------------------------------------------------------------------ extraction
    def ingest(self, messages: Sequence[BaseMessage], *, scope: Scope, authority: Authority = "user") -> list[Fact]:
        """Extract facts from user messages and tool results and write them.

        Provenance is the CAS ref of a captured tool result (``additional_kwargs["ctxplugin"]["ref"]``),
        else the message id, else the tool call id. Other message types are skipped. Returns the
        facts newly stored. A message read before (same text and source) is not read again; one
        edited in place (same id) is read for what it states anew, what it states no more is marked not current.

        A host marks what a message states under ``additional_kwargs["ctxplugin"]``:
        ``fact_scope`` (``"hypothetical"``, ``"draft"``, ``"task"``...; with ``scope_id``),
        ``authority`` (who the human speaks as, e.g. ``"manager"``; user messages only) and
        ``audience`` (``["role:finance"]``: who may be shown the facts).

        Args:
            messages: messages to read (``HumanMessage`` and ``ToolMessage`` are used; a ``ChatMessage`` in the user's role is read as a ``HumanMessage``: ``ctxplugin._roles``).
            scope: whose facts these are.
            authority: who the human speaks as. Tool results always have authority ``tool``, the lowest, whatever an extractor or the message says.

        Raises:
            InvalidInputError: ``authority`` is ``tool``, as in ``write``; a message's ``ctxplugin``
                metadata names an unknown fact scope or authority, or a malformed audience."""
        messages = ingested(messages, scope, authority)  # checked, a user's ChatMessage read as a HumanMessage
        drafts = read_drafts(messages, self.extractor, scope=scope, authority=authority, trusted=self.config.trust_message_authority)
        before = self._turns.read(messages, owner := owner_of(scope))  # messages that state nothing too
        if not drafts:
            return []
        if self.lock is None:  # one process: the facts are decided in order and sent together
            return self._ingest_batch(drafts, scope, (), before)
        # shared: one message's facts are decided under their slots' locks and sent together, so
        # a process killed meanwhile leaves none (the message is read again), never some of them
        connected(self.store, owner)
        written: list[Fact] = []
        for group in by_message(drafts):
            locks = sorted({*reached(owner, [read[0] for read in group]), *self.polls.reached(owner)})  # and of what it settles
            written += self._ingest_batch(group, scope, locks, before)
        return written

    def _ingest_batch(self, drafts: Sequence[Read], scope: Scope, locks: Sequence[str], before: Mapping[str, str]) -> list[Fact]:
        """Decide ``drafts`` in order, each seeing the ones before, under ``locks`` and the ledger's lock; send them together."""
        owner = owner_of(scope)
        written: list[Fact] = []
        with holding(self.lock, locks), self._lock:
            batch = WriteBatch(self.store, self._sent)
            self._batch.current = batch
            try:
                batch.prefetch(owner, [read[0] for read in drafts])
                for draft, source, audience, output in unread(batch, owner, drafts):
                    after = before.get(draft.source_ref or "")  # the user message said before, when known
                    self.polls.reading(batch, owner, output[0] if output else None)  # settles the outputs read before this one
                    fact, created = self._commit(draft, scope=scope, source=source, audience=audience, output=output, after=after)
                    self.polls.stated(owner, output[0] if output else None, fact, record=draft.record, digest=output[1] if output else None)
                    if created and fact.is_valid:
                        written.append(fact)
                unsaid(self.store, batch, owner, drafts)
            finally:
                self._batch.current = None
                self._sent.flush(batch)
        return written


__all__ = ["FactsLedger"]
