"""Supersession across processes: the facts ledger's write lock on Postgres advisory locks.

Processes of one deployment share their facts through a Chroma server, which has no
transactions. :class:`PostgresWriteLock` gives the ledger (``FactsLedger(lock=...)``) one lock
per owner slot, held in a transaction with ``pg_advisory_xact_lock``: the transaction ends when
the write does, and a process that dies mid-write loses its connection and with it the lock, so
nothing is left locked. :func:`ctxplugin.connect` builds one on the CAS store's pool whenever
``CTXPLUGIN_POSTGRES_DSN`` is set.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import psycopg
from psycopg_pool import ConnectionPool

from ctxplugin.errors import InvalidInputError, StoreBusyError
from ctxplugin.facts.locks import HeldNames
from ctxplugin_postgres._db import (
    DEFAULT_SCHEMA,
    POOL_TIMEOUT_S,
    check_schema,
    make_pool,
    translated,
)
from ctxplugin_postgres._pool import ProcessPool, same_process

WAIT_S = 10.0
"""How long a write waits for another process's write to the same slot before giving up."""


def lock_key(namespace: str, name: str) -> int:
    """The signed 64-bit advisory-lock key of ``name`` within ``namespace``."""
    digest = hashlib.blake2b(f"{namespace}\x00{name}".encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class PostgresWriteLock:
    """Named locks shared by every process connected to one Postgres database.

    Re-entrant within a thread (a nested ``hold`` of a name already held passes through).
    :meth:`hold_all` takes several names on one pooled connection.

    Args:
        pool: a connection pool (the CAS store's ``pool`` serves); a connection is borrowed for
            as long as a lock is held.
        namespace: keeps deployments on one database apart (``connect`` uses the schema name).
        wait_s: how long to wait for another holder before raising.
        owns_pool: close the pool with :meth:`close`.

    Example:
        >>> from ctxplugin.facts import ChromaFactStore, FactsLedger
        >>> lock = PostgresWriteLock.from_dsn("postgresql://app@db/ctx")  # doctest: +SKIP
        >>> ledger = FactsLedger(ChromaFactStore.http("http://chroma:8000"), lock=lock)  # doctest: +SKIP
    """

    def __init__(
        self, pool: ConnectionPool, *, namespace: str = DEFAULT_SCHEMA, wait_s: float = WAIT_S, owns_pool: bool = False
    ) -> None:
        if wait_s <= 0:
            raise InvalidInputError(f"wait_s must be > 0, got {wait_s}")
        self.pool = pool
        self.namespace = namespace
        self.wait_s = wait_s
        self._owns_pool = owns_pool
        self._held = HeldNames()
        self._opened_in = os.getpid()

    @classmethod
    def from_dsn(
        cls, dsn: str, *, namespace: str = DEFAULT_SCHEMA, wait_s: float = WAIT_S, max_size: int = 4
    ) -> PostgresWriteLock:
        """A lock with its own pool on ``dsn`` (closed by :meth:`close`); never blocks."""
        check_schema(namespace)
        pool = make_pool(dsn, max_size=max_size, timeout=POOL_TIMEOUT_S, name="ctxplugin-locks")
        return cls(pool, namespace=namespace, wait_s=wait_s, owns_pool=True)

    @contextmanager
    def hold(self, name: str) -> Iterator[None]:
        """Hold the lock ``name`` for the ``with`` block (see :class:`ctxplugin.facts.WriteLock`).

        Raises:
            StoreUnavailableError: Postgres is unreachable.
            StoreBusyError: another holder kept the lock longer than ``wait_s`` (a
                ``StoreUnavailableError`` too).
        """
        with self.hold_all((name,)):
            yield

    @contextmanager
    def hold_all(self, names: Iterable[str]) -> Iterator[None]:
        """Hold the locks ``names`` for the ``with`` block, taken in sorted order in one
        transaction, so on one pooled connection however many there are: a writer holding some
        never waits for another connection while writers waiting for them hold the rest of the
        pool. Names this thread holds already pass through. Raises as :meth:`hold` (each name
        waits up to ``wait_s``)."""
        wanted = sorted(set(names))
        taking = [name for name in wanted if not self._held.holds(name)]
        if not taking:
            with self._held.holding_all(wanted):
                yield
            return
        same_process(self.pool, self._opened_in, "this PostgresWriteLock")
        with translated("facts write lock", self.namespace), self.pool.connection() as conn, conn.transaction():
            conn.execute("SELECT set_config('lock_timeout', %s, true)", (f"{int(self.wait_s * 1000)}ms",))
            # the pool's statement timeout would otherwise end the wait before lock_timeout does
            conn.execute("SELECT set_config('statement_timeout', %s, true)", (f"{int(self.wait_s * 1000) + 1000}ms",))
            for name in taking:
                try:
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(self.namespace, name),))
                except psycopg.errors.LockNotAvailable as exc:
                    raise StoreBusyError(
                        f"facts write lock {name!r}: another process held it for more than {self.wait_s:g}s; "
                        "the write did not happen, retry it"
                    ) from exc
            with self._held.holding_all(wanted):
                yield

    def close(self) -> None:
        """Close the pool if this lock owns it (in a forked process, only that process's own
        connections: see :func:`ctxplugin_postgres.make_pool`). Idempotent."""
        if self._owns_pool and (self._opened_in == os.getpid() or isinstance(self.pool, ProcessPool)):
            self.pool.close()


__all__ = ["WAIT_S", "PostgresWriteLock", "lock_key"]
