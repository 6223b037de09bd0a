"""What a fact is: the :class:`Fact` record, its closed vocabularies, and store queries.

A fact is a small statement (at most 500 characters) with a semantic ``key``. A newer fact for
the same key replaces the older one, which stays stored (``is_valid=False``, ``superseded_by``)
so the chain can be read back, but is never retrieved for a model call.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ctxplugin._untrusted import storable_text, valid_unicode
from ctxplugin.errors import InvalidInputError
from ctxplugin.facts._text import normalize
from ctxplugin.scope import Scope, Visibility, scope_key

FactKind = Literal["decision", "entity", "task", "metric", "link", "preference", "constraint", "fact"]
"""What a fact records."""

MemoryType = Literal["user", "capability", "organizational"]
"""Whose knowledge it is: the user's own (preferences, corrections, decisions), learned patterns,
or organisational data and policy."""

FactScope = Literal["global", "session", "task", "draft", "hypothetical"]
"""Where a fact applies. Task, draft and hypothetical facts never replace global or session ones,
and draft and hypothetical facts are not retrieved unless asked for."""

SourceType = Literal["conversation", "tool", "state_write", "system", "policy"]
"""Where a fact came from: a user message, a tool output, a write through the API, the system
prompt or a policy."""

Authority = Literal["tool", "guest", "intern", "user", "employee", "manager", "admin", "executive", "system", "policy"]
"""Who stated a fact. ``tool`` is the lowest and only facts read from tool outputs have it: text a
tool returned is data, never a statement by anyone. A lower authority cannot replace a higher
one's constraint, and a tool's fact never replaces a fact stated by anyone else."""

TOOL_AUTHORITY: Authority = "tool"
"""The authority of every fact read from a tool output (the lowest)."""

AUTHORITY_RANK: dict[str, int] = {
    "tool": -1,
    "guest": 0,
    "intern": 1,
    "user": 2,
    "employee": 2,
    "manager": 3,
    "admin": 4,
    "executive": 5,
    "system": 5,
    "policy": 6,
}

FACT_KINDS: tuple[str, ...] = get_args(FactKind)
FACT_SCOPES: tuple[str, ...] = get_args(FactScope)
PROTECTED_SCOPES = frozenset({"global", "session"})
"""Fact scopes that task, draft and hypothetical facts cannot supersede."""
RETRIEVED_SCOPES: tuple[FactScope, ...] = ("global", "session", "task")
"""Fact scopes retrieved by default."""
PROVISIONAL_SCOPES = frozenset({"hypothetical", "draft"})
"""Fact scopes of statements not (yet) in force."""

MAX_TEXT = 500
MAX_AUDIENCE = 32
REFUSED = "refused"
"""Prefix of the note of a fact refused by a higher authority's constraint."""


