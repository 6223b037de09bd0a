"""The tool-schema registry table: every schema of every tool, versioned.

An engine's :class:`~ctxplugin.tools.ToolRegistry` lives in memory and numbers versions per
process. :class:`PostgresToolSchemas` keeps the catalogue in Postgres so that every process
agrees on version numbers and token counts, a deployment can see which schemas its agents were
given, and a new process can warm its registry from the table (:meth:`load_into`).

Tool and server names are stored with ``%``, NUL and lone surrogates percent-encoded
(:func:`~ctxplugin_postgres._db.escaped_text`), so any name has a row of its own and any server
its own filter. A schema or
description Postgres refuses (NUL, lone surrogates) is kept exactly in ``schema_json`` as
encoded JSON text (:func:`~ctxplugin_postgres._db.json_column`), with the description column
percent-encoded beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from ctxplugin.errors import InvalidInputError
from ctxplugin.tools.registry import ToolEntry, ToolRegistry
from ctxplugin_postgres._db import (
    DEFAULT_SCHEMA,
    POOL_TIMEOUT_S,
    Plan,
    Stmt,
    column_text,
    compose,
    escaped_text,
    json_column,
    json_value,
    jsonb_refuses,
    unescaped_text,
)
from ctxplugin_postgres._store import PooledStore, owned_pool

_COLUMNS = "tool_name, version, schema_hash, schema_json, token_count, server_name, description, updated_at"


@dataclass(frozen=True)
class StoredSchema:
    """One stored version of one tool's schema.

    Attributes:
        name: the tool name.
        version: 1 for the first schema stored under ``name``, +1 for every new one (shared by
            every process).
        hash: sha256 of the canonical JSON of ``schema`` (as :func:`ctxplugin.tools.registry.schema_hash`).
        schema: the tool as an OpenAI function tool.
        token_count: tokens the schema costs in a request.
        server: the tool server it came from ("" when unknown), e.g. an MCP server name.
        description: the tool's full description.
        updated_at: when this version was last recorded.
    """

    name: str
    version: int
    hash: str
    schema: dict[str, Any]
    token_count: int
    server: str
    description: str
    updated_at: datetime


class PostgresToolSchemas(PooledStore):
    """The tool-schema catalogue in Postgres.

    Args:
        pool: a psycopg ``ConnectionPool``.
        schema: the Postgres schema holding the tables.
        auto_migrate: on first use, apply pending migrations.
        owns_pool: close ``pool`` in :meth:`close`.

    Example:
        >>> schemas = PostgresToolSchemas.from_dsn(dsn)  # doctest: +SKIP
        >>> schemas.record_all(engine.registry, server="github")  # doctest: +SKIP
    """

    _closed_message = "the tool schema catalogue is closed"

    def __init__(
        self, pool: ConnectionPool, *, schema: str = DEFAULT_SCHEMA, auto_migrate: bool = True, owns_pool: bool = False
    ) -> None:
        super().__init__(pool, schema=schema, auto_migrate=auto_migrate, owns_pool=owns_pool)
        table = "{s}.ctxplugin_tool_schemas"
        self._lock_name = compose("SELECT pg_advisory_xact_lock(hashtext('ctxplugin-tool:' || %(name)s))", schema)
        self._upsert = compose(
            f"INSERT INTO {table} (tool_name, schema_hash, version, server_name, schema_json, description, token_count) "
            f"SELECT %(name)s, %(hash)s, coalesce(max(version), 0) + 1, %(server)s, %(schema)s, %(description)s, "
            f"%(tokens)s FROM {table} WHERE tool_name = %(name)s "
            "ON CONFLICT (tool_name, schema_hash) DO UPDATE SET updated_at = now(), "
            "server_name = EXCLUDED.server_name, token_count = EXCLUDED.token_count "
            f"RETURNING {_COLUMNS}",
            schema,
        )
        self._current = compose(
            f"SELECT {_COLUMNS} FROM {table} WHERE tool_name = %(name)s ORDER BY updated_at DESC, version DESC LIMIT 1",
            schema,
        )
        self._version = compose(f"SELECT {_COLUMNS} FROM {table} WHERE tool_name = %(name)s AND version = %(version)s", schema)
        self._versions = compose(f"SELECT {_COLUMNS} FROM {table} WHERE tool_name = %(name)s ORDER BY version", schema)
        self._latest_all = compose(
            f"SELECT DISTINCT ON (tool_name) {_COLUMNS} FROM {table} "
            "WHERE %(server)s::text IS NULL OR server_name = %(server)s "
            "ORDER BY tool_name, updated_at DESC, version DESC",
            schema,
        )

    @classmethod
    def from_dsn(
        cls, dsn: str, *, schema: str = DEFAULT_SCHEMA, auto_migrate: bool = True, timeout: float = POOL_TIMEOUT_S
    ) -> PostgresToolSchemas:
        """A catalogue with its own small pool on ``dsn`` (closed with it)."""
        pool = owned_pool(dsn, schema=schema, max_size=2, timeout=timeout, name="ctxplugin-tools")
        return cls(pool, schema=schema, auto_migrate=auto_migrate, owns_pool=True)

    def record(self, entry: ToolEntry, *, server: str = "") -> StoredSchema:
        """Store ``entry``'s schema (idempotent by name and hash) and return it with its shared
        version number; recording it again marks it the current schema of its tool."""
        if not isinstance(entry, ToolEntry):
            raise InvalidInputError(f"record() takes a ToolEntry (from ToolRegistry.register), got {type(entry).__name__}")
        exact = {"schema": entry.schema, "description": entry.description}
        refused = jsonb_refuses(exact)
        params = {
            "name": escaped_text(entry.name), "hash": entry.hash, "server": escaped_text(server),
            "schema": json_column(exact) if refused else Jsonb(entry.schema),
            "description": column_text(entry.description) if refused else entry.description, "tokens": entry.tokens,
        }

        def plan() -> Plan[StoredSchema]:
            yield Stmt(self._lock_name, params)  # versions are numbered one at a time per tool
            row = (yield Stmt(self._upsert, params)).rows[0]
            return _stored(row)

        return self._run("record a tool schema", plan)

    def record_all(self, registry: ToolRegistry, *, server: str = "") -> list[StoredSchema]:
        """:meth:`record` the current entry of every tool in ``registry``, by name."""
        entries = [e for e in (registry.get(name) for name in registry.names()) if e is not None]
        return [self.record(entry, server=server) for entry in entries]

    def get(self, name: str, version: int | None = None) -> StoredSchema | None:
        """The current schema of ``name`` (most recently recorded), or the given version."""
        params = {"name": escaped_text(name), "version": version}
        query = self._current if version is None else self._version

        def plan() -> Plan[StoredSchema | None]:
            row = (yield Stmt(query, params)).first()
            return None if row is None else _stored(row)

        return self._run("read a tool schema", plan)

    def versions(self, name: str) -> list[StoredSchema]:
        """Every stored version of ``name``, oldest first."""

        def plan() -> Plan[list[StoredSchema]]:
            return [_stored(row) for row in (yield Stmt(self._versions, {"name": escaped_text(name)})).rows]

        return self._run("read tool schema versions", plan)

    def current(self, *, server: str | None = None) -> list[StoredSchema]:
        """The current schema of every stored tool (of one ``server`` if given), by name."""

        def plan() -> Plan[list[StoredSchema]]:
            params = {"server": None if server is None else escaped_text(server)}
            return [_stored(row) for row in (yield Stmt(self._latest_all, params)).rows]

        return self._run("read tool schemas", plan)

    def load_into(self, registry: ToolRegistry, *, server: str | None = None) -> list[ToolEntry]:
        """Register the current stored schema of every tool in ``registry`` (as OpenAI tool
        dicts), e.g. to give a new process the directory of tools it has not been handed yet."""
        return [registry.register(stored.schema) for stored in self.current(server=server)]

    def close(self) -> None:
        """Release the catalogue (and its pool if owned). Idempotent."""
        super().close()


def _stored(row: tuple[Any, ...]) -> StoredSchema:
    name, version, hash_, schema, tokens, server, description, updated_at = row
    exact = json_value(schema)
    if exact is not schema:  # the schema and description, encoded (see :meth:`PostgresToolSchemas.record`)
        schema, description = exact["schema"], exact["description"]
    return StoredSchema(unescaped_text(name), version, hash_, schema, tokens, unescaped_text(server), description, updated_at)


__all__ = ["PostgresToolSchemas", "StoredSchema"]
