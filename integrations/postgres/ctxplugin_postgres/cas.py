"""Postgres CAS stores: :class:`PostgresCASStore` (the one the engine uses) and its async twin.

Both implement the :class:`~ctxplugin.cas.CASStore` port over a psycopg 3 connection pool and
share their SQL and decisions (:mod:`ctxplugin_postgres._cas_plans`); they differ in I/O only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import psycopg.errors
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from ctxplugin.cas import check_ref
from ctxplugin.cas.store import CASItem, CASRecord, Clock, check_put, system_clock
from ctxplugin.errors import StoreError
from ctxplugin.guard import StoreGuard
from ctxplugin.scope import Scope, Visibility
from ctxplugin_postgres._cas_plans import (
    CASQueries,
    exists_plan,
    get_plan,
    purge_plan,
    put_plan,
    revoke_plan,
    stats_plan,
)
from ctxplugin_postgres._db import DEFAULT_SCHEMA, POOL_TIMEOUT_S, Plan
from ctxplugin_postgres._store import AsyncPooledStore, PooledStore, owned_async_pool, owned_pool

_PURGE_ATTEMPTS = 3
T = TypeVar("T")


def _purge_race(exc: StoreError, attempt: int) -> bool:
    # a put committed a grant on a row the purge had already chosen: the purge is simply repeated
    return attempt < _PURGE_ATTEMPTS and isinstance(exc.__cause__, psycopg.errors.ForeignKeyViolation)


def _unwritable(exc: StoreError) -> bool:
    # counting an access is a write; the output itself can still be read
    return isinstance(exc.__cause__, (psycopg.errors.ReadOnlySqlTransaction, psycopg.errors.DiskFull))


class PostgresCASStore(PooledStore):
    """A :class:`~ctxplugin.cas.CASStore` in Postgres, shared by any number of processes.

    Each method is one short transaction on a pooled connection. Connections are checked before
    use, so after a server restart the store reconnects by itself; a call made while the server
    is down waits at most the pool timeout and raises
    :class:`~ctxplugin.errors.StoreUnavailableError`, which the engine turns into a pass-through.

    Args:
        pool: a psycopg ``ConnectionPool`` (see :func:`ctxplugin_postgres.make_pool`).
        schema: the Postgres schema holding the tables.
        clock: time source for TTLs (epoch seconds).
        auto_migrate: on first use, apply pending migrations; when False, a schema that is not
            current raises ``StoreError`` naming the ``ctxplugin-postgres migrate`` command.
        owns_pool: close ``pool`` in :meth:`close`.

    Example:
        >>> store = PostgresCASStore.from_dsn("postgresql://app@db/ctx")  # doctest: +SKIP
        >>> engine = ContextEngine(cas=store)  # doctest: +SKIP
    """

    _closed_message = "the Postgres CAS store is closed"

    def __init__(
        self,
        pool: ConnectionPool,
        *,
        schema: str = DEFAULT_SCHEMA,
        clock: Clock = system_clock,
        auto_migrate: bool = True,
        owns_pool: bool = False,
    ) -> None:
        super().__init__(pool, schema=schema, auto_migrate=auto_migrate, owns_pool=owns_pool)
        self._clock = clock
        self._q = CASQueries.for_schema(schema)

    @classmethod
    def from_dsn(
        cls,
        dsn: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        clock: Clock = system_clock,
        auto_migrate: bool = True,
        max_size: int = 10,
        timeout: float = POOL_TIMEOUT_S,
    ) -> PostgresCASStore:
        """A store with its own pool on ``dsn`` (closed with the store). Never blocks: the pool
        connects in the background and the schema is checked on first use."""
        pool = owned_pool(dsn, schema=schema, max_size=max_size, timeout=timeout, name="ctxplugin-cas")
        return cls(pool, schema=schema, clock=clock, auto_migrate=auto_migrate, owns_pool=True)

    # ------------------------------------------------------------------ the port
    def put(self, item: CASItem, scope: Scope, *, visibility: Visibility = "session", ttl_seconds: float | None = None) -> bool:
        """See :meth:`ctxplugin.cas.CASStore.put`."""
        check_put(item, visibility, ttl_seconds)
        return self._run("CAS put", lambda: put_plan(self._q, item, scope, visibility, ttl_seconds, self._clock()))

    def get(self, ref_id: str, scope: Scope) -> CASRecord:
        """See :meth:`ctxplugin.cas.CASStore.get`. A server that takes no writes right now (read
        only, its disk full) is still read: the output is returned, its access not counted."""
        check_ref(ref_id)
        try:
            return self._run("CAS get", lambda: get_plan(self._q, ref_id, scope, self._clock()))
        except StoreError as exc:
            if not _unwritable(exc):
                raise
        return self._run("CAS get", lambda: get_plan(self._q, ref_id, scope, self._clock(), counted=False))

    def purge_expired(self) -> int:
        """See :meth:`ctxplugin.cas.CASStore.purge_expired`."""
        return self._sweep("CAS purge", lambda: purge_plan(self._q, self._clock()))

    def _sweep(self, what: str, plan: Callable[[], Plan[T]]) -> T:
        """Run a plan that deletes what no grant points to, again when it raced a put."""
        for attempt in range(1, _PURGE_ATTEMPTS + 1):
            try:
                return self._run(what, plan)
            except StoreError as exc:
                if not _purge_race(exc, attempt):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """See :meth:`ctxplugin.cas.CASStore.close` (closes the pool if the store owns it)."""
        super().close()

    # ------------------------------------------------------------------ optional abilities
    def exists(self, ref_id: str, scope: Scope) -> bool:
        """See :meth:`ctxplugin.cas.store.RefExistence.exists`: one read, nothing counted."""
        check_ref(ref_id)
        return self._run("CAS exists", lambda: exists_plan(self._q, ref_id, scope, self._clock()))

    def revoke(self, ref_id: str, scope: Scope) -> bool:
        """See :meth:`ctxplugin.cas.store.RefRevocation.revoke`: one transaction."""
        check_ref(ref_id)
        return self._sweep("CAS revoke", lambda: revoke_plan(self._q, ref_id, scope))

    def stats(self) -> dict[str, int]:
        """Counts of stored variants, content bytes, grants and bound refs."""
        return self._run("CAS stats", lambda: stats_plan(self._q))

    def __enter__(self) -> PostgresCASStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncPostgresCASStore(AsyncPooledStore):
    """The async twin of :class:`PostgresCASStore`: the same tables and behaviour, with
    ``async`` methods on an ``AsyncConnectionPool``. For async services that read and write
    the CAS outside the engine (the engine itself is synchronous and uses the sync store).

    Every call returns or raises :class:`~ctxplugin.errors.StoreUnavailableError` within the
    pool's ``timeout`` (``from_dsn(timeout=...)``), a server that stopped answering included;
    a task cancelled while a call waits is released at once. Given a ``guard``, within the
    guard's timeout, and a server that is out costs the first call its timeout only: later
    calls fail at once while its circuit is open (see :class:`ctxplugin.guard.StoreGuard`).

    Args:
        pool: an *open* ``AsyncConnectionPool`` (see :func:`ctxplugin_postgres.make_async_pool`);
            its ``timeout`` bounds each call.
        schema: the Postgres schema holding the tables.
        clock: time source for TTLs (epoch seconds).
        auto_migrate: on first use, apply pending migrations.
        owns_pool: close ``pool`` in :meth:`close`.
        guard: the :class:`~ctxplugin.guard.StoreGuard` of the server, which bounds each call
            and fails calls at once after a failure (it may be the one of the sync stores).
    """

    _closed_message = "the Postgres CAS store is closed"

    def __init__(
        self,
        pool: AsyncConnectionPool,
        *,
        schema: str = DEFAULT_SCHEMA,
        clock: Clock = system_clock,
        auto_migrate: bool = True,
        owns_pool: bool = False,
        guard: StoreGuard | None = None,
    ) -> None:
        super().__init__(pool, schema=schema, auto_migrate=auto_migrate, owns_pool=owns_pool, guard=guard)
        self._clock = clock
        self._q = CASQueries.for_schema(schema)

    @classmethod
    async def from_dsn(
        cls,
        dsn: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        clock: Clock = system_clock,
        auto_migrate: bool = True,
        max_size: int = 10,
        timeout: float = POOL_TIMEOUT_S,
        guard: StoreGuard | None = None,
    ) -> AsyncPostgresCASStore:
        """A store with its own (opened) pool on ``dsn``, closed with the store."""
        pool = await owned_async_pool(dsn, schema=schema, max_size=max_size, timeout=timeout, name="ctxplugin-cas-async")
        return cls(pool, schema=schema, clock=clock, auto_migrate=auto_migrate, owns_pool=True, guard=guard)

    async def put(
        self, item: CASItem, scope: Scope, *, visibility: Visibility = "session", ttl_seconds: float | None = None
    ) -> bool:
        """See :meth:`ctxplugin.cas.CASStore.put`."""
        check_put(item, visibility, ttl_seconds)
        return await self._run("CAS put", lambda: put_plan(self._q, item, scope, visibility, ttl_seconds, self._clock()))

    async def get(self, ref_id: str, scope: Scope) -> CASRecord:
        """See :meth:`PostgresCASStore.get`."""
        check_ref(ref_id)
        try:
            return await self._run("CAS get", lambda: get_plan(self._q, ref_id, scope, self._clock()))
        except StoreError as exc:
            if not _unwritable(exc):
                raise
        return await self._run("CAS get", lambda: get_plan(self._q, ref_id, scope, self._clock(), counted=False))

    async def purge_expired(self) -> int:
        """See :meth:`ctxplugin.cas.CASStore.purge_expired`."""
        return await self._sweep("CAS purge", lambda: purge_plan(self._q, self._clock()))

    async def _sweep(self, what: str, plan: Callable[[], Plan[T]]) -> T:
        """Async :meth:`PostgresCASStore._sweep`."""
        for attempt in range(1, _PURGE_ATTEMPTS + 1):
            try:
                return await self._run(what, plan)
            except StoreError as exc:
                if not _purge_race(exc, attempt):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def revoke(self, ref_id: str, scope: Scope) -> bool:
        """Async :meth:`PostgresCASStore.revoke`."""
        check_ref(ref_id)
        return await self._sweep("CAS revoke", lambda: revoke_plan(self._q, ref_id, scope))

    async def exists(self, ref_id: str, scope: Scope) -> bool:
        """Async :meth:`PostgresCASStore.exists`."""
        check_ref(ref_id)
        return await self._run("CAS exists", lambda: exists_plan(self._q, ref_id, scope, self._clock()))

    async def stats(self) -> dict[str, int]:
        """Counts of stored variants, content bytes, grants and bound refs."""
        return await self._run("CAS stats", lambda: stats_plan(self._q))

    async def __aenter__(self) -> AsyncPostgresCASStore:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()


__all__ = ["AsyncPostgresCASStore", "PostgresCASStore"]