class Source(BaseModel):
    """Provenance of a fact.

    Attributes:
        type: conversation (a user message), tool (a tool result), state_write (written through
            the API), system or policy.
        ref: the message id, tool call id or CAS ref (``ref:<kind>:<hash>``) the fact came from.
        turn_index: position of that message in the conversation, when known.
        call_id: for a fact read from a tool output, the tool call id it answered.
        digest: for a fact read from a tool output or a message, :func:`output_digest` of its
            text as read: when the host later replaces that output (PII masking), the facts read
            from the old content are told from those read from the new one and withdrawn; a
            message edited in place (same id, other text) is read again.
        after: the id of the message just before the user message it was read from, if any.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: SourceType = "state_write"
    ref: str | None = None
    turn_index: int | None = None
    call_id: str | None = None
    digest: str | None = None
    after: str | None = None


class Fact(BaseModel):
    """One entry of the facts ledger.

    Attributes:
        id: unique id (``fact_<hex>``).
        key: semantic key; a newer fact with the same key (same owner, same fact scope)
            supersedes the older one. ``None`` for facts that never supersede by key.
        text: the statement, 1–500 characters.
        kind: decision, entity, task, metric, link, preference, constraint or fact.
        owner: the isolation scope that wrote it (tenant / workspace / user / session).
        visibility: who else may read it (session, user, workspace or tenant).
        scope: where it applies (global, session, task, draft, hypothetical); ``scope_id``
            names the task or draft.
        memory_type: user, capability or organizational.
        source: provenance (message id or CAS ref).
        authority: who stated it; protects constraints from lower authorities.
        tags: topic tags and exact identifiers, lower-case.
        importance: 0–1, used by the ``important`` and ``balanced`` strategies.
        created_at: when it was written (UTC).
        is_valid: False once superseded (or refused by a higher authority's constraint).
        supersedes / superseded_by: the supersession chain.
        depends_on: ids of facts this one was derived from.
        needs_review: set when a fact it depends on was superseded.
        constraint_type: budget, deadline, capacity, policy... for constraints.
        note: why the fact needs review or was refused.
        audience: who may be shown it, when restricted: ``"role:<name>"`` and ``"user:<id>"``
            entries; a reader needs one of them (a role in ``Scope.roles`` or its
            ``user_id``). Empty: everyone who can read it (see ``visibility``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(default_factory=lambda: new_fact_id())
    key: str | None = None
    text: str
    kind: FactKind = "fact"
    owner: Scope
    visibility: Visibility = "session"
    scope: FactScope = "global"
    scope_id: str | None = None
    memory_type: MemoryType = "user"
    source: Source = Field(default_factory=Source)
    authority: Authority = "user"
    tags: tuple[str, ...] = ()
    importance: float = Field(0.5, ge=0.0, le=1.0)
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    is_valid: bool = True
    supersedes: str | None = None
    superseded_by: str | None = None
    depends_on: tuple[str, ...] = ()
    needs_review: bool = False
    constraint_type: str | None = None
    note: str | None = None
    audience: tuple[str, ...] = ()

    @field_validator("text")
    @classmethod
    def _text(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise InvalidInputError("a fact's text must not be empty")
        if len(value) > MAX_TEXT:
            raise InvalidInputError(
                f"a fact's text is at most {MAX_TEXT} characters (got {len(value)}); "
                "split it into several facts or store the long content in the CAS and cite its ref"
            )
        return value

    @field_validator("created_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        # naive times are taken as UTC so that ages and orderings compare
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)

    @field_validator("key")
    @classmethod
    def _key(cls, value: str | None) -> str | None:
        return normalize_key(value)

    @field_validator("audience")
    @classmethod
    def _audience(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return normalize_audience(value)

    @property
    def from_tool(self) -> bool:
        """Whether the fact was read from a tool output (data, never instruction)."""
        return self.source.type == "tool"

    @property
    def is_constraint(self) -> bool:
        """Whether this fact is a formal constraint (protected by authority)."""
        return self.kind == "constraint" or self.constraint_type is not None

    @property
    def refused(self) -> bool:
        """Whether a higher authority's constraint refused this fact (``superseded_by`` names it)."""
        return not self.is_valid and (self.note or "").startswith(REFUSED)

    @property
    def text_hash(self) -> str:
        """Hash of the normalised text (repeated statements are stored once)."""
        return text_hash(self.text)


@dataclass(frozen=True)
class ScoredFact:
    """A retrieved fact with its score (higher is more relevant).

    Attributes:
        fact: the fact.
        score: the combined ranking score (relevance, recency/importance, tag overlap).
        relevance: the similarity of the fact to the query alone, in [0, 1].
    """

    fact: Fact
    score: float
    relevance: float = 0.0


@dataclass(frozen=True)
class FactQuery:
    """What a store lookup asks for. Every field narrows; ``None`` means any.

    ``reader`` restricts to facts that scope may read (see :meth:`Scope.can_read`).
    """

    reader: Scope
    key: str | None = None
    valid: bool | None = None
    scopes: tuple[str, ...] | None = None
    depends_on: str | None = None
    text_hash: str | None = None

    def __post_init__(self) -> None:
        reader_scope(self.reader)


def matches(fact: Fact, query: FactQuery) -> bool:
    """The reference semantics of a :class:`FactQuery`; every store must agree with it."""
    if not query.reader.can_read(fact.owner, fact.visibility):
        return False
    if query.key is not None and fact.key != query.key:
        return False
    if query.valid is not None and fact.is_valid != query.valid:
        return False
    if query.scopes is not None and fact.scope not in query.scopes:
        return False
    if query.depends_on is not None and query.depends_on not in fact.depends_on:
        return False
    return query.text_hash is None or fact.text_hash == query.text_hash


def withdrawn(fact: Fact, owner: Scope, outputs: Mapping[str, Collection[str]]) -> bool:
    """Whether a withdrawal of ``outputs`` by ``owner`` removes ``fact``: the reference
    semantics every store's ``withdraw`` agrees with. ``outputs`` maps a tool call id to the
    digests of the outputs that stand under it now (facts read from them stay; none: all go)."""
    source = fact.source
    if source.type != "tool" or source.call_id is None or source.call_id not in outputs:
        return False
    return source.digest not in outputs[source.call_id] and fact.owner.key() == owner.key()


def permitted(fact: Fact, reader: Scope) -> bool:
    """Whether ``reader`` is in ``fact``'s audience: always when the fact names none, else when
    the reader has one of its roles or is one of its users.

    Stores do not apply it (supersession sees every fact of a key); the ledger's reads do."""
    if not fact.audience:
        return True
    allowed = set(fact.audience)
    if reader.user_id is not None and f"user:{reader.user_id}" in allowed:
        return True
    return any(f"role:{role.strip().lower()}" in allowed for role in reader.roles)


def normalize_audience(entries: Sequence[str]) -> tuple[str, ...]:
    """Audience entries checked and normalised: ``"role:<name>"`` (role names compare as
    :class:`Scope` keeps them: case and spaces around ignored) or ``"user:<id>"`` (the id compares
    exactly with ``Scope.user_id``, which is kept as given, so distinct ids are never merged).

    Raises:
        InvalidInputError: not a list of entries, an entry of another form, a user id with
            whitespace around it (``"user: a"``), or more than 32 entries.
    """
    if isinstance(entries, str):
        entries = (entries,)
    elif not isinstance(entries, Collection):  # a mark's value (``5``) is the host's or a tool's
        raise InvalidInputError(f"an audience is a list of 'role:<name>' or 'user:<id>' entries, got {entries!r}")
    out: list[str] = []
    for entry in entries:
        kind, _, name = str(entry).partition(":")
        if kind not in ("role", "user") or not name.strip():
            raise InvalidInputError(f"an audience entry is 'role:<name>' or 'user:<id>', got {entry!r}")
        if kind == "user" and name != name.strip():
            raise InvalidInputError(f"the audience entry {entry!r} has whitespace around its user id; user ids compare exactly with Scope.user_id, so write {'user:' + name.strip()!r} for the user {name.strip()!r}")
        out.append(f"role:{name.strip().lower()}" if kind == "role" else f"user:{name}")
    if len(out) > MAX_AUDIENCE:
        raise InvalidInputError(f"a fact's audience has at most {MAX_AUDIENCE} entries (got {len(out)})")
    return tuple(dict.fromkeys(out))


def new_fact_id() -> str:
    """A fresh fact id."""
    return f"fact_{uuid.uuid4().hex[:20]}"


def revises(fact: Fact) -> bool:
    """Whether storing ``fact`` changes what is in force otherwise than by one more current fact:
    it is not current (superseded, refused) or it is provisional (hypothetical, draft)."""
    return not fact.is_valid or fact.scope in PROVISIONAL_SCOPES


def reader_scope(scope: object) -> Scope:
    """``scope``, checked to be a :class:`Scope` (the ledger's methods take ``scope=``).

    Raises:
        InvalidInputError: it is not one.
    """
    if not isinstance(scope, Scope):
        raise InvalidInputError(f"the facts ledger takes scope=Scope(session_id=...), got {type(scope).__name__}")
    return scope


def normalize_key(key: str | None) -> str | None:
    """Keys compare case- and space-insensitively: ``"Data Team"`` is ``"data_team"``. Lone
    surrogates and NUL become U+FFFD, as in the key a fact is stored with, so a key is looked up
    as it was written."""
    if key is None:
        return None
    if not isinstance(key, str):
        raise InvalidInputError(f"a fact's key is a string, got {type(key).__name__}")
    cleaned = "_".join(normalize(storable_text(key)).replace("-", " ").split())
    return cleaned or None


def output_digest(text: str) -> str:
    """The digest a fact records of the tool output it was read from (exact text, sha256)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@lru_cache(maxsize=16384)
def text_hash(text: str) -> str:
    """Hash of normalised text (memoised: a fact's hash is asked for at every check that may
    find it a duplicate)."""
    return hashlib.sha1(normalize(text).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def reader_keys(scope: Scope) -> list[str]:
    """Visibility keys a reader can see; a fact stores :func:`visibility_key` of its owner.

    One ``$in`` on a single metadata field filters a collection by visibility quickly; the exact
    rule (:meth:`Scope.can_read`) is applied to the few candidates afterwards. The keys of
    earlier versions (pipe-joined, ambiguous) follow, so facts written by them are still found
    until rewritten; the exact rule keeps an ambiguous old key from granting anything.
    """
    tenant = scope.tenant_id
    parts: list[tuple[str | None, ...]] = [("s", tenant, scope.session_id), ("t", tenant)]
    if scope.user_id:
        parts.append(("u", tenant, scope.user_id))
    if scope.workspace_id:
        parts.append(("w", tenant, scope.workspace_id))
    keys = [scope_key(*p) for p in parts]
    # an old key with undecodable bytes (a lone surrogate) was never stored: no store keeps one,
    # and a Chroma filter holding one is refused as a whole
    old = (f"{p[0]}|{'|'.join(v or '' for v in p[1:])}" for p in parts)
    keys += [key for key in old if valid_unicode(key) is key]
    return keys


def visibility_key(owner: Scope, visibility: Visibility) -> str:
    """The visibility key a fact written by ``owner`` with ``visibility`` is stored under."""
    tenant = owner.tenant_id
    if visibility == "session":
        return scope_key("s", tenant, owner.session_id)
    if visibility == "user":
        return scope_key("u", tenant, owner.user_id)
    if visibility == "workspace":
        return scope_key("w", tenant, owner.workspace_id)
    return scope_key("t", tenant)


__all__ = [
    "AUTHORITY_RANK",
    "TOOL_AUTHORITY",
    "Authority",
    "Fact",
    "FactKind",
    "FactQuery",
    "FactScope",
    "MemoryType",
    "ScoredFact",
    "Source",
    "SourceType",
    "matches",
    "output_digest",
    "permitted",
    "withdrawn",
]
