"""The plumbing every pooled store of this package shares: pool ownership, readiness, closing.

A store is built on a pool it may own, checks (or migrates) its schema once, on first use, and
refuses work once closed. :class:`PooledStore` does this for the synchronous stores and
:class:`AsyncPooledStore` for the async ones; the readiness plan and the state live in
:class:`_StoreState`, written once for both.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from psycopg_pool import AsyncConnectionPool, ConnectionPool

from ctxplugin.errors import StoreError
from ctxplugin.guard import StoreGuard, await_with_deadline
from ctxplugin_postgres._db import Plan, arun, check_schema, make_async_pool, make_pool, run
from ctxplugin_postgres._pool import same_process
from ctxplugin_postgres.migrations import ensure_plan

P = TypeVar("P", ConnectionPool, AsyncConnectionPool)
T = TypeVar("T")


class _StoreState(Generic[P]):
    """Schema, pool and lifecycle flags, plus what "ready" means for the store."""

    _closed_message = "the Postgres store is closed"
    """The ``StoreError`` text of a call made after :meth:`close`."""

    _ready_what = "schema check"
    """How a failure of :meth:`_ready_plan` is described."""

    def __init__(self, pool: P, *, schema: str, auto_migrate: bool = True, owns_pool: bool = False) -> None:
        self.schema = check_schema(schema)
        self.pool: P = pool
        self._auto_migrate = auto_migrate
        self._owns_pool = owns_pool
        self._ready = False
        self._closed = False
        self._opened_in = os.getpid()

    def _ready_plan(self) -> Plan[Any]:
        """The work run once before the first call: by default, check or apply the migrations."""
        return ensure_plan(self.schema, self._auto_migrate)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(self._closed_message)
        same_process(self.pool, self._opened_in, f"this {type(self).__name__}")


class PooledStore(_StoreState[ConnectionPool]):
    """Base of the synchronous stores: readiness is checked once, under a thread lock."""

    def __init__(
        self, pool: ConnectionPool, *, schema: str, auto_migrate: bool = True, owns_pool: bool = False
    ) -> None:
        super().__init__(pool, schema=schema, auto_migrate=auto_migrate, owns_pool=owns_pool)
        self._lock = threading.Lock()
        _sync_stores.add(self)

    def _ensure(self) -> None:
        self._check_open()
        if self._ready:
            return
        with self._lock:
            if not self._ready:
                run(self.pool, self.schema, self._ready_what, self._ready_plan)
                self._ready = True

    def _run(self, what: str, plan: Callable[[], Plan[T]]) -> T:
        self._ensure()
        return run(self.pool, self.schema, what, plan)

    def close(self) -> None:
        """Release the store (and its pool if owned). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._owns_pool and _closable_here(self.pool, self._opened_in):
            self.pool.close()


class AsyncPooledStore(_StoreState[AsyncConnectionPool]):
    """Base of the async stores: readiness is checked once, under an ``asyncio.Lock``.

    Each call returns or raises within the pool's ``timeout``: a server that stops answering
    while its host still takes the bytes (a stopped process, a stalled network) is caught by
    none of libpq's timeouts, and psycopg then waits on the socket for ever. A call past the
    timeout, or whose task is cancelled, is left to end in the background (psycopg cancels the
    query and drops the connection), so the caller is free at once. Given a ``guard``, calls go
    through it instead (its timeout, and its circuit: once the server failed, calls fail at
    once until its check finds the server back)."""

    def __init__(
        self,
        pool: AsyncConnectionPool,
        *,
        schema: str,
        auto_migrate: bool = True,
        owns_pool: bool = False,
        guard: StoreGuard | None = None,
    ) -> None:
        super().__init__(pool, schema=schema, auto_migrate=auto_migrate, owns_pool=owns_pool)
        self._lock = asyncio.Lock()
        self.guard = guard

    async def _ensure(self) -> None:
        self._check_open()
        if self._ready:
            return
        async with self._lock:
            if not self._ready:
                await arun(self.pool, self.schema, self._ready_what, self._ready_plan)
                self._ready = True

    async def _run(self, what: str, plan: Callable[[], Plan[T]]) -> T:
        if self.guard is not None:
            return await self.guard.acall(what, lambda: self._call(what, plan))
        return await await_with_deadline(
            lambda: self._call(what, plan), self.pool.timeout, f"Postgres {what}", bound="the store's timeout"
        )

    async def _call(self, what: str, plan: Callable[[], Plan[T]]) -> T:
        await self._ensure()
        return await arun(self.pool, self.schema, what, plan)

    async def close(self) -> None:
        """Release the store (and its pool if owned). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._owns_pool and _closable_here(self.pool, self._opened_in):
            await self.pool.close()


def _closable_here(pool: object, opened_in: int) -> bool:
    """Whether closing ``pool`` here ends this process's connections only: not so for a plain
    pool inherited through a fork, whose connections are the parent's (it is dropped instead)."""
    try:
        same_process(pool, opened_in, "the store")
    except StoreError:
        return False
    return True


_sync_stores: weakref.WeakSet[PooledStore] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for store in list(_sync_stores):
        store._lock = threading.Lock()  # a thread of the parent may have held it at the fork


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def owned_pool(dsn: str, *, schema: str, max_size: int, timeout: float, name: str) -> ConnectionPool:
    """The pool a ``from_dsn`` store owns; the schema name is checked before any connection."""
    check_schema(schema)
    return make_pool(dsn, max_size=max_size, timeout=timeout, name=name)


async def owned_async_pool(dsn: str, *, schema: str, max_size: int, timeout: float, name: str) -> AsyncConnectionPool:
    """Async :func:`owned_pool`: the pool is opened (connecting in the background)."""
    check_schema(schema)
    pool = make_async_pool(dsn, max_size=max_size, timeout=timeout, name=name)
    await pool.open(wait=False)
    return pool


__all__ = ["AsyncPooledStore", "PooledStore", "owned_async_pool", "owned_pool"]
