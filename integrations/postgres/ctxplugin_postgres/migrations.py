"""Versioned migrations of the ctxplugin tables in one Postgres schema.

Migrations are numbered and applied in order, each in the same transaction as the row that
records it in ``ctxplugin_schema_version``. Applying takes a transaction-scoped advisory lock
per schema, so many processes may call :func:`migrate` at once: one applies, the others wait
and find nothing left to do. A migration, once released, is never edited; changes come as new
numbers.

Run them with ``ctxplugin-postgres migrate --dsn ...``, or from code with :func:`migrate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from ctxplugin.errors import StoreError
from ctxplugin_postgres._db import (
    DEFAULT_SCHEMA,
    Plan,
    Stmt,
    check_schema,
    compose,
    drive,
    translated,
)


@dataclass(frozen=True)
class Migration:
    """One numbered step of the schema.

    Attributes:
        version: its number (1, 2, ...; applied in order).
        name: a short description, stored beside the number.
        sql: statements, with ``{s}`` standing for the quoted schema name.
    """

    version: int
    name: str
    sql: str


_CAS = """
CREATE TABLE {s}.ctxplugin_cas_refs (
    ref_id       TEXT PRIMARY KEY,
    content_hash TEXT NOT NULL,
    kind         TEXT NOT NULL,
    created_at   DOUBLE PRECISION NOT NULL
);
CREATE TABLE {s}.ctxplugin_cas_content (
    raw_hash   TEXT PRIMARY KEY,
    content    BYTEA NOT NULL,
    size       INTEGER NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE {s}.ctxplugin_cas_grants (
    ref_id           TEXT NOT NULL REFERENCES {s}.ctxplugin_cas_refs (ref_id),
    owner_key        TEXT NOT NULL,
    visibility       TEXT NOT NULL CHECK (visibility IN ('session', 'user', 'workspace', 'tenant')),
    tenant_id        TEXT,
    workspace_id     TEXT,
    user_id          TEXT,
    session_id       TEXT NOT NULL,
    content_hash     TEXT NOT NULL,
    raw_hash         TEXT NOT NULL REFERENCES {s}.ctxplugin_cas_content (raw_hash),
    kind             TEXT NOT NULL,
    summary          TEXT NOT NULL,
    created_at       DOUBLE PRECISION NOT NULL,
    expires_at       DOUBLE PRECISION,
    access_count     INTEGER NOT NULL DEFAULT 0,
    last_accessed_at DOUBLE PRECISION,
    PRIMARY KEY (ref_id, owner_key, visibility)
);
CREATE INDEX ctxplugin_cas_grants_expiry ON {s}.ctxplugin_cas_grants (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX ctxplugin_cas_grants_raw ON {s}.ctxplugin_cas_grants (raw_hash);
CREATE INDEX ctxplugin_cas_grants_session ON {s}.ctxplugin_cas_grants (tenant_id, session_id);
"""

# a write-behind queue with attempts, backoff, leases and token quotas
_JOBS = """
CREATE TABLE {s}.ctxplugin_summary_jobs (
    id               BIGSERIAL PRIMARY KEY,
    text_key         TEXT NOT NULL,
    session_key      TEXT NOT NULL,
    ref_id           TEXT,
    text             BYTEA NOT NULL,
    priority         SMALLINT NOT NULL DEFAULT 5,
    state            TEXT NOT NULL DEFAULT 'queued'
                     CHECK (state IN ('queued', 'running', 'done', 'failed', 'skipped')),
    attempt_count    INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
    next_attempt_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    lease_expires_at TIMESTAMPTZ,
    worker_id        TEXT,
    error_message    TEXT,
    token_cost       INTEGER,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    started_at       TIMESTAMPTZ,
    completed_at     TIMESTAMPTZ
);
CREATE UNIQUE INDEX ctxplugin_summary_jobs_live ON {s}.ctxplugin_summary_jobs (text_key)
    WHERE state IN ('queued', 'running');
CREATE INDEX ctxplugin_summary_jobs_queue ON {s}.ctxplugin_summary_jobs (priority DESC, next_attempt_at, id)
    WHERE state = 'queued';
CREATE INDEX ctxplugin_summary_jobs_lease ON {s}.ctxplugin_summary_jobs (lease_expires_at)
    WHERE state = 'running';
CREATE TABLE {s}.ctxplugin_summaries (
    text_key   TEXT PRIMARY KEY,
    summary    TEXT NOT NULL,
    tokens     INTEGER NOT NULL DEFAULT 0,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE {s}.ctxplugin_summary_usage (
    bucket     TEXT PRIMARY KEY,
    tokens     BIGINT NOT NULL DEFAULT 0,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
"""

# every schema version of every tool, with its hash and token count
_TOOLS = """
CREATE TABLE {s}.ctxplugin_tool_schemas (
    tool_name   TEXT NOT NULL,
    schema_hash TEXT NOT NULL,
    version     INTEGER NOT NULL,
    server_name TEXT NOT NULL DEFAULT '',
    schema_json JSONB NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    token_count INTEGER NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tool_name, schema_hash),
    UNIQUE (tool_name, version)
);
CREATE INDEX ctxplugin_tool_schemas_server ON {s}.ctxplugin_tool_schemas (server_name);
"""

# Scope keys were the pipe-joined scope ids, which two different scopes could share ("a" + "b|c"
# and "a|b" + "c"). ctxplugin_scope_key() computes ctxplugin.scope.scope_key() in SQL (each part
# percent-encoded as UTF-8, NULL as '!', joined by ','); every grant is rekeyed from the exact
# scope columns it keeps. New keys hold no '|' and old ones always do, so the UPDATE cannot
# meet a not-yet-updated row's key.
_SCOPE_KEYS = """
CREATE FUNCTION {s}.ctxplugin_key_part(part TEXT) RETURNS TEXT
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT coalesce(string_agg(
        CASE WHEN b BETWEEN 48 AND 57 OR b BETWEEN 65 AND 90 OR b BETWEEN 97 AND 122 OR b IN (45, 46, 95, 126)
             THEN chr(b) ELSE '%' || upper(lpad(to_hex(b), 2, '0')) END, '' ORDER BY i), '')
    FROM (SELECT i, get_byte(convert_to(part, 'UTF8'), i) AS b
          FROM generate_series(0, octet_length(convert_to(part, 'UTF8')) - 1) AS i) AS bytes
$$;
CREATE FUNCTION {s}.ctxplugin_scope_key(tenant TEXT, workspace TEXT, usr TEXT, session TEXT) RETURNS TEXT
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT concat_ws(',', coalesce({s}.ctxplugin_key_part(tenant), '!'), coalesce({s}.ctxplugin_key_part(workspace), '!'),
                     coalesce({s}.ctxplugin_key_part(usr), '!'), coalesce({s}.ctxplugin_key_part(session), '!'))
$$;
UPDATE {s}.ctxplugin_cas_grants SET owner_key = {s}.ctxplugin_scope_key(tenant_id, workspace_id, user_id, session_id);
"""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "content-addressable store: refs, contents, grants", _CAS),
    Migration(2, "summarization queue, summaries, quota usage", _JOBS),
    Migration(3, "tool schema registry", _TOOLS),
    Migration(4, "unambiguous scope keys: grants rekeyed from their scope columns", _SCOPE_KEYS),
)
"""Every migration, in order."""

LATEST = MIGRATIONS[-1].version
"""The schema version this release of the package works with."""

_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS {s}.ctxplugin_schema_version (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)"""


def _too_new(found: int, schema: str) -> StoreError:
    return StoreError(
        f"schema {schema!r} is at version {found}, newer than this ctxplugin-postgres knows ({LATEST}); "
        "upgrade the package"
    )


def migrate_plan(schema: str, target: int | None = None) -> Plan[list[int]]:
    """The work of :func:`migrate` as a plan (see :mod:`ctxplugin_postgres._db`)."""
    target = LATEST if target is None else target
    # a store's connections cut every statement at stores.timeout, which a migration rewriting a
    # large table (migration 4 rekeys every grant) outlasts: cut there, it would never be applied
    yield Stmt(compose("SET LOCAL statement_timeout = 0", schema))
    yield Stmt(compose("SELECT pg_advisory_xact_lock(hashtext('ctxplugin:' || %(schema)s))", schema), {"schema": schema})
    yield Stmt(compose("CREATE SCHEMA IF NOT EXISTS {s}", schema))
    yield Stmt(compose(_VERSION_TABLE, schema))
    found = yield Stmt(compose("SELECT version FROM {s}.ctxplugin_schema_version", schema))
    applied = {int(row[0]) for row in found.rows}
    if applied and max(applied) > LATEST:
        raise _too_new(max(applied), schema)
    done: list[int] = []
    for migration in MIGRATIONS:
        if migration.version in applied or migration.version > target:
            continue
        yield Stmt(compose(migration.sql, schema))
        yield Stmt(
            compose("INSERT INTO {s}.ctxplugin_schema_version (version, name) VALUES (%(v)s, %(n)s)", schema),
            {"v": migration.version, "n": migration.name},
        )
        done.append(migration.version)
    return done


def version_plan(schema: str) -> Plan[int]:
    """The applied schema version (0 when nothing is applied) as a plan."""
    table = yield Stmt(compose("SELECT to_regclass(%(t)s)", schema), {"t": f"{schema}.ctxplugin_schema_version"})
    row = table.first()
    if row is None or row[0] is None:
        return 0
    found = yield Stmt(compose("SELECT coalesce(max(version), 0) FROM {s}.ctxplugin_schema_version", schema))
    first = found.first()
    return int(first[0]) if first else 0


def migrate(dsn_or_conn: str | psycopg.Connection[Any], *, schema: str = DEFAULT_SCHEMA, target: int | None = None) -> list[int]:
    """Apply pending migrations to ``schema`` (created if missing).

    Args:
        dsn_or_conn: a Postgres DSN, or an open connection (not in a transaction of yours).
        schema: where the ctxplugin tables live.
        target: stop after this version (all of them when None).

    Returns:
        The versions applied now (empty when the schema was already current).

    Raises:
        ConfigError: ``schema`` is not an acceptable name.
        StoreUnavailableError: the server cannot be reached.
        StoreError: a migration failed (nothing of it is applied), or the schema is newer
            than this package.
    """
    check_schema(schema)
    with translated("migrate", schema):
        if isinstance(dsn_or_conn, str):
            with psycopg.connect(dsn_or_conn, connect_timeout=10) as conn:
                return drive(conn, migrate_plan(schema, target))
        with dsn_or_conn.transaction():
            return drive(dsn_or_conn, migrate_plan(schema, target))


def schema_version(dsn_or_conn: str | psycopg.Connection[Any], *, schema: str = DEFAULT_SCHEMA) -> int:
    """The version applied to ``schema``: 0 when none, :data:`LATEST` when current.

    Raises:
        StoreUnavailableError: the server cannot be reached.
        StoreError: the query failed.
    """
    check_schema(schema)
    with translated("read the schema version", schema):
        if isinstance(dsn_or_conn, str):
            with psycopg.connect(dsn_or_conn, connect_timeout=10) as conn:
                return drive(conn, version_plan(schema))
        return drive(dsn_or_conn, version_plan(schema))


def ensure_plan(schema: str, auto_migrate: bool) -> Plan[None]:
    """Check the schema is current; apply the migrations when allowed, else say how to."""
    found = yield from version_plan(schema)
    if found == LATEST:
        return None
    if found > LATEST:
        raise _too_new(found, schema)
    if not auto_migrate:
        raise StoreError(
            f"schema {schema!r} is at version {found}, this package needs {LATEST}: "
            f"run `ctxplugin-postgres migrate --dsn ... --schema {schema}`"
        )
    yield from migrate_plan(schema)
    return None


__all__ = ["LATEST", "MIGRATIONS", "Migration", "ensure_plan", "migrate", "migrate_plan", "schema_version", "version_plan"]
