"""The CAS store's database work, written once as plans for the sync and async stores.

Tables (migration 1): ``ctxplugin_cas_refs`` binds a ref id to its canonical hash (so two
processes cannot bind one ref to different content), ``ctxplugin_cas_content`` holds each exact
variant once as bytes (UTF-8 with surrogates kept, so any Python ``str`` round-trips, NUL
included), and ``ctxplugin_cas_grants`` holds one row per ``(ref, owner scope, visibility)``:
the only way to read content. Its id columns narrow a search (an id Postgres text cannot hold
is written percent-encoded there); who may read a grant is decided from its ``owner_key``.

Races with :func:`purge_plan` are settled by row locks: ``put`` holds a ``FOR KEY SHARE`` lock
on the ref and content rows it relies on, and the purge deletes only rows it could lock with
``FOR UPDATE SKIP LOCKED``. Times are the store clock's epoch seconds, so TTLs can be tested
with a fake clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import sql

from ctxplugin.cas import decode, encode
from ctxplugin.cas.store import NOT_VISIBLE, CASItem, CASRecord, expiry, later
from ctxplugin.errors import RefNotFoundError, StoreError, StoreUnavailableError
from ctxplugin.scope import Scope, Visibility, scope_key_parts
from ctxplugin_postgres._db import Plan, Result, Stmt, column_text, compose

_ATTEMPTS = 3  # a row vanishing under a concurrent purge between two statements is rare


@dataclass(frozen=True)
class CASQueries:
    """The CAS statements composed for one schema."""

    ref_insert: sql.Composed
    ref_lock: sql.Composed
    content_insert: sql.Composed
    content_lock: sql.Composed
    grant_insert: sql.Composed
    grant_lock: sql.Composed
    grant_revive: sql.Composed
    grant_extend: sql.Composed
    readable: sql.Composed
    touch: sql.Composed
    peek: sql.Composed
    content: sql.Composed
    purge_grants: sql.Composed
    purge_content: sql.Composed
    purge_refs: sql.Composed
    revoke_grants: sql.Composed
    revoke_content: sql.Composed
    revoke_ref: sql.Composed
    stats: sql.Composed

    @classmethod
    def for_schema(cls, schema: str) -> CASQueries:
        """Compose every statement for ``schema``."""
        key = "ref_id = %(ref)s AND owner_key = %(owner)s AND visibility = %(vis)s"
        return cls(
            ref_insert=compose(
                "INSERT INTO {s}.ctxplugin_cas_refs (ref_id, content_hash, kind, created_at) "
                "VALUES (%(ref)s, %(hash)s, %(kind)s, %(now)s) ON CONFLICT (ref_id) DO NOTHING",
                schema,
            ),
            ref_lock=compose("SELECT content_hash FROM {s}.ctxplugin_cas_refs WHERE ref_id = %(ref)s FOR KEY SHARE", schema),
            content_insert=compose(
                "INSERT INTO {s}.ctxplugin_cas_content (raw_hash, content, size, created_at) "
                "VALUES (%(raw)s, %(data)s, %(size)s, %(now)s) ON CONFLICT (raw_hash) DO NOTHING",
                schema,
            ),
            content_lock=compose("SELECT 1 FROM {s}.ctxplugin_cas_content WHERE raw_hash = %(raw)s FOR KEY SHARE", schema),
            grant_insert=compose(
                "INSERT INTO {s}.ctxplugin_cas_grants (ref_id, owner_key, visibility, tenant_id, workspace_id, "
                "user_id, session_id, content_hash, raw_hash, kind, summary, created_at, expires_at) "
                "VALUES (%(ref)s, %(owner)s, %(vis)s, %(tenant)s, %(workspace)s, %(user)s, %(session)s, "
                "%(hash)s, %(raw)s, %(kind)s, %(summary)s, %(now)s, %(expires)s) "
                "ON CONFLICT (ref_id, owner_key, visibility) DO NOTHING RETURNING 1",
                schema,
            ),
            grant_lock=compose(f"SELECT expires_at FROM {{s}}.ctxplugin_cas_grants WHERE {key} FOR UPDATE", schema),
            grant_revive=compose(
                "UPDATE {s}.ctxplugin_cas_grants SET raw_hash = %(raw)s, summary = %(summary)s, created_at = %(now)s, "
                f"expires_at = %(expires)s, access_count = 0, last_accessed_at = NULL WHERE {key}",
                schema,
            ),
            grant_extend=compose(f"UPDATE {{s}}.ctxplugin_cas_grants SET expires_at = %(expires)s WHERE {key}", schema),
            readable=compose(
                "SELECT owner_key, visibility FROM {s}.ctxplugin_cas_grants WHERE ref_id = %(ref)s "
                "AND tenant_id IS NOT DISTINCT FROM %(tenant)s AND (expires_at IS NULL OR expires_at > %(now)s) "
                "AND (visibility <> 'session' OR session_id = %(session)s) "
                "ORDER BY owner_key <> %(owner)s, created_at, owner_key, visibility",
                schema,
            ),
            touch=compose(
                "UPDATE {s}.ctxplugin_cas_grants SET access_count = access_count + 1, last_accessed_at = %(now)s "
                f"WHERE {key} AND (expires_at IS NULL OR expires_at > %(now)s) "
                "RETURNING content_hash, raw_hash, kind, summary, created_at, expires_at, access_count",
                schema,
            ),
            peek=compose(
                "SELECT content_hash, raw_hash, kind, summary, created_at, expires_at, access_count "
                f"FROM {{s}}.ctxplugin_cas_grants WHERE {key} AND (expires_at IS NULL OR expires_at > %(now)s)",
                schema,
            ),
            content=compose("SELECT content FROM {s}.ctxplugin_cas_content WHERE raw_hash = %(raw)s", schema),
            purge_grants=compose(
                "DELETE FROM {s}.ctxplugin_cas_grants WHERE expires_at IS NOT NULL AND expires_at <= %(now)s", schema
            ),
            purge_content=compose(_orphans("content", "raw_hash"), schema),
            purge_refs=compose(_orphans("refs", "ref_id"), schema),
            revoke_grants=compose(
                "DELETE FROM {s}.ctxplugin_cas_grants WHERE ref_id = %(ref)s AND owner_key = %(owner)s RETURNING raw_hash",
                schema,
            ),
            revoke_content=compose(_orphans("content", "raw_hash", "= ANY(%(raws)s)"), schema),
            revoke_ref=compose(_orphans("refs", "ref_id", "= %(ref)s"), schema),
            stats=compose(
                "SELECT (SELECT count(*) FROM {s}.ctxplugin_cas_content), "
                "(SELECT coalesce(sum(size), 0) FROM {s}.ctxplugin_cas_content), "
                "(SELECT count(*) FROM {s}.ctxplugin_cas_grants), (SELECT count(*) FROM {s}.ctxplugin_cas_refs)",
                schema,
            ),
        )


def _orphans(table: str, key: str, among: str | None = None) -> str:
    """Delete the rows of ``table`` no grant points to by ``key`` (those whose ``key`` is
    ``among``, when given), skipping rows a concurrent ``put`` holds (see the module's notes)."""
    narrowed = f"x.{key} {among} AND " if among else ""
    return (
        f"DELETE FROM {{s}}.ctxplugin_cas_{table} WHERE {key} IN (SELECT x.{key} FROM {{s}}.ctxplugin_cas_{table} x "
        f"WHERE {narrowed}NOT EXISTS (SELECT 1 FROM {{s}}.ctxplugin_cas_grants g WHERE g.{key} = x.{key}) "
        "FOR UPDATE SKIP LOCKED)"
    )


def _locked(insert: Stmt, lock: Stmt, what: str) -> Plan[Result]:
    """Insert a row unless present, then hold a key-share lock on it (retried if purged between)."""
    for _ in range(_ATTEMPTS):
        yield insert
        held = yield lock
        if held.rows:
            return held
    raise StoreUnavailableError(f"the {what} row was removed by concurrent purges {_ATTEMPTS} times; retry")


def put_plan(
    q: CASQueries, item: CASItem, scope: Scope, visibility: Visibility, ttl_seconds: float | None, now: float
) -> Plan[bool]:
    """See :meth:`ctxplugin.cas.CASStore.put` (arguments already checked)."""
    data = encode(item.content)
    expires = expiry(now, ttl_seconds)
    params: dict[str, Any] = {
        "ref": item.ref_id, "hash": item.content_hash, "kind": item.kind, "now": now, "raw": item.raw_hash,
        "data": data, "size": len(data), "owner": scope.key(), "vis": visibility, **_id_columns(scope),
        "summary": item.summary, "expires": expires,
    }
    bound = yield from _locked(Stmt(q.ref_insert, params), Stmt(q.ref_lock, params), "ref")
    if bound.rows[0][0] != item.content_hash:
        raise StoreError(f"ref {item.ref_id!r} is already bound to other content (hash prefix collision)")
    yield from _locked(Stmt(q.content_insert, params), Stmt(q.content_lock, params), "content")
    for _ in range(_ATTEMPTS):
        inserted = yield Stmt(q.grant_insert, params)
        if inserted.rows:
            return True
        current = (yield Stmt(q.grant_lock, params)).first()
        if current is None:  # purged between the two statements: insert again
            continue
        old_expiry: float | None = current[0]
        if old_expiry is not None and old_expiry <= now:
            yield Stmt(q.grant_revive, params)
            return True
        if old_expiry is not None:
            yield Stmt(q.grant_extend, {**params, "expires": later(old_expiry, expires)})
        return False
    raise StoreUnavailableError(f"the grant of {item.ref_id!r} was removed by concurrent purges {_ATTEMPTS} times; retry")


def _id_columns(scope: Scope) -> dict[str, str | None]:
    """The id columns of a grant: the ids as written since the first version, those Postgres
    text cannot hold percent-encoded (:func:`~ctxplugin_postgres._db.column_text`)."""
    return {
        "tenant": column_text(scope.tenant_id), "workspace": column_text(scope.workspace_id),
        "user": column_text(scope.user_id), "session": column_text(scope.session_id),
    }


def _readable_params(ref_id: str, scope: Scope, now: float) -> dict[str, Any]:
    ids = _id_columns(scope)
    return {"ref": ref_id, "tenant": ids["tenant"], "now": now, "session": ids["session"], "owner": scope.key()}


def _owner(owner_key: str) -> Scope:
    """The scope that wrote a grant, exactly (its id columns may hold encoded ids that an
    ordinary id spells too; its key names one scope)."""
    parts = scope_key_parts(owner_key)
    if len(parts) != 4 or parts[3] is None:  # pragma: no cover - grants are written with Scope.key()
        raise StoreError(f"grant owner key {owner_key!r} names no scope; the database is inconsistent")
    tenant_id, workspace_id, user_id, session_id = parts
    return Scope(tenant_id=tenant_id, workspace_id=workspace_id, user_id=user_id, session_id=session_id)


def _readable_grants(candidates: Result, scope: Scope) -> list[tuple[str, str]]:
    """``(owner_key, visibility)`` of the candidate grants ``scope`` may read, in their order."""
    return [(owner_key, visibility) for owner_key, visibility in candidates.rows if scope.can_read(_owner(owner_key), visibility)]


def get_plan(q: CASQueries, ref_id: str, scope: Scope, now: float, *, counted: bool = True) -> Plan[CASRecord]:
    """See :meth:`ctxplugin.cas.CASStore.get` (``ref_id`` already checked); reads only, without
    counting the access, unless ``counted``."""
    params = _readable_params(ref_id, scope, now)
    # SQL narrows (tenant, own session unless shared wider); Scope.can_read decides
    candidates = yield Stmt(q.readable, params)
    for owner_key, visibility in _readable_grants(candidates, scope):
        touched = (yield Stmt(q.touch if counted else q.peek, {**params, "owner": owner_key, "vis": visibility})).first()
        if touched is None:  # expired or purged since the select
            continue
        content_hash, raw, kind, summary, created_at, expires_at, access_count = touched
        blob = (yield Stmt(q.content, {"raw": raw})).first()
        if blob is None:
            raise StoreError(f"content of {ref_id!r} is missing; the database is inconsistent")
        return CASRecord(
            ref_id=ref_id,
            content_hash=content_hash,
            raw_hash=raw,
            kind=kind,
            content=decode(bytes(blob[0])),
            summary=summary,
            created_at=float(created_at),
            expires_at=None if expires_at is None else float(expires_at),
            access_count=int(access_count),
        )
    raise RefNotFoundError(NOT_VISIBLE.format(ref=ref_id))


def exists_plan(q: CASQueries, ref_id: str, scope: Scope, now: float) -> Plan[bool]:
    """See :meth:`ctxplugin.cas.store.RefExistence.exists` (``ref_id`` already checked)."""
    candidates = yield Stmt(q.readable, _readable_params(ref_id, scope, now))
    return bool(_readable_grants(candidates, scope))


def purge_plan(q: CASQueries, now: float) -> Plan[int]:
    """See :meth:`ctxplugin.cas.CASStore.purge_expired`."""
    removed = yield Stmt(q.purge_grants, {"now": now})
    yield Stmt(q.purge_content)
    yield Stmt(q.purge_refs)
    return removed.rowcount


def revoke_plan(q: CASQueries, ref_id: str, scope: Scope) -> Plan[bool]:
    """See :meth:`ctxplugin.cas.store.RefRevocation.revoke` (``ref_id`` already checked)."""
    params: dict[str, Any] = {"ref": ref_id, "owner": scope.key()}
    removed = yield Stmt(q.revoke_grants, params)
    if not removed.rows:
        return False
    yield Stmt(q.revoke_content, {"raws": sorted({row[0] for row in removed.rows})})
    yield Stmt(q.revoke_ref, params)
    return True


def stats_plan(q: CASQueries) -> Plan[dict[str, int]]:
    """Counts of stored variants, bytes, grants and bound refs."""
    row = (yield Stmt(q.stats)).first()
    contents, size, grants, refs = row if row else (0, 0, 0, 0)
    return {"contents": int(contents), "bytes": int(size), "grants": int(grants), "refs": int(refs)}


__all__ = ["CASQueries", "exists_plan", "get_plan", "purge_plan", "put_plan", "revoke_plan", "stats_plan"]
