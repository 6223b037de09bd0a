"""The SQLite CAS file's tables, and the helpers its store reads and writes them with: scope
columns, owners, unreferenced contents, the schema's migration, and sqlite3's errors as
ctxplugin's."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ctxplugin._sqlite_wal import schema_version
from ctxplugin._untrusted import valid_unicode
from ctxplugin.errors import StoreError, StoreUnavailableError
from ctxplugin.scope import Scope, scope_key, scope_key_parts

SCHEMA_VERSION = 2
# 1: owner_key was the pipe-joined scope (ambiguous); 2: owner_key is Scope.key(), rebuilt on
# open from the exact scope columns every grant row keeps.

# Content is stored once per exact variant; a grant row per (ref, owner scope, visibility) is
# the only way to read it. Text is kept as UTF-8 BLOBs (surrogatepass) so that any Python str,
# including lone surrogates from undecodable bytes, round-trips exactly.
SCHEMA = """
CREATE TABLE IF NOT EXISTS cas_content (
    raw_hash   TEXT PRIMARY KEY,
    content    BLOB NOT NULL,
    size       INTEGER NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS cas_grants (
    ref_id           TEXT NOT NULL,
    owner_key        TEXT NOT NULL,
    visibility       TEXT NOT NULL,
    tenant_id        TEXT,
    workspace_id     TEXT,
    user_id          TEXT,
    session_id       TEXT NOT NULL,
    content_hash     TEXT NOT NULL,
    raw_hash         TEXT NOT NULL REFERENCES cas_content(raw_hash),
    kind             TEXT NOT NULL,
    summary          BLOB NOT NULL,
    created_at       REAL NOT NULL,
    expires_at       REAL,
    access_count     INTEGER NOT NULL DEFAULT 0,
    last_accessed_at REAL,
    PRIMARY KEY (ref_id, owner_key, visibility)
);
CREATE INDEX IF NOT EXISTS cas_grants_expiry ON cas_grants(expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS cas_grants_raw ON cas_grants(raw_hash);
"""

GRANT_COLUMNS = (
    "ref_id, owner_key, visibility, tenant_id, workspace_id, user_id, session_id, content_hash, "
    "raw_hash, kind, summary, created_at, expires_at"
)

UNAVAILABLE = ("locked", "busy", "unable to open", "disk i/o", "readonly", "read-only", "disk is full")


def column(value: str | None) -> str | None:
    """A scope id as a TEXT column holds it: itself, or percent-encoded as in its scope key when
    it holds lone surrogates (which SQLite text cannot); an ordinary id may spell the same value,
    so a column only narrows a search and the owner is read from the key (:func:`owner`)."""
    if value is None or valid_unicode(value) is value:
        return value
    return scope_key(value)


def owner(owner_key: str) -> Scope:
    """The exact scope that wrote a grant, from its key."""
    tenant_id, workspace_id, user_id, session_id = scope_key_parts(owner_key)
    return Scope(tenant_id=tenant_id, workspace_id=workspace_id, user_id=user_id, session_id=session_id)


def drop_unreferenced(conn: sqlite3.Connection, raws: list[str] | None = None) -> None:
    """Delete the contents no grant points to: all of them, or those among ``raws``."""
    orphan = "NOT EXISTS (SELECT 1 FROM cas_grants g WHERE g.raw_hash = cas_content.raw_hash)"
    if raws is None:
        conn.execute(f"DELETE FROM cas_content WHERE {orphan}")
    elif raws:
        marks = ", ".join("?" * len(raws))
        conn.execute(f"DELETE FROM cas_content WHERE raw_hash IN ({marks}) AND {orphan}", raws)


def rekey_grants(conn: sqlite3.Connection) -> None:
    """Rewrite every grant's ``owner_key`` from its scope columns (migration 1 -> 2).

    The columns hold the exact scope, so this is exact even for rows whose old key was
    ambiguous. New keys never contain ``|`` and old ones always do, so no row's new key can
    meet another row's old key while the UPDATE runs.
    """
    conn.create_function("ctxplugin_scope_key", 4, scope_key, deterministic=True)
    conn.execute("UPDATE cas_grants SET owner_key = ctxplugin_scope_key(tenant_id, workspace_id, user_id, session_id)")


def ensure_schema(conn: sqlite3.Connection) -> None:
    """Create the tables (or migrate them) unless the file holds the current ones: a database
    another process made already needs no write lock, which a writer holding one (another worker
    mid-put) would keep this store from taking.

    Raises:
        StoreError: as :func:`translate`, or the file was written by a later release.
    """
    with translate("create schema"):
        if _version(conn) >= SCHEMA_VERSION:
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            if _version(conn) < SCHEMA_VERSION:
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                rekey_grants(conn)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")


def _version(conn: sqlite3.Connection) -> int:
    return schema_version(conn, SCHEMA_VERSION, "the SQLite CAS file")


def drop_stale_journal(path: Path) -> None:
    """Remove the WAL and shared-memory files of a database file that is gone: a new file at
    the path would read the old one's pages from them."""
    if path.exists():
        return
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


@contextmanager
def translate(what: str) -> Iterator[None]:
    """sqlite3 errors become ctxplugin store errors, chained, with a message saying what to do."""
    try:
        yield
    except sqlite3.Error as exc:
        text = str(exc)
        if isinstance(exc, sqlite3.OperationalError) and any(word in text.lower() for word in UNAVAILABLE):
            raise StoreUnavailableError(f"SQLite CAS {what} failed: {text}; retry, or check the file's disk and permissions") from exc
        raise StoreError(f"SQLite CAS {what} failed: {text}") from exc
    except OSError as exc:
        raise StoreUnavailableError(f"SQLite CAS {what} failed: {exc}") from exc
    except UnicodeDecodeError as exc:  # every text is stored as UTF-8: these bytes were changed since
        raise StoreError(f"SQLite CAS {what} failed: a stored value is damaged (not the UTF-8 text stored: {exc})") from exc
    except UnicodeEncodeError as exc:  # a scope id with lone surrogates cannot be a SQLite TEXT value
        raise StoreError(f"SQLite CAS {what} failed: a scope id is not valid Unicode text ({exc})") from exc


__all__ = [
    "GRANT_COLUMNS", "SCHEMA", "SCHEMA_VERSION", "UNAVAILABLE", "column", "drop_stale_journal", "drop_unreferenced", "ensure_schema",
    "owner", "rekey_grants", "translate",
]
