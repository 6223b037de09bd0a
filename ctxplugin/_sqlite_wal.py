"""SQLite files shared by threads and processes run in WAL mode: a reader never blocks a
writer, nor a writer a reader; writers wait for one another through the busy timeout. A file
deleted or replaced under a running process is told by its identity (:func:`file_identity`), and
one a later release wrote by its schema version (:func:`schema_version`)."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ctxplugin.errors import StoreError


def into_wal(conn: sqlite3.Connection, wait_s: float) -> None:
    """Put the database in WAL mode, waiting up to ``wait_s`` for other connections. A change of
    journal mode does not wait through the busy timeout: processes opening a new database at
    the same moment get "database is locked" at once, so it is tried again until the wait is up."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if ("locked" not in str(exc) and "busy" not in str(exc)) or time.monotonic() >= deadline:
                raise
            time.sleep(0.02)


@contextmanager
def opening(directory: Path, wait_s: float) -> Iterator[None]:
    """Held while a process opens a database file in ``directory``: an exclusive lock on the
    directory across processes (where the platform has ``flock``), so that one finding the file
    gone, and removing its stale WAL, never removes the WAL of the file another process has just
    made anew (what that process stored meanwhile was lost with it). Waited for ``wait_s`` at most
    (another process holds it for as long as its own open takes); the open then goes on without
    it, as where the platform or the file system has no ``flock``."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): the processes' opens are not ordered
        yield
        return
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # a directory that cannot be opened for reading: the open says what is wrong
        yield
        return
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.005)
            except OSError:  # a file system without flock
                break
        yield
    finally:
        os.close(fd)  # lets the lock go


def file_identity(path: Path) -> tuple[int, int] | None:
    """The device and inode of the file at ``path`` (None when there is none): another file
    at the path (deleted and made again, restored from a copy) has another identity."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return info.st_dev, info.st_ino


def schema_version(conn: sqlite3.Connection, known: int, what: str) -> int:
    """The schema version of ``conn``'s file (``PRAGMA user_version``).

    Raises:
        StoreError: a later release wrote the file (its version is above ``known``); ``what``
            and the file's path, looked up only then, name it. The file is left as it is.
    """
    found = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if found > known:
        path = conn.execute("PRAGMA database_list").fetchone()[2]
        raise StoreError(
            f"{what} {path} is at schema version {found}, newer than this ctxplugin knows ({known}); "
            "upgrade ctxplugin to open it, or give this engine another path"
        )
    return found


__all__ = ["file_identity", "into_wal", "opening", "schema_version"]
