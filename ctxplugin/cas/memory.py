"""In-memory CAS store: for tests, notebooks and short-lived processes."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass

from ctxplugin.cas._canon import check_ref
from ctxplugin.cas.store import (
    NOT_VISIBLE,
    CASItem,
    CASRecord,
    Clock,
    check_put,
    expiry,
    later,
    system_clock,
)
from ctxplugin.errors import RefNotFoundError, StoreError
from ctxplugin.scope import Scope, Visibility


@dataclass
class _Grant:
    owner: Scope
    visibility: Visibility
    content_hash: str
    raw_hash: str
    kind: str
    summary: str
    created_at: float
    expires_at: float | None
    access_count: int = 0


class MemoryCASStore:
    """A :class:`~ctxplugin.cas.CASStore` in a dict, guarded by a lock; nothing survives the process.

    Args:
        clock: time source for TTLs (epoch seconds).
    """

    def __init__(self, *, clock: Clock = system_clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._content: dict[str, str] = {}
        self._grants: dict[str, dict[tuple[str, str], _Grant]] = {}
        self._closed = False

    def put(self, item: CASItem, scope: Scope, *, visibility: Visibility = "session", ttl_seconds: float | None = None) -> bool:
        """See :meth:`ctxplugin.cas.CASStore.put`."""
        check_put(item, visibility, ttl_seconds)
        with self._lock:
            self._check_open()
            now = self._clock()
            grants = self._grants.setdefault(item.ref_id, {})
            for grant in grants.values():
                if grant.content_hash != item.content_hash:
                    raise StoreError(f"ref {item.ref_id!r} is already bound to other content (hash prefix collision)")
                break
            self._content.setdefault(item.raw_hash, item.content)
            key = (scope.key(), visibility)
            existing = grants.get(key)
            expires = expiry(now, ttl_seconds)
            if existing is not None and not _expired(existing, now):
                existing.expires_at = later(existing.expires_at, expires)
                return False
            grants[key] = _Grant(
                owner=scope,
                visibility=visibility,
                content_hash=item.content_hash,
                raw_hash=item.raw_hash,
                kind=item.kind,
                summary=item.summary,
                created_at=now,
                expires_at=expires,
            )
            return True

    def get(self, ref_id: str, scope: Scope) -> CASRecord:
        """See :meth:`ctxplugin.cas.CASStore.get`."""
        check_ref(ref_id)
        with self._lock:
            self._check_open()
            readable = self._readable(ref_id, scope)
            if not readable:
                raise RefNotFoundError(NOT_VISIBLE.format(ref=ref_id))
            grant = min(readable, key=lambda g: (g.owner != scope, g.created_at))
            grant.access_count += 1
            return CASRecord(
                ref_id=ref_id,
                content_hash=grant.content_hash,
                raw_hash=grant.raw_hash,
                kind=grant.kind,
                content=self._content[grant.raw_hash],
                summary=grant.summary,
                created_at=grant.created_at,
                expires_at=grant.expires_at,
                access_count=grant.access_count,
            )

    def exists(self, ref_id: str, scope: Scope) -> bool:
        """See :meth:`ctxplugin.cas.store.RefExistence.exists` (an optional ability)."""
        check_ref(ref_id)
        with self._lock:
            self._check_open()
            return bool(self._readable(ref_id, scope))

    def _readable(self, ref_id: str, scope: Scope) -> list[_Grant]:
        """Unexpired grants of ``ref_id`` that ``scope`` may read (the caller holds the lock)."""
        now = self._clock()
        return [
            g for g in self._grants.get(ref_id, {}).values() if not _expired(g, now) and scope.can_read(g.owner, g.visibility)
        ]

    def purge_expired(self) -> int:
        """See :meth:`ctxplugin.cas.CASStore.purge_expired`."""
        with self._lock:
            self._check_open()
            now = self._clock()
            removed = 0
            for ref_id in list(self._grants):
                grants = self._grants[ref_id]
                for key in [k for k, g in grants.items() if _expired(g, now)]:
                    del grants[key]
                    removed += 1
                if not grants:
                    del self._grants[ref_id]
            self._drop_unreferenced(self._content)
            return removed

    def revoke(self, ref_id: str, scope: Scope) -> bool:
        """See :meth:`ctxplugin.cas.store.RefRevocation.revoke` (an optional ability)."""
        check_ref(ref_id)
        with self._lock:
            self._check_open()
            grants = self._grants.get(ref_id, {})
            owner = scope.key()
            gone = {key: grants.pop(key) for key in [k for k in grants if k[0] == owner]}
            if not grants:
                self._grants.pop(ref_id, None)
            self._drop_unreferenced({g.raw_hash for g in gone.values()})
            return bool(gone)

    def _drop_unreferenced(self, candidates: Iterable[str]) -> None:
        """Delete the contents among ``candidates`` (raw hashes) no grant points to (the caller
        holds the lock)."""
        live = {g.raw_hash for grants in self._grants.values() for g in grants.values()}
        for raw in [r for r in candidates if r not in live]:
            self._content.pop(raw, None)

    def stats(self) -> dict[str, int]:
        """Counts of stored variants, grants and content characters."""
        with self._lock:
            self._check_open()
            grants = sum(len(g) for g in self._grants.values())
            return {"contents": len(self._content), "grants": grants, "bytes": sum(map(len, self._content.values()))}

    def close(self) -> None:
        """See :meth:`ctxplugin.cas.CASStore.close`."""
        with self._lock:
            self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the CAS store is closed")


def _expired(grant: _Grant, now: float) -> bool:
    return grant.expires_at is not None and grant.expires_at <= now
