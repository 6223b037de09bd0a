"""From a message or a draft to a fact: what a host marked on a message, provenance,
authority, memory type, the caller's own ids, and the fact built from a draft."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TypeAlias, get_args

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from pydantic import ValidationError

from ctxplugin._messages import META_KEY, annotation, said_ref
from ctxplugin._roles import with_role_classes
from ctxplugin._untrusted import content_problem, not_a_message, storable_text, valid_unicode
from ctxplugin.errors import EngineClosedError, InvalidInputError
from ctxplugin.facts._failures import failing_as_store
from ctxplugin.facts._said import AFTER
from ctxplugin.facts._text import identifiers
from ctxplugin.facts.extract import Extractor, FactDraft
from ctxplugin.facts.model import (
    AUTHORITY_RANK,
    TOOL_AUTHORITY,
    Authority,
    Fact,
    FactScope,
    MemoryType,
    Source,
    SourceType,
    new_fact_id,
    normalize_audience,
    output_digest,
    reader_keys,
    reader_scope,
    visibility_key,
)
from ctxplugin.facts.rules import RuleExtractor
from ctxplugin.scope import Scope, Visibility, scope_key
from ctxplugin.tokens import content_text

logger = logging.getLogger("ctxplugin.facts")

_MAX_ID = 128
_ANNOTATED_SCOPES = frozenset({"global", "session", "task", "draft", "hypothetical"})

Output: TypeAlias = tuple[str | None, str, str | None]
"""What a fact was read from: the tool call id (None for a user message), the digest of the text
read, and for a user message the id of the message before it (:attr:`Source.after`)."""


def owner_of(scope: Scope) -> Scope:
    """The owner a fact written from ``scope`` is stored with (its roles are the reader's, not
    the fact's). Raises :class:`InvalidInputError` when ``scope`` is no :class:`Scope`."""
    scope = reader_scope(scope)
    return scope.model_copy(update={"roles": ()}) if scope.roles else scope


def _build_fact(
    draft: FactDraft,
    *,
    scope: Scope,
    source: SourceType,
    clock: Callable[[], datetime],
    fact_id: str | None = None,
    audience: tuple[str, ...] = (),
    output: Output | None = None,
) -> Fact:
    """A fact from ``draft`` written by ``scope``, stamped with ``clock()``; ``output`` names the
    tool output (call id and :func:`~ctxplugin.facts.model.output_digest`) or the message (no call
    id, the digest of its text, the id of the message before it) it was read from."""
    reader_scope(scope)
    visibility = draft.visibility or "session"
    if visibility == "user" and not scope.user_id:
        raise InvalidInputError("visibility='user' needs a scope with a user_id")
    if visibility == "workspace" and not scope.workspace_id:
        raise InvalidInputError("visibility='workspace' needs a scope with a workspace_id")
    owner = owner_of(scope)
    authority = _authority(draft.authority, source)
    memory_type = draft.memory_type or _memory_type(source, authority)
    tags = tuple(dict.fromkeys([t.lower() for t in draft.tags] + identifiers(draft.text)))[:12]
    try:
        return Fact(
            id=new_fact_id() if fact_id is None else _qualified(_caller_id(fact_id), _id_slot(owner, visibility)),
            key=draft.key,
            text=draft.text,
            kind=draft.kind,
            owner=owner,
            visibility=visibility,
            scope=draft.scope,
            scope_id=draft.scope_id,
            memory_type=memory_type,
            source=Source(
                type=source, ref=draft.source_ref, call_id=output[0] if output else None, digest=output[1] if output else None,
                after=output[2] if output else None,
            ),
            authority=authority,
            tags=tags,
            importance=draft.importance,
            created_at=clock(),
            depends_on=draft.depends_on,
            constraint_type=draft.constraint_type,
            audience=normalize_audience(audience),
        )
    except ValidationError as exc:
        problems = "; ".join(f"{_argument(exc.title, e['loc'])}: {e['msg']}" for e in exc.errors())
        raise InvalidInputError(f"invalid fact: {problems}") from exc


def _argument(model: str, loc: tuple[int | str, ...]) -> str:
    """The argument of ``FactsLedger.write`` a validation error is about: the fact scope is
    ``fact_scope`` there (``scope`` is the writer's Scope), and the source's type is ``source``."""
    path = [str(step) for step in loc]
    if model == "Source":
        path = ["source"] if path == ["type"] else ["source", *path]
    elif path[:1] == ["scope"]:
        path[0] = "fact_scope"
    return ".".join(path) or "fact"


@dataclass(frozen=True)
class _Marks:
    """What a host said about a message's statements (``additional_kwargs["ctxplugin"]``)."""

    fact_scope: FactScope | None = None
    scope_id: str | None = None
    authority: Authority | None = None
    audience: tuple[str, ...] = ()


_AUTHORITIES: tuple[str, ...] = get_args(Authority)


def _marks(message: BaseMessage, source: SourceType) -> _Marks:
    raw = message.additional_kwargs.get(META_KEY)
    if raw is not None and not isinstance(raw, dict):  # ``"hypothetical"`` for ``{"fact_scope": "hypothetical"}``
        raise InvalidInputError(f"additional_kwargs['ctxplugin'] is a dict of marks (fact_scope, authority, audience...), got {raw!r:.60}")
    note = annotation(message)
    fact_scope = note.get("fact_scope")
    if fact_scope is not None and (not isinstance(fact_scope, str) or fact_scope not in _ANNOTATED_SCOPES):
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
        fact_scope=fact_scope,  # type: ignore[arg-type]
        scope_id=str(scope_id) if scope_id is not None else None,
        authority=authority,
        audience=normalize_audience(audience if not isinstance(audience, str) else (audience,)),
    )


