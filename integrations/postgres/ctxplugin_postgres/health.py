"""Is this DSN usable: a check that tells a wrong configuration from a server that is down.

:func:`ctxplugin.connect` calls :func:`check_server` once. A wrong DSN, an unknown host, a
missing database or role, refused credentials, TLS required of a server without it or a
certificate refused will not fix themselves: they raise
:class:`~ctxplugin.errors.ConfigError` there, chained to psycopg's error. A server that refuses
connections or does not answer may come back: the cause is returned, and the engine starts with
its Postgres circuit open (calls pass the original through, a background check reconnects).
"""

from __future__ import annotations

import re

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool

from ctxplugin.errors import ConfigError, StoreUnavailableError
from ctxplugin_postgres._db import connection_options, translated, unquoted_dsn_error

_PERMANENT = re.compile(
    r"failed to resolve host|could not translate host name|does not exist|authentication failed"
    r"|no pg_hba\.conf entry|invalid (?:connection option|integer value|sslmode|port number)|permission denied"
    r"|does not support SSL|certificate verify failed",
    re.IGNORECASE,
)


def _cause(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text.removeprefix("connection failed: ")


def check_dsn(dsn: str) -> dict[str, str]:
    """The parsed connection settings of ``dsn``.

    Raises:
        ConfigError: ``dsn`` is not a libpq connection string or URI.
    """
    try:
        return {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
    except psycopg.ProgrammingError as exc:
        # not chained: the driver's message quotes the DSN, and a logged traceback would show it
        raise ConfigError(
            f"CTXPLUGIN_POSTGRES_DSN is not a Postgres connection string ({unquoted_dsn_error(exc)}); "
            "expected e.g. postgresql://user@host:5432/dbname"
        ) from None


def check_server(dsn: str, timeout: float) -> str | None:
    """Connect once to ``dsn``: None when it works, the cause when the server is out for now.

    Raises:
        ConfigError: the DSN, host, database, role or credentials are wrong (retrying cannot
            help); the message names the cause.
    """
    settings = check_dsn(dsn)
    try:
        with psycopg.connect(dsn, **connection_options(timeout, "ctxplugin-check", dsn)) as conn:
            conn.execute("SELECT 1")
    except psycopg.OperationalError as exc:
        cause = _cause(exc)
        if _PERMANENT.search(cause):
            where = f"{settings.get('host', 'localhost')}:{settings.get('port', '5432')}/{settings.get('dbname', '')}"
            raise ConfigError(f"CTXPLUGIN_POSTGRES_DSN ({where}) cannot be used: {cause}") from exc
        return cause
    return None


def ping(dsn: str, timeout: float, pool: ConnectionPool | None = None) -> None:
    """Raise unless a fresh connection to ``dsn`` answers ``SELECT 1`` and, given a ``pool``,
    the pool lends a connection that does too (the engine's background check while Postgres is
    out: the circuit closes only when the stores' own path works again).

    Raises:
        StoreUnavailableError: it does not (the message is the cause).
    """
    try:
        cause = check_server(dsn, timeout)
    except ConfigError as exc:  # e.g. the database was dropped: still not usable
        raise StoreUnavailableError(str(exc)) from exc
    if cause is not None:
        raise StoreUnavailableError(f"Postgres: {cause}")
    if pool is not None:
        with translated("check", "public"), pool.connection(timeout=timeout) as conn:
            conn.execute("SELECT 1")


__all__ = ["check_dsn", "check_server", "ping"]
