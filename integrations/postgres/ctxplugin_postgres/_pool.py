"""A connection pool per process: what a process forked from the pool's owner does with it.

A process forked from another (a gunicorn ``--preload`` worker, a ``multiprocessing`` "fork"
worker) inherits its pools as they were: the same sockets, connected to the same server
sessions, and none of the threads that fill the pool. Used there, parent and child would send
statements on one socket and read each other's results, and the child would wait in vain for
new connections. Closed there, each inherited connection would tell the server to end the
*parent's* session.

:class:`ProcessPool` (what :func:`ctxplugin_postgres.make_pool` builds) therefore starts afresh
in a forked process, on its first use there: it sets the inherited connections aside, never
using, closing or finalizing them (the parent keeps using them), and opens connections of its
own with the same settings. Everything that holds the pool — the stores, the facts write lock,
the engine's health check — uses the new connections without knowing.

It also checks a connection before lending it (``check``) without pausing between failed
checks, as psycopg's pool does (1 s, then 2 s, ...): the server ending several idle sessions at
once (``pg_terminate_backend``, ``idle_session_timeout``, a restart, a pooler or failover proxy)
leaves as many dead connections in the pool, and a caller must get past them within its own
timeout, not the pool's back-off.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from psycopg import AsyncConnection, Connection
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from ctxplugin.errors import StoreError

logger = logging.getLogger("ctxplugin.postgres")

_inherited: list[Any] = []
"""What forked processes set aside: kept for the life of the process, so that no finalizer of
an inherited connection or pool ever runs here."""


class ProcessPool(ConnectionPool[Connection[Any]]):
    """A psycopg ``ConnectionPool`` that a process forked from its owner replaces by one of its
    own on first use (see the module docstring). In the process that built it, it is a plain
    ``ConnectionPool``.

    Args:
        conninfo: the DSN.
        check: called with a connection before it is lent; one that raises is closed (the pool
            opens another) and the next connection is tried at once.
        **options: ``ConnectionPool`` settings; the pool is built unopened whatever ``open``
            says, and each process opens its own.
    """

    def __init__(
        self,
        conninfo: str,
        *,
        check: Callable[[Connection[Any]], object] | None = None,
        **options: Any,
    ) -> None:
        options = {**options, "open": False}
        super().__init__(conninfo, **options)
        self._options = options
        self._check_lent = check
        self._pid = os.getpid()
        self._renewing = threading.Lock()
        self._lent: weakref.WeakSet[Connection[Any]] = weakref.WeakSet()
        _pools.add(self)

    def _renew(self, *, closing: bool = False) -> None:
        """In a forked process, set the parent's state aside and start this process's own:
        opened again if the parent's was open (unless this is for :meth:`close`)."""
        if self._pid == os.getpid():
            return
        with self._renewing:
            if self._pid == os.getpid():
                return
            inherited = self.__dict__
            _inherited.append(inherited)
            was_open, was_opened = not inherited["_closed"], inherited["_opened"]
            self.__dict__ = {
                "_options": self._options,
                "_check_lent": self._check_lent,
                "_pid": os.getpid(),
                "_renewing": self._renewing,
                "_lent": weakref.WeakSet(),
            }
            ConnectionPool.__init__(self, inherited["conninfo"], **self._options)
            if was_open and not closing:
                self.open(wait=False)
            else:  # a pool the parent closed, or that this process closes now, stays closed
                self._opened = was_opened or closing

    def getconn(self, timeout: float | None = None) -> Connection[Any]:
        """See ``ConnectionPool.getconn`` (in a forked process, a connection of its own), checked
        with ``check``; within ``timeout`` in all, however many connections fail their check."""
        self._renew()
        wait = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + wait
        while True:
            conn = super().getconn(max(0.0, deadline - time.monotonic()))
            try:
                if self._check_lent is not None:
                    self._check_lent(conn)
            except Exception as exc:
                conn.close()  # handed back closed, it is discarded and replaced
                # as psycopg's own check does: a connection found broken, not one a caller closed
                # (which psycopg warns of); it is closed, so a closed pool has nothing to close
                try:
                    self._putconn(conn, from_getconn=True)
                except (AttributeError, TypeError):
                    # a psycopg_pool without it: the public way, which warns
                    super().putconn(conn)
                if time.monotonic() >= deadline:
                    raise PoolTimeout(
                        f"no connection passed its check within {wait:.2f} sec"
                    ) from exc
                continue
            except BaseException:  # an interruption: the connection goes back, nothing is retried
                super().putconn(conn)
                raise
            break
        self._lent.add(conn)
        return conn

    def putconn(self, conn: Connection[Any]) -> None:
        """See ``ConnectionPool.putconn``. A connection the parent had lent out at the fork
        (the forking thread was using it) is set aside, not taken into this process's pool."""
        self._renew()
        if getattr(conn, "_pool", None) is self and conn not in self._lent:
            _inherited.append(conn)
            return
        self._lent.discard(conn)
        super().putconn(conn)

    def open(self, wait: bool = False, timeout: float = 30.0) -> None:
        """See ``ConnectionPool.open``."""
        self._renew()
        super().open(wait=wait, timeout=timeout)

    def close(self, timeout: float = 5.0) -> None:
        """See ``ConnectionPool.close``. In a forked process it closes that process's own
        connections only; the parent's stay open."""
        self._renew(closing=True)
        super().close(timeout)

    def wait(self, timeout: float = 30.0) -> None:
        """See ``ConnectionPool.wait``."""
        self._renew()
        super().wait(timeout)

    def check(self) -> None:
        """See ``ConnectionPool.check``."""
        self._renew()
        super().check()

    def drain(self) -> None:
        """See ``ConnectionPool.drain``."""
        self._renew()
        super().drain()

    def resize(self, min_size: int, max_size: int | None = None) -> None:
        """See ``ConnectionPool.resize``."""
        self._renew()
        super().resize(min_size, max_size)

    def __del__(self) -> None:
        if getattr(self, "_pid", None) == os.getpid():  # the parent's threads are not ours to stop
            super().__del__()