def _output_marks(message: ToolMessage) -> _Marks | None:
    """The marks of a tool result, or None when they are malformed. A bad mark on a user message
    is the host's to fix (:func:`_marks` raises); a tool that returns its own ``ToolMessage``
    writes these itself, and raising would fail every later call of the thread. Reading the
    output unmarked could drop an audience the host meant: nothing is read from it."""
    try:
        return _marks(message, "tool")
    except InvalidInputError:
        return None


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
        raise InvalidInputError(f"fact_id must be 1-{_MAX_ID} characters without spaces or '~', got {fact_id!r}")
    if valid_unicode(cleaned) is not cleaned:
        raise InvalidInputError(f"fact_id {fact_id!r} holds undecodable bytes (lone surrogates), which no fact store keeps")
    return cleaned


def _qualified(fact_id: str, slot: str, digits: int = 32) -> str:
    """A caller's id as stored: qualified by the owner slot, so that two sessions (or users) using the
    same id never share, overwrite or read each other's fact (``digits=8``: the earlier form, still
    read, which two of some 77,000 slots share by chance)."""
    return f"{fact_id}~{hashlib.sha256(slot.encode('utf-8', 'surrogatepass')).hexdigest()[:digits]}"


def _stored_forms(fact: Fact, fact_id: str) -> list[str]:
    """The id ``fact`` (the caller's ``fact_id``) is stored under, then its earlier form."""
    return [fact.id, _qualified(_caller_id(fact_id), _id_slot(fact.owner, fact.visibility), 8)]


def _id_slot(owner: Scope, visibility: Visibility) -> str:
    """What a caller's id written by ``owner`` with ``visibility`` is qualified by: the slot's
    visibility key, and for a session fact the owner's user and workspace too (a thread id
    reused by another user or in another workspace is another session, see
    :meth:`~ctxplugin.scope.Scope.can_read`, whose ids must not meet)."""
    if visibility != "session":
        return visibility_key(owner, visibility)
    return scope_key("S", owner.tenant_id, owner.workspace_id, owner.user_id, owner.session_id)


