"""How facts are laid out in Chroma: metadata fields, the filters that read them, and the fast
way back from a query result to a :class:`~ctxplugin.facts.model.Fact`.

Fields that filters use are metadata of their own (``vis``, ``scope``, ``is_valid``, and the
composite ``sv``/``hv``/``kv``/``cv``/``dep_<id>`` fields that make each lookup one selective
equality); everything else travels as one JSON string, since each metadata field is a row in
Chroma's SQLite.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, TypeVar
from urllib.parse import quote

from pydantic import BaseModel

from ctxplugin._untrusted import valid_unicode
from ctxplugin.facts._said import said_by
from ctxplugin.facts.model import Fact, FactQuery, Source, reader_keys, visibility_key
from ctxplugin.scope import Scope

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_SEP = "\x1f"


def find_where(query: FactQuery) -> dict[str, Any]:
    """One selective Chroma clause for ``query``; the rest is checked in Python (:func:`matches`).

    Chroma lists every record matching each clause before intersecting, so a clause matching
    most of the collection (the reader's visibility, validity) is slow however selective the
    whole filter is. Composite fields (visibility key joined with the key, text hash or state)
    make each lookup a single selective equality.
    """
    keys = reader_keys(query.reader)
    if query.text_hash is not None:
        return {"hv": {"$in": [f"{v}{_SEP}{query.text_hash}" for v in keys]}}
    if query.key is not None:
        return {"kv": {"$in": [f"{v}{_SEP}{query.key}" for v in keys]}}
    if query.depends_on is not None:
        return {"dep_" + query.depends_on: {"$in": keys}}
    if query.valid is not None:
        state = _state_where(keys, query.valid)
        if query.scopes is not None and "global" not in query.scopes:
            # a few scopes (the provisional ones): Chroma returns only their facts, not every
            # fact of the state to be filtered here. Facts stored without a scope field are global.
            return {"$and": [state, {"scope": {"$in": list(query.scopes)}}]}
        return state
    return {"vis": {"$in": keys}}


_MAX_VALUES = 5_000
"""Values one lookup request binds at most: Chroma's SQLite takes one variable per value and
refuses a statement with more than 32,766 (a long conversation's first ingest looks up tens of
thousands of keys and text hashes)."""


def lookup_wheres(reader: Scope, keys: Sequence[str], hashes: Sequence[str]) -> list[dict[str, Any]]:
    """The clauses, one request each, for the facts ``reader`` may see whose key is among
    ``keys`` or text hash among ``hashes`` (none when both are empty): the composite fields of
    :func:`find_where`, one ``$in`` each, at most :data:`_MAX_VALUES` values per clause."""
    slots = reader_keys(reader)
    values = [("kv", f"{v}{_SEP}{k}") for v in slots for k in keys]
    values += [("hv", f"{v}{_SEP}{h}") for v in slots for h in hashes]
    return _in_chunks(values, ("kv", "hv"))


def _in_chunks(values: Sequence[tuple[str, str]], fields: Sequence[str]) -> list[dict[str, Any]]:
    """One clause per :data:`_MAX_VALUES` of ``values`` (field, value): an ``$in`` per field
    of ``fields`` that the chunk holds, joined by ``$or`` when there are several."""
    wheres: list[dict[str, Any]] = []
    for start in range(0, len(values), _MAX_VALUES):
        chunk = values[start : start + _MAX_VALUES]
        clauses = [
            {field: {"$in": listed}}
            for field in fields
            if (listed := [value for name, value in chunk if name == field])
        ]
        wheres.append(clauses[0] if len(clauses) == 1 else {"$or": clauses})
    return wheres


def _id_field(field: str, value: str) -> tuple[str, str]:
    """The field and value naming an id: ``field`` and the id, or for an id with lone
    surrogates (which no Chroma string holds) ``field + "s"`` and the id percent-encoded; in a
    field of its own it never meets an ordinary id that spells the same. ``cv`` names a tool
    call; ``mv`` the user message a fact was read from (written since edited messages are told
    apart: a fact stored before has neither, and is not found by it); ``av`` the message said
    just before that one (written since branches are told apart after a restart)."""
    if valid_unicode(value) is value:
        return field, value
    return f"{field}s", quote(value, safe="", errors="surrogatepass")


def message_wheres(owner: Scope, refs: Sequence[str], field: str = "mv") -> list[dict[str, Any]]:
    """The clauses, one request each, for the facts read from the user messages ``refs`` in the
    slots ``owner`` can read (ownership is checked after), at most :data:`_MAX_VALUES` values each;
    with ``field="av"``, from the user messages said right after the messages ``refs``."""
    fields = [_id_field(field, ref) for ref in dict.fromkeys(refs)]
    values = [(name, f"{v}{_SEP}{value}") for name, value in fields for v in reader_keys(owner)]
    return _in_chunks(values, (field, f"{field}s"))


def withdraw_wheres(owner: Scope, call_ids: Sequence[str]) -> list[dict[str, Any]]:
    """The clauses, one request each, for the facts read from the outputs of ``call_ids`` in the
    slots ``owner`` can read (the composite ``cv`` field, and ``cvs``; ownership and digests are
    checked after), at most :data:`_MAX_VALUES` values each."""
    fields = [_id_field("cv", call_id) for call_id in dict.fromkeys(call_ids)]
    return _in_chunks([(name, f"{v}{_SEP}{value}") for name, value in fields for v in reader_keys(owner)], ("cv", "cvs"))


def search_where(query: FactQuery) -> dict[str, Any]:
    if query.valid is not None and query.key is None and query.text_hash is None and query.depends_on is None:
        return _state_where(reader_keys(query.reader), query.valid)
    return find_where(query)


def _state_where(keys: list[str], valid: bool) -> dict[str, Any]:
    state = "valid" if valid else "invalid"
    return {"sv": {"$in": [f"{v}{_SEP}{state}" for v in keys]}}


def may_match(meta: dict[str, Any] | None, query: FactQuery, readable: frozenset[str]) -> bool:
    """A cheap necessary condition on raw metadata, before building the fact."""
    if meta is None:
        return False
    if query.valid is not None and bool(meta.get("is_valid", True)) != query.valid:
        return False
    if query.scopes is not None and meta.get("scope", "global") not in query.scopes:
        return False
    return meta.get("vis") in readable


def to_metadata(fact: Fact) -> dict[str, Any]:
    """Chroma metadata of a fact: the fields filters use, plus the rest as one JSON string
    (each metadata field is a row in Chroma's SQLite; fewer fields write and read faster)."""
    owner = fact.owner
    vis = visibility_key(owner, fact.visibility)
    body = {
        "owner": [owner.session_id, owner.user_id, owner.workspace_id, owner.tenant_id],
        "visibility": fact.visibility,
        "scope_id": fact.scope_id,
        "memory_type": fact.memory_type,
        "source": [fact.source.type, fact.source.ref, fact.source.turn_index, fact.source.call_id, fact.source.digest, fact.source.after],
        "authority": fact.authority,
        "tags": list(fact.tags),
        "importance": fact.importance,
        "created_us": (fact.created_at - _EPOCH) // _MICROSECOND,
        "supersedes": fact.supersedes,
        "superseded_by": fact.superseded_by,
        "depends_on": list(fact.depends_on),
        "needs_review": fact.needs_review,
        "constraint_type": fact.constraint_type,
        "note": fact.note,
    }
    if fact.audience:
        body["audience"] = list(fact.audience)
    meta: dict[str, Any] = {
        "kind": fact.kind,
        "scope": fact.scope,
        "is_valid": fact.is_valid,
        "vis": vis,
        "sv": f"{vis}{_SEP}{'valid' if fact.is_valid else 'invalid'}",
        "hv": f"{vis}{_SEP}{fact.text_hash}",
        # ASCII: an owner id with lone surrogates must still round-trip through Chroma exactly
        "fact": json.dumps(body, separators=(",", ":")),
    }
    if fact.key is not None:
        meta["key"] = fact.key
        meta["kv"] = f"{vis}{_SEP}{fact.key}"
    if fact.source.call_id is not None:
        field, value = _id_field("cv", fact.source.call_id)
        meta[field] = f"{vis}{_SEP}{value}"
    if (ref := said_by(fact)) is not None:
        field, value = _id_field("mv", ref)
        meta[field] = f"{vis}{_SEP}{value}"
        if fact.source.after is not None:
            field, value = _id_field("av", fact.source.after)
            meta[field] = f"{vis}{_SEP}{value}"
    for dep in fact.depends_on:
        meta["dep_" + dep] = vis
    return meta


def from_metadata(fact_id: str, text: str | None, meta: dict[str, Any] | None) -> Fact:
    m = meta or {}
    body = json.loads(m.get("fact") or "{}")
    session_id, user_id, workspace_id, tenant_id = body.get("owner") or ["", None, None, None]
    # facts stored before the tool call id and output digest were recorded have three fields,
    # before the message said before a user message was, five
    source_type, source_ref, turn_index, call_id, digest, after = (*(body.get("source") or ["state_write", None, None]), None, None, None)[:6]
    owner = _construct(
        Scope, {"session_id": session_id, "user_id": user_id, "workspace_id": workspace_id, "tenant_id": tenant_id, "roles": ()}
    )
    source = _construct(
        Source, {"type": source_type, "ref": source_ref, "turn_index": turn_index, "call_id": call_id, "digest": digest, "after": after}
    )
    values: dict[str, Any] = {
        "id": fact_id,
        "key": m.get("key"),
        "text": text or "",
        "kind": m.get("kind", "fact"),
        "owner": owner,
        "visibility": body.get("visibility", "session"),
        "scope": m.get("scope", "global"),
        "scope_id": body.get("scope_id"),
        "memory_type": body.get("memory_type", "user"),
        "source": source,
        # facts read from tool outputs before tool authority existed were stored as "system"
        "authority": "tool" if source_type == "tool" else body.get("authority", "user"),
        "tags": tuple(body.get("tags", ())),
        "importance": float(body.get("importance", 0.5)),
        "created_at": _EPOCH + _MICROSECOND * int(body.get("created_us", 0)),
        "is_valid": bool(m.get("is_valid", True)),
        "supersedes": body.get("supersedes"),
        "superseded_by": body.get("superseded_by"),
        "depends_on": tuple(body.get("depends_on", ())),
        "needs_review": bool(body.get("needs_review", False)),
        "constraint_type": body.get("constraint_type"),
        "note": body.get("note"),
        "audience": tuple(body.get("audience", ())),
    }
    return _construct(Fact, values)


M = TypeVar("M", bound=BaseModel)


@lru_cache(maxsize=8)
def _field_count(cls: type[BaseModel]) -> int:
    return len(cls.model_fields)


def _construct(cls: type[M], values: dict[str, Any]) -> M:
    """``cls.model_construct(**values)`` for values naming every field, without its per-field
    default handling (a fact read back from Chroma was validated when it was written; this is
    the hot path of every search)."""
    if len(values) != _field_count(cls):
        return cls.model_construct(**values)
    instance = cls.__new__(cls)
    object.__setattr__(instance, "__dict__", values)
    object.__setattr__(instance, "__pydantic_fields_set__", set(values))
    object.__setattr__(instance, "__pydantic_extra__", None)
    object.__setattr__(instance, "__pydantic_private__", None)
    return instance


__all__ = ["find_where", "from_metadata", "lookup_wheres", "may_match", "search_where", "to_metadata", "withdraw_wheres"]
