"""The facts ledger: writes with supersession, reads, retrieval and extraction (``engine.facts``).

Supersession rules, applied on every write:

1. explicit: ``supersedes=<id>`` replaces that fact (or the current head of its chain);
2. by key: a new fact replaces the valid fact with the same key, owner and fact scope;
3. by correction: a draft that names an old value ("X instead of Y") replaces the current fact
   stating Y when it has no key of its own;
4. implicit (seed 002, rule 2): a statement with no key of its own that names a keyed fact's
   subject (every word of its key) and gives it a conflicting value of the same type — another
   day, time, date, amount of money or percentage — replaces it and takes over its key ("Let's
   do the meeting Thursday at 3pm" replaces "The meeting is Tuesday at 2pm", keyed
   ``meeting``). A statement keyed otherwise is about another subject ("The standup meeting is
   Thursday" keeps ``meeting``). Tool outputs never supersede implicitly, and
   ``FactsConfig.implicit_supersession=False`` turns the rule off;
5. authority: a constraint can only be replaced by an equal or higher authority; a lower one's
   fact is kept, but invalid and pointing at the constraint that refused it;
6. provenance: a fact read from a tool output (source ``tool``, authority ``tool``, the lowest)
   never replaces a fact anyone stated — a user, the system prompt, a policy, an API write. It
   is kept, refused, pointing at the fact it would have replaced. Text a tool returned is data:
   a fetched page saying "Max discount is 90%" does not override the user's "Max discount is 15%";
7. fact scope: task, draft and hypothetical facts never replace global or session ones.

A replaced fact stays stored (``is_valid=False``, ``superseded_by``) and is never retrieved;
facts that depend on it, directly or through others, are marked ``needs_review``.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, get_args

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from pydantic import ValidationError

from ctxplugin._messages import annotation
from ctxplugin._untrusted import storable_text
from ctxplugin.config import FactsConfig, FactsStrategy
from ctxplugin.errors import InvalidInputError
from ctxplugin.facts._batch import WriteBatch
from ctxplugin.facts._text import content_words, identifiers, stem
from ctxplugin.facts._values import conflicting, typed_values
from ctxplugin.facts.extract import Extractor, ExtractorLike, FactDraft, as_extractor
from ctxplugin.facts.locks import WriteLock, slot_lock_name
from ctxplugin.facts.model import (
    AUTHORITY_RANK,
    PROTECTED_SCOPES,
    REFUSED,
    RETRIEVED_SCOPES,
    TOOL_AUTHORITY,
    Authority,
    Fact,
    FactKind,
    FactQuery,
    FactScope,
    MemoryType,
    ScoredFact,
    Source,
    SourceType,
    new_fact_id,
    normalize_audience,
    normalize_key,
    permitted,
    reader_keys,
    visibility_key,
)
from ctxplugin.facts.ranking import fuse, query_tags, rank
from ctxplugin.facts.rules import RuleExtractor
from ctxplugin.facts.store import FactStore
from ctxplugin.scope import Scope, Visibility

_MAX_CHAIN = 1000
_MAX_ID = 128
_ANNOTATED_SCOPES = frozenset({"global", "session", "task", "draft", "hypothetical"})
_IMPLICIT_CANDIDATES = 8
_KEY_PREFIXES = frozenset({"pref", "decision"})
"""Words the extraction rules put before a key's subject (``pref_aisle``, ``decision_vendor``)."""


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
        self.config = config or FactsConfig()
        self.extractor: Extractor = (
            as_extractor(extractor) if extractor is not None else RuleExtractor(self.config.max_per_message)
        )
        self.clock = clock or (lambda: datetime.now(UTC))
        self._lock = threading.RLock()
        self._batch = threading.local()  # the WriteBatch of the ingest running in this thread

    def _writes(self) -> FactStore | WriteBatch:
        """Where the write path reads and writes: the batch of an ingest running in this thread
        (its writes sent together at its end), else the store."""
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
                stored qualified by the owner's slot (``F-001~1a2b3c4d``), so the same id used
                by another session or user never collides with this one.
            audience: restrict who is shown the fact: ``"role:<name>"`` / ``"user:<id>"``
                entries, checked against ``Scope.roles`` and ``Scope.user_id`` of the reader.

        Raises:
            InvalidInputError: empty or over-long text, an unknown kind, a ``supersedes`` id or
                key not readable from ``scope``, a visibility the scope cannot give (``"user"``
                without ``scope.user_id``), authority ``tool`` on a fact not from a tool, a
                ``fact_id`` already used for another statement, or a malformed audience.
        """
        if authority == TOOL_AUTHORITY and source != "tool":
            raise InvalidInputError("authority 'tool' is only for facts from tool outputs (source='tool')")
        draft = FactDraft(
            text=text, key=key, kind=kind, tags=tuple(tags), importance=importance, scope=fact_scope,
            scope_id=scope_id, constraint_type=constraint_type, depends_on=tuple(depends_on),
            authority=authority, memory_type=memory_type, visibility=visibility, source_ref=ref,
        )
        fact, _ = self._commit(
            draft, scope=scope, source=source, supersedes=supersedes, fact_id=fact_id, audience=tuple(audience)
        )
        return fact

    def add(self, text: str, **fields: Any) -> Fact:
        """The same as :meth:`write` (the name a state API usually gives it)."""
        return self.write(text, **fields)

    def _refused(self, fact: Fact, blocker: Fact, why: str) -> Fact:
        """Store ``fact`` as refused in favour of ``blocker`` (kept for its history, never current)."""
        refused = fact.model_copy(update={"is_valid": False, "superseded_by": blocker.id, "note": f"{REFUSED}: {why}"})
        self._writes().add([refused])
        return refused

    def _commit(
        self,
        draft: FactDraft,
        *,
        scope: Scope,
        source: SourceType,
        supersedes: str | None = None,
        fact_id: str | None = None,
        audience: tuple[str, ...] = (),
    ) -> tuple[Fact, bool]:
        """Write one draft; returns the fact and whether it was newly stored."""
        fact = self._build(_valid_draft(draft), scope=scope, source=source, fact_id=fact_id, audience=audience)
        shared: AbstractContextManager[None] = nullcontext()
        if self.lock is not None:
            # connecting can take a second (a Chroma server client): done before the shared
            # lock, which other processes wait for, rather than while holding it
            opener = getattr(self.store, "open", None)
            if callable(opener):
                opener(fact.owner)
            shared = self.lock.hold(slot_lock_name(visibility_key(fact.owner, fact.visibility)))
        with self._lock, shared:
            if fact_id is not None:
                taken = self._writes().get([fact.id], reader=fact.owner)
                if taken:
                    if taken[0].text_hash == fact.text_hash and taken[0].key == fact.key:
                        return taken[0], False
                    raise InvalidInputError(
                        f"fact id {fact_id!r} is already used for another statement; give the new "
                        f"statement its own id and supersedes={fact_id!r}"
                    )
            if fact.depends_on:
                fact = fact.model_copy(update={"depends_on": tuple(self._resolve(d, fact.owner) for d in fact.depends_on)})
            existing = self._duplicate(fact)
            if existing is not None:
                return existing, False
            targets = self._targets(fact, draft, supersedes)
            if not targets and supersedes is None:
                targets = self._implicit(fact)
                if targets:
                    fact = fact.model_copy(update={"key": targets[0].key})
            protected = [
                t for t in targets
                if t.is_constraint and AUTHORITY_RANK[t.authority] > AUTHORITY_RANK[fact.authority]
            ]
            stated = [t for t in targets if not t.from_tool] if fact.from_tool else []
            if stated:
                blocker = stated[0]
                why = f"a tool output cannot replace the {blocker.authority} statement {blocker.id}"
                return self._refused(fact, blocker, why), True
            if protected:
                blocker = protected[0]
                why = f"a {fact.authority} statement cannot replace the {blocker.authority} constraint {blocker.id}"
                return self._refused(fact, blocker, why), True
            if fact.scope not in PROTECTED_SCOPES and any(t.scope in PROTECTED_SCOPES for t in targets):
                kept = [t.id for t in targets if t.scope in PROTECTED_SCOPES]
                targets = [t for t in targets if t.scope not in PROTECTED_SCOPES]
                note = f"kept beside {', '.join(kept)}: a {fact.scope} fact does not replace a global or session one"
                fact = fact.model_copy(update={"note": note})
            if targets:
                fact = fact.model_copy(update={"supersedes": targets[0].id})
            # the new fact is stored before the old one is invalidated: a failure in between
            # leaves both visible rather than neither
            self._writes().add([fact])
            if targets:
                self._writes().update([t.model_copy(update={"is_valid": False, "superseded_by": fact.id}) for t in targets])
                self._flag_dependents([t.id for t in targets], scope)
            return fact, True

    def _build(
        self,
        draft: FactDraft,
        *,
        scope: Scope,
        source: SourceType,
        fact_id: str | None = None,
        audience: tuple[str, ...] = (),
    ) -> Fact:
        visibility = draft.visibility or "session"
        if visibility == "user" and not scope.user_id:
            raise InvalidInputError("visibility='user' needs a scope with a user_id")
        if visibility == "workspace" and not scope.workspace_id:
            raise InvalidInputError("visibility='workspace' needs a scope with a workspace_id")
        owner = scope.model_copy(update={"roles": ()}) if scope.roles else scope
        authority = _authority(draft.authority, source)
        memory_type = draft.memory_type or _memory_type(source, authority)
        tags = tuple(dict.fromkeys([t.lower() for t in draft.tags] + identifiers(draft.text)))[:12]
        try:
            return Fact(
                id=new_fact_id() if fact_id is None else _qualified(_caller_id(fact_id), visibility_key(owner, visibility)),
                key=draft.key,
                text=draft.text,
                kind=draft.kind,
                owner=owner,
                visibility=visibility,
                scope=draft.scope,
                scope_id=draft.scope_id,
                memory_type=memory_type,
                source=Source(type=source, ref=draft.source_ref),
                authority=authority,
                tags=tags,
                importance=draft.importance,
                created_at=self.clock(),
                depends_on=draft.depends_on,
                constraint_type=draft.constraint_type,
                audience=normalize_audience(audience),
            )
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'fact'}: {e['msg']}" for e in exc.errors())
            raise InvalidInputError(f"invalid fact: {problems}") from exc

    def _duplicate(self, fact: Fact) -> Fact | None:
        query = FactQuery(reader=fact.owner, key=fact.key, valid=True, scopes=(fact.scope,), text_hash=fact.text_hash)
        for found in self._writes().find(query, limit=5):
            if found.key == fact.key and found.scope_id == fact.scope_id and _same_slot(found, fact):
                return found
        return None

    def _targets(self, fact: Fact, draft: FactDraft, supersedes: str | None) -> list[Fact]:
        reader = fact.owner
        if supersedes is not None:
            found = self._writes().get(_candidate_ids(supersedes, reader), reader=reader)
            if not found:
                by_key = normalize_key(supersedes)
                same = self._writes().find(FactQuery(reader=reader, key=by_key, valid=True, scopes=(fact.scope,))) if by_key else []
                same = [f for f in same if f.scope_id == fact.scope_id and _same_slot(f, fact)]
                if not same:
                    raise InvalidInputError(
                        f"supersedes={supersedes!r}: no fact with that id, nor a current fact with that key, "
                        "readable from this scope"
                    )
                return same
            head = self._head(found[0], reader)
            return [head] if head is not None and head.is_valid else []
        if fact.key is not None:
            same = self._writes().find(FactQuery(reader=reader, key=fact.key, valid=True, scopes=(fact.scope,)))
            return [f for f in same if f.scope_id == fact.scope_id and _same_slot(f, fact)]
        if draft.replaces:
            return self._stating(draft.replaces, fact)
        return []

    def _resolve(self, fact_id: str, reader: Scope) -> str:
        """The stored id of ``fact_id`` (a caller's own id qualified by its slot), or itself."""
        found = self._writes().get(_candidate_ids(fact_id, reader), reader=reader)
        return found[0].id if found else fact_id

    def _implicit(self, fact: Fact) -> list[Fact]:
        """Rule 4: current keyed facts, in ``fact``'s owner slot and fact scope, whose subject
        (the words of their key) ``fact`` names and whose typed values it contradicts; only for
        a ``fact`` without a key (a keyed one is about its own subject)."""
        if (
            not self.config.implicit_supersession
            or fact.key is not None
            or fact.source.type == "tool"
            or not typed_values(fact.text)
        ):
            return []
        said = {stem(w) for w in content_words(fact.text)}
        query = FactQuery(reader=fact.owner, valid=True, scopes=(fact.scope,))
        found: list[Fact] = []
        for candidate, _ in self._writes().search(fact.text, query, n=_IMPLICIT_CANDIDATES):
            if candidate.key is None or candidate.scope_id != fact.scope_id:
                continue
            subject = {stem(w) for w in content_words(candidate.key.replace("_", " "))} - _KEY_PREFIXES
            if (
                subject
                and subject <= said
                and _same_slot(candidate, fact)
                and conflicting(candidate.text, fact.text)
            ):
                found.append(candidate)
        return found

    def _head(self, fact: Fact, reader: Scope) -> Fact | None:
        """The current end of ``fact``'s supersession chain."""
        current: Fact | None = fact
        for _ in range(_MAX_CHAIN):
            if current is None or current.is_valid or current.superseded_by is None:
                return current
            nxt = self._writes().get([current.superseded_by], reader=reader)
            if not nxt or nxt[0].id == current.id:
                return current
            current = nxt[0]
        return current

    def _stating(self, old_value: str, fact: Fact) -> list[Fact]:
        """The current fact, in ``fact``'s owner and fact scope, that states ``old_value``."""
        words = set(content_words(old_value))
        if not words:
            return []
        query = FactQuery(reader=fact.owner, valid=True, scopes=(fact.scope,))
        for candidate, _ in self._writes().search(old_value, query, n=5):
            if _same_slot(candidate, fact) and words <= set(content_words(candidate.text)):
                return [candidate]
        return []

    def _flag_dependents(self, changed: list[str], reader: Scope) -> None:
        seen = set(changed)
        frontier = list(changed)
        while frontier:
            source_id = frontier.pop()
            dependents = self._writes().find(FactQuery(reader=reader, valid=True, depends_on=source_id))
            flagged = [
                d.model_copy(update={"needs_review": True, "note": f"depends on {source_id}, which was superseded"})
                for d in dependents if d.id not in seen
            ]
            if flagged:
                self._writes().update(flagged)
            for d in flagged:
                seen.add(d.id)
                frontier.append(d.id)

    # ------------------------------------------------------------------ reads
    def get(self, fact_id: str, *, scope: Scope) -> Fact | None:
        """The fact with this id (or the caller's own id given at write), or ``None`` if it is
        unknown or not readable from ``scope`` (including a fact restricted to an audience
        ``scope`` is not in)."""
        found = [f for f in self.store.get(_candidate_ids(fact_id, scope), reader=scope) if permitted(f, scope)]
        return found[0] if found else None

    def current(self, key: str, *, scope: Scope, fact_scopes: Sequence[FactScope] = ("global", "session")) -> Fact | None:
        """The current (valid) fact for ``key`` readable from ``scope``: highest authority first,
        then the newest. ``None`` if there is none."""
        norm = normalize_key(key)
        if norm is None:
            raise InvalidInputError("current() needs a non-empty key")
        valid = [
            f for f in self.store.find(FactQuery(reader=scope, key=norm, valid=True, scopes=tuple(fact_scopes)))
            if permitted(f, scope)
        ]
        if not valid:
            return None
        return max(valid, key=lambda f: (AUTHORITY_RANK[f.authority], f.created_at))

    def changed_basis(self, fact: Fact, *, scope: Scope, limit: int = 2) -> list[Fact]:
        """For a fact flagged ``needs_review``: the current facts that replaced what it was
        derived from, directly or through other flagged facts (at most ``limit``)."""
        found: list[Fact] = []
        seen: set[str] = {fact.id}
        frontier = list(fact.depends_on)
        while frontier and len(found) < limit and len(seen) < _MAX_CHAIN:
            dep_id = frontier.pop(0)
            if dep_id in seen:
                continue
            seen.add(dep_id)
            got = self.store.get([dep_id], reader=scope)
            if not got:
                continue
            dep = got[0]
            if not dep.is_valid:
                head = self._head(dep, scope)
                if head is not None and head.is_valid and head.id not in seen and permitted(head, scope):
                    seen.add(head.id)
                    found.append(head)
            elif dep.needs_review:
                frontier.extend(dep.depends_on)
        return found

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
        old = self.store.find(FactQuery(reader=scope, valid=False, scopes=tuple(RETRIEVED_SCOPES)), limit=limit)
        known = {f.id: f for f in old}
        wanted = {f.superseded_by for f in old if f.superseded_by and f.superseded_by not in known}
        known.update((f.id, f) for f in self.store.get(sorted(wanted), reader=scope))
        pairs: list[tuple[Fact, Fact]] = []
        for fact in old:
            head = fact
            for _ in range(_MAX_CHAIN):
                nxt = known.get(head.superseded_by or "")
                if nxt is None or nxt.id == head.id:
                    break
                head = nxt
            if head.is_valid and head.id != fact.id and permitted(fact, scope) and permitted(head, scope):
                pairs.append((fact, head))
        return pairs

    def search(
        self,
        query: str,
        *,
        scope: Scope,
        k: int | None = None,
        tags: Sequence[str] | None = None,
        strategy: FactsStrategy | None = None,
        fact_scopes: Sequence[FactScope] = RETRIEVED_SCOPES,
    ) -> list[ScoredFact]:
        """The ``k`` valid facts most relevant to ``query`` (default ``config.k``), best first.

        Relevance fuses the embedding's ranking with the store's lexical (BM25) ranking when the
        store has one (``search_lexical``) and ``config.hybrid`` is on; it is combined with the
        strategy's recency/importance prior and the overlap of ``tags`` (plus identifiers in the
        query) with the fact's tags. Facts naming the query's identifiers come first.
        Superseded facts are never returned; a blank query returns nothing.
        """
        k = self.config.k if k is None else k
        if k <= 0:
            return []
        if not query.strip():
            return []
        wanted = FactQuery(reader=scope, valid=True, scopes=tuple(fact_scopes))
        n = max(math.ceil(k * self.config.candidates), k + 4)
        # min_relevance is an embedding similarity: it applies before fusion, and a fact the
        # lexical side found shares a rare word or identifier with the query, so it stays. 0
        # means no floor: a word-vector embedding gives unrelated texts cosines below 0
        floor = self.config.min_relevance
        dense = [(f, s) for f, s in self.store.search(query, wanted, n=n) if permitted(f, scope)]
        if floor != 0.0:
            dense = [(f, s) for f, s in dense if s >= floor]
        lexical = getattr(self.store, "search_lexical", None) if self.config.hybrid else None
        found = [(f, s) for f, s in lexical(query, wanted, n=n) if permitted(f, scope)] if callable(lexical) else []
        return rank(
            fuse(dense, found),
            now=self.clock(),
            strategy=strategy or self.config.strategy,
            half_life_hours=self.config.half_life_hours,
            tags=query_tags(query, tags),
            exact=identifiers(query),
            k=k,
        )

    # ------------------------------------------------------------------ extraction
    def ingest(self, messages: Sequence[BaseMessage], *, scope: Scope, authority: Authority = "user") -> list[Fact]:
        """Extract facts from user messages and tool results and write them.

        Provenance is the CAS ref of a captured tool result
        (``additional_kwargs["ctxplugin"]["ref"]``), else the message id, else the tool call id.
        Other message types are skipped. Returns the facts newly stored.

        A host marks what a message states under ``additional_kwargs["ctxplugin"]``:
        ``fact_scope`` (``"hypothetical"``, ``"draft"``, ``"task"``...; with ``scope_id``),
        ``authority`` (who the human speaks as, e.g. ``"manager"``; user messages only) and
        ``audience`` (``["role:finance"]``: who may be shown the facts).

        Args:
            messages: messages to read (``HumanMessage`` and ``ToolMessage`` are used).
            scope: whose facts these are.
            authority: who the human speaks as. Tool results always have authority ``tool``,
                the lowest, whatever an extractor or the message says.

        Raises:
            InvalidInputError: a message's ``ctxplugin`` metadata names an unknown fact scope or
                authority, or a malformed audience.
        """
        drafts: list[tuple[FactDraft, SourceType, tuple[str, ...]]] = []
        for message in messages:
            if not isinstance(message, (HumanMessage, ToolMessage)):
                continue
            ref = _provenance(message)
            source: SourceType = "tool" if isinstance(message, ToolMessage) else "conversation"
            marks = _marks(message, source)
            for draft in self.extractor(message):
                visibility = draft.visibility or ("user" if draft.kind == "preference" and scope.user_id else "session")
                draft = _with(draft, ref, None if source == "tool" else marks.authority or authority, visibility)
                if marks.fact_scope is not None:
                    draft = replace(draft, scope=marks.fact_scope, scope_id=marks.scope_id or draft.scope_id)
                drafts.append((draft, source, marks.audience))
        if not drafts:
            return []
        written: list[Fact] = []
        if self.lock is not None:
            # shared with other processes: each fact is written while its slot's lock is held
            for draft, source, audience in drafts:
                fact, created = self._commit(draft, scope=scope, source=source, audience=audience)
                if created and fact.is_valid:
                    written.append(fact)
            return written
        # one process: the facts are decided in order, each seeing the ones before, and sent to
        # the store together (one add, one update), under the ledger's lock throughout
        with self._lock:
            batch = WriteBatch(self.store)
            self._batch.current = batch
            try:
                for draft, source, audience in drafts:
                    fact, created = self._commit(draft, scope=scope, source=source, audience=audience)
                    if created and fact.is_valid:
                        written.append(fact)
            finally:
                self._batch.current = None
                batch.flush()
        return written


@dataclass(frozen=True)
class _Marks:
    """What a host said about a message's statements (``additional_kwargs["ctxplugin"]``)."""

    fact_scope: FactScope | None = None
    scope_id: str | None = None
    authority: Authority | None = None
    audience: tuple[str, ...] = ()


_AUTHORITIES: tuple[str, ...] = get_args(Authority)


def _marks(message: BaseMessage, source: SourceType) -> _Marks:
    note = annotation(message)
    fact_scope = note.get("fact_scope")
    if fact_scope is not None and fact_scope not in _ANNOTATED_SCOPES:
        raise InvalidInputError(
            f"additional_kwargs['ctxplugin']['fact_scope'] must be one of {sorted(_ANNOTATED_SCOPES)}, got {fact_scope!r}"
        )
    authority = note.get("authority") if source != "tool" else None
    if authority is not None and (authority not in _AUTHORITIES or authority == TOOL_AUTHORITY):
        raise InvalidInputError(
            f"additional_kwargs['ctxplugin']['authority'] must be one of "
            f"{[a for a in _AUTHORITIES if a != TOOL_AUTHORITY]}, got {authority!r}"
        )
    scope_id = note.get("scope_id")
    audience = note.get("audience") or ()
    return _Marks(
        fact_scope=fact_scope,
        scope_id=str(scope_id) if scope_id is not None else None,
        authority=authority,
        audience=normalize_audience(audience if not isinstance(audience, str) else (audience,)),
    )


def _authority(given: Authority | None, source: SourceType) -> Authority:
    """A fact's authority: ``tool`` for anything read from a tool output, whatever an extractor
    proposed; otherwise the given one, or the source's default."""
    if source == "tool":
        return TOOL_AUTHORITY
    if given is not None:
        return given
    return "system" if source == "system" else "policy" if source == "policy" else "user"


def _caller_id(fact_id: str) -> str:
    cleaned = fact_id.strip()
    if not cleaned or len(cleaned) > _MAX_ID or "~" in cleaned or any(c.isspace() for c in cleaned):
        raise InvalidInputError(
            f"fact_id must be 1-{_MAX_ID} characters without spaces or '~', got {fact_id!r}"
        )
    return cleaned


def _qualified(fact_id: str, slot: str) -> str:
    """A caller's id as stored: qualified by the owner slot, so that two sessions (or users)
    using the same id never share, overwrite or read each other's fact."""
    return f"{fact_id}~{hashlib.sha256(slot.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def _candidate_ids(fact_id: str, reader: Scope) -> list[str]:
    """Stored ids ``fact_id`` may stand for from ``reader``: itself, and the caller's id
    qualified by each slot ``reader`` can read."""
    if "~" in fact_id or not fact_id.strip() or any(c.isspace() for c in fact_id):
        return [fact_id]
    return [fact_id, *(_qualified(fact_id, key) for key in reader_keys(reader))]


def _valid_draft(draft: FactDraft) -> FactDraft:
    """The draft with lone surrogates (undecodable bytes of a tool output) replaced: fact stores
    need valid Unicode, and the exact original stays in the CAS behind the fact's ref."""
    texts = (draft.text, draft.key, draft.replaces, draft.scope_id, draft.constraint_type, *draft.tags)
    if all(t is None or storable_text(t) is t for t in texts):
        return draft
    return replace(
        draft,
        text=storable_text(draft.text),
        key=None if draft.key is None else storable_text(draft.key),
        replaces=None if draft.replaces is None else storable_text(draft.replaces),
        scope_id=None if draft.scope_id is None else storable_text(draft.scope_id),
        constraint_type=None if draft.constraint_type is None else storable_text(draft.constraint_type),
        tags=tuple(storable_text(t) for t in draft.tags),
    )


def _with(draft: FactDraft, ref: str | None, authority: Authority | None, visibility: Visibility) -> FactDraft:
    """The draft with provenance, authority and visibility filled in where the extractor left
    them open."""
    return replace(
        draft,
        source_ref=draft.source_ref or ref,
        authority=draft.authority or authority,
        visibility=visibility,
    )


def _provenance(message: BaseMessage) -> str | None:
    ref = annotation(message).get("ref")
    if isinstance(ref, str) and ref:
        return ref
    if message.id:
        return str(message.id)
    if isinstance(message, ToolMessage):
        return message.tool_call_id
    return None


def _memory_type(source: SourceType, authority: str) -> MemoryType:
    # 002's rule: policy and system sources are organisational knowledge; the rest is the user's
    if source in ("tool", "system", "policy") or authority in ("policy", "system", "executive"):
        return "organizational"
    return "user"


def _same_slot(a: Fact, b: Fact) -> bool:
    """Whether two facts share an owner slot: the same session for session facts, the same user
    for user facts, and so on (the unit within which a key supersedes)."""
    return a.visibility == b.visibility and visibility_key(a.owner, a.visibility) == visibility_key(b.owner, b.visibility)


__all__ = ["FactsLedger"]