def _candidate_ids(fact_id: str, reader: Scope) -> list[str]:
    """Stored ids ``fact_id`` may stand for from ``reader``: itself, and the caller's id
    qualified by each slot ``reader`` can read (a session's as its writer named its user and
    workspace: as the reader does, or naming none; then as earlier versions qualified it)."""
    if not isinstance(fact_id, str):
        raise InvalidInputError(f"a fact id is a string, got {type(fact_id).__name__}")
    reader_scope(reader)
    if valid_unicode(fact_id) is not fact_id:  # no fact is stored under an id with lone surrogates
        return []
    if "~" in fact_id or not fact_id.strip() or any(c.isspace() for c in fact_id):
        return [fact_id]
    sessions = [
        scope_key("S", reader.tenant_id, workspace, user, reader.session_id)
        for workspace in dict.fromkeys((reader.workspace_id, None)) for user in dict.fromkeys((reader.user_id, None))
    ]
    return [fact_id, *(_qualified(fact_id, key, n) for n in (32, 8) for key in (*sessions, *reader_keys(reader)))]


def _valid_draft(draft: FactDraft) -> FactDraft:
    """The draft with lone surrogates (undecodable bytes of a tool output) replaced: fact stores
    need valid Unicode, and the exact original stays in the CAS behind the fact's ref."""
    named = {"text": draft.text, "key": draft.key, "scope_id": draft.scope_id, "constraint_type": draft.constraint_type}
    for name, value in (*named.items(), *(("tag", t) for t in draft.tags)):
        if not isinstance(value, str) and (value is not None or name == "text"):
            raise InvalidInputError(f"a fact's {name} is a string, got {type(value).__name__}")
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


Read: TypeAlias = tuple[FactDraft, SourceType, tuple[str, ...], Output | None]
"""A draft read from a message, its source type, the audience the host marked, and the call id
(a tool output's; None for a message), digest of the text it was read from and, for a user
message, the id of the message before it."""


def ingested(messages: object, scope: object, authority: Authority = "user") -> Sequence[BaseMessage]:
    """``messages`` as :meth:`FactsLedger.ingest` reads them (a user's ``ChatMessage`` as a
    ``HumanMessage``: :func:`ctxplugin._roles.with_role_classes`), checked: a list (or other
    sequence) of langchain-core messages, and a :class:`Scope`; anything else would be read as nothing.

    Raises:
        InvalidInputError: ``scope`` is no Scope, ``authority`` is unknown or ``tool`` (as in ``write``),
            ``messages`` is one message, a string or a dict rather than a sequence of them, or
            one of them is no message or has content no message can hold."""
    reader_scope(scope)
    if authority == TOOL_AUTHORITY or authority not in _AUTHORITIES:  # refused before anything is read, stated or not
        raise InvalidInputError("authority 'tool' is only for facts from tool outputs, which ingest() gives it itself; pass who the human speaks as (e.g. authority='user')" if authority == TOOL_AUTHORITY else f"ingest() takes an authority of {[a for a in _AUTHORITIES if a != TOOL_AUTHORITY]}, got {authority!r}")
    if isinstance(messages, (str, bytes, dict, BaseMessage)) or not isinstance(messages, Sequence):
        raise InvalidInputError(
            f"ingest() takes a list of langchain-core messages, got {type(messages).__name__}; "
            "langchain_core.messages.convert_to_messages makes messages of dicts, tuples and strings"
        )
    for index, message in enumerate(messages):
        problem = not_a_message(f"message {index}", message) or content_problem(f"message {index}", message)
        if problem is not None:
            raise InvalidInputError(problem)
    return with_role_classes(messages)


