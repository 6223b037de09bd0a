"""Pools, SQL composition, error translation and the two drivers (sync and async).

Every store in this package writes its database work once, as a *plan*: a generator that
yields :class:`Stmt` objects and receives each statement's :class:`Result`. The plan holds the
SQL text and the decisions between statements; :func:`drive` and :func:`adrive` only execute
it, on a ``psycopg.Connection`` or a ``psycopg.AsyncConnection``. So the sync and async stores
share one core and differ in I/O alone.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import quote, unquote

import psycopg
import psycopg.errors
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolClosed, PoolTimeout

from ctxplugin.errors import ConfigError, StoreError, StoreUnavailableError
from ctxplugin_postgres._pool import AsyncCheckedPool, ProcessPool

T = TypeVar("T")

SCHEMA_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
"""A Postgres schema name this package accepts (lower case, so it never needs quoting rules)."""

DEFAULT_SCHEMA = "public"
CONNECT_TIMEOUT_S = 5
POOL_TIMEOUT_S = 5.0
_ATTEMPTS = 3


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")  # what Postgres text refuses
_ESCAPED = re.compile("[%\x00\ud800-\udfff]")


def column_text(value: str | None) -> str | None:
    """``value`` as a Postgres text column can hold it: unchanged unless it holds NUL or lone
    surrogates (which text refuses), else percent-encoded whole, as one part of a scope key is
    (:func:`ctxplugin.scope.scope_key`), so no two such strings share a column value.

    Only such values change, so rows written before keep matching. An encoded value may equal
    an ordinary string (``"a\\x00"`` and ``"a%00"`` both give ``"a%00"``): a column written through
    this narrows a search; the exact ids come from the row's scope key.
    """
    if value is None or not _UNSTORABLE.search(value):
        return value
    return quote(value, safe="", errors="surrogatepass")


def escaped_text(value: str) -> str:
    """``value`` with ``%``, NUL and lone surrogates percent-encoded (as UTF-8, surrogates kept):
    injective, undone by :func:`unescaped_text`, and no change to a string holding none of them.
    For key columns no other column disambiguates (a tool's name)."""
    return _ESCAPED.sub(lambda m: quote(m.group(), safe="", errors="surrogatepass"), value)


def unescaped_text(value: str) -> str:
    """The string :func:`escaped_text` made ``value`` from."""
    return unquote(value, errors="surrogatepass") if "%" in value else value


ENCODED_JSON = "percent_encoded_json"
"""The one key of a JSONB value that stands for a value JSONB cannot hold (see :func:`json_column`)."""
_UNSTORABLE_JSON = re.compile(r"[\ud800-\udfff]|\\u0000")


def jsonb_refuses(value: Any) -> bool:
    """Whether ``value`` holds a string JSONB refuses (with NUL or lone surrogates)."""
    return _UNSTORABLE_JSON.search(json.dumps(value, ensure_ascii=False)) is not None


def json_column(value: Any) -> Jsonb:
    """``value`` for a JSONB column: itself, or when JSONB refuses it (:func:`jsonb_refuses`) an
    object whose one key :data:`ENCODED_JSON` holds its JSON text percent-encoded; read back
    exactly by :func:`json_value`. Callers store no value that is such an object itself."""
    text = json.dumps(value, ensure_ascii=False)
    if _UNSTORABLE_JSON.search(text) is None:
        return Jsonb(value)
    return Jsonb({ENCODED_JSON: quote(text, safe="", errors="surrogatepass")})


def json_value(stored: Any) -> Any:
    """The value :func:`json_column` stored as ``stored``."""
    if isinstance(stored, dict) and set(stored) == {ENCODED_JSON}:
        return json.loads(unquote(stored[ENCODED_JSON], errors="surrogatepass"))
    return stored


@dataclass(frozen=True)
class Stmt:
    """One statement of a plan: composed SQL and its named parameters."""

    query: sql.Composed
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Result:
    """What a statement returned: its rows (empty for commands) and the affected row count."""

    rows: list[tuple[Any, ...]]
    rowcount: int

    def first(self) -> tuple[Any, ...] | None:
        """The first row, or None."""
        return self.rows[0] if self.rows else None


Plan = Generator[Stmt, Result, T]
"""A unit of database work: yields statements, receives their results, returns a value."""


def check_schema(schema: str) -> str:
    """``schema`` if it is an acceptable schema name.

    Raises:
        ConfigError: the name is not lower-case letters, digits and underscores (63 at most), or
            names a system schema (``pg_*``, ``information_schema``).
    """
    if not isinstance(schema, str) or not SCHEMA_RE.match(schema):
        raise ConfigError(
            f"Postgres schema must be lower-case letters, digits and underscores (at most 63), got {schema!r}"
        )
    if schema.startswith("pg_") or schema == "information_schema":
        raise ConfigError(f"Postgres schema {schema!r} names a system schema (pg_*, information_schema): choose a schema of your own")
    return schema


def compose(template: str, schema: str) -> sql.Composed:
    """``template`` with ``{s}`` replaced by the quoted schema name (once, when a store is built)."""
    return sql.SQL(template).format(s=sql.Identifier(check_schema(schema)))


def drive(conn: psycopg.Connection[Any], plan: Plan[T]) -> T:
    """Run ``plan`` on a synchronous connection (inside the caller's transaction)."""
    try:
        stmt = next(plan)
        while True:
            cur = conn.execute(stmt.query, stmt.params or None)
            rows = cur.fetchall() if cur.description is not None else []
            stmt = plan.send(Result(rows=rows, rowcount=cur.rowcount))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def adrive(conn: psycopg.AsyncConnection[Any], plan: Plan[T]) -> T:
    """Run ``plan`` on an asynchronous connection (inside the caller's transaction)."""
    try:
        stmt = next(plan)
        while True:
            cur = await conn.execute(stmt.query, stmt.params or None)
            rows = await cur.fetchall() if cur.description is not None else []
            stmt = plan.send(Result(rows=rows, rowcount=cur.rowcount))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def connection_options(timeout: float, name: str, dsn: str = "") -> dict[str, Any]:
    """libpq settings that bound a connection's waits by ``timeout`` seconds, for ``dsn``.

    ``connect_timeout`` bounds connecting (libpq counts whole seconds, at least 2);
    ``statement_timeout`` makes the server cancel a statement that runs longer; TCP keepalives
    and ``tcp_user_timeout`` drop a connection whose peer vanished (a host gone, a network cut)
    instead of waiting on it. A server process that is stopped but whose host still answers
    TCP is caught by none of these: the engine's guard (:mod:`ctxplugin.guard`) puts a deadline
    on each call for that.

    The server options ``dsn`` sets (``options=-c ...``, else ``PGOPTIONS``) are kept: given
    here, ``options`` replaces theirs, so the statement timeout is appended to them (the last
    setting of a name wins, so it bounds statements whatever they say).
    """
    millis = max(1, int(timeout * 1000))
    return {
        "connect_timeout": max(2, math.ceil(timeout)),
        "application_name": name,
        "options": f"{_dsn_options(dsn)} -c statement_timeout={millis}".lstrip(),
        "keepalives": 1,
        "keepalives_idle": max(1, math.ceil(timeout)),
        "keepalives_interval": 1,
        "keepalives_count": 3,
        "tcp_user_timeout": millis,
    }


def _dsn_options(dsn: str) -> str:
    """The server options ``dsn`` gives a connection: its ``options``, else ``PGOPTIONS``."""
    try:
        given = conninfo_to_dict(dsn).get("options") if dsn else None
    except psycopg.ProgrammingError:  # not a connection string: connecting says why
        given = None
    return str(given if given is not None else os.environ.get("PGOPTIONS", "")).strip()


def _pool_options(dsn: str, min_size: int, max_size: int, timeout: float, name: str) -> dict[str, Any]:
    """What both pool kinds are built with, unopened (the caller opens it as its kind allows).
    ``timeout`` bounds the wait for a connection and, through :func:`connection_options`,
    connecting and each statement."""
    return {
        "min_size": min_size,
        "max_size": max(max_size, min_size),
        "open": False,
        "timeout": timeout,
        # a failed reconnection is retried with growing delays, and the pool grows again only
        # once it gives up: giving up after ``timeout`` lets it reconnect as soon as it is asked
        # after an outage instead of seconds later
        "reconnect_timeout": max(1.0, timeout),
        "kwargs": connection_options(timeout, name, dsn),
        "name": name,
    }


def make_pool(
    dsn: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    timeout: float = POOL_TIMEOUT_S,
    name: str = "ctxplugin",
) -> ConnectionPool:
    """An open connection pool that checks each connection before lending it.

    The check is what makes the stores survive a Postgres restart: connections broken by the
    restart are discarded and replaced when next borrowed, the next one tried at once. ``timeout`` bounds how long a caller
    waits for a connection while the server is down; the store then reports
    :class:`~ctxplugin.errors.StoreUnavailableError` and the engine passes the original through.
    The pool connects in the background, so building it never blocks on an unreachable server.
    It belongs to the process that uses it: in a process forked from this one (gunicorn
    ``--preload``, ``multiprocessing`` "fork") it opens connections of its own on first use and
    leaves the parent's alone (:class:`~ctxplugin_postgres._pool.ProcessPool`).
    """
    pool = ProcessPool(dsn, check=ConnectionPool.check_connection, **_pool_options(dsn, min_size, max_size, timeout, name))
    pool.open(wait=False)
    return pool


def make_async_pool(
    dsn: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    timeout: float = POOL_TIMEOUT_S,
    name: str = "ctxplugin",
) -> AsyncConnectionPool:
    """An unopened :class:`AsyncConnectionPool` configured and checked like :func:`make_pool`.

    Open it with ``await pool.open()`` (async pools cannot open in a constructor)."""
    return AsyncCheckedPool(
        dsn, check=AsyncConnectionPool.check_connection, **_pool_options(dsn, min_size, max_size, timeout, name)
    )


def is_retryable(exc: BaseException) -> bool:
    """Whether the transaction that raised ``exc`` was rolled back and may simply run again:
    the server or the connection went away, or a deadlock or serialization failure (40xxx).
    Not the pool's timeout (an ``OperationalError`` too): that wait took the whole ``timeout``
    already, and one more per attempt would make a call to a server that refuses connections
    wait three times as long."""
    if isinstance(exc, (PoolTimeout, PoolClosed)):
        return False
    if isinstance(exc, (psycopg.errors.AdminShutdown, psycopg.errors.CrashShutdown, psycopg.errors.CannotConnectNow)):
        return True
    if isinstance(exc, psycopg.OperationalError):
        return exc.sqlstate is None or exc.sqlstate.startswith(("08", "40"))
    return False


_QUOTED = re.compile(r'"([^"]*)"')


def unquoted_dsn_error(exc: BaseException) -> str:
    """libpq's error about a DSN with the pieces of the DSN it quotes left out: the piece it
    stopped at may be (part of) the password (``missing "=" after "cret"`` for ``password=s3 cret``)."""
    text = " ".join(str(exc).split()).removeprefix("connection failed: ")
    return _QUOTED.sub(lambda m: m.group(0) if m.group(1) == "=" else '"…"', text)


@contextmanager
def translated(what: str, schema: str) -> Iterator[None]:
    """psycopg and pool errors as ctxplugin store errors, chained, with what to do next."""
    try:
        yield
    except StoreError:
        raise
    except PoolTimeout as exc:
        raise StoreUnavailableError(
            f"Postgres {what} failed: no connection became available ({exc}); the server is "
            "unreachable or refuses connections, or every pooled connection is busy"
        ) from exc
    except PoolClosed as exc:
        raise StoreError(f"Postgres {what} failed: the store is closed") from exc
    except psycopg.errors.UndefinedTable as exc:
        raise StoreError(
            f"Postgres {what} failed: ctxplugin tables are missing in schema {schema!r}; "
            f"run `ctxplugin-postgres migrate --dsn ... --schema {schema}` ({exc})"
        ) from exc
    except psycopg.errors.InsufficientPrivilege as exc:  # no DDL rights, or not granted the tables
        raise StoreError(
            f"Postgres {what} failed: {exc}; create the tables as a role that may "
            f"(`ctxplugin-postgres migrate --dsn ... --schema {schema}`) and grant this role "
            "the use of that schema and its tables"
        ) from exc
    except psycopg.errors.ProgramLimitExceeded as exc:  # this value, not the server: others go on being stored
        raise StoreError(f"Postgres {what} failed: {exc}; a value of this call (a scope id this long) is beyond "
                         "what the server can index, and is kept out of it") from exc
    except psycopg.OperationalError as exc:
        raise StoreUnavailableError(f"Postgres {what} failed: {exc}; retry when the server is reachable") from exc
    except psycopg.ProgrammingError as exc:
        if exc.sqlstate is not None:  # the server's: says nothing of the DSN
            raise StoreError(f"Postgres {what} failed: {exc}") from exc
        # libpq refused the DSN: its message quotes where it stopped, maybe the password; not chained
        raise StoreError(f"Postgres {what} failed: the DSN is not a Postgres connection string "
                          f"({unquoted_dsn_error(exc)})") from None
    except psycopg.Error as exc:
        raise StoreError(f"Postgres {what} failed: {exc}") from exc
    except UnicodeDecodeError as exc:  # content is stored as UTF-8: these bytes were changed since
        raise StoreError(f"Postgres {what} failed: a stored value is damaged (not the UTF-8 text stored: {exc})") from exc
    except UnicodeEncodeError as exc:  # a text value (a scope id) with lone surrogates
        raise StoreError(f"Postgres {what} failed: a text value is not valid Unicode ({exc})") from exc


def run(pool: ConnectionPool, schema: str, what: str, make_plan: Callable[[], Plan[T]]) -> T:
    """Run a fresh plan from ``make_plan`` in one transaction on a pooled connection.

    A plan whose transaction was rolled back because the connection dropped (a server restart)
    or because Postgres chose it as a deadlock or serialization victim is run again, on a fresh
    connection, up to three times in all; plans are written to be safe to repeat. Errors are
    translated."""
    with translated(what, schema):
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                with pool.connection() as conn:
                    return drive(conn, make_plan())
            except psycopg.OperationalError as exc:
                if attempt == _ATTEMPTS or not is_retryable(exc):
                    raise
    raise AssertionError("unreachable")  # pragma: no cover


async def arun(pool: AsyncConnectionPool, schema: str, what: str, make_plan: Callable[[], Plan[T]]) -> T:
    """Async :func:`run`."""
    with translated(what, schema):
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                async with pool.connection() as conn:
                    return await adrive(conn, make_plan())
            except psycopg.OperationalError as exc:
                if attempt == _ATTEMPTS or not is_retryable(exc):
                    raise
    raise AssertionError("unreachable")  # pragma: no cover


__all__ = [
    "DEFAULT_SCHEMA",
    "POOL_TIMEOUT_S",
    "Plan",
    "Result",
    "Stmt",
    "adrive",
    "arun",
    "check_schema",
    "compose",
    "connection_options",
    "drive",
    "is_retryable",
    "make_async_pool",
    "make_pool",
    "run",
    "translated",
]