class AsyncCheckedPool(AsyncConnectionPool[AsyncConnection[Any]]):
    """A psycopg ``AsyncConnectionPool`` that checks a connection before lending it as
    :class:`ProcessPool` does: one that fails ``check`` is closed (the pool opens another) and
    the next is tried at once, within the caller's ``timeout`` in all.

    A pool still open when its event loop ends (``asyncio.run`` returning before the store or
    pool was closed) is closed then, with a warning: ``asyncio.run`` cancels the tasks left
    running, and a task of psycopg's pool cancelled while connecting takes it for a failed
    connection and waits for its next job for ever, so ``asyncio.run`` never returned."""

    def __init__(
        self,
        conninfo: str,
        *,
        check: Callable[[AsyncConnection[Any]], Awaitable[object]] | None = None,
        **options: Any,
    ) -> None:
        self._closer: asyncio.Task[None] | None = None
        super().__init__(conninfo, **options)
        self._check_lent = check

    async def open(self, wait: bool = False, timeout: float = 30.0) -> None:
        """See ``AsyncConnectionPool.open``."""
        await super().open(wait=wait, timeout=timeout)
        if not self.closed and (self._closer is None or self._closer.done()):
            name = f"{self.name}-closer"
            self._closer = asyncio.create_task(self._close_at_loop_end(), name=name)

    async def close(self, timeout: float = 5.0) -> None:
        """See ``AsyncConnectionPool.close``."""
        closer, self._closer = self._closer, None
        if closer is not None and closer is not asyncio.current_task():
            closer.cancel()
        await super().close(timeout)

    async def _close_at_loop_end(self) -> None:
        """Wait until cancelled (what ``asyncio.run`` does to the tasks left at its end), then
        close the pool if it is still open, so that its own tasks end too."""
        try:
            await asyncio.get_running_loop().create_future()
        except asyncio.CancelledError:
            if not self.closed:
                logger.warning(
                    "the connection pool %r was not closed before its event loop ended; "
                    "closing it. Close the store with 'async with' or 'await store.close()'",
                    self.name,
                )
                await self.close()
            raise

    async def getconn(self, timeout: float | None = None) -> AsyncConnection[Any]:
        """See ``AsyncConnectionPool.getconn``; checked with ``check``."""
        wait = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + wait
        while True:
            conn = await super().getconn(max(0.0, deadline - time.monotonic()))
            try:
                if self._check_lent is not None:
                    await self._check_lent(conn)
            except Exception as exc:
                # handed back closed, it is discarded and replaced, quietly (see ProcessPool)
                await conn.close()
                try:
                    await self._putconn(conn, from_getconn=True)
                except (AttributeError, TypeError):
                    # a psycopg_pool without it: the public way, which warns
                    await super().putconn(conn)
                if time.monotonic() >= deadline:
                    raise PoolTimeout(
                        f"no connection passed its check within {wait:.2f} sec"
                    ) from exc
                continue
            except BaseException:  # a cancellation: the connection goes back, nothing is retried
                await super().putconn(conn)
                raise
            return conn


_pools: weakref.WeakSet[ProcessPool] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # a thread of the parent may have held the lock at the fork; the rest waits for first use
    for pool in list(_pools):
        pool._renewing = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def same_process(pool: object, opened_in: int, what: str) -> None:
    """Refuse a pool that is not a :class:`ProcessPool` in a process forked after ``what`` was
    built on it: its connections are the parent's.

    Raises:
        StoreError: this process is not ``opened_in`` and the pool cannot start afresh here.
    """
    if opened_in != os.getpid() and not isinstance(pool, ProcessPool):
        raise StoreError(
            f"{what} was built in process {opened_in} on a connection pool that cannot be used in "
            f"process {os.getpid()}, forked from it (the connections are the parent's). Build the "
            "pool with ctxplugin_postgres.make_pool, which opens its own connections in a forked "
            "process, or build the store after the fork"
        )


__all__ = ["AsyncCheckedPool", "ProcessPool", "same_process"]