def read_drafts(
    messages: Sequence[BaseMessage], extractor: Extractor, *, scope: Scope, authority: Authority, trusted: bool = False
) -> list[Read]:
    """The drafts ``extractor`` reads from the user messages and tool results of ``messages``,
    with provenance, authority, visibility and the host's marks filled in. A message's authority
    mark above ``authority`` is capped at it unless the marks are ``trusted`` (a client that posts
    its own messages can write them)."""
    drafts: list[Read] = []
    for message in messages:
        if not isinstance(message, (HumanMessage, ToolMessage)):
            continue
        ref = _provenance(message)
        source: SourceType = "tool" if isinstance(message, ToolMessage) else "conversation"
        # the text read, so that a message edited in place (same id, other text) is read again
        after = annotation(message).get(AFTER) if isinstance(message, HumanMessage) else None
        output = (
            message.tool_call_id if isinstance(message, ToolMessage) else None, output_digest(content_text(message.content)),
            after if isinstance(after, str) and after else None,
        )
        marks = _output_marks(message) if isinstance(message, ToolMessage) else _marks(message, source)
        if marks is None:
            continue
        if not trusted and marks.authority is not None and AUTHORITY_RANK[marks.authority] > AUTHORITY_RANK[authority]:
            _warn_capped(marks.authority, authority)
            marks = replace(marks, authority=authority)
        for draft in _extracted(extractor, message):
            # like its authority, who may read what a tool returned is not the extractor's to widen
            # (a fetched page would reach every user of the tenant): it stays in the session
            visibility = "session" if source == "tool" else draft.visibility or (
                "user" if draft.kind == "preference" and scope.user_id else "session"
            )
            given = None if source == "tool" else marks.authority or authority
            if given is not None and draft.authority is not None and AUTHORITY_RANK[draft.authority] > AUTHORITY_RANK[given]:
                draft = replace(draft, authority=given)  # an extractor's answer ranks no higher than what it read
            draft = _with(draft, ref, given, visibility)
            if marks.fact_scope is not None:
                draft = replace(draft, scope=marks.fact_scope, scope_id=marks.scope_id or draft.scope_id)
            if isinstance(extractor, RuleExtractor) or _makes_a_fact(draft, scope, source):
                drafts.append((draft, source, marks.audience, output))
    return drafts


def _makes_a_fact(draft: FactDraft, scope: Scope, source: SourceType) -> bool:
    """Whether ``draft`` makes a fact. A model's answer may not (a text over 500 characters or
    an empty one, a key that is no string, an importance above 1...): it is no fact, logged and
    left out as one with unknown fields is, rather than failing the step on every later call
    (the message would be read again each time). The rules' drafts always make one."""
    try:
        _build_fact(_valid_draft(draft), scope=scope, source=source, clock=_now)
    except InvalidInputError as exc:
        logger.warning("a fact extractor's output is left out, it is no fact: %s", exc)
        return False
    return True


def _now() -> datetime:
    return datetime.now(UTC)


def _extracted(extractor: Extractor, message: BaseMessage) -> list[FactDraft]:
    """What ``extractor`` reads from ``message``. A model's output that is no fact (an item with
    unknown fields) gives none, with a warning, and the message is not asked again; a failure of
    what the extractor calls (a hosted model down) is a :class:`~ctxplugin.errors.StoreError`:
    the step degrades and the message is read again on a later call."""
    try:
        with failing_as_store("the fact extractor"):
            return list(extractor(message))
    except EngineClosedError:
        raise
    except InvalidInputError as exc:
        logger.warning("a fact extractor's output is left out, it is no fact: %s", exc)
        return []


_capped_once: set[tuple[str, str]] = set()


def _warn_capped(claimed: str, cap: str) -> None:
    """Log once per pair that a message's authority mark was capped."""
    if (claimed, cap) not in _capped_once:
        _capped_once.add((claimed, cap))
        logger.warning(
            "a message marked authority=%r was read as %r: marks above the ingest's authority are not trusted by default; "
            "set FactsConfig(trust_message_authority=True) where your code, not a client, writes them",
            claimed,
            cap,
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
    if isinstance(message, HumanMessage):
        return said_ref(message)
    return None


def _memory_type(source: SourceType, authority: str) -> MemoryType:
    # 002's rule: policy and system sources are organisational knowledge; the rest is the user's
    if source in ("tool", "system", "policy") or authority in ("policy", "system", "executive"):
        return "organizational"
    return "user"
