"""SQLite files shared by threads and processes run in WAL mode: a reader never blocks a
writer, nor a writer a reader; writers wait for one another through the busy timeout."""

from __future__ import annotations

import sqlite3
import time


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


__all__ = ["into_wal"]
