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
6. fact scope: task, draft and hypothetical facts never replace global or session ones.

A replaced fact stays stored (``is_valid=False``, ``superseded_by``) and is never retrieved;
facts that depend on it, directly or through others, are marked ``needs_review``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from datetime import UTC, datetime

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from pydantic import ValidationError

from ctxplugin._messages import annotation
from ctxplugin.config import FactsConfig, FactsStrategy
from ctxplugin.errors import InvalidInputError
from ctxplugin.facts._text import content_words, identifiers, stem
from ctxplugin.facts._values import conflicting, typed_values
from ctxplugin.facts.extract import Extractor, ExtractorLike, FactDraft, as_extractor
from ctxplugin.facts.locks import WriteLock, slot_lock_name
from ctxplugin.facts.model import (
    AUTHORITY_RANK,
    PROTECTED_SCOPES,
    REFUSED,
    RETRIEVED_SCOPES,
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
    normalize_key,
    visibility_key,
)
from ctxplugin.facts.ranking import fuse, query_tags, rank
from ctxplugin.facts.rules import RuleExtractor
from ctxplugin.facts.store import FactStore
from ctxplugin.scope import Scope, Visibility

_MAX_CHAIN = 1000
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
        authority: Authority = "user",
        memory_type: MemoryType | None = None,
        source: SourceType = "state_write",
        ref: str | None = None,
        tags: Sequence[str] = (),
        importance: float = 0.5,
        depends_on: Sequence[str] = (),
        constraint_type: str | None = None,
    ) -> Fact:
        """Record a fact and apply the supersession rules.

        Returns the stored fact; a statement already current (same key and text) returns the
        existing fact instead of a copy. When a higher authority's constraint refuses the
        change, the returned fact has ``is_valid=False`` and ``superseded_by`` naming it.

        Raises:
            InvalidInputError: empty or over-long text, an unknown kind, a ``supersedes`` id not
                readable from ``scope``, or a visibility the scope cannot give (``"user"``
                without ``scope.user_id``).
        """
        draft = FactDraft(
            text=text, key=key, kind=kind, tags=tuple(tags), importance=importance, scope=fact_scope,
            scope_id=scope_id, constraint_type=constraint_type, depends_on=tuple(depends_on),
            authority=authority, memory_type=memory_type, visibility=visibility, source_ref=ref,
        )
        fact, _ = self._commit(draft, scope=scope, source=source, supersedes=supersedes)
        return fact

    def _commit(
        self, draft: FactDraft, *, scope: Scope, source: SourceType, supersedes: str | None = None
    ) -> tuple[Fact, bool]:
        """Write one draft; returns the fact and whether it was newly stored."""
        fact = self._build(draft, scope=scope, source=source)
        shared: AbstractContextManager[None] = nullcontext()
        if self.lock is not None:
            # connecting can take a second (a Chroma server client): done before the shared
            # lock, which other processes wait for, rather than while holding it
            opener = getattr(self.store, "open", None)
            if callable(opener):
                opener(fact.owner)
            shared = self.lock.hold(slot_lock_name(visibility_key(fact.owner, fact.visibility)))
        with self._lock, shared:
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
            if protected:
                blocker = protected[0]
                refused = fact.model_copy(update={
                    "is_valid": False,
                    "superseded_by": blocker.id,
                    "note": f"{REFUSED}: a {fact.authority} statement cannot replace the {blocker.authority} constraint {blocker.id}",
                })
                self.store.add([refused])
                return refused, True
            if fact.scope not in PROTECTED_SCOPES and any(t.scope in PROTECTED_SCOPES for t in targets):
                kept = [t.id for t in targets if t.scope in PROTECTED_SCOPES]
                targets = [t for t in targets if t.scope not in PROTECTED_SCOPES]
                note = f"kept beside {', '.join(kept)}: a {fact.scope} fact does not replace a global or session one"
                fact = fact.model_copy(update={"note": note})
            if targets:
                fact = fact.model_copy(update={"supersedes": targets[0].id})
            # the new fact is stored before the old one is invalidated: a failure in between
            # leaves both visible rather than neither
            self.store.add([fact])
            if targets:
                self.store.update([t.model_copy(update={"is_valid": False, "superseded_by": fact.id}) for t in targets])
                self._flag_dependents([t.id for t in targets], scope)
            return fact, True

    def _build(self, draft: FactDraft, *, scope: Scope, source: SourceType) -> Fact:
        visibility = draft.visibility or "session"
        if visibility == "user" and not scope.user_id:
            raise InvalidInputError("visibility='user' needs a scope with a user_id")
        if visibility == "workspace" and not scope.workspace_id:
            raise InvalidInputError("visibility='workspace' needs a scope with a workspace_id")
        authority = draft.authority or ("system" if source in ("tool", "system") else "policy" if source == "policy" else "user")
        memory_type = draft.memory_type or _memory_type(source, authority)
        tags = tuple(dict.fromkeys([t.lower() for t in draft.tags] + identifiers(draft.text)))[:12]
        try:
            return Fact(
                id=new_fact_id(),
                key=draft.key,
                text=draft.text,
                kind=draft.kind,
                owner=scope,
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
            )
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'fact'}: {e['msg']}" for e in exc.errors())
            raise InvalidInputError(f"invalid fact: {problems}") from exc

    def _duplicate(self, fact: Fact) -> Fact | None:
        query = FactQuery(reader=fact.owner, key=fact.key, valid=True, scopes=(fact.scope,), text_hash=fact.text_hash)
        for found in self.store.find(query, limit=5):
            if found.key == fact.key and found.scope_id == fact.scope_id and _same_slot(found, fact):
                return found
        return None

    def _targets(self, fact: Fact, draft: FactDraft, supersedes: str | None) -> list[Fact]:
        reader = fact.owner
        if supersedes is not None:
            found = self.store.get([supersedes], reader=reader)
            if not found:
                raise InvalidInputError(f"supersedes={supersedes!r}: no such fact readable from this scope")
            head = self._head(found[0], reader)
            return [head] if head is not None and head.is_valid else []
        if fact.key is not None:
            same = self.store.find(FactQuery(reader=reader, key=fact.key, valid=True, scopes=(fact.scope,)))
            return [f for f in same if f.scope_id == fact.scope_id and _same_slot(f, fact)]
        if draft.replaces:
            return self._stating(draft.replaces, fact)
        return []

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
        for candidate, _ in self.store.search(fact.text, query, n=_IMPLICIT_CANDIDATES):
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
            nxt = self.store.get([current.superseded_by], reader=reader)
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
        for candidate, _ in self.store.search(old_value, query, n=5):
            if _same_slot(candidate, fact) and words <= set(content_words(candidate.text)):
                return [candidate]
        return []

    def _flag_dependents(self, changed: list[str], reader: Scope) -> None:
        seen = set(changed)
        frontier = list(changed)
        while frontier:
            source_id = frontier.pop()
            dependents = self.store.find(FactQuery(reader=reader, valid=True, depends_on=source_id))
            flagged = [
                d.model_copy(update={"needs_review": True, "note": f"depends on {source_id}, which was superseded"})
                for d in dependents if d.id not in seen
            ]
            if flagged:
                self.store.update(flagged)
            for d in flagged:
                seen.add(d.id)
                frontier.append(d.id)

    # ------------------------------------------------------------------ reads
    def get(self, fact_id: str, *, scope: Scope) -> Fact | None:
        """The fact with this id, or ``None`` if it is unknown or not readable from ``scope``."""
        found = self.store.get([fact_id], reader=scope)
        return found[0] if found else None

    def current(self, key: str, *, scope: Scope, fact_scopes: Sequence[FactScope] = ("global", "session")) -> Fact | None:
        """The current (valid) fact for ``key`` readable from ``scope``: highest authority first,
        then the newest. ``None`` if there is none."""
        norm = normalize_key(key)
        if norm is None:
            raise InvalidInputError("current() needs a non-empty key")
        valid = self.store.find(FactQuery(reader=scope, key=norm, valid=True, scopes=tuple(fact_scopes)))
        if not valid:
            return None
        return max(valid, key=lambda f: (AUTHORITY_RANK[f.authority], f.created_at))

    def history(self, key: str, *, scope: Scope) -> list[Fact]:
        """Every fact ever written for ``key`` readable from ``scope``, oldest first."""
        norm = normalize_key(key)
        if norm is None:
            raise InvalidInputError("history() needs a non-empty key")
        return sorted(self.store.find(FactQuery(reader=scope, key=norm)), key=lambda f: f.created_at)

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
            if head.is_valid and head.id != fact.id:
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
        dense = self.store.search(query, wanted, n=n)
        if floor != 0.0:
            dense = [(f, s) for f, s in dense if s >= floor]
        lexical = getattr(self.store, "search_lexical", None) if self.config.hybrid else None
        found = lexical(query, wanted, n=n) if callable(lexical) else []
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

        Args:
            messages: messages to read (``HumanMessage`` and ``ToolMessage`` are used).
            scope: whose facts these are.
            authority: who the human speaks as (tool results count as ``"system"``).
        """
        written: list[Fact] = []
        for message in messages:
            if not isinstance(message, (HumanMessage, ToolMessage)):
                continue
            ref = _provenance(message)
            source: SourceType = "tool" if isinstance(message, ToolMessage) else "conversation"
            for draft in self.extractor(message):
                visibility = draft.visibility or ("user" if draft.kind == "preference" and scope.user_id else "session")
                draft = _with(draft, ref, None if source == "tool" else authority, visibility)
                fact, created = self._commit(draft, scope=scope, source=source)
                if created and fact.is_valid:
                    written.append(fact)
        return written


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
