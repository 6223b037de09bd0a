"""SQLite CAS store: the embedded default. One file, WAL, shared by threads and processes."""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ctxplugin._sqlite_wal import file_identity, into_wal, opening
from ctxplugin._step import step_wait, waiting
from ctxplugin.cas._canon import check_ref, decode, encode
from ctxplugin.cas._sqlite_tables import (
    GRANT_COLUMNS,
    column,
    drop_stale_journal,
    drop_unreferenced,
    ensure_schema,
    owner,
    translate,
)
from ctxplugin.cas.store import (
    NOT_VISIBLE,
    CASItem,
    CASRecord,
    Clock,
    check_put,
    expiry,
    system_clock,
)
from ctxplugin.errors import RefNotFoundError, StoreError, StoreUnavailableError
from ctxplugin.scope import Scope, Visibility

logger = logging.getLogger("ctxplugin")


_HELD_WAIT_S = 0.05
"""How long a write waits for the file while another process is known to hold it past the whole
wait (a backup, a shell left in a transaction; known once a write waited half of it in vain): each step then tries it at this cost instead of
waiting ``busy_timeout_ms`` again, until a write gets through."""


class SQLiteCASStore:
    """A :class:`~ctxplugin.cas.CASStore` in one SQLite file.

    The file and its parent directories are created on first use. Each thread (and each
    process, after a fork) gets its own connection; the database runs in WAL mode with a busy
    timeout, and every write is one short ``BEGIN IMMEDIATE`` transaction, so several threads
    and processes can write the same file safely.

    Args:
        path: the database file.
        clock: time source for TTLs (epoch seconds).
        busy_timeout_ms: how long a writer waits for another one before the store reports
            :class:`~ctxplugin.errors.StoreUnavailableError`. Once a write waited half that long or
            more in vain, the next ones wait 50 ms, until one gets through. A ``get`` waits half
            as long to count its access, then reads without counting it.

    Raises:
        StoreError: the file cannot be created or is not a usable database.
    """

    def __init__(self, path: str | Path, *, clock: Clock = system_clock, busy_timeout_ms: int = 10_000) -> None:
        self.path = Path(path).absolute()  # each thread connects later: a chdir must not move the file
        self._clock = clock
        self._busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: weakref.WeakSet[_Held] = weakref.WeakSet()
        self._pid = os.getpid()
        self._closed = False
        self._held_elsewhere = False  # a write waited (half) the busy timeout in vain; none got through since
        with translate("open"):
            self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._using():  # the first connection makes the file and its tables
            pass

    # ------------------------------------------------------------------ connections
    def _held(self) -> _Held:
        if self._closed:
            raise StoreError(f"the CAS store {self.path} is closed")
        if os.getpid() != self._pid:  # forked: the parent's connections must not be reused
            with self._lock:
                self._pid = os.getpid()
                # nor closed here: a parent's thread may have held one's lock at the fork, and
                # its close would wait on that lock for ever; they are kept, unused
                _INHERITED.append((self._local, list(self._connections)))
                self._connections = weakref.WeakSet()
                self._local = threading.local()
        held: _Held | None = getattr(self._local, "held", None)
        if held is not None:
            with translate("open"):  # a directory gone unreadable (a stale mount, a failing disk)
                identity = file_identity(self.path)
            if held.file == identity:
                return held
            self._reopen(held)
        # one thread of one process opens the file at a time: one that found it gone removes its
        # stale WAL, which must not be the WAL of the file another has just made anew
        with _opening(self.path), translate("open"):
            self.path.parent.mkdir(parents=True, exist_ok=True)  # its directory may have been removed with it
            with opening(self.path.parent, self._busy_timeout_ms / 1000):
                drop_stale_journal(self.path)
                conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=self._busy_timeout_ms / 1000)
                conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
                into_wal(conn, self._busy_timeout_ms / 1000)
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
        try:
            ensure_schema(conn)  # a thread's first connection may find the file made anew
            with translate("open"):
                file = file_identity(self.path)
        except BaseException:
            conn.close()
            raise
        held = _Held(conn, self._busy_timeout_ms, file)
        self._local.held = held
        with self._lock:
            self._connections.add(held)
        return held

    def _reopen(self, held: _Held) -> None:
        """Let go of this thread's connection to a file no longer at the store's path (deleted,
        or replaced by a copy): writes to it would be lost with it. The next connection opens
        the file at the path, made anew when there is none."""
        logger.warning(
            "the SQLite CAS file %s was deleted or replaced while in use; opened it again "
            "(outputs stored in the old file are only there)", self.path,
        )
        self._local.held = None
        with self._lock:
            self._connections.discard(held)
        with held.busy:
            held.conn.close()

    @contextmanager
    def _using(self, write: bool = False, share: float = 1.0) -> Iterator[sqlite3.Connection]:
        """This thread's connection, held busy while the caller uses it: :meth:`close` closes
        only idle connections (closing one while another thread runs a statement on it crashes
        the process) and leaves a busy one to its thread, which closes it here."""
        held = self._held()
        with held.busy:
            if self._closed:
                held.conn.close()
                raise StoreError(f"the CAS store {self.path} is closed")
            # another writer is waited for until the step's deadline at the latest: a step
            # storing many outputs waits stores.timeout in all, not once per output
            whole = self._busy_timeout_ms / 1000
            wait_ms = int(step_wait(min(whole, _HELD_WAIT_S) if write and self._held_elsewhere else whole) * share * 1000)
            if wait_ms != held.wait_ms:
                with translate("open"):
                    held.conn.execute(f"PRAGMA busy_timeout = {wait_ms}")
                held.wait_ms = wait_ms
            try:
                with waiting():  # the step's store time: a writer's lock may be waited for
                    yield held.conn
            finally:
                if self._closed:
                    held.conn.close()

    @contextmanager
    def _transaction(self, what: str, share: float = 1.0) -> Iterator[sqlite3.Connection]:
        with self._using(write=True, share=share) as conn, translate(what):
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                # a wait the step's store time cut very short says little; half the timeout does
                # (another cause, a disk I/O error, says nothing of a writer holding the file)
                busy = "locked" in str(exc) or "busy" in str(exc)
                if busy and conn.execute("PRAGMA busy_timeout").fetchone()[0] >= self._busy_timeout_ms / 2:
                    self._held_elsewhere = True  # another process holds the file
                raise
            self._held_elsewhere = False
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                # SQLite may have rolled it back itself (a full disk); a COMMIT that failed may
                # also leave it open, holding the write lock against every other writer
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    # ------------------------------------------------------------------ the port
    def put(self, item: CASItem, scope: Scope, *, visibility: Visibility = "session", ttl_seconds: float | None = None) -> bool:
        """See :meth:`ctxplugin.cas.CASStore.put`."""
        check_put(item, visibility, ttl_seconds)
        data = encode(item.content)
        key = scope.key()
        with self._transaction("put") as conn:
            now = self._clock()
            bound = conn.execute("SELECT content_hash FROM cas_grants WHERE ref_id = ? LIMIT 1", (item.ref_id,)).fetchone()
            if bound is not None and bound[0] != item.content_hash:
                raise StoreError(f"ref {item.ref_id!r} is already bound to other content (hash prefix collision)")
            conn.execute(
                "INSERT INTO cas_content (raw_hash, content, size, created_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (raw_hash) DO NOTHING",
                (item.raw_hash, data, len(data), now),
            )
            expires = expiry(now, ttl_seconds)
            row = conn.execute(
                "SELECT expires_at FROM cas_grants WHERE ref_id = ? AND owner_key = ? AND visibility = ?",
                (item.ref_id, key, visibility),
            ).fetchone()
            if row is not None and (row[0] is None or row[0] > now):
                if row[0] is not None:
                    conn.execute(
                        "UPDATE cas_grants SET expires_at = CASE WHEN ? IS NULL THEN NULL ELSE max(expires_at, ?) END "
                        "WHERE ref_id = ? AND owner_key = ? AND visibility = ?",
                        (expires, expires, item.ref_id, key, visibility),
                    )
                return False
            values = (
                item.ref_id, key, visibility, column(scope.tenant_id), column(scope.workspace_id), column(scope.user_id),
                column(scope.session_id), item.content_hash, item.raw_hash, item.kind, encode(item.summary), now, expires,
            )
            conn.execute(
                f"INSERT INTO cas_grants ({GRANT_COLUMNS}) VALUES ({', '.join('?' * len(values))}) "
                "ON CONFLICT (ref_id, owner_key, visibility) DO UPDATE SET raw_hash = excluded.raw_hash, "
                "summary = excluded.summary, created_at = excluded.created_at, expires_at = excluded.expires_at, "
                "access_count = 0, last_accessed_at = NULL",
                values,
            )
            return True

    def _readable(self, conn: sqlite3.Connection, ref_id: str, scope: Scope, now: float) -> Iterator[tuple[Any, ...]]:
        """Unexpired grants of ``ref_id`` that ``scope`` may read, its own first, then oldest."""
        # Narrow in SQL (tenant, and own session unless shared wider); Scope.can_read decides.
        rows = conn.execute(
            "SELECT owner_key, visibility, tenant_id, workspace_id, user_id, session_id, content_hash, "
            "raw_hash, kind, summary, created_at, expires_at, access_count FROM cas_grants "
            "WHERE ref_id = ? AND tenant_id IS ? AND (expires_at IS NULL OR expires_at > ?) "
            "AND (visibility != 'session' OR session_id = ?) ORDER BY owner_key != ?, created_at",
            (ref_id, column(scope.tenant_id), now, column(scope.session_id), scope.key()),
        ).fetchall()
        for row in rows:
            if scope.can_read(owner(row[0]), row[1]):
                yield row

    def exists(self, ref_id: str, scope: Scope) -> bool:
        """See :meth:`ctxplugin.cas.store.RefExistence.exists` (an optional ability)."""
        check_ref(ref_id)
        with self._using() as conn, translate("exists"):  # one SELECT: no write lock taken
            return next(self._readable(conn, ref_id, scope, self._clock()), None) is not None

    def get(self, ref_id: str, scope: Scope) -> CASRecord:
        """See :meth:`ctxplugin.cas.CASStore.get`. A file that cannot be written right now (a
        full disk, a read-only file, another writer's lock held past the wait) is still read:
        the stored output is returned, its access not counted, with a warning logged."""
        check_ref(ref_id)
        try:
            # counting the access waits for another writer half the time at most: the read
            # without counting, after it, must fit in the call's deadline too
            with self._transaction("get", share=0.5) as conn:
                return self._record(conn, ref_id, scope, counted=True)
        except StoreUnavailableError as exc:
            with self._using() as conn, translate("get"):
                record = self._record(conn, ref_id, scope, counted=False)
            logger.warning("%s read without counting its access: %s", ref_id, exc)
            return record

    def _record(self, conn: sqlite3.Connection, ref_id: str, scope: Scope, *, counted: bool) -> CASRecord:
        now = self._clock()
        for row in self._readable(conn, ref_id, scope, now):
            if counted:
                conn.execute(
                    "UPDATE cas_grants SET access_count = access_count + 1, last_accessed_at = ? "
                    "WHERE ref_id = ? AND owner_key = ? AND visibility = ?",
                    (now, ref_id, row[0], row[1]),
                )
            blob = conn.execute("SELECT content FROM cas_content WHERE raw_hash = ?", (row[7],)).fetchone()
            if blob is None:
                raise StoreError(f"content of {ref_id!r} is missing from {self.path}; the database is inconsistent")
            return CASRecord(
                ref_id=ref_id, content_hash=row[6], raw_hash=row[7], kind=row[8], content=decode(bytes(blob[0])),
                summary=row[9] if isinstance(row[9], str) else decode(bytes(row[9])),
                created_at=row[10], expires_at=row[11], access_count=row[12] + counted,
            )
        raise RefNotFoundError(NOT_VISIBLE.format(ref=ref_id))

    def purge_expired(self) -> int:
        """See :meth:`ctxplugin.cas.CASStore.purge_expired`."""
        with self._transaction("purge") as conn:
            removed = conn.execute(
                "DELETE FROM cas_grants WHERE expires_at IS NOT NULL AND expires_at <= ?", (self._clock(),)
            ).rowcount
            drop_unreferenced(conn)
        return int(removed)

    def revoke(self, ref_id: str, scope: Scope) -> bool:
        """See :meth:`ctxplugin.cas.store.RefRevocation.revoke` (an optional ability)."""
        check_ref(ref_id)
        # the freed pages are overwritten, not left in the file for a reader of its bytes (on
        # for this connection from now on: builds differ in their default)
        with translate("revoke"), self._using() as conn:
            conn.execute("PRAGMA secure_delete = ON")
        with self._transaction("revoke") as conn:
            key = (ref_id, scope.key())
            raws = [row[0] for row in conn.execute("SELECT raw_hash FROM cas_grants WHERE ref_id = ? AND owner_key = ?", key)]
            conn.execute("DELETE FROM cas_grants WHERE ref_id = ? AND owner_key = ?", key)
            drop_unreferenced(conn, raws)
        return bool(raws)

    def close(self) -> None:
        """See :meth:`ctxplugin.cas.CASStore.close`."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            connections, self._connections = list(self._connections), weakref.WeakSet()
        for held in connections:
            if not held.busy.acquire(blocking=False):
                continue  # its thread is running a statement: it closes the connection when done
            try:
                held.conn.close()
            except sqlite3.Error:
                pass
            finally:
                held.busy.release()

    # ------------------------------------------------------------------ optional abilities
    def stats(self) -> dict[str, int]:
        """Counts of stored variants, grants and content bytes (for ``ctxplugin inspect``)."""
        with self._using() as conn, translate("stats"):
            contents, size = conn.execute("SELECT count(*), coalesce(sum(size), 0) FROM cas_content").fetchone()
            grants = conn.execute("SELECT count(*) FROM cas_grants").fetchone()[0]
        return {"contents": int(contents), "grants": int(grants), "bytes": int(size)}


_OPENING: dict[Path, threading.Lock] = {}
_OPENING_GUARD = threading.Lock()


def _opening(path: Path) -> threading.Lock:
    """The lock held while a connection to the file at ``path`` is opened (one per path for the
    process's life: a process opens few CAS files)."""
    with _OPENING_GUARD:
        return _OPENING.setdefault(path, threading.Lock())


_INHERITED: list[Any] = []
"""The connections a forked process inherited from its parent: kept for the life of the process,
never used nor closed there (see :meth:`SQLiteCASStore._connection`)."""


class _Held:
    """One thread's connection, closed when the thread ends: only that thread's local storage
    holds it, so a service that runs each request on a new thread keeps no file open per
    request (a connection left to the garbage collector stays open until a collection runs,
    as it is part of a reference cycle). :meth:`SQLiteCASStore.close` reaches the live ones
    through a weak set."""

    __slots__ = ("__weakref__", "busy", "conn", "file", "wait_ms")

    def __init__(self, conn: sqlite3.Connection, wait_ms: int, file: tuple[int, int] | None) -> None:
        self.conn = conn
        self.busy = threading.Lock()
        self.wait_ms = wait_ms  # the connection's busy timeout now
        self.file = file  # the identity of the file it opened (see file_identity)

    def __del__(self) -> None:
        self.conn.close()
