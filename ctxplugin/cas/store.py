"""The store port: what every CAS backend (memory, SQLite, Postgres, ...) implements.

A store keeps byte-exact tool outputs and *grants*: an output is readable from a scope only
through a grant row ``(ref_id, owner scope, visibility)`` written by :meth:`CASStore.put`.
The ref id names the content; it is never an access grant by itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ctxplugin.cas._canon import REF_RE, check_ref
from ctxplugin.errors import InvalidInputError
from ctxplugin.scope import VISIBILITIES, Scope, Visibility

Clock = Callable[[], float]
"""Seconds since the epoch; stores take one so that TTL behaviour can be tested without sleeping."""

NOT_VISIBLE = "no stored output {ref!r} is visible from this scope (unknown, expired, or owned by another session)"


@dataclass(frozen=True)
class CASItem:
    """One tool output to store.

    Attributes:
        ref_id: ``ref:<kind>:<hash16>``; the 16 hex digits are the start of ``content_hash``.
        content_hash: sha256 hex of the canonical form (see :func:`ctxplugin.cas.content_hash`).
        raw_hash: sha256 hex of ``content`` itself (UTF-8, surrogates kept): the exact variant.
        kind: the ``<kind>`` part of the ref (tool name slug or content shape).
        content: the original output, exactly.
        summary: the compact text the conversation carries (informational for the store).
    """

    ref_id: str
    content_hash: str
    raw_hash: str
    kind: str
    content: str
    summary: str = ""


@dataclass(frozen=True)
class CASRecord(CASItem):
    """A stored output as read back through one grant.

    Attributes:
        created_at: when the grant was first written (epoch seconds).
        expires_at: when the grant stops being readable, or None for never.
        access_count: reads through this grant, including the one that returned this record.
    """

    created_at: float = 0.0
    expires_at: float | None = None
    access_count: int = 0


@runtime_checkable
class CASStore(Protocol):
    """A content-addressable store for tool outputs, isolated by scope. Synchronous.

    Implementations must be safe to share between threads. Backend failures are translated at
    the boundary: raise :class:`~ctxplugin.errors.StoreUnavailableError` when the backend cannot
    be reached or is busy past its timeout (connection refused, database locked, disk I/O),
    :class:`~ctxplugin.errors.StoreError` for any other backend failure and for use after
    :meth:`close`, always chained with ``raise ... from exc``. The engine turns a ``StoreError``
    into a pass-through of the original output and a warning; anything else propagates.

    Optional abilities are separate methods a caller detects with ``hasattr`` (none are required):
    ``exists`` (see :class:`RefExistence`), ``revoke`` (see :class:`RefRevocation`) and ``stats``.
    """

    def put(self, item: CASItem, scope: Scope, *, visibility: Visibility = "session", ttl_seconds: float | None = None) -> bool:
        """Store ``item.content`` (once per ``raw_hash``) and grant ``scope`` access to ``item.ref_id``.

        Idempotent: the grant is keyed by ``(ref_id, scope, visibility)``. Putting an existing,
        unexpired grant again changes nothing except its expiry, which only ever moves later
        (``ttl_seconds=None`` means never). When the same scope puts a *different* variant of
        the same canonical content (same ``content_hash``, other ``raw_hash``), the first
        variant stays the one returned by :meth:`get`. An expired grant put again is revived
        with the new variant and expiry. Safe to call concurrently from threads and processes.

        Args:
            item: the output; ``ref_id`` must be well formed and match ``content_hash``.
            scope: the owner of the grant.
            visibility: who else may read through this grant (see :meth:`Scope.can_read`).
            ttl_seconds: seconds until the grant expires; None keeps it until removed.

        Returns:
            True if a new grant was written (or an expired one revived), False if it existed.

        Raises:
            InvalidInputError: malformed ``ref_id``, a ``ref_id`` that does not match
                ``content_hash``, an unknown ``visibility`` or a non-positive ``ttl_seconds``.
            StoreError: the ref id is already bound to different canonical content (a 64-bit
                prefix collision), or the backend failed.
        """
        ...

    def get(self, ref_id: str, scope: Scope) -> CASRecord:
        """The output behind ``ref_id`` through a grant ``scope`` may read; counts the access.

        Among several readable grants, one owned by exactly ``scope`` wins, then the oldest.
        The chosen grant's ``access_count`` is incremented.

        Raises:
            InvalidInputError: ``ref_id`` is malformed.
            RefNotFoundError: no unexpired grant readable from ``scope`` exists. Unknown,
                expired and other-scope refs raise the same error with the same message, so a
                ref id reveals nothing to a scope that may not read it.
            StoreError: the backend failed.
        """
        ...

    def purge_expired(self) -> int:
        """Delete expired grants, then outputs no grant points to.

        Returns:
            The number of grants deleted.

        Raises:
            StoreError: the backend failed.
        """
        ...

    def close(self) -> None:
        """Release connections. Idempotent; later calls to other methods raise ``StoreError``."""
        ...


@runtime_checkable
class RefExistence(Protocol):
    """An optional CAS ability: whether a ref is readable, without reading or counting it."""

    def exists(self, ref_id: str, scope: Scope) -> bool:
        """True when an unexpired grant of ``ref_id`` readable from ``scope`` exists (what
        :meth:`CASStore.get` would find), without loading the content or counting an access.

        Raises:
            InvalidInputError: ``ref_id`` is malformed.
            StoreError: the backend failed.
        """
        ...


@runtime_checkable
class RefRevocation(Protocol):
    """An optional CAS ability: take back what one scope stored under a ref.

    The engine calls it when it learns that something outside ctxplugin masked a captured
    output after capture (a PII filter on tool results): the unmasked original must not stay
    at rest behind the ref.
    """

    def revoke(self, ref_id: str, scope: Scope) -> bool:
        """Delete the grants of ``ref_id`` owned by exactly ``scope`` (every visibility), then
        the content no grant points to any more, as :meth:`CASStore.purge_expired` does.
        Grants of other scopes, and the content they point to, stay.

        Returns:
            True if a grant was deleted, False if ``scope`` owned none.

        Raises:
            InvalidInputError: ``ref_id`` is malformed.
            StoreError: the backend failed (``StoreUnavailableError`` when it could not be
                reached in time).
        """
        ...


def check_put(item: CASItem, visibility: str, ttl_seconds: float | None) -> None:
    """Shared argument checks for :meth:`CASStore.put` implementations.

    Raises:
        InvalidInputError: see :meth:`CASStore.put`.
    """
    check_ref(item.ref_id)
    match = REF_RE.match(item.ref_id)
    if match is None or not item.content_hash.startswith(match.group(2)) or match.group(1) != item.kind:
        raise InvalidInputError(
            f"ref {item.ref_id!r} does not match kind {item.kind!r} and hash {item.content_hash[:16]!r}"
        )
    if visibility not in VISIBILITIES:
        raise InvalidInputError(f"visibility must be one of {', '.join(VISIBILITIES)}, got {visibility!r}")
    if ttl_seconds is not None and not ttl_seconds > 0:
        raise InvalidInputError(f"ttl_seconds must be positive or None, got {ttl_seconds!r}")


def expiry(now: float, ttl_seconds: float | None) -> float | None:
    """When a grant written at ``now`` expires."""
    return None if ttl_seconds is None else now + ttl_seconds


def later(old: float | None, new: float | None) -> float | None:
    """The later of two expiries (None is never)."""
    if old is None or new is None:
        return None
    return max(old, new)


def system_clock() -> float:
    """The default clock."""
    return time.time()
